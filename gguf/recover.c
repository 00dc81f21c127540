/*
 * recover.c - gguf_recover: completing or discarding a commit that was
 * interrupted (killed, power cut) after it left something beside the file.
 * The states it meets are those commit.c's crash-safety rules allow:
 *
 *  - PATH.ggufs-new: a rewrite that never reached its rename.  The
 *    original is whole; the copy is removed.
 *  - An incomplete journal (no valid trailer and checksum): it was never
 *    relied on, the file is untouched; the journal is removed.
 *  - A complete journal: the commit was decided, and recovery redoes it
 *    (forwards: redo is idempotent, the insert is done only if the file
 *    still has its old size, the header write is whole).  Before redoing,
 *    the file must be recognisably the one the journal was written for:
 *    its size is the old size (insert not yet done) or the old size + k,
 *    and each header byte is either the old or the new byte at that
 *    position; otherwise someone changed the file since and the journal is
 *    left alone (GGUF_E_CHANGED).  Where insert-range turns out to be
 *    unsupported, the same change is finished by a rewrite; where there is
 *    no room to finish and the header is still the old one, it is rolled
 *    back instead (the only way to leave a valid file).
 *
 * Recovery takes the commit lock first, so the journal or new file of a
 * commit that is running right now is never taken for a stale one.
 *
 * Trust.  ggufs runs as root on models in shared directories (/tmp), and
 * a journal is a plan to write bytes, so recovery acts only on what a
 * commit of this very file could have left (issue 11):
 *
 *  - the model is opened O_NOFOLLOW (a symlink as last component is
 *    refused) and must be a regular file; every file beside it is reached
 *    through a descriptor of its directory with *at() calls, never
 *    following a symlink, and opened O_NONBLOCK (a FIFO cannot hang us);
 *  - a journal, and a PATH.ggufs-new before it is removed, must be a
 *    regular file with one link, owned by the effective uid or by the
 *    model's owner; a journal must have mode 0600 (journal.c creates it
 *    so), record the model's device and inode, and hold old and new
 *    headers that are valid GGUF headers (gguf_check_header);
 *  - anything else is left in place, nothing is written, and recovery
 *    fails (GGUF_E_PERM, or GGUF_E_CHANGED for another file's journal)
 *    with one line naming the file and why; a read-write mount then
 *    refuses to start.  The checksum proves nothing: anyone can compute
 *    it.  Removing the file (after looking at it) is the way out.
 *
 * One exception to the device/inode rule, writing nothing: an insert
 * finished by a rewrite replaces the inode before its journal is dropped
 * (commit.c rule 6), so a journal whose file is already exactly in its
 * end state is simply removed.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- recovery ------------------------------------------------------- */

/* Checks that the file (size `size`, header bytes have[0, n)) is the one j
 * was written for, at some point of carrying it out, and says whether the
 * insert is done.  Byte rule: each byte is the new one or the one that was
 * there before (old header, shifted by k after the insert; zeros in the
 * inserted range and past the old end of file). */
bool gguf_jnl_matches(const struct gguf_jnl *j, uint64_t size,
                      const uint8_t *have, uint64_t n, bool *inserted) {
    uint64_t lo = j->orig_size, hi;
    *inserted = false;
    if (j->op == GGUF_JNL_INSERT && size != j->orig_size) {
        *inserted = true;
        lo = j->orig_size + j->k;
    }
    hi = lo > j->new_len ? lo : j->new_len;
    if (size < lo || size > hi)
        return false;
    /* Before the insert only the old header is known: what follows it (up
     * to new_len) is tensor data. */
    if (!*inserted && n > j->old_len)
        n = j->old_len;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t shift = *inserted ? j->k : 0;
        uint8_t before = 0;
        if (i >= shift && i - shift < j->old_len && i - shift < j->orig_size)
            before = j->old_hdr[i - shift];
        bool was_new = j->op == GGUF_JNL_INPLACE || *inserted;
        if (have[i] != before && !(was_new && have[i] == j->new_hdr[i]))
            return false;
    }
    return true;
}

/* The file's size and header bytes, checked against j (jnl_matches):
 * *sb is its fstat, *inserted whether the insert is done. */
static enum gguf_status check_state(int fd, const char *path,
                                    const struct gguf_jnl *j, struct stat *sb,
                                    bool *inserted, struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    uint8_t *have = NULL;
    char *jname = NULL;

    if (fstat(fd, sb) < 0) {
        st = gguf_sys_fail(err, errno, "cannot stat %s", path);
        goto out;
    }
    uint64_t size = (uint64_t)sb->st_size;
    uint64_t n = size < j->new_len ? size : j->new_len;
    have = malloc(n ? (size_t)n : 1);
    if (!have) {
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory reading the header");
        goto out;
    }
    st = gguf_pread_full(fd, have, n, 0, "the header", err);
    if (st != GGUF_OK)
        goto out;
    if (!gguf_jnl_matches(j, size, have, n, inserted)) {
        jname = gguf_sidecar_path(path, GGUF_JOURNAL_SUFFIX);
        st = gguf_fail(err, GGUF_E_CHANGED,
                       "the file (%llu bytes) is not in a state the journal "
                       "of an interrupted commit leads to (from %llu bytes, "
                       "%s); it was changed since: check it, then remove "
                       "the journal %s",
                       (unsigned long long)size,
                       (unsigned long long)j->orig_size,
                       j->op == GGUF_JNL_INSERT ? "inserting before the header"
                                                : "header in place",
                       jname ? jname : path);
    }
out:
    free(jname);
    free(have);
    return st;
}

/* Completes the journaled commit j on the locked fd.  Leaves the journal
 * file to the caller; *rolled_back: undone instead (no room), the file is
 * as before the commit. */
static enum gguf_status redo(int fd, const struct gguf_at *at,
                             const struct gguf_jnl *j, struct gguf_faults *f,
                             bool *rolled_back, struct gguf_error *err) {
    const char *path = at->shown;
    enum gguf_status st;
    struct stat sb;
    bool inserted = false;
    enum gguf_jnl_stage stage;

    *rolled_back = false;
    st = check_state(fd, path, j, &sb, &inserted, err);
    if (st != GGUF_OK)
        return st;
    st = gguf_jnl_apply(fd, j, inserted, f, &stage, err);
    if (st != GGUF_OK && stage == GGUF_JNL_NO_INSERT) {
        /* The commit was killed before it found out that there is no
         * insert-range here: finish the same change by a rewrite. */
        int nfd = -1;
        uint64_t copied = 0;
        memset(err, 0, sizeof *err);
        st = gguf_rewrite_file(fd, at, &sb, j->old_len, j->new_hdr, j->new_len,
                               f, &nfd, &copied, NULL, NULL, err);
        if (nfd >= 0)
            close(nfd);
    }
    if (st == GGUF_E_NOSPACE && stage != GGUF_JNL_WRITING) {
        /* No room to finish, and the header is still the old one: going
         * back is the only way to leave a valid file. */
        struct gguf_error e2 = {0};
        if (gguf_jnl_rollback(fd, j, stage, &e2) == GGUF_OK) {
            *rolled_back = true;
            st = gguf_fail(err, GGUF_E_NOSPACE,
                           "no space to complete the interrupted commit; it "
                           "was rolled back and the file is as before it");
            if (err)
                err->sys_errno = ENOSPC;
        }
    }
    return st;
}

/* ---- trust ---------------------------------------------------------- */

bool gguf_sidecar_trusted(const struct stat *sb, const struct stat *model,
                          uid_t euid, bool journal, char *why, size_t n) {
    if (!S_ISREG(sb->st_mode)) {
        snprintf(why, n, "is not a regular file (%s)",
                 S_ISFIFO(sb->st_mode)  ? "a FIFO"
                 : S_ISLNK(sb->st_mode) ? "a symbolic link"
                 : S_ISDIR(sb->st_mode) ? "a directory"
                                        : "a device or socket");
        return false;
    }
    if (sb->st_nlink != 1) {
        snprintf(why, n, "has %llu links, not 1",
                 (unsigned long long)sb->st_nlink);
        return false;
    }
    if (sb->st_uid != euid && sb->st_uid != model->st_uid) {
        snprintf(why, n,
                 "is owned by uid %u, not by uid %u (running ggufs) or "
                 "uid %u (the model's owner)",
                 (unsigned)sb->st_uid, (unsigned)euid, (unsigned)model->st_uid);
        return false;
    }
    if (journal && (sb->st_mode & 07777) != 0600) {
        snprintf(why, n, "has mode %04o, not 0600",
                 (unsigned)(sb->st_mode & 07777));
        return false;
    }
    return true;
}

/* The file size once j is carried out (a tensor-less file may have ended
 * before its padded header). */
static uint64_t end_size(const struct gguf_jnl *j) {
    uint64_t s = j->orig_size + j->k; /* decode checked: no overflow */
    return s > j->new_len ? s : j->new_len;
}

bool gguf_jnl_plausible(const struct gguf_jnl *j, const struct stat *model,
                        char *why, size_t n) {
    struct gguf_error e = {0};
    if (j->dev != (uint64_t)model->st_dev ||
        j->ino != (uint64_t)model->st_ino) {
        snprintf(why, n,
                 "was written for device %llu inode %llu, the file is device "
                 "%llu inode %llu",
                 (unsigned long long)j->dev, (unsigned long long)j->ino,
                 (unsigned long long)model->st_dev,
                 (unsigned long long)model->st_ino);
        return false;
    }
    if (j->op == GGUF_JNL_PATCH) /* no header: its stage is checked */
        return true;
    /* Nested arrays: a mount may allow them, and its journal must pass. */
    if (gguf_check_header(j->old_hdr, j->old_len, j->orig_size,
                          GGUF_OPEN_ALLOW_NESTED, &e) != GGUF_OK) {
        snprintf(why, n, "has an old header that is not a valid GGUF one (%s)",
                 e.msg);
        return false;
    }
    if (gguf_check_header(j->new_hdr, j->new_len, end_size(j),
                          GGUF_OPEN_ALLOW_NESTED, &e) != GGUF_OK) {
        snprintf(why, n, "has a new header that is not a valid GGUF one (%s)",
                 e.msg);
        return false;
    }
    return true;
}

/* ---- recovery ------------------------------------------------------- */

/* The model and the files beside it: dfd is its directory, base its name
 * there, jname and nname those of the journal and new file (pointing into
 * jpath and npath, the full names used in messages). */
struct place {
    const char *path;
    int dfd, fd;    /* the journal's directory (the model's, or the state
                    directory's), the model */
    int mdfd;       /* the model's directory: a rewrite's new file goes there */
    struct stat sb; /* fstat of fd */
    const char *base, *jname, *nname;
    char *jpath, *npath;
    struct gguf_faults faults;
};

/* Whether the model (fd) is already exactly j's end state: the size, and
 * the new header in place.  Reads only. */
static bool at_end_state(const struct place *pl, const struct gguf_jnl *j) {
    if (j->op == GGUF_JNL_PATCH || (uint64_t)pl->sb.st_size != end_size(j) ||
        j->new_len > SIZE_MAX)
        return false;
    uint8_t *have = malloc(j->new_len ? (size_t)j->new_len : 1);
    bool yes = have &&
               gguf_pread_full(pl->fd, have, j->new_len, 0, "the header",
                               NULL) == GGUF_OK &&
               memcmp(have, j->new_hdr, (size_t)j->new_len) == 0;
    free(have);
    return yes;
}

/* Removes the file name (in pl->dfd) if it still is the inode of *was. */
static enum gguf_status unlink_same(const struct place *pl, const char *name,
                                    const char *shown, const struct stat *was,
                                    struct gguf_error *err) {
    struct stat now;
    if (fstatat(pl->dfd, name, &now, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT
                   ? GGUF_OK
                   : gguf_sys_fail(err, errno, "cannot stat %s", shown);
    if (now.st_dev != was->st_dev || now.st_ino != was->st_ino)
        return gguf_fail(err, GGUF_E_CHANGED,
                         "%s was replaced while recovery read it: not "
                         "removed, left in place",
                         shown);
    if (unlinkat(pl->dfd, name, 0) < 0 && errno != ENOENT)
        return gguf_sys_fail(err, errno, "cannot remove %s", shown);
    return GGUF_OK;
}

/* The stage of a tensor-bytes journal (tensorw.c): pl's journal name +
 * GGUF_STAGE_SUFFIX in pl->dfd, opened without following a symlink and
 * trusted as a journal is (regular, one link, owner, 0600); -1 with err. */
static int open_stage(const struct place *pl, const char *sname,
                      const char *shown, struct stat *ssb,
                      struct gguf_error *err) {
    char why[400];
    int sfd =
        openat(pl->dfd, sname, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (sfd < 0) {
        gguf_sys_fail(err, errno, "cannot open the staged bytes %s", shown);
        return -1;
    }
    if (fstat(sfd, ssb) < 0 ||
        !gguf_sidecar_trusted(ssb, &pl->sb, geteuid(), true, why, sizeof why)) {
        gguf_fail(err, GGUF_E_PERM, "%s %s: not applied, left in place", shown,
                  why);
        close(sfd);
        return -1;
    }
    return sfd;
}

/* Redoes a complete tensor-bytes journal j: its stage, of the recorded
 * length and checksum, copied in again at k and synced.  A stage that
 * does not match is left in place with the journal (GGUF_E_CHANGED): the
 * journal was written only after its stage was durable. */
static enum gguf_status redo_patch(struct place *pl, const struct gguf_jnl *j,
                                   struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    char *spath = gguf_stage_path(pl->jpath);
    struct stat ssb;
    int sfd = -1;
    bool ok = false;
    if (!spath)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    uint64_t len = gguf_rd64(j->new_hdr), want = gguf_rd64(j->new_hdr + 8);
    sfd = open_stage(pl, spath + (pl->jname - pl->jpath), spath, &ssb, err);
    if (sfd < 0) {
        st = err && err->code ? err->code : GGUF_E_IO;
        goto out;
    }
    if ((uint64_t)ssb.st_size != len ||
        gguf_stage_checksum(sfd, len, &ok) != want || !ok) {
        st = gguf_fail(err, GGUF_E_CHANGED,
                       "the staged bytes %s do not match journal %s: not "
                       "applied, both left in place",
                       spath, pl->jpath);
        goto out;
    }
    st = gguf_stage_copy_in(sfd, pl->fd, j->k, len, &pl->faults, err);
out:
    if (sfd >= 0)
        close(sfd);
    free(spath);
    return st;
}

/* Removes pl's stage if there is one (a stale one: its journal is gone or
 * was never complete), if it is trusted. */
static enum gguf_status drop_stage(struct place *pl, struct gguf_error *err) {
    char *spath = gguf_stage_path(pl->jpath);
    if (!spath)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    const char *sname = spath + (pl->jname - pl->jpath);
    struct stat ssb;
    char why[400];
    enum gguf_status st = GGUF_OK;
    if (fstatat(pl->dfd, sname, &ssb, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno != ENOENT)
            st = gguf_sys_fail(err, errno, "cannot stat %s", spath);
    } else if (!gguf_sidecar_trusted(&ssb, &pl->sb, geteuid(), true, why,
                                     sizeof why)) {
        st = gguf_fail(err, GGUF_E_PERM, "%s %s: not removed, left in place",
                       spath, why);
    } else {
        gguf_fault_point(&pl->faults, "unlink stage");
        st = unlink_same(pl, sname, spath, &ssb, err);
    }
    free(spath);
    return st;
}

/* The journal part of recovery: check it may be trusted, redo a complete
 * journal (or roll it back), then remove it.  *changed once something on
 * disk changed (the caller syncs the directory). */
static enum gguf_status recover_journal(struct place *pl, bool *changed,
                                        struct gguf_error *err) {
    enum gguf_status st;
    struct gguf_jnl j;
    struct stat jsb;
    uint8_t *jbytes = NULL;
    uint64_t jn = 0;
    bool complete = false, rolled_back = false;
    char why[400];
    int jfd = openat(pl->dfd, pl->jname,
                     O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

    if (jfd < 0) {
        if (errno == ELOOP)
            st = gguf_fail(err, GGUF_E_PERM,
                           "journal %s is a symbolic link: not applied, left "
                           "in place",
                           pl->jpath);
        else
            st = gguf_sys_fail(err, errno, "cannot open journal %s", pl->jpath);
        goto out;
    }
    if (fstat(jfd, &jsb) < 0) {
        st = gguf_sys_fail(err, errno, "cannot stat %s", pl->jpath);
        goto out;
    }
    if (!gguf_sidecar_trusted(&jsb, &pl->sb, geteuid(), true, why,
                              sizeof why)) {
        st = gguf_fail(err, GGUF_E_PERM,
                       "journal %s %s: not applied, left in place", pl->jpath,
                       why);
        goto out;
    }
    st = gguf_jnl_read(jfd, pl->jpath, &jbytes, &jn, err);
    if (st != GGUF_OK)
        goto out;
    st = gguf_jnl_decode(jbytes, jn, &j, &complete, err);
    if (st != GGUF_OK)
        goto out;
    if (complete && !gguf_jnl_plausible(&j, &pl->sb, why, sizeof why)) {
        /* A rewrite under an insert journal renames a new inode in before
         * the journal goes (commit.c rule 6): nothing left to do. */
        bool other = j.dev != (uint64_t)pl->sb.st_dev ||
                     j.ino != (uint64_t)pl->sb.st_ino;
        if (other && at_end_state(pl, &j)) {
            complete = false;
        } else {
            st = gguf_fail(err, other ? GGUF_E_CHANGED : GGUF_E_PERM,
                           "journal %s %s: not applied, left in place",
                           pl->jpath, why);
            goto out;
        }
    }
    if (complete && j.op == GGUF_JNL_PATCH) {
        st = redo_patch(pl, &j, err);
        if (st != GGUF_OK)
            goto out; /* journal and stage kept */
    } else if (complete) {
        struct gguf_at self = {pl->mdfd, pl->base, pl->path};
        st = redo(pl->fd, &self, &j, &pl->faults, &rolled_back, err);
        if (st != GGUF_OK && !rolled_back)
            goto out; /* journal kept: the file needs it */
    }
    gguf_fault_point(&pl->faults, "unlink journal");
    struct gguf_error e2 = {0};
    enum gguf_status s2 = unlink_same(pl, pl->jname, pl->jpath, &jsb, &e2);
    if (s2 != GGUF_OK) {
        if (st == GGUF_OK)
            *err = e2;
        st = s2;
        goto out;
    }
    *changed = true;
    /* A stage goes once its journal has (tensorw.c, step 13), and once
     * the journal's removal is durable: a journal brought back by a power
     * cut without its stage would block the file. */
    s2 = gguf_fsync_dirfd(pl->dfd, pl->jpath, &e2);
    if (s2 == GGUF_OK)
        s2 = drop_stage(pl, &e2);
    if (s2 != GGUF_OK && st == GGUF_OK) {
        *err = e2;
        st = s2;
    }
    /* rolled back: st is still worth reporting, the directory is synced
     * by the caller */
out:
    if (jfd >= 0)
        close(jfd);
    free(jbytes);
    return st;
}

/* A rewrite that never reached its rename: the original is whole, and the
 * copy goes, if it is ours (rewrite.c creates it 0600, then gives it the
 * model's owner and mode). */
static enum gguf_status drop_new_file(struct place *pl, bool *changed,
                                      struct gguf_error *err) {
    struct stat nsb;
    char why[400];
    if (fstatat(pl->dfd, pl->nname, &nsb, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT
                   ? GGUF_OK
                   : gguf_sys_fail(err, errno, "cannot stat %s", pl->npath);
    if (!gguf_sidecar_trusted(&nsb, &pl->sb, geteuid(), false, why, sizeof why))
        return gguf_fail(err, GGUF_E_PERM, "%s %s: not removed, left in place",
                         pl->npath, why);
    gguf_fault_point(&pl->faults, "unlink stale new file");
    enum gguf_status st = unlink_same(pl, pl->nname, pl->npath, &nsb, err);
    if (st == GGUF_OK)
        *changed = true;
    return st;
}

/* The journal of a commit whose directory was not writable, sj in the
 * user's state directory sdfd (as gguf_state_journal checked it, held:
 * not looked up by path again): the same checks and the same redo as
 * beside the file; that directory is synced here. */
static enum gguf_status recover_state_journal(const struct place *pl,
                                              const char *sj, int sdfd,
                                              struct gguf_error *err) {
    struct place ps = *pl;
    bool changed = false;
    ps.jpath = (char *)sj;
    ps.jname = strrchr(sj, '/') + 1;
    ps.dfd = sdfd;
    enum gguf_status st = recover_journal(&ps, &changed, err);
    enum gguf_status sst =
        changed ? gguf_fsync_dirfd(ps.dfd, sj, st == GGUF_OK ? err : NULL)
                : GGUF_OK;
    if (st == GGUF_OK)
        st = sst;
    return st;
}

/* Something (even a FIFO or a dangling symlink) is at name in dfd. */
static bool exists_at(int dfd, const char *name) {
    struct stat sb;
    return fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0;
}

bool gguf_commit_interrupted(const char *path) {
    char *j = gguf_sidecar_path(path, GGUF_JOURNAL_SUFFIX);
    bool yes = j && gguf_path_exists(j);
    free(j);
    struct stat sb;
    char sj[4096];
    if (!yes && stat(path, &sb) == 0 &&
        gguf_state_journal(&sb, false, sj, sizeof sj, NULL, NULL) == GGUF_OK)
        yes = gguf_path_exists(sj);
    return yes;
}

/* Fault points: unlink stale new file; then for an incomplete journal:
 * unlink journal; for a complete one: gguf_jnl_apply's points, unlink
 * journal; last, fsync directory. */
enum gguf_status gguf_recover_file(struct gguf_file *f, bool *did,
                                   struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    struct place pl = {.path = f->path,
                       .dfd = f->dfd,
                       .fd = f->fd,
                       .mdfd = f->dfd,
                       .sb = f->sb};
    bool changed = false;
    int sdfd = -1; /* the state directory (gguf_state_journal), when any */
    struct gguf_error scratch;

    if (!err)
        err = &scratch; /* redo() clears it before its fallback */
    if (did)
        *did = false;
    pl.jpath = gguf_sidecar_path(f->path, GGUF_JOURNAL_SUFFIX);
    pl.npath = gguf_sidecar_path(f->path, GGUF_NEWFILE_SUFFIX);
    if (!pl.jpath || !pl.npath) {
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        goto out;
    }
    size_t skip = (size_t)(f->base - f->path); /* sidecars share the prefix */
    pl.base = f->base;
    pl.jname = pl.jpath + skip;
    pl.nname = pl.npath + skip;
    gguf_faults_init(&pl.faults);
    char sj[4096];
    struct gguf_error e2 = {0};
    bool in_state = gguf_state_journal(&f->sb, false, sj, sizeof sj, &sdfd,
                                       &e2) == GGUF_OK &&
                    exists_at(sdfd, strrchr(sj, '/') + 1);
    /* Nothing pending: touch nothing (the file may well be read-only). */
    char *sp = gguf_stage_path(pl.jpath);
    bool staged = sp && exists_at(pl.dfd, sp + skip);
    free(sp);
    if (!exists_at(pl.dfd, pl.jname) && !exists_at(pl.dfd, pl.nname) &&
        !in_state && !staged)
        goto out;
    if (!f->writable) {
        st = gguf_fail(err, GGUF_E_PERM,
                       "%s has an interrupted commit to complete but cannot "
                       "be opened for writing: nothing done",
                       f->path);
        goto out;
    }
    /* The lock commits hold (gguf_commit_lock): a journal or new file of
     * a commit that is running right now is not stale. */
    st = gguf_commit_lock(pl.fd, true, err);
    if (st != GGUF_OK)
        goto out;

    st = drop_new_file(&pl, &changed, err);
    if (st != GGUF_OK)
        goto out;
    if (exists_at(pl.dfd, pl.jname))
        st = recover_journal(&pl, &changed, err);
    else if (staged) { /* never relied on: its journal never was */
        st = drop_stage(&pl, err);
        changed = true;
    }
    if (st == GGUF_OK && in_state)
        st = recover_state_journal(&pl, sj, sdfd, err);
out:
    if (changed) {
        gguf_fault_point(&pl.faults, "fsync directory");
        enum gguf_status sst =
            gguf_fsync_dirfd(pl.dfd, f->path, st == GGUF_OK ? err : NULL);
        if (st == GGUF_OK)
            st = sst;
        if (did)
            *did = true;
        /* An insert finished by a rewrite put a new inode at the name:
         * from now on that is the file (it was renamed in under our commit
         * lock, and has the new header). */
        struct stat now;
        if (fstatat(pl.dfd, pl.base, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
            (now.st_dev != f->sb.st_dev || now.st_ino != f->sb.st_ino)) {
            struct gguf_error e2 = {0};
            if (gguf_file_reopen(f, &e2) != GGUF_OK && st == GGUF_OK) {
                *err = e2;
                st = e2.code;
            }
        } else {
            (void)fstat(f->fd, &f->sb); /* a redo in place changed it */
        }
    }
    if (sdfd >= 0)
        close(sdfd);
    free(pl.jpath);
    free(pl.npath);
    return st;
}

enum gguf_status gguf_recover(const char *path, bool *did,
                              struct gguf_error *err) {
    struct gguf_file f;
    if (did)
        *did = false;
    if (!path || !*path)
        return gguf_fail(err, GGUF_E_INVAL, "missing path to gguf_recover");
    /* Nothing beside it: nothing to do, even for a missing file.  (Only a
     * decision to do nothing is taken on the path; the work goes through
     * the descriptors.) */
    char *n = gguf_sidecar_path(path, GGUF_NEWFILE_SUFFIX);
    bool any = !n || gguf_commit_interrupted(path) || gguf_path_exists(n);
    free(n);
    if (!any)
        return GGUF_OK;
    enum gguf_status st = gguf_file_open(&f, path, -1, err);
    if (st == GGUF_OK)
        st = gguf_recover_file(&f, did, err);
    gguf_file_close(&f);
    return st;
}
