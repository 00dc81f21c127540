/*
 * commit.c - writing a context's edited metadata back into its GGUF file,
 * crash-safely and without moving tensor bytes when that can be avoided.
 * This file is the policy: which way, in which order, and what happens on
 * failure.  The mechanisms are apart: live.c plans the header
 * (gguf_plan_commit), journal.c writes and carries out the journal,
 * rewrite.c copies the file, durable.c does the I/O, recover.c finishes
 * what a crash interrupted.
 *
 * Three ways, tried in order:
 *
 *  in place  The new header, padded by write.c's filler KV, ends exactly at
 *            the old data offset D: only [0, D) is rewritten.
 *  insert    The header no longer fits.  D grows by k (a multiple of the
 *            filesystem block and of the alignment, with headroom for later
 *            edits): FALLOC_FL_INSERT_RANGE shifts every tensor byte by k
 *            without copying it, then the header for D + k is written.
 *  compact   (GGUF_COMMIT_COMPACT) the smallest header, no filler: in
 *            place when the data start stays, else a rewrite whose data
 *            starts lower (the rewrite's steps and fault points).
 *  rewrite   Insert-range unsupported (tmpfs, ...) or GGUF_COMMIT_NO_INSERT,
 *            or, header fitting or not, GGUF_COMMIT_NEW_FILE (readers map
 *            the file and must keep its bytes): a complete copy
 *            PATH.ggufs-new is written beside the file and renamed over
 *            it.  Costs a copy of the data (holes stay holes).
 *
 * Crash-safety rules.  Every step below, and those of journal.c, rewrite.c
 * and recover.c, keeps them:
 *
 *  1. Nothing is written unless the file is still the one ctx read
 *     (device, inode through fd and through its name in the directory it
 *     was opened in, size, mtime, ctime) and no journal of an earlier
 *     commit is pending.  Everything written beside the file (journal,
 *     new file) is reached through that directory's descriptor (ctx->dfd,
 *     *at calls), never by path: a directory of the path renamed or
 *     swapped meanwhile cannot send it elsewhere, where recovery of the
 *     file would not find it.
 *  2. One committer per file: a whole-file OFD write lock on it is held
 *     throughout (GGUF_E_BUSY if another open file holds it); gguf_recover
 *     takes the same lock, so it never mistakes a running commit for an
 *     interrupted one.  flock locks are the caller's (the mount holds one
 *     on ctx->fd): left alone, and carried over to the new file when a
 *     rewrite replaces ctx->fd.
 *  3. In place and insert change the file itself, so they are journaled:
 *     the plan with both old and new header bytes goes to
 *     PATH.ggufs-journal (or, when the file's directory cannot be written,
 *     to DEV-INO.journal in the user's private state directory, where
 *     recovery looks too), its trailer written last, and is fsync'ed with
 *     its directory before the first byte of the file changes.  Until then
 *     a failure just removes the journal; from then on, a crash is always
 *     finished forwards by gguf_recover.
 *  4. The journal is removed only once the file is synced in its new state,
 *     or put back exactly as it was and synced (gguf_jnl_rollback, done
 *     with the journal still in place).  If the undo fails too, the journal
 *     stays and recovery completes the commit.
 *  5. A rewrite needs no journal: the original is untouched until the
 *     rename of a complete, synced copy, the directory is synced after it
 *     (gguf_replace; a failed directory sync is an error after the rename,
 *     by durable.c's one rule), and a stale PATH.ggufs-new is simply
 *     removed.
 *  6. Insert-range unsupported is an explicit result (GGUF_JNL_NO_INSERT,
 *     decided in journal.c), never guessed from an errno here: the same
 *     change is then finished by a rewrite, and the insert journal stays
 *     until the rewrite is renamed in, so that from the journal's fsync on
 *     a crash always ends in the new state.
 *  7. Each durable step is preceded by a fault point, counted per commit
 *     or recovery (struct gguf_faults, a local of gguf_commit and
 *     gguf_recover), so that tests can stop the process between any two.
 *
 * Fault points (GGUFS_FAULT=N kills the process just before the Nth step;
 * GGUFS_FAULT_TRACE=1 lists them):
 *
 *   in place                     insert                      rewrite
 *   1 journal write, body        1 journal write, body       1 create new file
 *   2 journal write, trailer     2 journal write, trailer    2 header to new file
 *   3 fsync journal              3 fsync journal             3 copy tensor data
 *   4 fsync directory            4 fsync directory           4 fsync new file
 *   5 header, first half         5 insert-range              5 rename over file
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
 *
 * Steps 1-4 are gguf_jnl_write's, the header steps gguf_jnl_apply's, the
 * last two gguf_jnl_drop's (journal.c); the rewrite's are
 * gguf_rewrite_file's (rewrite.c).
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int64_t mtime_ns(const struct stat *sb) {
    return (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
}

static int64_t ctime_ns(const struct stat *sb) {
    return (int64_t)sb->st_ctim.tv_sec * 1000000000 + sb->st_ctim.tv_nsec;
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
 * size, same mtime, same ctime.  The ctime because a program can write in
 * place and put the mtime back (utimensat), but cannot set the ctime: any
 * write, chmod or utimensat moves it (so does our own commit, which is
 * why adopt() takes it again after writing).  *sb receives fstat of the
 * fd. */
static enum gguf_status check_unchanged(const gguf_ctx *ctx, struct stat *sb,
                                        struct gguf_error *err) {
    struct stat ps;
    char what[300] = "";

    if (fstat(ctx->fd, sb) < 0)
        return gguf_sys_fail(err, errno, "cannot stat %s", ctx->path);
    if (fstatat(ctx->dfd, ctx->base, &ps, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno == ENOENT)
            return gguf_fail(err, GGUF_E_CHANGED,
                             "the file was removed or renamed since it was "
                             "opened");
        return gguf_sys_fail(err, errno, "cannot stat %s", ctx->path);
    }
    if (sb->st_dev != ctx->dev || ps.st_dev != ctx->dev)
        say(what, sizeof what, "device %llu -> %llu",
            (unsigned long long)ctx->dev,
            (unsigned long long)(ps.st_dev != ctx->dev ? ps.st_dev
                                                       : sb->st_dev));
    if (sb->st_ino != ctx->ino || ps.st_ino != ctx->ino)
        say(what, sizeof what, "inode %llu -> %llu (replaced)",
            (unsigned long long)ctx->ino,
            (unsigned long long)(ps.st_ino != ctx->ino ? ps.st_ino
                                                       : sb->st_ino));
    if ((uint64_t)sb->st_size != ctx->file_size)
        say(what, sizeof what, "size %llu -> %llu",
            (unsigned long long)ctx->file_size,
            (unsigned long long)sb->st_size);
    if (mtime_ns(sb) != ctx->mtime_ns)
        say(what, sizeof what, "mtime %lld ns -> %lld ns",
            (unsigned long long)ctx->mtime_ns,
            (unsigned long long)mtime_ns(sb));
    if (ctime_ns(sb) != ctx->ctime_ns)
        say(what, sizeof what,
            "ctime %lld ns -> %lld ns (written or its "
            "times set)",
            (unsigned long long)ctx->ctime_ns,
            (unsigned long long)ctime_ns(sb));
    if (what[0])
        return gguf_fail(err, GGUF_E_CHANGED,
                         "the file changed since it was opened (%s); reopen it "
                         "and edit again",
                         what);
    return GGUF_OK;
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

/* After a successful write: ctx describes the file as it now is. */
static void adopt(gguf_ctx *ctx, uint64_t data_offset) {
    struct stat sb;
    ctx->data_offset = data_offset;
    if (fstat(ctx->fd, &sb) == 0) {
        ctx->dev = sb.st_dev;
        ctx->ino = sb.st_ino;
        ctx->mtime_ns = mtime_ns(&sb);
        ctx->ctime_ns = ctime_ns(&sb);
        ctx->file_size = (uint64_t)sb.st_size;
    }
    ctx->dirty = false;
}

/* One commit: what its steps share. */
struct commit {
    gguf_ctx *ctx;
    struct gguf_commit_info *info;
    struct stat sb;     /* fstat of ctx->fd, checked unchanged */
    char *jpath;        /* PATH.ggufs-journal, or the state directory's
                           (write_journal): for messages */
    struct gguf_at jat; /* the journal's place: in ctx->dfd, or state_dfd */
    int state_dfd;      /* the state directory when the journal is there */
    struct gguf_buf nh; /* the planned header, [0, d2) */
    uint64_t d2;        /* its data offset */
    uint8_t *old;       /* the file's bytes [0, D) */
    struct gguf_faults faults;
    bool locked; /* holds the commit lock on ctx->fd */
};

/* Rule 3's journal: beside the file; where its directory cannot be
 * written (a user's model in someone else's directory), in the user's
 * private state directory, named by the file's device and inode, where
 * recovery looks as well (recover.c). */
static enum gguf_status write_journal(struct commit *c,
                                      const struct gguf_jnl *j,
                                      struct gguf_error *err) {
    enum gguf_status st = gguf_jnl_write(&c->jat, j, &c->faults, err);
    if (st != GGUF_E_IO ||
        (err->sys_errno != EACCES && err->sys_errno != EPERM))
        return st;
    char here[4096], dir_msg[sizeof err->msg];
    snprintf(dir_msg, sizeof dir_msg, "%s", err->msg);
    struct gguf_error e2 = {0};
    if (gguf_state_journal(&c->sb, true, here, sizeof here, &c->state_dfd,
                           &e2) != GGUF_OK) {
        gguf_fail(err, GGUF_E_IO,
                  "%s, and no private place for the journal either (%s): a "
                  "commit cannot be crash-safe",
                  dir_msg, e2.msg);
        err->sys_errno = EACCES;
        return GGUF_E_IO;
    }
    char *p = strdup(here);
    if (!p)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    free(c->jpath);
    c->jpath = p;
    c->jat = (struct gguf_at){c->state_dfd, strrchr(p, '/') + 1, p};
    memset(err, 0, sizeof *err);
    return gguf_jnl_write(&c->jat, j, &c->faults, err);
}

/* Journaled in-place or insert commit of c->nh (for data offset D + k).
 * When insert-range is not supported on this file, *unsupported is set,
 * nothing was changed, and the journal is left in place: the caller
 * finishes the same change by a rewrite and then drops it (rule 6). */
static enum gguf_status journaled(struct commit *c, uint32_t op, uint64_t k,
                                  bool *unsupported, struct gguf_error *err) {
    gguf_ctx *ctx = c->ctx;
    enum gguf_status st;
    enum gguf_jnl_stage stage = GGUF_JNL_UNTOUCHED;
    struct gguf_jnl j = {
        .op = op,
        .dev = (uint64_t)c->sb.st_dev,
        .ino = (uint64_t)c->sb.st_ino,
        .orig_size = (uint64_t)c->sb.st_size,
        .k = k,
        .orig_mtime_ns = mtime_ns(&c->sb),
        .old_hdr = c->old,
        .old_len = ctx->data_offset,
        .new_hdr = c->nh.p,
        .new_len = c->nh.len,
    };

    *unsupported = false;
    st = write_journal(c, &j, err);
    if (st != GGUF_OK)
        goto out;
    st = gguf_jnl_apply(ctx->fd, &j, false, &c->faults, &stage, err);
    if (st != GGUF_OK) {
        struct gguf_error e2 = {0};
        if (stage == GGUF_JNL_NO_INSERT) {
            *unsupported = true;
            goto out;
        }
        /* Put the file back, then drop the journal (rule 4). */
        if (gguf_jnl_rollback(ctx->fd, &j, stage, &e2) == GGUF_OK &&
            gguf_jnl_drop(&c->jat, &c->faults, &e2) == GGUF_OK)
            goto out;
        size_t m = strlen(err->msg);
        snprintf(err->msg + m, sizeof err->msg - m,
                 "; undoing failed too (%s): %s is kept and recovery "
                 "(remount) will complete the commit",
                 e2.msg, c->jpath);
        goto out;
    }
    adopt(ctx, ctx->data_offset + k);
    st = gguf_jnl_drop(&c->jat, &c->faults, err);
out:
    return st;
}

/* The rewrite way: ctx->fd becomes the new file's. */
static enum gguf_status rewrite(struct commit *c, struct gguf_error *err) {
    gguf_ctx *ctx = c->ctx;
    int nfd = -1;
    uint64_t copied = 0;
    struct gguf_at self = {ctx->dfd, ctx->base, ctx->path};
    enum gguf_status st = gguf_rewrite_file(
        ctx->fd, &self, &c->sb, ctx->data_offset, c->nh.p, c->d2, &c->faults,
        &nfd, &copied, ctx->progress, ctx->progress_user, err);
    if (nfd >= 0) {
        close(ctx->fd); /* also releases the locks on the replaced file */
        ctx->fd = nfd;
        adopt(ctx, c->d2);
        c->info->bytes_written = c->nh.len + copied;
    }
    if (st == GGUF_OK || !ctx->dirty)
        c->info->how = GGUF_COMMIT_REWRITE;
    return st;
}

/* The journal of an earlier commit still there, beside the file or in the
 * state directory (there, n bytes: its path), each looked up in the
 * directory held, not by path; else NULL. */
static const char *pending_journal(const struct commit *c, char *there,
                                   size_t n) {
    struct stat js;
    if (fstatat(c->ctx->dfd, c->jat.name, &js, AT_SYMLINK_NOFOLLOW) == 0)
        return c->jpath;
    int sdfd = -1;
    struct gguf_error e2 = {0};
    bool yes =
        gguf_state_journal(&c->sb, false, there, n, &sdfd, &e2) == GGUF_OK &&
        fstatat(sdfd, strrchr(there, '/') + 1, &js, AT_SYMLINK_NOFOLLOW) == 0;
    if (sdfd >= 0)
        close(sdfd);
    return yes ? there : NULL;
}

/* Rules 1 and 2: a file-backed, writable context whose file is unchanged
 * and has no pending journal, locked for the commit. */
static enum gguf_status begin(struct commit *c, struct gguf_error *err) {
    gguf_ctx *ctx = c->ctx;
    if (ctx->fd < 0 || ctx->dfd < 0 || !ctx->path)
        return gguf_fail(err, GGUF_E_INVAL,
                         "the context was not read from a file");
    int fl = fcntl(ctx->fd, F_GETFL);
    if (fl < 0 || (fl & O_ACCMODE) != O_RDWR)
        return gguf_fail(err, GGUF_E_INVAL,
                         "the file was opened read-only (GGUF_OPEN_RDWR is "
                         "needed to commit)");
    c->jpath = gguf_sidecar_path(ctx->path, GGUF_JOURNAL_SUFFIX);
    if (!c->jpath)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    struct gguf_at self = {ctx->dfd, ctx->base, ctx->path};
    c->jat = gguf_at_beside(&self, c->jpath);
    enum gguf_status st = gguf_commit_lock(ctx->fd, true, err);
    if (st != GGUF_OK)
        return st;
    c->locked = true;
    st = check_unchanged(ctx, &c->sb, err);
    if (st != GGUF_OK)
        return st;
    char there[4096];
    const char *pending = pending_journal(c, there, sizeof there);
    if (pending)
        return gguf_fail(err, GGUF_E_BUSY,
                         "%s exists: an interrupted commit must be recovered "
                         "first (remounting does it)",
                         pending);
    return GGUF_OK;
}

/* The header fits before D: journaled in place, unless the file already
 * says exactly this. */
static enum gguf_status in_place(struct commit *c, struct gguf_error *err) {
    gguf_ctx *ctx = c->ctx;
    uint64_t d = ctx->data_offset;
    bool unused;
    enum gguf_status st =
        read_old_header(ctx->fd, d, (uint64_t)c->sb.st_size, &c->old, err);
    if (st != GGUF_OK)
        return st;
    if (memcmp(c->old, c->nh.p, (size_t)d) == 0) {
        ctx->dirty = false; /* nothing to write */
        return GGUF_OK;
    }
    st = journaled(c, GGUF_JNL_INPLACE, 0, &unused, err);
    if (st == GGUF_OK || !ctx->dirty) {
        c->info->how = GGUF_COMMIT_INPLACE;
        c->info->bytes_written = c->nh.len;
    }
    return st;
}

/* The header grows to c->d2: insert-range, journaled; where that is not
 * supported, a rewrite under the insert journal (rule 6). */
static enum gguf_status insert(struct commit *c, struct gguf_error *err) {
    gguf_ctx *ctx = c->ctx;
    uint64_t k = c->d2 - ctx->data_offset;
    bool unsupported = false;
    uint64_t avail = gguf_free_bytes(ctx->fd);
    enum gguf_status st;

    if (avail < k) {
        st = gguf_fail(err, GGUF_E_NOSPACE,
                       "the header must grow by %llu bytes; %llu are free",
                       (unsigned long long)k, (unsigned long long)avail);
        err->sys_errno = ENOSPC;
        return st;
    }
    st = read_old_header(ctx->fd, ctx->data_offset, (uint64_t)c->sb.st_size,
                         &c->old, err);
    if (st != GGUF_OK)
        return st;
    st = journaled(c, GGUF_JNL_INSERT, k, &unsupported, err);
    if (st == GGUF_OK || !ctx->dirty) {
        c->info->how = GGUF_COMMIT_INSERT;
        c->info->bytes_written = c->nh.len;
    }
    if (!unsupported)
        return st;
    /* A crash before the rename is completed by recovery (which rewrites
     * too); a failure leaves the file untouched, so the journal can go. */
    memset(err, 0, sizeof *err);
    st = rewrite(c, err);
    struct gguf_error e2 = {0};
    enum gguf_status s2 = gguf_jnl_drop(&c->jat, &c->faults, &e2);
    if (st == GGUF_OK && s2 != GGUF_OK) {
        st = s2;
        *err = e2;
    }
    return st;
}

enum gguf_status gguf_commit(gguf_ctx *ctx, unsigned flags,
                             struct gguf_commit_info *info,
                             struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    struct gguf_commit_info dummy;
    struct gguf_error scratch;
    struct commit c = {.ctx = ctx, .state_dfd = -1};
    enum gguf_plan_how how;

    if (!info)
        info = &dummy;
    if (!err)
        err = &scratch; /* the steps amend and clear it */
    memset(info, 0, sizeof *info);
    info->how = GGUF_COMMIT_NONE;
    c.info = info;
    gguf_faults_init(&c.faults);
    if (!ctx) {
        st = gguf_fail(err, GGUF_E_INVAL, "missing context");
        goto out;
    }
    info->old_data_offset = info->new_data_offset = ctx->data_offset;
    /* No edits: nothing is written, not even a check of the file. */
    if (!ctx->dirty && !(flags & GGUF_COMMIT_COMPACT))
        goto out;
    st = begin(&c, err);
    if (st != GGUF_OK)
        goto out;
    if (flags & GGUF_COMMIT_COMPACT) {
        /* The smallest header (write.c, target 0): no filler. */
        st = gguf_write_header(ctx, 0, &c.nh, err);
        c.d2 = c.nh.len;
        how = c.d2 == ctx->data_offset ? GGUF_PLAN_INPLACE : GGUF_PLAN_GROWN;
        flags |= c.d2 == ctx->data_offset ? 0 : GGUF_COMMIT_NO_INSERT;
        ctx->dirty = true; /* adopt() clears it once written */
    } else {
        st = gguf_plan_commit(ctx, &c.nh, &how, &c.d2, err);
    }
    if (st != GGUF_OK)
        goto out;
    if (how == GGUF_PLAN_INPLACE && !(flags & GGUF_COMMIT_NEW_FILE)) {
        st = in_place(&c, err);
    } else if (how == GGUF_PLAN_INPLACE || how == GGUF_PLAN_GROWN) {
        info->new_data_offset = c.d2;
        st = flags & (GGUF_COMMIT_NO_INSERT | GGUF_COMMIT_NEW_FILE)
                 ? rewrite(&c, err)
                 : insert(&c, err);
    }
out:
    if (st != GGUF_OK && info->how == GGUF_COMMIT_NONE && ctx)
        info->new_data_offset = ctx->data_offset;
    if (c.locked)
        (void)gguf_commit_lock(ctx->fd, false, NULL);
    gguf_buf_free(&c.nh);
    free(c.old);
    free(c.jpath);
    if (c.state_dfd >= 0)
        close(c.state_dfd);
    return st;
}

void gguf_set_progress(gguf_ctx *ctx, gguf_progress_fn fn, void *user) {
    ctx->progress = fn;
    ctx->progress_user = user;
}
