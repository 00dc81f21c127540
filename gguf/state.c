/*
 * state.c - what ggufs keeps about a model outside the model: the pending
 * edits of a read-write mount (so that a daemon killed before its commit
 * loses none) and the outcome of a commit that nobody was waiting for
 * (after fusermount3 -u, umount or a signal), for the next ggufs command
 * to report.
 *
 * Where: the per-user state directory, $XDG_STATE_HOME/ggufs if that is an
 * absolute path, else HOME/.local/state/ggufs with HOME the effective
 * user's home from the password database (created 0700 as needed).
 * One model's files are named by a 64-bit FNV-1a hash of its absolute path
 * (16 hex digits) and a kind: HASH.pending, HASH.status, HASH.pending.old,
 * HASH.overlay-mount.  Each file starts
 * with the model's path, so a hash collision is recognised, not obeyed.
 *
 * Trust: the directory and its files may have been prepared by someone
 * else (a shared HOME, a hostile XDG_STATE_HOME).  ggufs runs as root, so
 * the directory must be a real directory owned by the effective user and
 * writable by nobody else, files are opened relative to it with
 * O_NOFOLLOW and must be regular files owned by that user, and reads are
 * bounded (GGUF_STATE_MAX).  A file that fails these checks is an error
 * naming it, never followed.
 *
 * A commit's journal goes here instead of beside the model when the
 * model's directory cannot be written (gguf_state_journal: DEV-INO.journal,
 * named by the model's device and inode, as the journal records them).
 *
 * Durability: a file is replaced whole (gguf_replace, durable.c: a
 * temporary NAME.tmp, fsync'ed, renamed over NAME, the directory
 * fsync'ed), so a crash leaves the old or the new version.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const kind_name[] = {"pending", "status", "pending.old",
                                        "overlay-mount"};

/* The state directory's path into out: 0 or an errno.  The home is the
 * effective user's from the password database, not $HOME: root running
 * under sudo must not write its state into the invoking user's home. */
static int state_dir_path(char *out, size_t n) {
    const char *x = getenv("XDG_STATE_HOME");
    struct passwd pw, *res = NULL;
    char pwbuf[4096];
    const char *home = NULL;
    if (getpwuid_r(geteuid(), &pw, pwbuf, sizeof pwbuf, &res) == 0 && res)
        home = res->pw_dir;
    int w;
    if (x && x[0] == '/')
        w = snprintf(out, n, "%s/ggufs", x);
    else if (home && home[0] == '/')
        w = snprintf(out, n, "%s/.local/state/ggufs", home);
    else
        return ENOENT;
    return w < 0 || (size_t)w >= n ? ENAMETOOLONG : 0;
}

/* mkdir -p of path with mode 0700 for what it creates: 0 or an errno.
 * Each directory it creates is an entry in its parent, durable only once
 * the parent is fsync'ed (the rule of durable.c): done before the next
 * level is made, so that a power cut never keeps a state file whose
 * directory it lost.  (The entries made in the state directory itself are
 * synced by their writers: gguf_replace syncs it after its rename.) */
static int make_dirs(char *path) {
    struct gguf_error e = {0};
    for (char *p = path + 1;; p++) {
        if (*p && *p != '/')
            continue;
        char c = *p;
        *p = '\0';
        int r = mkdir(path, 0700), me = errno;
        if (r == 0 && gguf_fsync_dir(path, &e) != GGUF_OK)
            me = e.sys_errno ? e.sys_errno : EIO;
        *p = c;
        if ((r < 0 && me != EEXIST) || (r == 0 && e.code))
            return me;
        if (!c)
            return 0;
    }
}

/* Opens the state directory (creating it if create), checked as the
 * header says.  -1 with err set, or with *absent when it does not exist
 * and create is false. */
static int open_dir(bool create, bool *absent, struct gguf_error *err) {
    char dir[4096];
    struct stat sb;
    int e = state_dir_path(dir, sizeof dir);
    *absent = false;
    if (e) {
        gguf_fail(err, GGUF_E_IO,
                  "no state directory: neither XDG_STATE_HOME nor HOME is "
                  "an absolute path");
        return -1;
    }
    if (create && (e = make_dirs(dir))) {
        gguf_sys_fail(err, e, "cannot create the state directory %s", dir);
        return -1;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT && !create) {
            *absent = true;
            return -1;
        }
        gguf_sys_fail(err, errno, "cannot open the state directory %s", dir);
        return -1;
    }
    if (fstat(fd, &sb) < 0 || sb.st_uid != geteuid() ||
        (sb.st_mode & 022) != 0) {
        gguf_fail(err, GGUF_E_PERM,
                  "state directory %s is not owned by uid %u or is writable "
                  "by others: not used",
                  dir, (unsigned)geteuid());
        close(fd);
        return -1;
    }
    return fd;
}

int gguf_state_dir_open(bool create, bool *absent, struct gguf_error *err) {
    return open_dir(create, absent, err);
}

/* The state directory for reading or removing: its fd, or -1 with *st
 * GGUF_OK when it does not exist (nothing to read) or an error. */
static int open_existing(enum gguf_status *st, struct gguf_error *err) {
    bool absent;
    int dfd = open_dir(false, &absent, err);
    *st = dfd >= 0 || absent ? GGUF_OK
                             : (err && err->code ? err->code : GGUF_E_IO);
    return dfd;
}

/* The file name of model's state of this kind (no directory). */
static void file_name(const char *model, enum gguf_state_kind kind, char *out,
                      size_t n) {
    snprintf(out, n, "%016llx.%s",
             (unsigned long long)gguf_hash(model, strlen(model)),
             kind_name[kind]);
}

enum gguf_status gguf_state_path(const char *model, enum gguf_state_kind kind,
                                 char *out, size_t n, struct gguf_error *err) {
    char dir[4096], name[64];
    if (state_dir_path(dir, sizeof dir))
        return gguf_fail(err, GGUF_E_IO, "no state directory");
    file_name(model, kind, name, sizeof name);
    int w = snprintf(out, n, "%s/%s", dir, name);
    if (w < 0 || (size_t)w >= n)
        return gguf_fail(err, GGUF_E_RANGE, "state path too long");
    return GGUF_OK;
}

enum gguf_status gguf_state_journal(const struct stat *model, bool create,
                                    char *out, size_t n, int *dfd_out,
                                    struct gguf_error *err) {
    char dir[4096];
    bool absent = false;
    if (dfd_out)
        *dfd_out = -1;
    if (state_dir_path(dir, sizeof dir))
        return gguf_fail(err, GGUF_E_IO, "no state directory");
    /* The directory's trust checks, whether it is created or not. */
    int dfd = open_dir(create, &absent, err);
    if (dfd < 0)
        return absent ? gguf_fail(err, GGUF_E_NOTFOUND, "no state directory")
                      : (err && err->code ? err->code : GGUF_E_IO);
    int w = snprintf(out, n, "%s/%llx-%llx.journal", dir,
                     (unsigned long long)model->st_dev,
                     (unsigned long long)model->st_ino);
    if (w < 0 || (size_t)w >= n) {
        close(dfd);
        return gguf_fail(err, GGUF_E_RANGE, "state path too long");
    }
    if (dfd_out)
        *dfd_out = dfd;
    else
        close(dfd);
    return GGUF_OK;
}

/* Record layout: "ggufs-state 1\n" model path "\n" then the body. */
#define STATE_MAGIC "ggufs-state 1\n"

enum gguf_status gguf_state_write(const char *model, enum gguf_state_kind kind,
                                  const void *body, size_t len,
                                  struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    char name[64];
    bool absent;
    int dfd = open_dir(true, &absent, err);
    if (dfd < 0)
        return err && err->code ? err->code : GGUF_E_IO;
    file_name(model, kind, name, sizeof name);
    struct gguf_replace r = {
        .dfd = dfd, .name = name, .shown = name, .same_as = -1};
    /* NAME.tmp left by a crash is ours: the directory is. */
    snprintf(r.tmp, sizeof r.tmp, "%s.tmp", name);
    size_t ml = strlen(model);
    if ((st = gguf_replace_open(&r, 0600, GGUF_REPLACE_STALE, err)) !=
            GGUF_OK ||
        (st = gguf_pwrite_full(r.fd, STATE_MAGIC, sizeof STATE_MAGIC - 1, 0,
                               "the state file", err)) != GGUF_OK ||
        (st = gguf_pwrite_full(r.fd, model, ml, sizeof STATE_MAGIC - 1,
                               "the state file", err)) != GGUF_OK ||
        (st = gguf_pwrite_full(r.fd, "\n", 1, sizeof STATE_MAGIC - 1 + ml,
                               "the state file", err)) != GGUF_OK ||
        (st = gguf_pwrite_full(r.fd, body, len, sizeof STATE_MAGIC + ml,
                               "the state file", err)) != GGUF_OK)
        goto out;
    st = gguf_replace_commit(&r, err);
out:
    gguf_replace_end(&r);
    close(dfd);
    return st;
}

/* Reads the open state file fd (checked) into out: the body after the
 * model line, which must name model. */
static enum gguf_status read_body(int fd, const char *model, const char *name,
                                  struct gguf_buf *out,
                                  struct gguf_error *err) {
    struct stat sb;
    if (fstat(fd, &sb) < 0)
        return gguf_sys_fail(err, errno, "cannot stat state file %s", name);
    if (!S_ISREG(sb.st_mode) || sb.st_uid != geteuid() ||
        (sb.st_mode & 022) != 0)
        return gguf_fail(err, GGUF_E_PERM,
                         "state file %s is not a regular file of uid %u "
                         "writable only by it: not used",
                         name, (unsigned)geteuid());
    if ((uint64_t)sb.st_size > GGUF_STATE_MAX)
        return gguf_fail(err, GGUF_E_RANGE,
                         "state file %s is %lld bytes, more than the %llu "
                         "a state file may have",
                         name, (long long)sb.st_size,
                         (unsigned long long)GGUF_STATE_MAX);
    size_t n = (size_t)sb.st_size, ml = strlen(model);
    uint8_t *p = malloc(n ? n : 1);
    if (!p)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory reading %s", name);
    enum gguf_status st = gguf_pread_full(fd, p, n, 0, name, err);
    size_t head = sizeof STATE_MAGIC - 1 + ml + 1;
    if (st == GGUF_OK &&
        (n < head || memcmp(p, STATE_MAGIC, sizeof STATE_MAGIC - 1) != 0 ||
         memcmp(p + sizeof STATE_MAGIC - 1, model, ml) != 0 ||
         p[head - 1] != '\n'))
        st = gguf_fail(err, GGUF_E_FORMAT,
                       "state file %s is not ggufs state of %s", name, model);
    if (st == GGUF_OK) {
        out->len = 0;
        st = gguf_buf_add(out, p + head, n - head);
        if (st != GGUF_OK)
            st = gguf_fail(err, st, "out of memory reading %s", name);
    }
    free(p);
    return st;
}

enum gguf_status gguf_state_read(const char *model, enum gguf_state_kind kind,
                                 struct gguf_buf *out, bool *found,
                                 struct gguf_error *err) {
    char name[64];
    *found = false;
    enum gguf_status st0;
    int dfd = open_existing(&st0, err);
    if (dfd < 0)
        return st0;
    file_name(model, kind, name, sizeof name);
    /* O_NONBLOCK: a FIFO planted under the name must not hang us. */
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    enum gguf_status st = GGUF_OK;
    if (fd < 0) {
        if (errno != ENOENT)
            st = gguf_sys_fail(err, errno, "cannot open state file %s", name);
        goto out;
    }
    st = read_body(fd, model, name, out, err);
    *found = st == GGUF_OK;
    close(fd);
out:
    close(dfd);
    return st;
}

enum gguf_status gguf_state_remove(const char *model, enum gguf_state_kind kind,
                                   struct gguf_error *err) {
    char name[64];
    enum gguf_status st0;
    int dfd = open_existing(&st0, err);
    if (dfd < 0)
        return st0;
    file_name(model, kind, name, sizeof name);
    enum gguf_status st = GGUF_OK;
    if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
        st = gguf_sys_fail(err, errno, "cannot remove state file %s", name);
    else
        st = gguf_fsync_dirfd(dfd, name, err);
    close(dfd);
    return st;
}

enum gguf_status gguf_state_retire(const char *model, struct gguf_error *err) {
    char from[64], to[64];
    enum gguf_status st0;
    int dfd = open_existing(&st0, err);
    if (dfd < 0)
        return st0;
    file_name(model, GGUF_STATE_PENDING, from, sizeof from);
    file_name(model, GGUF_STATE_PENDING_OLD, to, sizeof to);
    enum gguf_status st = GGUF_OK;
    if (renameat(dfd, from, dfd, to) < 0 && errno != ENOENT)
        st = gguf_sys_fail(err, errno, "cannot move state file %s aside", from);
    else
        st = gguf_fsync_dirfd(dfd, from, err);
    close(dfd);
    return st;
}

/* ---- the daemons' log -------------------------------------------------- */

#define LOG_NAME "ggufs.log"
#define LOG_OLD "ggufs.log.1"

enum gguf_status gguf_state_log_path(char *out, size_t n,
                                     struct gguf_error *err) {
    char dir[4096];
    if (state_dir_path(dir, sizeof dir))
        return gguf_fail(err, GGUF_E_IO, "no state directory");
    int w = snprintf(out, n, "%s/" LOG_NAME, dir);
    if (w < 0 || (size_t)w >= n)
        return gguf_fail(err, GGUF_E_RANGE, "state path too long");
    return GGUF_OK;
}

/* Opens (creating) the log in the state directory dfd: -1 with err
 * unless it is a regular file of ours with one link, writable by nobody
 * else; *size its size. */
static int log_open_at(int dfd, uint64_t *size, struct gguf_error *err) {
    struct stat sb;
    int fd = openat(dfd, LOG_NAME,
                    O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK |
                        O_CLOEXEC,
                    0600);
    if (fd < 0) {
        gguf_sys_fail(err, errno, "cannot open the log " LOG_NAME);
        return -1;
    }
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid() ||
        (sb.st_mode & 022) != 0 || sb.st_nlink != 1) {
        gguf_fail(err, GGUF_E_PERM,
                  "the log " LOG_NAME " is not a regular file of uid %u with "
                  "one link, writable only by it: not used",
                  (unsigned)geteuid());
        close(fd);
        return -1;
    }
    *size = (uint64_t)sb.st_size;
    return fd;
}

int gguf_state_log_open(struct gguf_error *err) {
    bool absent;
    uint64_t size = 0;
    int dfd = open_dir(true, &absent, err);
    if (dfd < 0)
        return -1;
    int fd = log_open_at(dfd, &size, err);
    if (fd >= 0 && size >= GGUF_LOG_MAX) {
        /* Rotated: the full file becomes the old one (replacing it), a
         * new one starts.  Daemons still writing to the old file switch
         * once they see it full.  Neither the log's creation nor this
         * rename is synced: the log holds no edit (a power cut may lose
         * its last lines or the rotation, never an edit). */
        close(fd);
        fd = -1;
        if (renameat(dfd, LOG_NAME, dfd, LOG_OLD) < 0 && errno != ENOENT)
            gguf_sys_fail(err, errno, "cannot rotate the log " LOG_NAME);
        else
            fd = log_open_at(dfd, &size, err);
    }
    close(dfd);
    return fd;
}
