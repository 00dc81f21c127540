/*
 * tensorjnl.c - a tensor's bytes replaced whole, crash-safely (issue 24):
 * after a crash at any point the tensor is the old bytes or the new ones,
 * never a mix.
 *
 * The rules (a redo log, as SQLite's WAL and git's lockfile write first
 * and rename or apply after):
 *   1. The new bytes go to a journal beside the GGUF, PATH.ggufs-tensor
 *      (gguf_sidecar_path), created O_EXCL, 0600, never through a symlink.
 *      Until rule 3 is done the GGUF is untouched: a crash leaves a
 *      journal without a valid trailer, which recovery removes (the old
 *      tensor stays).
 *   2. Bytes of the tensor never written keep the old bytes: at seal, the
 *      gaps are filled from the GGUF.
 *   3. Seal: the header (the GGUF's device, inode and size, the absolute
 *      offset and length), then the trailer (XXH3-64 of the header and
 *      the bytes, and an end mark) by a separate, later write; then
 *      fdatasync of the journal and fsync of its directory.  From here on
 *      the new tensor is decided.
 *   4. Apply: the bytes copied to the GGUF at the offset, fdatasync of the
 *      GGUF, then the journal unlinked and the directory fsync'ed.  A crash
 *      during the copy leaves a sealed journal, which recovery applies
 *      again (copying the same bytes twice is harmless).
 * Recovery (gguf_tjnl_recover, from gguf_recover_file: a read-write mount
 * and `ggufs --recover` run it before anything reads the file) acts only
 * on a journal a replace of this very file could have left: a regular
 * file, one link, mode 0600, owned by us or the model's owner
 * (gguf_sidecar_trusted), sealed for the GGUF's device and inode, its
 * range within the file.  Fault points (GGUFS_FAULT=N, as commit.c's):
 * "tensor journal trailer", "tensor journal fsync", "tensor copy",
 * "tensor copy half", "tensor fsync", "tensor journal unlink".
 *
 * Layout, little-endian: magic "GGUFSTNS", version 1 (4), 0 (4), st_dev,
 * st_ino, file size, offset, length (8 each), the bytes from 64, then
 * XXH3-64 of everything before it (8) and "GGUFSEND" (8).
 */
#include "internal.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TJ_MAGIC "GGUFSTNS"
#define TJ_END "GGUFSEND"
#define TJ_HDR 64
#define TJ_CHUNK ((size_t)1 << 20)

struct gguf_tjnl {
    int dfd, jfd; /* the GGUF's directory (borrowed); the journal */
    char *jpath;  /* for messages */
    const char *jname;
    uint64_t off, len; /* the tensor: absolute offset, bytes */
    /* Ranges written so far, [a, b) relative to the tensor, sorted, apart */
    struct tj_range {
        uint64_t a, b;
    } * r;
    size_t nr, cap;
    struct gguf_faults faults;
};

static const char *jname_of(const struct gguf_file *f, const char *jpath) {
    return jpath + (f->base - f->path); /* sidecars share the prefix */
}

enum gguf_status gguf_tjnl_begin(const struct gguf_file *f, uint64_t off,
                                 uint64_t len, struct gguf_tjnl **out,
                                 struct gguf_error *err) {
    struct gguf_tjnl *j = calloc(1, sizeof *j);
    *out = NULL;
    if (!j || !(j->jpath = gguf_sidecar_path(f->path, GGUF_TENSOR_SUFFIX))) {
        free(j);
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    }
    j->dfd = f->dfd;
    j->jname = jname_of(f, j->jpath);
    j->off = off;
    j->len = len;
    gguf_faults_init(&j->faults);
    j->jfd = openat(f->dfd, j->jname,
                    O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (j->jfd < 0) {
        enum gguf_status st =
            errno == EEXIST
                ? gguf_fail(err, GGUF_E_BUSY,
                            "%s exists: another tensor is being replaced "
                            "(or one was interrupted: a read-write mount "
                            "or 'ggufs --recover' completes it)",
                            j->jpath)
                : gguf_sys_fail(err, errno, "cannot create %s", j->jpath);
        free(j->jpath);
        free(j);
        return st;
    }
    *out = j;
    return GGUF_OK;
}

/* Adds [a, b) to the written ranges, merging neighbours. */
static enum gguf_status note_range(struct gguf_tjnl *j, uint64_t a, uint64_t b,
                                   struct gguf_error *err) {
    size_t i = 0;
    while (i < j->nr && j->r[i].b < a)
        i++;
    size_t k = i;
    while (k < j->nr && j->r[k].a <= b) { /* overlapping or touching */
        a = j->r[k].a < a ? j->r[k].a : a;
        b = j->r[k].b > b ? j->r[k].b : b;
        k++;
    }
    if (k == i) { /* a new range at i */
        if (j->nr == j->cap) {
            size_t nc = j->cap ? 2 * j->cap : 8;
            struct tj_range *nr = realloc(j->r, nc * sizeof *nr);
            if (!nr)
                return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
            j->r = nr;
            j->cap = nc;
        }
        memmove(j->r + i + 1, j->r + i, (j->nr - i) * sizeof *j->r);
        j->nr++;
    } else if (k > i + 1) { /* ranges i..k-1 become one */
        memmove(j->r + i + 1, j->r + k, (j->nr - k) * sizeof *j->r);
        j->nr -= k - i - 1;
    }
    j->r[i] = (struct tj_range){a, b};
    return GGUF_OK;
}

enum gguf_status gguf_tjnl_write(struct gguf_tjnl *j, uint64_t rel,
                                 const void *p, size_t n,
                                 struct gguf_error *err) {
    if (rel > j->len || n > j->len - rel)
        return gguf_fail(err, GGUF_E_RANGE, "a write past the tensor's end");
    enum gguf_status st =
        gguf_pwrite_full(j->jfd, p, n, TJ_HDR + rel, j->jpath, err);
    return st == GGUF_OK && n ? note_range(j, rel, rel + n, err) : st;
}

/* Copies n bytes from (from, at) to (to, at2) through buf. */
static enum gguf_status copy(int from, uint64_t at, int to, uint64_t at2,
                             uint64_t n, char *buf, const char *what,
                             struct gguf_error *err) {
    while (n) {
        size_t m = n < TJ_CHUNK ? (size_t)n : TJ_CHUNK;
        enum gguf_status st = gguf_pread_full(from, buf, m, at, what, err);
        if (st == GGUF_OK)
            st = gguf_pwrite_full(to, buf, m, at2, what, err);
        if (st != GGUF_OK)
            return st;
        at += m, at2 += m, n -= m;
    }
    return GGUF_OK;
}

/* XXH3-64 of the journal's first TJ_HDR + len bytes. */
static enum gguf_status tj_hash(int fd, uint64_t len, char *buf, uint64_t *h,
                                const char *what, struct gguf_error *err) {
    XXH3_state_t *s = XXH3_createState();
    enum gguf_status st = GGUF_OK;
    if (!s)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    XXH3_64bits_reset(s);
    for (uint64_t at = 0, n = TJ_HDR + len; st == GGUF_OK && n;) {
        size_t m = n < TJ_CHUNK ? (size_t)n : TJ_CHUNK;
        if ((st = gguf_pread_full(fd, buf, m, at, what, err)) == GGUF_OK)
            XXH3_64bits_update(s, buf, m);
        at += m, n -= m;
    }
    *h = XXH3_64bits_digest(s);
    XXH3_freeState(s);
    return st;
}

/* Rule 2 and 3: the gaps filled from the GGUF (fd), the header, the
 * trailer, made durable. */
static enum gguf_status seal(struct gguf_tjnl *j, int fd, char *buf,
                             struct gguf_error *err) {
    struct stat sb;
    uint64_t at = 0, h;
    enum gguf_status st = GGUF_OK;
    for (size_t i = 0; st == GGUF_OK && i <= j->nr; i++) {
        uint64_t end = i < j->nr ? j->r[i].a : j->len;
        if (end > at)
            st = copy(fd, j->off + at, j->jfd, TJ_HDR + at, end - at, buf,
                      j->jpath, err);
        at = i < j->nr ? j->r[i].b : at;
    }
    if (st != GGUF_OK)
        return st;
    if (fstat(fd, &sb) != 0)
        return gguf_sys_fail(err, errno, "fstat of the model");
    uint8_t hdr[TJ_HDR] = {0}, tr[16];
    memcpy(hdr, TJ_MAGIC, 8);
    gguf_wr32(hdr + 8, 1);
    gguf_wr64(hdr + 16, (uint64_t)sb.st_dev);
    gguf_wr64(hdr + 24, (uint64_t)sb.st_ino);
    gguf_wr64(hdr + 32, (uint64_t)sb.st_size);
    gguf_wr64(hdr + 40, j->off);
    gguf_wr64(hdr + 48, j->len);
    if ((st = gguf_pwrite_full(j->jfd, hdr, TJ_HDR, 0, j->jpath, err)) ||
        (st = tj_hash(j->jfd, j->len, buf, &h, j->jpath, err)))
        return st;
    gguf_wr64(tr, h);
    memcpy(tr + 8, TJ_END, 8);
    gguf_fault_point(&j->faults, "tensor journal trailer");
    if ((st = gguf_pwrite_full(j->jfd, tr, 16, TJ_HDR + j->len, j->jpath, err)))
        return st;
    gguf_fault_point(&j->faults, "tensor journal fsync");
    if (fdatasync(j->jfd) != 0)
        return gguf_sys_fail(err, errno, "fdatasync of %s", j->jpath);
    return gguf_fsync_dirfd(j->dfd, j->jpath, err);
}

/* Rule 4: the journal's bytes (sealed, jfd) into the GGUF (fd), then the
 * journal removed.  faults: the replace's or recovery's. */
static enum gguf_status apply(int jfd, int fd, int dfd, const char *jname,
                              const char *jpath, uint64_t off, uint64_t len,
                              char *buf, struct gguf_faults *faults,
                              struct gguf_error *err) {
    gguf_fault_point(faults, "tensor copy");
    enum gguf_status st =
        copy(jfd, TJ_HDR, fd, off, len / 2, buf, "the tensor", err);
    gguf_fault_point(faults, "tensor copy half");
    if (st == GGUF_OK)
        st = copy(jfd, TJ_HDR + len / 2, fd, off + len / 2, len - len / 2, buf,
                  "the tensor", err);
    if (st != GGUF_OK)
        return st;
    gguf_fault_point(faults, "tensor fsync");
    if (fdatasync(fd) != 0)
        return gguf_sys_fail(err, errno, "fdatasync of the model");
    gguf_fault_point(faults, "tensor journal unlink");
    if (unlinkat(dfd, jname, 0) != 0)
        return gguf_sys_fail(err, errno, "cannot remove %s", jpath);
    return gguf_fsync_dirfd(dfd, jpath, err);
}

static void tj_free(struct gguf_tjnl *j) {
    if (j->jfd >= 0)
        close(j->jfd);
    free(j->r);
    free(j->jpath);
    free(j);
}

enum gguf_status gguf_tjnl_commit(struct gguf_tjnl *j, int fd, uint64_t off,
                                  struct gguf_error *err) {
    if (!j->nr) { /* nothing written: the old bytes stay */
        gguf_tjnl_abort(j);
        return GGUF_OK;
    }
    j->off = off; /* a commit of the header may have moved the data */
    char *buf = malloc(TJ_CHUNK);
    enum gguf_status st =
        buf ? seal(j, fd, buf, err) : gguf_fail(err, GGUF_E_NOMEM, "oom");
    if (st == GGUF_OK)
        st = apply(j->jfd, fd, j->dfd, j->jname, j->jpath, j->off, j->len, buf,
                   &j->faults, err);
    else if (buf) /* not sealed: the GGUF is untouched, the journal goes */
        (void)unlinkat(j->dfd, j->jname, 0);
    /* Sealed but not applied: the journal stays for recovery. */
    free(buf);
    tj_free(j);
    return st;
}

void gguf_tjnl_abort(struct gguf_tjnl *j) {
    if (!j)
        return;
    (void)unlinkat(j->dfd, j->jname, 0);
    tj_free(j);
}

/* A sealed journal for the model (sb) read from jfd: its offset and
 * length; false if it is not one (cut short, torn, another file's). */
static bool sealed_for(int jfd, const struct stat *jsb, const struct stat *sb,
                       uint64_t *off, uint64_t *len, char *buf) {
    uint8_t hdr[TJ_HDR], tr[16];
    uint64_t h;
    struct gguf_error e = {0};
    if ((uint64_t)jsb->st_size < TJ_HDR + 16 ||
        gguf_pread_full(jfd, hdr, TJ_HDR, 0, "", &e) != GGUF_OK ||
        memcmp(hdr, TJ_MAGIC, 8) != 0 || gguf_rd32(hdr + 8) != 1)
        return false;
    *off = gguf_rd64(hdr + 40);
    *len = gguf_rd64(hdr + 48);
    if (gguf_rd64(hdr + 16) != (uint64_t)sb->st_dev ||
        gguf_rd64(hdr + 24) != (uint64_t)sb->st_ino ||
        *len != (uint64_t)jsb->st_size - TJ_HDR - 16 ||
        *off > (uint64_t)sb->st_size || *len > (uint64_t)sb->st_size - *off)
        return false;
    return gguf_pread_full(jfd, tr, 16, TJ_HDR + *len, "", &e) == GGUF_OK &&
           memcmp(tr + 8, TJ_END, 8) == 0 &&
           tj_hash(jfd, *len, buf, &h, "", &e) == GGUF_OK && h == gguf_rd64(tr);
}

enum gguf_status gguf_tjnl_recover(const struct gguf_file *f, bool *did,
                                   struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    char *jpath = gguf_sidecar_path(f->path, GGUF_TENSOR_SUFFIX);
    char *buf = malloc(TJ_CHUNK), why[256];
    struct stat jsb;
    struct gguf_faults faults;
    uint64_t off, len;
    int jfd = -1;
    if (!jpath || !buf) {
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        goto out;
    }
    const char *jname = jname_of(f, jpath);
    jfd = openat(f->dfd, jname, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (jfd < 0) {
        if (errno != ENOENT)
            st = gguf_sys_fail(err, errno, "cannot open %s", jpath);
        goto out;
    }
    if (fstat(jfd, &jsb) != 0 ||
        !gguf_sidecar_trusted(&jsb, &f->sb, geteuid(), true, why, sizeof why)) {
        st = gguf_fail(err, GGUF_E_PERM, "%s: not acted on: %s", jpath, why);
        goto out;
    }
    gguf_faults_init(&faults);
    if (!f->writable) {
        st = gguf_fail(err, GGUF_E_PERM,
                       "%s has an interrupted tensor replace to complete but "
                       "cannot be opened for writing: nothing done",
                       f->path);
        goto out;
    }
    if (sealed_for(jfd, &jsb, &f->sb, &off, &len, buf))
        st = apply(jfd, f->fd, f->dfd, jname, jpath, off, len, buf, &faults,
                   err);
    else if (unlinkat(f->dfd, jname, 0) != 0) /* rule 1: never sealed */
        st = gguf_sys_fail(err, errno, "cannot remove %s", jpath);
    else
        st = gguf_fsync_dirfd(f->dfd, jpath, err);
    if (did && st == GGUF_OK)
        *did = true;
out:
    if (jfd >= 0)
        close(jfd);
    free(jpath);
    free(buf);
    return st;
}
