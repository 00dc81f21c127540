/*
 * gguf_example.c - a program of a libgguf user, built by tests/deb.py
 * against the installed library only (`cc gguf_example.c $(pkg-config
 * --cflags --libs gguf)`), never against the source tree.
 *
 *   gguf_example FILE            prints general.architecture and the
 *                                counts of keys and tensors
 *   gguf_example FILE KEY TEXT   sets the existing KEY to TEXT (parsed as
 *                                its type) and commits it into FILE
 *
 * Exit status 0, or 1 with one line naming the file and the library's
 * message.
 */
#include <gguf.h>
#include <stdio.h>
#include <string.h>

static int fail(const char *path, const struct gguf_error *err) {
    fprintf(stderr, "gguf_example: %s: %s\n", path, err->msg);
    return 1;
}

static int set(gguf_ctx *ctx, const char *path, const char *key,
               const char *text) {
    struct gguf_error err = {0};
    struct gguf_buf payload = {0};
    struct gguf_commit_info info = {0};
    int64_t i = gguf_find_key(ctx, key, strlen(key));
    if (i < 0) {
        fprintf(stderr, "gguf_example: %s: no key %s\n", path, key);
        return 1;
    }
    enum gguf_type t = gguf_kv_type(ctx, i);
    enum gguf_type at = t == GGUF_TYPE_ARRAY ? gguf_kv_arr_type(ctx, i) : t;
    int rc = 1;
    if (gguf_parse_text(t, at, text, strlen(text), &payload, &err) == GGUF_OK &&
        gguf_set_payload(ctx, key, strlen(key), t, payload.p, payload.len,
                         &err) == GGUF_OK &&
        gguf_commit(ctx, 0, &info, &err) == GGUF_OK)
        rc = 0;
    gguf_buf_free(&payload);
    return rc ? fail(path, &err) : 0;
}

int main(int argc, char **argv) {
    struct gguf_error err = {0};
    gguf_ctx *ctx = NULL;
    if (argc != 2 && argc != 4) {
        fprintf(stderr, "usage: gguf_example FILE [KEY TEXT]\n");
        return 2;
    }
    unsigned flags = argc == 4 ? GGUF_OPEN_RDWR : 0;
    if (gguf_open(&ctx, argv[1], flags, &err) != GGUF_OK)
        return fail(argv[1], &err);
    int rc = 0;
    if (argc == 4) {
        rc = set(ctx, argv[1], argv[2], argv[3]);
    } else {
        int64_t i = gguf_find_key(ctx, "general.architecture", 20);
        size_t n = 0;
        const char *s = NULL;
        if (i >= 0 && gguf_kv_get_str(ctx, i, &s, &n))
            printf("architecture %.*s\n", (int)n, s);
        printf("%lld keys, %lld tensors\n", (long long)gguf_n_kv(ctx),
               (long long)gguf_n_tensors(ctx));
    }
    gguf_close(ctx);
    return rc;
}
