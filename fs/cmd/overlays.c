/*
 * overlays.c - `ggufs --overlays` (issue 32): every overlay in the user's
 * state directory (the default ones: -o overlay without PATH, and every
 * store model's), one tab-separated line each under a header, for column
 * -t and sort:
 *
 *   overlay  source  state  set  removed  tensors
 *
 * state: "applies" (the source is there and the overlay belongs to it),
 * "changed" (the source is there but is another version: --overlay-rebase
 * carries the edits), "gone" (no file at the source's path: the edits are
 * kept, --overlay-drop SOURCE forgets them; a store model's name carries
 * them to its new blob, edits/carry.c), "remote" (a URL: not asked);
 * set and removed: the keys, ", "-separated ("-": none); tensors: how many
 * tensors it holds.  An overlay that cannot be trusted or read is a line
 * with state "unreadable: WHY".  Read only: nothing is written, no lock
 * taken.  Exit 0; EXIT_BADFILE when the state directory cannot be read.
 */
#include "../ggufs.h"
#include "../source/source.h"

#include "../../status.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SUFFIX ".overlay.gguf"

/* Control bytes of a text shown on one line made '?'. */
static void put_safe(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        putchar((unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i]);
}

/* The keys ov sets, ", "-separated, or "-". */
static void put_set(const gguf_ctx *ov) {
    int any = 0;
    for (int64_t i = 0; i < gguf_n_kv(ov); i++) {
        size_t len;
        const char *k = gguf_kv_key(ov, i, &len);
        if (gguf_key_is_overlay(k, len) ||
            (len == 18 && memcmp(k, "ggufs.removed_keys", 18) == 0))
            continue;
        fputs(any++ ? ", " : "", stdout);
        put_safe(k, len);
    }
    if (!any)
        putchar('-');
}

/* The names in ggufs.removed_keys (an array of strings: type, count, then
 * each length and bytes, read within its payload), or "-". */
static void put_removed(const gguf_ctx *ov) {
    int64_t i = gguf_find_key(ov, "ggufs.removed_keys", 18);
    size_t len = 0, at = 12;
    const uint8_t *p = i >= 0 ? gguf_kv_payload(ov, i, &len) : NULL;
    uint64_t n = p && len >= 12 ? gguf_kv_arr_n(ov, i) : 0;
    for (uint64_t e = 0; e < n && at + 8 <= len; e++) {
        uint64_t l = 0;
        for (int b = 0; b < 8; b++)
            l |= (uint64_t)p[at + b] << (8 * b);
        at += 8;
        if (l > len - at)
            break;
        fputs(e ? ", " : "", stdout);
        put_safe((const char *)p + at, (size_t)l);
        at += (size_t)l;
    }
    if (!n)
        putchar('-');
}

/* Whether the source is there and the overlay made for made belongs to
 * it: "applies", "changed", "gone", "remote". */
static const char *source_state(const struct gguf_overlay_id *made) {
    struct gguf_error err = {0};
    struct gguf_overlay_id now;
    struct gguf_file f;
    gguf_ctx **v = NULL;
    int n = 0;
    char bad[PATH_MAX + 64], why[1024];
    struct stat sb;
    if (made->remote)
        return "remote";
    if (stat(made->source, &sb) != 0 && (errno == ENOENT || errno == ENOTDIR))
        return "gone";
    if (gguf_file_open(&f, made->source, 0, &err) != GGUF_OK)
        return "changed";
    const char *st = "changed";
    if (gguf_open_set(made->source, &f, 0, &v, &n, bad, sizeof bad, &err) ==
            GGUF_OK &&
        gguf_overlay_identify(v, n, made->source, false, NULL, &now, &err) ==
            GGUF_OK &&
        gguf_overlay_matches(made, &now, why, sizeof why))
        st = "applies";
    gguf_close_set(v, n);
    gguf_file_close(&f);
    return st;
}

/* One overlay's line. */
static void list_one(const char *dir, const char *name) {
    struct gguf_error err = {0};
    struct gguf_overlay_id made;
    struct gguf_overlay_tensor *t = NULL;
    size_t nt = 0;
    gguf_ctx *ov = NULL;
    bool found = false;
    char path[2 * PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    put_safe(path, strlen(path));
    if (gguf_overlay_load(path, "", &ov, &made, &found, &err) != GGUF_OK ||
        !found || gguf_overlay_tensors(ov, &t, &nt, &err) != GGUF_OK) {
        printf("\t-\tunreadable: ");
        put_safe(err.msg, strlen(err.msg));
        printf("\t-\t-\t-\n");
        gguf_close(ov);
        return;
    }
    putchar('\t');
    put_safe(made.source, strlen(made.source));
    printf("\t%s\t", source_state(&made));
    put_set(ov);
    putchar('\t');
    put_removed(ov);
    printf("\t%zu\n", nt);
    gguf_overlay_tensors_free(t, nt);
    gguf_close(ov);
}

static int name_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int gfs_overlays_list(void) {
    char dir[PATH_MAX];
    if (gguf_overlay_default_path("/", dir, sizeof dir, NULL) != GGUF_OK ||
        !strrchr(dir, '/')) {
        fprintf(stderr, "ggufs: --overlays: no state directory\n");
        return EXIT_BADFILE;
    }
    *strrchr(dir, '/') = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    printf("overlay\tsource\tstate\tset\tremoved\ttensors\n");
    if (!d) {
        if (fd >= 0)
            close(fd);
        if (errno == ENOENT)
            return 0; /* no state directory: no overlay */
        fprintf(stderr, "ggufs: --overlays: %s: %s\n", dir, strerror(errno));
        return EXIT_BADFILE;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l <= strlen(SUFFIX) ||
            strcmp(e->d_name + l - strlen(SUFFIX), SUFFIX) != 0)
            continue;
        if (n == cap) {
            char **v = realloc(names, (cap = cap ? cap * 2 : 16) * sizeof *v);
            if (!v)
                break;
            names = v;
        }
        if (!(names[n] = strdup(e->d_name)))
            break;
        n++;
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, name_cmp);
    for (size_t i = 0; i < n; i++) {
        list_one(dir, names[i]);
        free(names[i]);
    }
    free(names);
    return 0;
}
