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
static bool jnl_matches(const struct gguf_jnl *j, uint64_t size,
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
    if (!jnl_matches(j, size, have, n, inserted)) {
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
static enum gguf_status redo(int fd, const char *path, const struct gguf_jnl *j,
                             struct gguf_faults *f, bool *rolled_back,
                             struct gguf_error *err) {
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
        st = gguf_rewrite_file(fd, path, &sb, j->old_len, j->new_hdr,
                               j->new_len, f, &nfd, &copied, err);
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

/* The journal part of recovery: redo a complete journal (or roll it
 * back), then remove the journal.  *changed once something on disk
 * changed (the caller syncs the directory). */
static enum gguf_status recover_journal(int fd, const char *path,
                                        const char *jpath,
                                        struct gguf_faults *f, bool *changed,
                                        struct gguf_error *err) {
    enum gguf_status st;
    struct gguf_jnl j;
    uint8_t *jbytes = NULL;
    uint64_t jn = 0;
    bool complete = false, rolled_back = false;

    st = gguf_jnl_read(jpath, &jbytes, &jn, err);
    if (st != GGUF_OK)
        goto out;
    st = gguf_jnl_decode(jbytes, jn, &j, &complete, err);
    if (st != GGUF_OK)
        goto out;
    if (complete) {
        st = redo(fd, path, &j, f, &rolled_back, err);
        if (st != GGUF_OK && !rolled_back)
            goto out; /* journal kept: the file needs it */
    }
    gguf_fault_point(f, "unlink journal");
    if (unlink(jpath) < 0 && errno != ENOENT) {
        st = gguf_sys_fail(err, errno, "cannot remove %s", jpath);
        goto out;
    }
    *changed = true;
    /* rolled back: st is still worth reporting, the directory is synced
     * by the caller */
out:
    free(jbytes);
    return st;
}

/* Fault points: unlink stale new file; then for an incomplete journal:
 * unlink journal; for a complete one: gguf_jnl_apply's points, unlink
 * journal; last, fsync directory. */
bool gguf_commit_interrupted(const char *path) {
    char *j = gguf_sidecar_path(path, GGUF_JOURNAL_SUFFIX);
    bool yes = j && gguf_path_exists(j);
    free(j);
    return yes;
}

enum gguf_status gguf_recover(const char *path, bool *did,
                              struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    char *jpath = NULL, *npath = NULL;
    int fd = -1;
    bool changed = false;
    struct gguf_error scratch;
    struct gguf_faults faults = {0};

    if (!err)
        err = &scratch; /* redo() clears it before its fallback */
    if (did)
        *did = false;
    if (!path) {
        st = gguf_fail(err, GGUF_E_INVAL, "missing path to gguf_recover");
        goto out;
    }
    jpath = gguf_sidecar_path(path, GGUF_JOURNAL_SUFFIX);
    npath = gguf_sidecar_path(path, GGUF_NEWFILE_SUFFIX);
    if (!jpath || !npath) {
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        goto out;
    }
    gguf_faults_init(&faults);
    /* Nothing pending: touch nothing (the file may well be read-only). */
    if (!gguf_path_exists(jpath) && !gguf_path_exists(npath))
        goto out;

    /* The lock commits hold (gguf_commit_lock): a journal or new file of a
     * commit that is running right now is not stale. */
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        st = gguf_sys_fail(err, errno,
                           "cannot open %s to recover an "
                           "interrupted commit",
                           path);
        goto out;
    }
    st = gguf_commit_lock(fd, true, err);
    if (st != GGUF_OK)
        goto out;

    if (gguf_path_exists(npath)) {
        /* A rewrite that never reached its rename: the original is whole. */
        gguf_fault_point(&faults, "unlink stale new file");
        if (unlink(npath) < 0 && errno != ENOENT) {
            st = gguf_sys_fail(err, errno, "cannot remove %s", npath);
            goto out;
        }
        changed = true;
    }
    if (gguf_path_exists(jpath))
        st = recover_journal(fd, path, jpath, &faults, &changed, err);
out:
    if (changed) {
        struct gguf_error e2 = {0};
        gguf_fault_point(&faults, "fsync directory");
        enum gguf_status s2 = gguf_fsync_dir(path, &e2);
        if (st == GGUF_OK && s2 != GGUF_OK) {
            st = s2;
            if (err)
                *err = e2;
        }
        if (did)
            *did = true;
    }
    if (fd >= 0)
        close(fd);
    free(jpath);
    free(npath);
    return st;
}
