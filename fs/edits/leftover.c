/*
 * leftover.c - what earlier mounts of a model left behind, told to the
 * user by the next ggufs command on that model (the commands that act on
 * it are cli/leftover.c's):
 *
 *   - the outcome of a commit nobody waited for (after fusermount3 -u,
 *     umount or a signal), recorded by the daemon as the model's status
 *     record and printed once by the next command;
 *   - pending edits of a daemon that died before committing them (the
 *     pending record, kept durably after every edit): a read-write mount
 *     refuses to start over them; `ggufs --apply-pending FILE` commits
 *     them, `ggufs --drop-pending FILE` forgets them, `ggufs
 *     --show-pending FILE` names them with their values (nothing applied,
 *     no lock taken: it only reads);
 *   - a commit still running in a daemon whose mount is already gone:
 *     a new mount waits for it (gfs_wait_previous).
 *
 * The records are the library's (gguf/state.c, gguf/pending.c); this file
 * is the policy of when to print what.
 */
#include "../base/base.h"
#include "../ggufs.h"
#include "edits.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#define WAIT_SECONDS 60

void gfs_record_outcome(struct gfs *fs, const char *when) {
    char body[1400], stamp[32];
    struct gguf_error err = {0};
    time_t now = time(NULL);
    struct tm tm;
    if (!localtime_r(&now, &tm) ||
        !strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm))
        snprintf(stamp, sizeof stamp, "%lld", (long long)now);
    int n = snprintf(body, sizeof body, "%s (%s, %s)\n", fs->edits.commit_msg,
                     when, stamp);
    if (n > 0 &&
        gguf_state_write(fs->path, GGUF_STATE_STATUS, body,
                         (size_t)n < sizeof body ? (size_t)n : sizeof body - 1,
                         &err) != GGUF_OK)
        gfs_log(fs, "%s: cannot record the commit's outcome: %s", fs->path,
                err.msg);
}

int gfs_print_outcome(const char *path) {
    struct gguf_buf b = {0};
    struct gguf_error err = {0};
    bool found = false;
    int failed = 0;
    if (gguf_state_read(path, GGUF_STATE_STATUS, &b, &found, &err) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: %s\n", path, err.msg);
    } else if (found) {
        /* One line, as recorded; control bytes never reach the terminal. */
        size_t n = b.len;
        while (n && (b.p[n - 1] == '\n' || b.p[n - 1] == '\0'))
            n--;
        for (size_t i = 0; i < n; i++)
            if (b.p[i] < 0x20 || b.p[i] == 0x7f)
                b.p[i] = '?';
        fprintf(stderr, "ggufs: last commit: %.*s\n", (int)n, (char *)b.p);
        failed = memmem(b.p, n, ": commit failed", 15) != NULL;
        (void)gguf_state_remove(path, GGUF_STATE_STATUS, NULL);
    }
    gguf_buf_free(&b);
    return failed;
}

int gfs_pending_note(const char *path, const char *file) {
    /* Until recovery has run, the file is between versions: whether the
     * edits are in it cannot be told yet. */
    if (gguf_commit_interrupted(path))
        return 0;
    char what[128];
    struct gguf_error err = {0};
    bool found = false, in_file = false, stale = false;
    if (gguf_pending_describe(path, what, sizeof what, &found, &in_file, &stale,
                              &err) != GGUF_OK) {
        fprintf(stderr,
                "ggufs: %s: pending edits unreadable: %s ('ggufs "
                "--drop-pending %s' forgets them)\n",
                file, err.msg, file);
        return 1;
    }
    if (found && in_file) {
        /* The commit went through (recovery finished it): nothing is
         * pending any more. */
        (void)gguf_state_remove(path, GGUF_STATE_PENDING, NULL);
        return 0;
    }
    if (!found)
        return 0;
    if (stale) {
        /* Made against a file that is no longer at this path: they can
         * never be applied here, and must not block it.  Kept aside. */
        char old[4096] = "";
        (void)gguf_state_path(path, GGUF_STATE_PENDING_OLD, old, sizeof old,
                              NULL);
        if (gguf_state_retire(path, &err) != GGUF_OK) {
            fprintf(stderr, "ggufs: %s: %s\n", file, err.msg);
            return 1;
        }
        fprintf(stderr,
                "ggufs: %s: pending edits of an earlier mount (%s) were made "
                "against another version of this file; not applied, kept in "
                "%s (a tensor-less GGUF after its first two lines)\n",
                file, what, old);
        return 0;
    }
    fprintf(stderr,
            "ggufs: %s: pending edits of an earlier mount that ended without "
            "committing them (%s): apply them with 'ggufs --apply-pending "
            "%s' or drop them with 'ggufs --drop-pending %s'\n",
            file, what, file, file);
    return 1;
}

int gfs_wait_previous(const char *path, const char *file, int mounted) {
    int said = 0;
    for (int ms = 0; !mounted; ms += 50) {
        /* Opened anew each time: a rewrite commit swaps a new inode in and
         * holds its lock on that one until the daemon exits. */
        int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            return 0; /* the open that follows reports it */
        int free_now = flock(fd, LOCK_SH | LOCK_NB) == 0;
        close(fd);
        if (free_now)
            return 0;
        if (ms >= WAIT_SECONDS * 1000) {
            fprintf(stderr,
                    "ggufs: %s: still locked by another program after %d s "
                    "(an earlier mount's commit?)\n",
                    file, WAIT_SECONDS);
            return -1;
        }
        if (!said++)
            fprintf(stderr,
                    "ggufs: %s: waiting for the commit of an earlier mount "
                    "to finish\n",
                    file);
        usleep(50000);
    }
    return 0;
}

int gfs_hash_named_refused(const struct gguf_file *f, const char *file,
                           const char *cmd) {
    char real[4096];
    if (!gguf_file_hash_named(f, real, sizeof real))
        return 0;
    fprintf(stderr,
            "ggufs: %s: named by its hash (%s): a store's blob is never "
            "written, so %s is refused; a mount of it keeps the edits in its "
            "overlay, and 'ggufs --overlay-apply COPY OVERLAY' writes them "
            "into a copy\n",
            file, real, cmd);
    return 1;
}
