/*
 * leftover.c - the commands that settle what an earlier mount left in a
 * local model, without mounting it:
 *
 *   ggufs --recover FILE        finish a commit interrupted by a crash
 *   ggufs --apply-pending FILE  commit the pending edits of a daemon that
 *                               died before committing them
 *   ggufs --drop-pending FILE   forget them
 *   ggufs --show-pending FILE   name them with their values (nothing
 *                               applied, no lock taken: it only reads)
 *
 * The records are the library's (gguf/state.c, gguf/pending.c); when a
 * mount prints what is left is fs/edits/leftover.c's.  Exit statuses:
 * status.h.
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

/* The absolute path of arg with its directory resolved (realpath) and its
 * last component as given, not followed.  NULL with errno. */
static char *resolve_dir(const char *arg) {
    char *copy = strdup(arg), *out = NULL;
    if (!copy)
        return NULL;
    char *slash = strrchr(copy, '/');
    const char *base = slash ? slash + 1 : copy;
    char *dir = slash ? (slash == copy ? "/" : copy) : ".";
    if (slash)
        *slash = '\0';
    char *rdir = *base ? realpath(dir, NULL) : NULL;
    if (!*base)
        errno = EISDIR;
    if (rdir &&
        asprintf(&out, "%s/%s", strcmp(rdir, "/") ? rdir : "", base) < 0)
        out = NULL;
    free(rdir);
    free(copy);
    return out;
}

/* ggufs --recover FILE.  The file must exist: a commit never leaves it
 * missing (a rewrite renames over it), so a missing file is a wrong
 * name, not "nothing to recover". */
int cli_recover_cmd(const char *file) {
    struct gguf_error err = {0};
    struct gguf_file f;
    bool did = false;
    int status = EXIT_BADFILE;
    /* Recovery writes what a file beside the model says: the model is
     * the file named, never what a symlink there points to (its
     * directory is resolved, so the name is the one a mount commits
     * under); it is opened once and recovered through that descriptor
     * (gguf/file.c). */
    char *path = resolve_dir(file);
    if (!path) {
        fprintf(stderr, "ggufs: %s: %s\n", file, strerror(errno));
        return EXIT_BADFILE;
    }
    if (gguf_file_open(&f, path, -1, &err) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: %s\n", file, err.msg);
        goto out;
    }
    if (gfs_hash_named_refused(&f, file, "--recover"))
        goto out;
    if (gguf_recover_file(&f, &did, &err) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: %s\n", file, err.msg);
        goto out;
    }
    printf("ggufs: %s: %s\n", file,
           did ? "interrupted commit completed" : "nothing to recover");
    (void)gfs_print_outcome(path);
    (void)gfs_pending_note(path, file);
    status = 0;
out:
    gguf_file_close(&f);
    free(path);
    return status;
}

/* Opens path read-write for the pending commands, after recovery, locked
 * against mounts.  NULL after one line on stderr. */
static gguf_ctx *open_locked(const char *path, const char *file) {
    struct gguf_error err = {0};
    gguf_ctx *ctx = NULL;
    bool did = false;
    struct gguf_file f;
    int opened = gguf_file_open(&f, path, 1, &err) == GGUF_OK;
    if (opened && gfs_hash_named_refused(&f, file, "this command")) {
        gguf_file_close(&f);
        return NULL;
    }
    if (!opened || gguf_recover_file(&f, &did, &err) != GGUF_OK ||
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

/* The start of both pending commands (and of commands.c's): the
 * absolute path into *path (freed by the caller), the last outcome told,
 * the file opened and locked (a live mount's pending record is its own,
 * not ours). */
gguf_ctx *cli_open_model(const char *file, char **path) {
    if (!(*path = realpath(file, NULL))) {
        fprintf(stderr, "ggufs: %s: %s\n", file, strerror(errno));
        return NULL;
    }
    (void)gfs_print_outcome(*path);
    return open_locked(*path, file);
}

int cli_apply_pending_cmd(const char *file) {
    struct gguf_error err = {0};
    struct gguf_commit_info info = {0};
    char what[128] = "", saved[4096] = "";
    bool found = false;
    int status = EXIT_BADFILE;
    char *path = NULL;
    gguf_ctx *ctx = cli_open_model(file, &path);
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

int cli_drop_pending_cmd(const char *file) {
    struct gguf_error err = {0};
    char what[128] = "";
    bool found = false;
    int status = EXIT_BADFILE;
    char *path = NULL;
    gguf_ctx *ctx = cli_open_model(file, &path);
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

int cli_show_pending_cmd(const char *file) {
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
