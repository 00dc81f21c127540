/*
 * ovtensors.c - the tensors an overlay holds (issue 24): tensors written
 * through an overlay mount, copy-on-write, never into the source.
 *
 * Each written tensor's bytes, whole, lie in the overlay's data file, the
 * overlay's name + GGUF_OVERLAY_DATA_SUFFIX in the same directory (the
 * same trust rule as the overlay: regular, one link, the effective user's,
 * writable by nobody else; opened O_NOFOLLOW, created 0600).  The overlay
 * records them under its own key
 *   ggufs.overlay.tensors  array of strings "OFFSET SIZE NAME": tensor
 *                          NAME's SIZE bytes are at OFFSET of the data file
 * so they survive remounts; a record is valid only for a source tensor of
 * that name and size (the mount checks).  The data file only grows while
 * the overlay lives: a region stops being used when a record is replaced
 * (a whole-tensor replace writes a new region and then the overlay); the
 * overlay's replace by rename is what makes a record's change atomic.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define K_TENSORS GGUF_OVERLAY_NS "tensors"

void gguf_overlay_tensors_free(struct gguf_overlay_tensor *v, size_t n) {
    for (size_t i = 0; v && i < n; i++)
        free(v[i].name);
    free(v);
}

/* One record "OFFSET SIZE NAME" (e, el bytes) into t. */
static bool parse_one(const char *e, size_t el, struct gguf_overlay_tensor *t) {
    char num[48];
    const char *sp1 = memchr(e, ' ', el);
    const char *sp2 =
        sp1 ? memchr(sp1 + 1, ' ', el - (size_t)(sp1 + 1 - e)) : NULL;
    if (!sp1 || !sp2 || (size_t)(sp2 - e) >= sizeof num)
        return false;
    memcpy(num, e, (size_t)(sp2 - e));
    num[sp2 - e] = '\0';
    char *end;
    errno = 0;
    t->off = strtoull(num, &end, 10);
    if (*end != ' ' || errno)
        return false;
    t->size = strtoull(end + 1, &end, 10);
    if (*end || errno || t->off > UINT64_MAX - t->size)
        return false;
    size_t nl = el - (size_t)(sp2 + 1 - e);
    if (nl == 0 || !(t->name = malloc(nl + 1)))
        return false;
    memcpy(t->name, sp2 + 1, nl);
    t->name[nl] = '\0';
    return true;
}

enum gguf_status gguf_overlay_tensors(const gguf_ctx *ov,
                                      struct gguf_overlay_tensor **v, size_t *n,
                                      struct gguf_error *err) {
    *v = NULL;
    *n = 0;
    int64_t k = gguf_find_key(ov, K_TENSORS, sizeof K_TENSORS - 1);
    if (k < 0)
        return GGUF_OK;
    uint64_t cnt = gguf_kv_arr_n(ov, k);
    if (gguf_kv_type(ov, k) != GGUF_TYPE_ARRAY ||
        gguf_kv_arr_type(ov, k) != GGUF_TYPE_STRING || cnt > (1u << 24))
        return gguf_fail(err, GGUF_E_FORMAT,
                         "the overlay's " K_TENSORS " is not a list of "
                         "tensors");
    size_t len;
    const uint8_t *p = gguf_kv_payload(ov, k, &len);
    uint64_t off = 12;
    *v = calloc(cnt ? (size_t)cnt : 1, sizeof **v);
    if (!*v)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    for (uint64_t i = 0; i < cnt; i++) {
        size_t el;
        const char *e = gguf_edits_next_name(p, &off, &el);
        if (!parse_one(e, el, &(*v)[i])) {
            gguf_overlay_tensors_free(*v, (size_t)i + 1);
            *v = NULL;
            return gguf_fail(err, GGUF_E_FORMAT,
                             "the overlay's " K_TENSORS " has a bad entry "
                             "(%llu)",
                             (unsigned long long)i);
        }
        ++*n;
    }
    return GGUF_OK;
}

enum gguf_status gguf_ovl_tensors_kv(const struct gguf_overlay_tensor *t,
                                     size_t nt, struct gguf_buf *out) {
    struct gguf_buf list = {0};
    enum gguf_status st = GGUF_OK;
    char head[64];
    uint8_t len[8];
    for (size_t i = 0; st == GGUF_OK && i < nt; i++) {
        int hl = snprintf(head, sizeof head, "%" PRIu64 " %" PRIu64 " ",
                          t[i].off, t[i].size);
        gguf_wr64(len, (uint64_t)hl + strlen(t[i].name));
        st = gguf_buf_add(&list, len, sizeof len);
        if (st == GGUF_OK)
            st = gguf_buf_add(&list, head, (size_t)hl);
        if (st == GGUF_OK)
            st = gguf_buf_add(&list, t[i].name, strlen(t[i].name));
    }
    size_t start = out->len;
    uint64_t size = gguf_kv_record_size(sizeof K_TENSORS - 1, 12 + list.len);
    if (st == GGUF_OK && size < SIZE_MAX / 2)
        st = gguf_buf_reserve(out, (size_t)size);
    if (st == GGUF_OK) {
        uint8_t *p = out->p + start;
        p = gguf_put_kv(p, K_TENSORS, sizeof K_TENSORS - 1, GGUF_TYPE_ARRAY,
                        NULL, 0);
        gguf_wr32(p, GGUF_TYPE_STRING);
        gguf_wr64(p + 4, nt);
        if (list.len)
            memcpy(p + 12, list.p, list.len);
        out->len = start + (size_t)size;
    }
    gguf_buf_free(&list);
    return st;
}

/* The data file's directory (*dfd) and its name there (*name,
 * malloc'ed), its path as shown; -1 with err (GGUF_E_NOTFOUND: no state
 * directory, so no data file). */
static int data_place(const char *path, const char *source, bool create,
                      int *dfd, char **name, char *shown, size_t sn,
                      struct gguf_error *err) {
    char base[256], oshown[4096];
    bool absent;
    *name = NULL;
    *dfd = gguf_ovl_open_parent(path, source, create, base, sizeof base, oshown,
                                sizeof oshown, &absent, err);
    if (*dfd < 0) {
        if (absent)
            gguf_fail(err, GGUF_E_NOTFOUND, "no overlay data");
        return -1;
    }
    if (!(*name = gguf_sidecar_path(base, GGUF_OVERLAY_DATA_SUFFIX))) {
        gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        close(*dfd);
        return -1;
    }
    snprintf(shown, sn, "%s%s", oshown, *name + strlen(base));
    return 0;
}

int gguf_overlay_data_open(const char *path, const char *source, bool create,
                           char *shown, size_t sn, struct gguf_error *err) {
    struct stat sb;
    int dfd;
    char *name;
    if (data_place(path, source, create, &dfd, &name, shown, sn, err) < 0)
        return -1;
    int fl = O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
    int fd = openat(dfd, name, fl | (create ? O_CREAT : 0), 0600);
    if (fd < 0) {
        if (errno == ENOENT)
            gguf_fail(err, GGUF_E_NOTFOUND, "%s is missing", shown);
        else
            gguf_sys_fail(err, errno, "cannot open the overlay's data %s",
                          shown);
    } else if (fstat(fd, &sb) < 0 ||
               gguf_ovl_check_trusted(&sb, "overlay data", shown, err) !=
                   GGUF_OK) {
        if (err && !err->code)
            gguf_sys_fail(err, errno, "cannot stat %s", shown);
        close(fd);
        fd = -1;
    }
    free(name);
    close(dfd);
    return fd;
}

enum gguf_status gguf_overlay_data_remove(const char *path, const char *source,
                                          struct gguf_error *err) {
    char shown[4096];
    struct stat sb;
    struct gguf_error e2 = {0};
    int dfd;
    char *name;
    if (data_place(path, source, false, &dfd, &name, shown, sizeof shown, &e2) <
        0)
        return e2.code == GGUF_E_NOTFOUND ? GGUF_OK : (*err = e2, e2.code);
    enum gguf_status st = GGUF_OK;
    if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno != ENOENT)
            st = gguf_sys_fail(err, errno, "cannot stat %s", shown);
    } else if ((st = gguf_ovl_check_trusted(&sb, "overlay data", shown, err)) ==
               GGUF_OK) {
        st = unlinkat(dfd, name, 0) == 0
                 ? gguf_fsync_dirfd(dfd, shown, err)
                 : gguf_sys_fail(err, errno, "cannot remove %s", shown);
    }
    free(name);
    close(dfd);
    return st;
}
