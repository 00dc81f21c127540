/*
 * commit.c - writing a context's edited metadata back into its GGUF file,
 * crash-safely and without moving tensor bytes when that can be avoided;
 * and saving the edits aside when a commit cannot be made.
 *
 * Three ways, tried in order:
 *
 *  in place  The new header, padded by write.c's filler KV, ends exactly at
 *            the old data offset D: only [0, D) is rewritten.
 *  insert    The header no longer fits.  D grows by k (a multiple of the
 *            filesystem block and of the alignment, with headroom for later
 *            edits): FALLOC_FL_INSERT_RANGE shifts every tensor byte by k
 *            without copying it, then the header for D + k is written.
 *  rewrite   Insert-range unsupported (tmpfs, ...) or GGUF_COMMIT_NO_INSERT:
 *            a complete copy PATH.ggufs-new is written beside the file and
 *            renamed over it.  Costs a copy of the data (holes stay holes).
 *
 * In place and insert change the file itself, so they are journaled: the
 * plan with both old and new header bytes goes to PATH.ggufs-journal and
 * is fsync'ed (with its directory) before the first byte of the file
 * changes, and removed after the file is synced.  gguf_recover (recover.c)
 * completes a commit killed in between.  The rewrite needs no journal: the
 * rename is the atomic step, a stale PATH.ggufs-new is simply removed.
 *
 * Concurrency: a commit holds a whole-file OFD write lock on the file for
 * its whole duration (GGUF_E_BUSY if another open file holds it);
 * gguf_recover takes the same lock, so it never mistakes a running commit
 * for an interrupted one.  flock locks are the caller's (the mount holds
 * one on ctx->fd): left alone, and carried over to the new file when a
 * rewrite replaces ctx->fd.
 *
 * Fault points (GGUFS_FAULT=N kills the process just before the Nth step;
 * GGUFS_FAULT_TRACE=1 lists them):
 *
 *   in place                     insert                      rewrite
 *   1 journal write, body        1 journal write, body       1 create new file
 *   2 journal write, trailer     2 journal write, trailer    2 header to new file
 *   3 fsync journal              3 fsync journal             3 copy tensor data
 *   4 fsync directory            4 fsync directory           4 fsync new file
 *   5 header, first half         5 insert-range              5 rename over original
 *   6 header, second half        6 fsync after insert        6 fsync directory
 *   7 fsync file                 7 header, first half
 *   8 unlink journal             8 header, second half
 *   9 fsync directory            9 fsync file
 *                               10 unlink journal
 *                               11 fsync directory
 *
 * Where insert-range is refused (tmpfs, btrfs): the insert's steps 1-5,
 * then the rewrite's 1-6, then unlink journal, fsync directory (13): the
 * insert journal stays until the rewrite is renamed in.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define COPY_CHUNK (UINT64_C(8) << 20)

static int64_t mtime_ns(const struct stat *sb) {
    return (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
}

static bool exists(const char *p) {
    struct stat sb;
    return lstat(p, &sb) == 0;
}

/* Appends ", " and a printf'ed piece to msg (len n). */
static void say(char *msg, size_t n, const char *fmt, unsigned long long a,
                unsigned long long b) {
    size_t used = strlen(msg);
    if (used + 2 < n) {
        if (used)
            strcat(msg, ", ");
        used = strlen(msg);
        snprintf(msg + used, n - used, fmt, a, b);
    }
}

/* The file must still be the one ctx describes: same device and inode
 * through the fd and through the path (not replaced by a rename), same
 * size, same mtime.  *sb receives fstat of the fd. */
static enum gguf_status check_unchanged(const gguf_ctx *ctx, struct stat *sb,
                                        struct gguf_error *err) {
    struct stat ps;
    char what[300] = "";

    if (fstat(ctx->fd, sb) < 0)
        return gguf_sys_fail(err, errno, "cannot stat %s", ctx->path);
    if (stat(ctx->path, &ps) < 0) {
        if (errno == ENOENT)
            return gguf_fail(err, GGUF_E_CHANGED,
                             "the file was removed or renamed since it was "
                             "opened");
        return gguf_sys_fail(err, errno, "cannot stat %s", ctx->path);
    }
    if (sb->st_dev != ctx->dev || ps.st_dev != ctx->dev)
        say(what, sizeof what, "device %llu -> %llu",
            (unsigned long long)ctx->dev,
            (unsigned long long)(ps.st_dev != ctx->dev ? ps.st_dev : sb->st_dev));
    if (sb->st_ino != ctx->ino || ps.st_ino != ctx->ino)
        say(what, sizeof what, "inode %llu -> %llu (replaced)",
            (unsigned long long)ctx->ino,
            (unsigned long long)(ps.st_ino != ctx->ino ? ps.st_ino : sb->st_ino));
    if ((uint64_t)sb->st_size != ctx->file_size)
        say(what, sizeof what, "size %llu -> %llu",
            (unsigned long long)ctx->file_size, (unsigned long long)sb->st_size);
    if (mtime_ns(sb) != ctx->mtime_ns)
        say(what, sizeof what, "mtime %lld ns -> %lld ns",
            (unsigned long long)ctx->mtime_ns, (unsigned long long)mtime_ns(sb));
    if (what[0])
        return gguf_fail(err, GGUF_E_CHANGED,
                         "the file changed since it was opened (%s); reopen it "
                         "and edit again", what);
    return GGUF_OK;
}

/* Free bytes for us (the reserve counts for root). */
static uint64_t free_bytes(int fd) {
    struct statvfs vs;
    if (fstatvfs(fd, &vs) < 0)
        return UINT64_MAX; /* unknown: let the writes tell */
    uint64_t blocks = geteuid() == 0 ? vs.f_bfree : vs.f_bavail;
    uint64_t unit = vs.f_frsize ? vs.f_frsize : vs.f_bsize;
    if (unit && blocks > UINT64_MAX / unit)
        return UINT64_MAX;
    return blocks * unit;
}

/* The file's current bytes [0, D), zeros past its end (a tensor-less file
 * may end before its padded header does). */
static enum gguf_status read_old_header(int fd, uint64_t d, uint64_t size,
                                        uint8_t **out, struct gguf_error *err) {
    if (d > SIZE_MAX)
        return gguf_fail(err, GGUF_E_NOMEM, "header too large");
    *out = calloc(1, d ? (size_t)d : 1);
    if (!*out)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory reading the header");
    return gguf_pread_full(fd, *out, d < size ? d : size, 0,
                           "the current header", err);
}

/* Writes the journal: body, then trailer, fsync, directory fsync.  Until
 * this returns GGUF_OK the file must not be touched; on failure no journal
 * is left behind (the file was not touched, so none is needed). */
static enum gguf_status write_journal(const char *jpath, const char *path,
                                      const struct gguf_jnl *j,
                                      struct gguf_error *err) {
    enum gguf_status st;
    struct gguf_buf b = {0};
    int jfd = -1;
    bool created = false;

    st = gguf_jnl_encode(j, &b, err);
    if (st != GGUF_OK)
        goto out;
    jfd = open(jpath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (jfd < 0) {
        if (errno == EEXIST)
            st = gguf_fail(err, GGUF_E_BUSY,
                           "%s exists: an interrupted commit must be "
                           "recovered first", jpath);
        else
            st = gguf_sys_fail(err, errno, "cannot create %s", jpath);
        goto out;
    }
    created = true;
    uint64_t body = b.len - GGUF_JNL_TRAILER;
    gguf_fault_point("journal write, body");
    st = gguf_pwrite_full(jfd, b.p, body, 0, "the journal", err);
    if (st != GGUF_OK)
        goto out;
    gguf_fault_point("journal write, trailer");
    st = gguf_pwrite_full(jfd, b.p + body, GGUF_JNL_TRAILER, body,
                          "the journal", err);
    if (st != GGUF_OK)
        goto out;
    gguf_fault_point("fsync journal");
    if (fsync(jfd) < 0) {
        st = gguf_sys_fail(err, errno, "cannot sync %s", jpath);
        goto out;
    }
    gguf_fault_point("fsync directory (journal)");
    st = gguf_fsync_dir(path, err);
out:
    if (jfd >= 0)
        close(jfd);
    if (st != GGUF_OK && created)
        unlink(jpath);
    gguf_buf_free(&b);
    return st;
}

/* Removes the journal of a finished (or fully undone) commit. */
static enum gguf_status drop_journal(const char *jpath, const char *path,
                                     struct gguf_error *err) {
    gguf_fault_point("unlink journal");
    if (unlink(jpath) < 0)
        return gguf_sys_fail(err, errno, "cannot remove %s", jpath);
    gguf_fault_point("fsync directory");
    return gguf_fsync_dir(path, err);
}

/* After a successful write: ctx describes the file as it now is. */
static void adopt(gguf_ctx *ctx, uint64_t data_offset) {
    struct stat sb;
    ctx->data_offset = data_offset;
    if (fstat(ctx->fd, &sb) == 0) {
        ctx->dev = sb.st_dev;
        ctx->ino = sb.st_ino;
        ctx->mtime_ns = mtime_ns(&sb);
        ctx->file_size = (uint64_t)sb.st_size;
    }
    ctx->dirty = false;
}

/* Journaled in-place or insert commit of the header nh (for data offset
 * D + k).  When insert-range is not available on this file, *unsupported
 * is set, nothing was changed, and the journal is left in place: the
 * caller finishes the same change by a rewrite and then drops it, so that
 * from the journal's fsync on, a crash always ends in the new state. */
static enum gguf_status journaled(gguf_ctx *ctx, const struct stat *sb,
                                  const char *jpath, uint32_t op, uint64_t k,
                                  const struct gguf_buf *nh,
                                  const uint8_t *old, bool *unsupported,
                                  struct gguf_error *err) {
    enum gguf_status st;
    enum gguf_jnl_stage stage = GGUF_JNL_UNTOUCHED;
    struct gguf_jnl j = {
        .op = op, .dev = (uint64_t)sb->st_dev, .ino = (uint64_t)sb->st_ino,
        .orig_size = (uint64_t)sb->st_size, .k = k,
        .orig_mtime_ns = mtime_ns(sb), .old_hdr = old,
        .old_len = ctx->data_offset, .new_hdr = nh->p, .new_len = nh->len,
    };

    *unsupported = false;
    st = write_journal(jpath, ctx->path, &j, err);
    if (st != GGUF_OK)
        goto out;
    st = gguf_jnl_apply(ctx->fd, &j, false, &stage, err);
    if (st != GGUF_OK) {
        int e = err->sys_errno;
        struct gguf_error e2 = {0};
        if (op == GGUF_JNL_INSERT && stage == GGUF_JNL_UNTOUCHED &&
            (e == EOPNOTSUPP || e == EINVAL || e == ENOSYS || e == ENOTTY)) {
            *unsupported = true;
            goto out;
        }
        /* Put the file back, then drop the journal; if either fails the
         * journal stays and recovery completes the commit instead. */
        if (gguf_jnl_rollback(ctx->fd, &j, stage, &e2) == GGUF_OK &&
            drop_journal(jpath, ctx->path, &e2) == GGUF_OK)
            goto out;
        size_t m = strlen(err->msg);
        snprintf(err->msg + m, sizeof err->msg - m,
                 "; undoing failed too (%s): %s is kept and recovery "
                 "(remount) will complete the commit", e2.msg, jpath);
        goto out;
    }
    adopt(ctx, ctx->data_offset + k);
    st = drop_journal(jpath, ctx->path, err);
out:
    return st;
}

/* Copies [from, to) of in to out at dst + (x - from), extent by extent
 * (SEEK_DATA/SEEK_HOLE: holes in the source stay holes; out must already
 * have its final size).  copy_file_range, or read/write where the kernel
 * cannot.  *copied counts bytes moved. */
static enum gguf_status copy_data(int in, uint64_t from, uint64_t to, int out,
                                  uint64_t dst, uint64_t *copied,
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
                    st = gguf_sys_fail(err, errno, "copying tensor data at %llu",
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
                st = gguf_fail(err, GGUF_E_NOMEM, "out of memory for a copy buffer");
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

/* Rewrite: the file at path (open as fd, fstat sb, data at d) again with
 * hdr (d2 bytes) as its header and its data at d2: written to
 * PATH.ggufs-new, synced, renamed over path.  Until the rename the original
 * is untouched, and on failure the new file is removed.  *newfd is the new
 * file (O_RDWR) once the rename happened, else -1; it carries the flock
 * lock fd held, if any.  The caller must hold the commit lock on fd. */
enum gguf_status gguf_rewrite_file(int fd, const char *path,
                                   const struct stat *sb, uint64_t d,
                                   const uint8_t *hdr, uint64_t d2, int *newfd,
                                   uint64_t *copied, struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    struct gguf_error scratch;
    char *npath = gguf_path_with(path, GGUF_NEWFILE_SUFFIX);
    int nfd = -1;
    bool created = false;
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
    if (tail > (uint64_t)INT64_MAX - d2) {
        st = gguf_fail(err, GGUF_E_RANGE, "the grown file would be too large");
        goto out;
    }
    /* Fail fast on a device that cannot hold the copy (allocated bytes). */
    uint64_t need = d2 + (uint64_t)sb->st_blocks * 512, avail = free_bytes(fd);
    if (avail < need) {
        st = gguf_fail(err, GGUF_E_NOSPACE,
                       "the header must grow and the file be rewritten, which "
                       "needs about %llu bytes; %llu are free",
                       (unsigned long long)need, (unsigned long long)avail);
        err->sys_errno = ENOSPC;
        goto out;
    }

    gguf_fault_point("create new file");
    for (int attempt = 0; nfd < 0; attempt++) {
        nfd = open(npath, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        /* A leftover of a killed rewrite: ours to remove, since we hold the
         * lock of the file it was meant to replace. */
        if (nfd < 0 && errno == EEXIST && attempt == 0 && unlink(npath) == 0)
            continue;
        if (nfd < 0) {
            st = gguf_sys_fail(err, errno, "cannot create %s", npath);
            goto out;
        }
    }
    created = true;
    if (ftruncate(nfd, (off_t)(d2 + tail)) < 0) {
        st = gguf_sys_fail(err, errno, "cannot size %s", npath);
        goto out;
    }
    gguf_fault_point("header to new file");
    st = gguf_pwrite_full(nfd, hdr, d2, 0, "the new header", err);
    if (st != GGUF_OK)
        goto out;
    gguf_fault_point("copy tensor data");
    st = copy_data(fd, d, size, nfd, d2, copied, err);
    if (st != GGUF_OK)
        goto out;
    /* Owner before mode: chown clears set-id bits. */
    if (fchown(nfd, sb->st_uid, sb->st_gid) < 0) {
        st = gguf_fail(err, GGUF_E_PERM,
                       "cannot give the rewritten file the owner %u:%u of the "
                       "original (%s); the file is unchanged",
                       (unsigned)sb->st_uid, (unsigned)sb->st_gid,
                       strerror(errno));
        goto out;
    }
    if (fchmod(nfd, sb->st_mode & 07777) < 0) {
        st = gguf_sys_fail(err, errno, "cannot set the mode of %s", npath);
        goto out;
    }
    /* The caller's flock on the old file (the mount's "one writer" lock)
     * must hold on the file that replaces it; nfd is nobody else's yet. */
    int held = held_flock(fd);
    if (held && flock(nfd, held | LOCK_NB) < 0) {
        st = gguf_sys_fail(err, errno, "cannot lock %s", npath);
        goto out;
    }
    gguf_fault_point("fsync new file");
    if (fsync(nfd) < 0) {
        st = gguf_sys_fail(err, errno, "cannot sync %s", npath);
        goto out;
    }
    gguf_fault_point("rename over original");
    if (rename(npath, path) < 0) {
        st = gguf_sys_fail(err, errno, "cannot rename %s to %s", npath, path);
        goto out;
    }
    created = false;
    *newfd = nfd;
    nfd = -1;
    gguf_fault_point("fsync directory");
    st = gguf_fsync_dir(path, err);
out:
    if (nfd >= 0)
        close(nfd);
    if (created)
        unlink(npath);
    if (st == GGUF_E_NOSPACE && created) {
        size_t m = strlen(err->msg);
        snprintf(err->msg + m, sizeof err->msg - m,
                 "; the partial copy was removed, the file is unchanged");
    }
    free(npath);
    return st;
}

/* The rewrite way of a commit: ctx->fd becomes the new file's. */
static enum gguf_status rewrite(gguf_ctx *ctx, const struct stat *sb,
                                uint64_t d2, const struct gguf_buf *nh,
                                struct gguf_commit_info *info,
                                struct gguf_error *err) {
    int nfd = -1;
    uint64_t copied = 0;
    enum gguf_status st = gguf_rewrite_file(ctx->fd, ctx->path, sb,
                                            ctx->data_offset, nh->p, d2, &nfd,
                                            &copied, err);
    if (nfd >= 0) {
        close(ctx->fd); /* also releases the locks on the replaced file */
        ctx->fd = nfd;
        adopt(ctx, d2);
        info->bytes_written = nh->len + copied;
    }
    return st;
}

enum gguf_status gguf_commit(gguf_ctx *ctx, unsigned flags,
                             struct gguf_commit_info *info,
                             struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    struct gguf_commit_info dummy;
    struct gguf_error scratch;
    struct gguf_buf nh = {0};
    struct gguf_error fit = {0};
    uint8_t *old = NULL;
    char *jpath = NULL;
    bool locked = false;
    struct stat sb;

    if (!info)
        info = &dummy;
    if (!err)
        err = &scratch; /* the error's errno steers the fallbacks below */
    memset(info, 0, sizeof *info);
    info->how = GGUF_COMMIT_NONE;
    if (!ctx) {
        st = gguf_fail(err, GGUF_E_INVAL, "missing context");
        goto out;
    }
    info->old_data_offset = info->new_data_offset = ctx->data_offset;
    /* No edits: nothing is written, not even a check of the file. */
    if (!ctx->dirty)
        goto out;
    if (ctx->fd < 0 || !ctx->path) {
        st = gguf_fail(err, GGUF_E_INVAL, "the context was not read from a file");
        goto out;
    }
    int fl = fcntl(ctx->fd, F_GETFL);
    if (fl < 0 || (fl & O_ACCMODE) != O_RDWR) {
        st = gguf_fail(err, GGUF_E_INVAL,
                       "the file was opened read-only (GGUF_OPEN_RDWR is "
                       "needed to commit)");
        goto out;
    }
    jpath = gguf_path_with(ctx->path, GGUF_JOURNAL_SUFFIX);
    if (!jpath) {
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        goto out;
    }
    gguf_fault_reset();
    st = gguf_commit_lock(ctx->fd, true, err);
    if (st != GGUF_OK)
        goto out;
    locked = true;
    st = check_unchanged(ctx, &sb, err);
    if (st != GGUF_OK)
        goto out;
    if (exists(jpath)) {
        st = gguf_fail(err, GGUF_E_BUSY,
                       "%s exists: an interrupted commit must be recovered "
                       "first (remounting does it)", jpath);
        goto out;
    }

    uint64_t d = ctx->data_offset, size = (uint64_t)sb.st_size;
    st = gguf_write_header(ctx, d, &nh, &fit);
    if (st == GGUF_OK && nh.len != d) {
        st = gguf_fail(err, GGUF_E_RANGE,
                       "the header writer made %zu bytes for a data offset of "
                       "%llu", nh.len, (unsigned long long)d);
        goto out;
    }
    if (st == GGUF_OK) {
        bool unused;
        st = read_old_header(ctx->fd, d, size, &old, err);
        if (st != GGUF_OK)
            goto out;
        if (memcmp(old, nh.p, (size_t)d) == 0) {
            ctx->dirty = false; /* the file already says exactly this */
            goto out;
        }
        st = journaled(ctx, &sb, jpath, GGUF_JNL_INPLACE, 0, &nh, old,
                       &unused, err);
        if (st == GGUF_OK || !ctx->dirty) {
            info->how = GGUF_COMMIT_INPLACE;
            info->bytes_written = nh.len;
        }
        goto out;
    }
    if (st != GGUF_E_RANGE) {
        if (err)
            *err = fit;
        goto out;
    }

    /* Grow: D' = D + k, k a multiple of the filesystem block and of the
     * alignment, with headroom so that the next edits fit in place.  The
     * rule is live.c's (gguf_grown_offset), so that the live view shows
     * exactly the file a commit writes. */
    uint64_t d2 = 0;
    st = gguf_grown_offset(ctx, &d2, err);
    if (st != GGUF_OK)
        goto out;
    if (d2 <= d || (d2 - d) % 512 != 0) {
        st = gguf_fail(err, GGUF_E_RANGE, "bad grown data offset %llu (from %llu)",
                       (unsigned long long)d2, (unsigned long long)d);
        goto out;
    }
    uint64_t k = d2 - d;
    nh.len = 0;
    st = gguf_write_header(ctx, d2, &nh, err);
    if (st != GGUF_OK)
        goto out;
    if (nh.len != d2) {
        st = gguf_fail(err, GGUF_E_RANGE,
                       "the header writer made %zu bytes for a data offset of "
                       "%llu", nh.len, (unsigned long long)d2);
        goto out;
    }
    info->new_data_offset = d2;

    if (!(flags & GGUF_COMMIT_NO_INSERT)) {
        bool unsupported = false;
        uint64_t avail = free_bytes(ctx->fd);
        if (avail < k) {
            st = gguf_fail(err, GGUF_E_NOSPACE,
                           "the header must grow by %llu bytes; %llu are free",
                           (unsigned long long)k, (unsigned long long)avail);
            err->sys_errno = ENOSPC;
            goto out;
        }
        st = read_old_header(ctx->fd, d, size, &old, err);
        if (st != GGUF_OK)
            goto out;
        st = journaled(ctx, &sb, jpath, GGUF_JNL_INSERT, k, &nh, old,
                       &unsupported, err);
        if (st == GGUF_OK || !ctx->dirty) {
            info->how = GGUF_COMMIT_INSERT;
            info->bytes_written = nh.len;
        }
        if (!unsupported)
            goto out;
        /* The insert journal stays until the rewrite is renamed in: a
         * crash before that is completed by recovery (which rewrites too);
         * a failure leaves the file untouched, so the journal can go. */
        memset(err, 0, sizeof *err);
        st = rewrite(ctx, &sb, d2, &nh, info, err);
        if (st == GGUF_OK || !ctx->dirty)
            info->how = GGUF_COMMIT_REWRITE;
        struct gguf_error e2 = {0};
        enum gguf_status s2 = drop_journal(jpath, ctx->path, &e2);
        if (st == GGUF_OK && s2 != GGUF_OK) {
            st = s2;
            *err = e2;
        }
        goto out;
    }
    st = rewrite(ctx, &sb, d2, &nh, info, err);
    if (st == GGUF_OK || !ctx->dirty)
        info->how = GGUF_COMMIT_REWRITE;
out:
    if (st != GGUF_OK && info->how == GGUF_COMMIT_NONE && ctx)
        info->new_data_offset = ctx->data_offset;
    if (locked)
        (void)gguf_commit_lock(ctx->fd, false, NULL);
    gguf_buf_free(&nh);
    free(old);
    free(jpath);
    return st;
}

/* ---- saving edits aside --------------------------------------------- */

static enum gguf_status put_str(struct gguf_buf *b, const void *s, uint64_t n) {
    uint8_t len[8];
    gguf_wr64(len, n);
    enum gguf_status st = gguf_buf_add(b, len, 8);
    return st == GGUF_OK ? gguf_buf_add(b, s, (size_t)n) : st;
}

static enum gguf_status put_u32(struct gguf_buf *b, uint32_t v) {
    uint8_t p[4];
    gguf_wr32(p, v);
    return gguf_buf_add(b, p, 4);
}

#define REMOVED_KEY "ggufs.removed_keys"

/* A tensor-less GGUF of ctx's keys (the filler left out) plus, when keys of
 * the file on disk are gone from ctx, REMOVED_KEY: an array of their
 * names (a rename shows as the old name removed and the new one present). */
static enum gguf_status serialize_edits(const gguf_ctx *ctx,
                                        struct gguf_buf *b,
                                        struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    gguf_ctx *disk = NULL;
    struct gguf_buf removed = {0};
    uint64_t n_removed = 0, n_kv = 0;
    uint8_t tmp[8];

#define TRY(x)                                                                \
    do {                                                                      \
        if ((st = (x)) != GGUF_OK)                                            \
            goto out;                                                         \
    } while (0)

    if (ctx->path) {
        struct gguf_error e2 = {0};
        if (gguf_open(&disk, ctx->path, 0, &e2) != GGUF_OK)
            disk = NULL; /* unreadable now: no list of removals */
    }
    for (int64_t i = 0; disk && i < gguf_n_kv(disk); i++) {
        size_t kl;
        const char *key = gguf_kv_key(disk, i, &kl);
        if (gguf_key_is_filler(key, kl) || gguf_find_key(ctx, key, kl) >= 0)
            continue;
        TRY(put_str(&removed, key, kl));
        n_removed++;
    }
    /* Left out: the filler, and a REMOVED_KEY of ctx's own (ours anyway;
     * two keys of one name would make the file invalid). */
    bool *skip = calloc((size_t)ctx->n_kv + 1, sizeof *skip);
    if (!skip) {
        st = GGUF_E_NOMEM;
        goto out;
    }
    for (int64_t i = 0; i < ctx->n_kv; i++) {
        const struct gguf_kv *kv = &ctx->kv[i];
        skip[i] = gguf_key_is_filler(kv->key, (size_t)kv->key_len) ||
                  (n_removed && kv->key_len == sizeof REMOVED_KEY - 1 &&
                   memcmp(kv->key, REMOVED_KEY, sizeof REMOVED_KEY - 1) == 0);
        n_kv += !skip[i];
    }

    uint32_t version = ctx->version == 2 ? 2 : 3;
    gguf_wr64(tmp, 0);
    if ((st = gguf_buf_add(b, GGUF_MAGIC, 4)) == GGUF_OK &&
        (st = put_u32(b, version)) == GGUF_OK &&
        (st = gguf_buf_add(b, tmp, 8)) == GGUF_OK) {
        gguf_wr64(tmp, n_kv + (n_removed > 0));
        st = gguf_buf_add(b, tmp, 8);
    }
    for (int64_t i = 0; st == GGUF_OK && i < ctx->n_kv; i++) {
        const struct gguf_kv *kv = &ctx->kv[i];
        if (skip[i])
            continue;
        if ((st = put_str(b, kv->key, kv->key_len)) == GGUF_OK &&
            (st = put_u32(b, kv->type)) == GGUF_OK)
            st = gguf_buf_add(b, kv->val, (size_t)kv->val_len);
    }
    free(skip);
    TRY(st);
    if (n_removed) {
        TRY(put_str(b, REMOVED_KEY, sizeof REMOVED_KEY - 1));
        TRY(put_u32(b, GGUF_TYPE_ARRAY));
        TRY(put_u32(b, GGUF_TYPE_STRING));
        gguf_wr64(tmp, n_removed);
        TRY(gguf_buf_add(b, tmp, 8));
        TRY(gguf_buf_add(b, removed.p, removed.len));
    }
    uint32_t a = ctx->alignment ? ctx->alignment : GGUF_DEFAULT_ALIGNMENT;
    while (b->len % a)
        TRY(gguf_buf_add(b, "", 1));
#undef TRY
out:
    if (st != GGUF_OK)
        st = gguf_fail(err, st, "out of memory saving the edits");
    if (disk)
        gguf_close(disk);
    gguf_buf_free(&removed);
    return st;
}

/* Creates the edits file under prefix (a path prefix; the name gets a
 * timestamp and, on a clash, a counter) exclusively, writes and syncs it.
 * The name is put in out only if it fits. */
static enum gguf_status write_edits_at(const char *prefix,
                                       const struct gguf_buf *b, char *out,
                                       size_t n, struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    char stamp[32], name[PATH_MAX];
    time_t now = time(NULL);
    struct tm tm;
    int fd = -1;

    if (!localtime_r(&now, &tm) ||
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm) == 0)
        snprintf(stamp, sizeof stamp, "%lld", (long long)now);
    for (int i = 1; fd < 0; i++) {
        int w = i == 1 ? snprintf(name, sizeof name, "%s.ggufs-edits-%s.gguf",
                                  prefix, stamp)
                       : snprintf(name, sizeof name,
                                  "%s.ggufs-edits-%s-%d.gguf", prefix, stamp, i);
        if (w < 0 || (size_t)w >= sizeof name || (size_t)w >= n) {
            st = gguf_fail(err, GGUF_E_RANGE, "the edits file name is too long");
            goto out;
        }
        fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && (errno != EEXIST || i >= 1000)) {
            st = gguf_sys_fail(err, errno, "cannot create %s", name);
            goto out;
        }
    }
    st = gguf_pwrite_full(fd, b->p, b->len, 0, "the saved edits", err);
    if (st == GGUF_OK && fsync(fd) < 0)
        st = gguf_sys_fail(err, errno, "cannot sync %s", name);
    if (st == GGUF_OK && close(fd) < 0)
        st = gguf_sys_fail(err, errno, "cannot close %s", name);
    fd = -1;
    if (st != GGUF_OK) {
        unlink(name);
        goto out;
    }
    (void)gguf_fsync_dir(name, NULL);
    memcpy(out, name, strlen(name) + 1);
out:
    if (fd >= 0)
        close(fd);
    return st;
}

enum gguf_status gguf_save_edits(const gguf_ctx *ctx, char *out, size_t n,
                                 struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    struct gguf_error scratch;
    struct gguf_buf b = {0};
    char *copy = NULL, *prefix = NULL;

    if (!err)
        err = &scratch; /* its errno chooses the fallback directory */
    if (!ctx || !out || n == 0) {
        st = gguf_fail(err, GGUF_E_INVAL, "missing argument to gguf_save_edits");
        goto out;
    }
    out[0] = '\0';
    st = serialize_edits(ctx, &b, err);
    if (st != GGUF_OK)
        goto out;
    if (ctx->path) {
        st = write_edits_at(ctx->path, &b, out, n, err);
        if (st == GGUF_OK || st == GGUF_E_RANGE)
            goto out;
        int e = err ? err->sys_errno : 0;
        if (e != EACCES && e != EPERM && e != EROFS && e != ENOSPC &&
            e != EDQUOT && e != ENOENT)
            goto out;
    }
    /* The GGUF's directory is not writable (or there is none): use the
     * temporary directory, keeping the file's base name. */
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    const char *base = "ggufs";
    if (ctx->path) {
        copy = strdup(ctx->path);
        if (!copy) {
            st = gguf_fail(err, GGUF_E_NOMEM, "out of memory");
            goto out;
        }
        base = basename(copy);
    }
    if (asprintf(&prefix, "%s/%s", tmp, base) < 0) {
        prefix = NULL;
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        goto out;
    }
    if (err)
        memset(err, 0, sizeof *err);
    st = write_edits_at(prefix, &b, out, n, err);
out:
    gguf_buf_free(&b);
    free(copy);
    free(prefix);
    return st;
}
