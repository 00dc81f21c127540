/*
 * rewrite.c - the rewrite way of growing a header: a complete copy of the
 * file with the new header, PATH.ggufs-new, written beside it, synced and
 * renamed over it (gguf_replace, durable.c, with same_as: swapped in only
 * while the name is still the mounted file's).  The rename is the one atomic
 * step: until it, the
 * original is untouched and a stale PATH.ggufs-new is simply removed
 * (gguf_recover does); after it, the new file is whole and synced.  Used by
 * gguf_commit (where insert-range is unsupported or not wanted) and by
 * gguf_recover (to finish an insert journal on such a filesystem).
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define COPY_CHUNK (UINT64_C(8) << 20)

/* Copies [from, to) of in to out at dst + (x - from), extent by extent
 * (SEEK_DATA/SEEK_HOLE: holes in the source stay holes; out must already
 * have its final size).  copy_file_range, or read/write where the kernel
 * cannot.  *copied counts bytes moved. */
static enum gguf_status copy_data(int in, uint64_t from, uint64_t to, int out,
                                  uint64_t dst, uint64_t *copied,
                                  gguf_progress_fn pfn, void *puser,
                                  struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    uint8_t *buf = NULL;
    bool use_cfr = true;
    uint64_t pos = from;

    while (pos < to) {
        off_t d = lseek(in, (off_t)pos, SEEK_DATA);
        if (d < 0 && errno == ENXIO)
            break; /* only a hole is left */
        uint64_t start = d < 0 ? pos : (uint64_t)d;
        if (start >= to)
            break;
        off_t h = d < 0 ? -1 : lseek(in, d, SEEK_HOLE);
        uint64_t end = h < 0 || (uint64_t)h > to ? to : (uint64_t)h;
        if (end <= start)
            end = to;
        while (start < end) {
            uint64_t n = end - start < COPY_CHUNK ? end - start : COPY_CHUNK;
            if (pfn)
                pfn(puser, start - from, to - from);
            if (use_cfr) {
                loff_t ri = (loff_t)start, wo = (loff_t)(dst + (start - from));
                ssize_t r = copy_file_range(in, &ri, out, &wo, (size_t)n, 0);
                if (r < 0 && errno == EINTR)
                    continue;
                if (r < 0 && (errno == EXDEV || errno == ENOSYS ||
                              errno == EINVAL || errno == EOPNOTSUPP)) {
                    use_cfr = false;
                    continue;
                }
                if (r < 0) {
                    st =
                        gguf_sys_fail(err, errno, "copying tensor data at %llu",
                                      (unsigned long long)start);
                    goto out;
                }
                if (r == 0) {
                    st = gguf_fail(err, GGUF_E_CHANGED,
                                   "the file ended at %llu while copying it",
                                   (unsigned long long)start);
                    goto out;
                }
                start += (uint64_t)r;
                *copied += (uint64_t)r;
                continue;
            }
            if (!buf && !(buf = malloc(COPY_CHUNK))) {
                st = gguf_fail(err, GGUF_E_NOMEM,
                               "out of memory for a copy buffer");
                goto out;
            }
            st = gguf_pread_full(in, buf, n, start, "tensor data", err);
            if (st != GGUF_OK)
                goto out;
            st = gguf_pwrite_full(out, buf, n, dst + (start - from),
                                  "tensor data", err);
            if (st != GGUF_OK)
                goto out;
            start += n;
            *copied += n;
        }
        pos = end;
    }
out:
    free(buf);
    return st;
}

/* LOCK_EX or LOCK_SH if the open file description fd holds a flock lock,
 * else 0.  /proc/self/fdinfo lists exactly the locks owned by that open
 * file; without /proc, 0. */
static int held_flock(int fd) {
    char name[64], line[256];
    int mode = 0;
    snprintf(name, sizeof name, "/proc/self/fdinfo/%d", fd);
    FILE *f = fopen(name, "re");
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "lock:", 5) != 0 || !strstr(line, " FLOCK "))
            continue;
        if (strstr(line, " WRITE "))
            mode = LOCK_EX;
        else if (strstr(line, " READ ") && !mode)
            mode = LOCK_SH;
    }
    fclose(f);
    return mode;
}

/* Refuses a copy that cannot be: too large, or (fail fast) more than the
 * device has free, counting the original's allocated bytes, not its size:
 * holes stay holes. */
static enum gguf_status check_room(int fd, const struct stat *sb, uint64_t d2,
                                   uint64_t tail, struct gguf_error *err) {
    if (tail > (uint64_t)INT64_MAX - d2)
        return gguf_fail(err, GGUF_E_RANGE,
                         "the grown file would be too large");
    uint64_t need = d2 + (uint64_t)sb->st_blocks * 512;
    uint64_t avail = gguf_free_bytes(fd);
    if (avail < need) {
        gguf_fail(err, GGUF_E_NOSPACE,
                  "the header must grow and the file be rewritten, which "
                  "needs about %llu bytes; %llu are free",
                  (unsigned long long)need, (unsigned long long)avail);
        err->sys_errno = ENOSPC;
        return GGUF_E_NOSPACE;
    }
    return GGUF_OK;
}

/* Copies every extended attribute of fd to nfd (user.*, ACLs as
 * system.posix_acl_*, security.* and trusted.* where we may read them):
 * the file keeps what the user or the system attached to it.  One that
 * cannot be copied fails the rewrite, naming it, before anything is
 * renamed: silently dropping an ACL could open the model to others.  The
 * kernel bounds a list and a value at 64 KiB each (XATTR_LIST_MAX,
 * XATTR_SIZE_MAX), so the buffers are fixed. */
static enum gguf_status copy_xattrs(int fd, int nfd, struct gguf_error *err) {
    enum { XMAX = 65536 };
    enum gguf_status st = GGUF_OK;
    char *names = malloc(XMAX), *val = malloc(XMAX), *have = malloc(XMAX);
    if (!names || !val || !have) {
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        goto out;
    }
    ssize_t n = flistxattr(fd, names, XMAX);
    if (n < 0) {
        if (errno != ENOTSUP)
            st = gguf_sys_fail(err, errno,
                               "cannot list the extended attributes of the "
                               "file; it is unchanged");
        goto out;
    }
    for (ssize_t at = 0; at < n; at += (ssize_t)strlen(names + at) + 1) {
        const char *name = names + at;
        ssize_t v = fgetxattr(fd, name, val, XMAX);
        if (v < 0) {
            st = gguf_sys_fail(err, errno,
                               "cannot read extended attribute %s of the "
                               "file; it is unchanged",
                               name);
            goto out;
        }
        ssize_t h = fgetxattr(nfd, name, have, XMAX);
        if (h == v && memcmp(have, val, (size_t)v) == 0)
            continue; /* the new file has it already (a default label) */
        if (fsetxattr(nfd, name, val, (size_t)v, 0) < 0) {
            st = gguf_sys_fail(err, errno,
                               "the header must grow by rewriting the file, "
                               "and its extended attribute %s cannot be "
                               "copied to the new file; the file is "
                               "unchanged",
                               name);
            goto out;
        }
    }
out:
    free(names);
    free(val);
    free(have);
    return st;
}

/* The new file nfd (at npath) takes over what belongs to the file, not to
 * its bytes: owner, mode, extended attributes (ACLs too), and the caller's flock on fd (the mount's "one
 * writer" lock must hold on the file that replaces it; nfd is nobody
 * else's yet). */
static enum gguf_status take_over(int fd, const struct stat *sb, int nfd,
                                  const char *npath, struct gguf_error *err) {
    /* Owner before mode: chown clears set-id bits. */
    if (fchown(nfd, sb->st_uid, sb->st_gid) < 0)
        return gguf_fail(err, GGUF_E_PERM,
                         "cannot give the rewritten file the owner %u:%u of "
                         "the original (%s); the file is unchanged",
                         (unsigned)sb->st_uid, (unsigned)sb->st_gid,
                         strerror(errno));
    if (fchmod(nfd, sb->st_mode & 07777) < 0)
        return gguf_sys_fail(err, errno, "cannot set the mode of %s", npath);
    enum gguf_status st = copy_xattrs(fd, nfd, err);
    if (st != GGUF_OK)
        return st;
    int held = held_flock(fd);
    if (held && flock(nfd, held | LOCK_NB) < 0)
        return gguf_sys_fail(err, errno, "cannot lock %s", npath);
    return GGUF_OK;
}

/* Steps (fault points): create, header, copy, fsync, rename, directory
 * fsync.  On failure the new file is removed and the original is as it
 * was.  The caller holds the commit lock on fd, which makes a leftover
 * PATH.ggufs-new ours to remove. */
enum gguf_status gguf_rewrite_file(int fd, const struct gguf_at *at,
                                   const struct stat *sb, uint64_t d,
                                   const uint8_t *hdr, uint64_t d2,
                                   struct gguf_faults *f, int *newfd,
                                   uint64_t *copied, gguf_progress_fn pfn,
                                   void *puser, struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    struct gguf_error scratch;
    /* The rename replaces path only while it is still fd's file: a commit
     * writes into the file that was mounted, never over whatever path
     * names now (the user may have moved the model away, or put another
     * file there, while it was mounted). */
    const char *path = at->shown;
    struct gguf_replace r = {.dfd = at->dfd,
                             .name = at->name,
                             .shown = path,
                             .what = "file",
                             .f = f,
                             .same_as = fd,
                             .fd = -1};
    char *npath = gguf_sidecar_path(path, GGUF_NEWFILE_SUFFIX);
    uint64_t size = (uint64_t)sb->st_size;
    uint64_t tail = size > d ? size - d : 0;

    if (!err)
        err = &scratch;
    *newfd = -1;
    *copied = 0;
    if (!npath) {
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        goto out;
    }
    st = check_room(fd, sb, d2, tail, err);
    if (st != GGUF_OK)
        goto out;
    snprintf(r.tmp, sizeof r.tmp, "%s", gguf_at_beside(at, npath).name);
    /* A leftover PATH.ggufs-new of a killed rewrite is ours to remove,
     * since we hold the lock of the file it was meant to replace. */
    st = gguf_replace_open(&r, 0600, GGUF_REPLACE_STALE, err);
    if (st != GGUF_OK)
        goto out;
    if (ftruncate(r.fd, (off_t)(d2 + tail)) < 0) {
        st = gguf_sys_fail(err, errno, "cannot size %s", npath);
        goto out;
    }
    gguf_fault_point(f, "header to new file");
    st = gguf_pwrite_full(r.fd, hdr, d2, 0, "the new header", err);
    if (st != GGUF_OK)
        goto out;
    gguf_fault_point(f, "copy tensor data");
    st = copy_data(fd, d, size, r.fd, d2, copied, pfn, puser, err);
    if (st != GGUF_OK)
        goto out;
    if (pfn) /* copied; the sync of it can take as long again */
        pfn(puser, tail, tail);
    st = take_over(fd, sb, r.fd, npath, err);
    if (st == GGUF_OK)
        st = gguf_replace_commit(&r, err);
    if (r.renamed) { /* in place, even if its directory's sync failed */
        *newfd = r.fd;
        r.fd = -1;
    }
out:
    if (pfn)
        pfn(puser, 0, 0); /* over, whatever the outcome */
    if (st == GGUF_E_NOSPACE && !r.renamed && r.tmp[0]) {
        size_t m = strlen(err->msg);
        snprintf(err->msg + m, sizeof err->msg - m,
                 "; the partial copy was removed, the file is unchanged");
    }
    gguf_replace_end(&r);
    free(npath);
    return st;
}
