/*
 * mkhostile - headers that are cheap to make and costly to serve (issue 11,
 * item 6), built with tests/craft.c:
 *
 *   mkhostile bools OUT N      one key, x.bools, an array of N bools (all
 *                              false), the array's bytes left as a hole:
 *                              a file of N bytes that takes a few KB of disk
 *   mkhostile longkeys OUT N L N keys of L bytes each (L > 255: each file
 *                              name in meta/ is a hashed long name), uint8
 *                              values; the keys differ in their last bytes
 *                              so every name hashes and sorts apart
 *
 * Both files have no tensors and are valid GGUF v3 (ggml's reader opens
 * them).  Exit 0, or 1 with a message.
 */
#include "craft.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int die(const char *what, const char *out) {
    fprintf(stderr, "mkhostile: %s: %s: %s\n", out, what,
            errno ? strerror(errno) : "failed");
    return 1;
}

static uint64_t num(const char *s) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || end == s) {
        fprintf(stderr, "mkhostile: bad number '%s'\n", s);
        exit(1);
    }
    return v;
}

/* The bools' bytes are zeros (false), made by extending the file. */
static int bools(const char *out, uint64_t n) {
    struct craft c = {0};
    craft_header(&c, 3, 0, 1);
    craft_kv_arr(&c, "x.bools", GGUF_TYPE_BOOL, n);
    if (c.failed || !craft_write(&c, out))
        return die("cannot write", out);
    uint64_t end = craft_len(&c) + n;
    end = (end + 31) / 32 * 32; /* the (empty) data section's alignment */
    craft_free(&c);
    if (truncate(out, (off_t)end) != 0)
        return die("cannot extend", out);
    return 0;
}

static int longkeys(const char *out, uint64_t n, uint64_t len) {
    struct craft c = {0};
    char *key = malloc(len + 1);
    if (!key || len < 16)
        return die("key length below 16 or out of memory", out);
    craft_header(&c, 3, 0, n);
    for (uint64_t i = 0; i < n; i++) {
        /* a readable prefix, then the number: equal up to the cut */
        memset(key, 'k', len);
        memcpy(key, "hostile.", 8);
        snprintf(key + len - 12, 13, "%012llu", (unsigned long long)i);
        craft_kv_u8(&c, key, (uint8_t)i);
    }
    free(key);
    craft_pad(&c, 32);
    if (c.failed || !craft_write(&c, out))
        return die("cannot write", out);
    craft_free(&c);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "bools"))
        return bools(argv[2], num(argv[3]));
    if (argc == 5 && !strcmp(argv[1], "longkeys"))
        return longkeys(argv[2], num(argv[3]), num(argv[4]));
    fprintf(stderr, "usage: mkhostile bools OUT N | longkeys OUT N LEN\n");
    return 1;
}
