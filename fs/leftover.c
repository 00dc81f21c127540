/*
 * leftover.c - what earlier mounts of a model left behind, told to the
 * user by the next ggufs command on that model, and the commands that act
 * on it:
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
#include "ggufs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

enum { EXIT_BADFILE = 1, EXIT_COMMIT = 4 };

#define WAIT_SECONDS 60

void gfs_record_outcome(struct gfs *fs, const char *when) {
    char body[1400], stamp[32];
    struct gguf_error err = {0};
    time_t now = time(NULL);
    struct tm tm;
    if (!localtime_r(&now, &tm) ||
        !strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm))
        snprintf(stamp, sizeof stamp, "%lld", (long long)now);
    int n = snprintf(body, sizeof body, "%s (%s, %s)\n", fs->commit_msg, when,
                     stamp);
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

/* Opens path read-write for the pending commands, after recovery, locked
 * against mounts.  NULL after one line on stderr. */
static gguf_ctx *open_locked(const char *path, const char *file) {
    struct gguf_error err = {0};
    gguf_ctx *ctx = NULL;
    bool did = false;
    struct gguf_file f;
    if (gguf_file_open(&f, path, 1, &err) != GGUF_OK ||
        gguf_recover_file(&f, &did, &err) != GGUF_OK ||
        gguf_open_file(&ctx, &f, GGUF_OPEN_RDWR, &err) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: %s\n", file, err.msg);
        gguf_file_close(&f);
        return NULL;
    }
    gguf_file_close(&f); /* ctx holds its own descriptor of the file */
    if (flock(gguf_fd(ctx), LOCK_EX | LOCK_NB) != 0) {
        fprintf(stderr, "ggufs: %s: mounted or locked by another program\n",
                file);
        gguf_close(ctx);
        return NULL;
    }
    return ctx;
}

/* The start of both pending commands (and of fs/commands.c's): the
 * absolute path into *path (freed by the caller), the last outcome told,
 * the file opened and locked (a live mount's pending record is its own,
 * not ours). */
gguf_ctx *gfs_open_model(const char *file, char **path) {
    if (!(*path = realpath(file, NULL))) {
        fprintf(stderr, "ggufs: %s: %s\n", file, strerror(errno));
        return NULL;
    }
    (void)gfs_print_outcome(*path);
    return open_locked(*path, file);
}

int gfs_apply_pending_cmd(const char *file) {
    struct gguf_error err = {0};
    struct gguf_commit_info info = {0};
    char what[128] = "", saved[4096] = "";
    bool found = false;
    int status = EXIT_BADFILE;
    char *path = NULL;
    gguf_ctx *ctx = gfs_open_model(file, &path);
    if (!ctx)
        goto out;
    bool in_file = false, stale = false;
    (void)gguf_pending_describe(path, what, sizeof what, &found, &in_file,
                                &stale, NULL);
    if (found && in_file) {
        (void)gguf_state_remove(path, GGUF_STATE_PENDING, NULL);
        printf("ggufs: %s: the pending edits are already in the file\n", file);
        status = 0;
        goto out;
    }
    if (gguf_pending_apply(ctx, &found, &err) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: pending edits: %s\n", file, err.msg);
        goto out;
    }
    if (!found) {
        fprintf(stderr, "ggufs: %s: no pending edits\n", file);
        goto out;
    }
    status = EXIT_COMMIT;
    if (gfs_commit_metered(ctx, 0, &info, &err) != GGUF_OK) {
        struct gguf_error serr = {0};
        if (gguf_save_edits(ctx, saved, sizeof saved, &serr) != GGUF_OK)
            saved[0] = '\0';
        fprintf(stderr,
                "ggufs: %s: applying the pending edits failed: %s%s%s; they "
                "are still pending\n",
                file, err.msg, saved[0] ? "; edits also saved in " : "", saved);
        goto out;
    }
    (void)gguf_state_remove(path, GGUF_STATE_PENDING, NULL);
    printf("ggufs: %s: pending edits (%s) committed\n", file, what);
    status = 0;
out:
    if (ctx)
        gguf_close(ctx);
    free(path);
    return status;
}

int gfs_drop_pending_cmd(const char *file) {
    struct gguf_error err = {0};
    char what[128] = "";
    bool found = false;
    int status = EXIT_BADFILE;
    char *path = NULL;
    gguf_ctx *ctx = gfs_open_model(file, &path);
    if (!ctx)
        goto out;
    bool in_file = false, stale = false;
    if (gguf_pending_describe(path, what, sizeof what, &found, &in_file, &stale,
                              &err) != GGUF_OK &&
        !found) {
        fprintf(stderr, "ggufs: %s: %s\n", file, err.msg);
        found = true; /* unreadable: drop it all the same */
    }
    if (!found) {
        fprintf(stderr, "ggufs: %s: no pending edits\n", file);
        goto out;
    }
    if (gguf_state_remove(path, GGUF_STATE_PENDING, &err) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: %s\n", file, err.msg);
        goto out;
    }
    printf("ggufs: %s: pending edits dropped%s%s%s\n", file,
           what[0] ? " (" : "", what, what[0] ? ")" : "");
    status = 0;
out:
    if (ctx)
        gguf_close(ctx);
    free(path);
    return status;
}

/* Lines --show-pending prints at most (the rest are counted). */
#define SHOW_MAX 10000

/* Writes b to f with control bytes but tab and newline as '?': lines of
 * a record must never drive the terminal. */
static void put_clean(FILE *f, struct gguf_buf *b) {
    for (size_t i = 0; i < b->len; i++)
        if ((b->p[i] < 0x20 && b->p[i] != '\t' && b->p[i] != '\n') ||
            b->p[i] == 0x7f)
            b->p[i] = '?';
    fwrite(b->p, 1, b->len, f);
}

int gfs_show_pending_cmd(const char *file) {
    struct gguf_error err = {0};
    struct gguf_buf b = {0};
    char what[128] = "";
    bool found = false, in_file = false, stale = false;
    uint64_t n = 0;
    int status = EXIT_BADFILE;
    char *path = realpath(file, NULL);
    if (!path) {
        fprintf(stderr, "ggufs: %s: %s\n", file, strerror(errno));
        return EXIT_BADFILE;
    }
    if (gguf_pending_describe(path, what, sizeof what, &found, &in_file, &stale,
                              &err) != GGUF_OK ||
        (found &&
         gguf_pending_show(path, SHOW_MAX, &b, &n, &found, &err) != GGUF_OK)) {
        fprintf(stderr, "ggufs: %s: pending edits unreadable: %s\n", file,
                err.msg);
        goto out;
    }
    if (!found) {
        fprintf(stderr, "ggufs: %s: no pending edits\n", file);
        goto out;
    }
    printf("ggufs: %s: pending edits (%s)%s, not applied:\n", file, what,
           in_file ? "; the file already holds them"
           : stale ? "; made against another version of this file"
                   : "");
    if (n) {
        fputs(GGUF_DIFF_HEADER, stdout);
        put_clean(stdout, &b);
    }
    if (n > SHOW_MAX)
        printf("... and %llu more\n", (unsigned long long)(n - SHOW_MAX));
    status = 0;
out:
    gguf_buf_free(&b);
    free(path);
    return status;
}
