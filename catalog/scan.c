/*
 * scan.c - cat_scan: a local store's scan run by its kind (ollama.c,
 * hfcache.c, folder.c), then the list finished (list.c).  The top of the
 * catalog's calls: nothing in catalog/ calls cat_scan.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int cat_scan(int dirfd, enum cat_kind kind, struct cat_list *out,
             cat_log_fn log, void *log_u, char *msg, size_t n) {
    struct cat_scan s = {
        .dirfd = dirfd, .out = out, .log = log, .log_u = log_u};
    struct stat st = {0};
    memset(out, 0, sizeof *out);
    out->kind = kind;
    if (fstat(dirfd, &st) != 0 || !S_ISDIR(st.st_mode)) {
        int e = S_ISDIR(st.st_mode) ? errno : ENOTDIR;
        snprintf(msg, n, "the store is not a readable directory: %s",
                 strerror(e));
        return -1;
    }
    if (kind == CAT_OLLAMA)
        cat_scan_ollama(&s);
    else if (kind == CAT_HF)
        cat_scan_hf(&s);
    else if (kind == CAT_LMSTUDIO || kind == CAT_DIR)
        cat_scan_folder(&s);
    else {
        snprintf(msg, n, "not a local store kind: %s", cat_kind_name(kind));
        return -1;
    }
    if (!s.oom)
        cat_list_finish(&s);
    if (s.oom) {
        cat_list_free(out);
        snprintf(msg, n, "out of memory while listing the store's models");
        return -1;
    }
    return 0;
}
