/*
 * file.c - the edit store of a mount without -o overlay (edits.h): the
 * model file.  Its edits are kept as the model's pending record in the
 * state directory (gguf_pending_save) after every edit, and a commit
 * writes them into the GGUF in place, crash-safely (gguf_commit); after a
 * commit nothing is pending and the record goes.  A read-only mount keeps
 * nothing.
 */
#include "../base/base.h"
#include "edits.h"

#include "../ggufs.h"
#include "../kinds.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

/* Saves the edits as the pending record when they changed since the last
 * save, or drops the record when nothing is left to commit: once a change
 * to meta/ has been answered, a daemon killed at any later instant loses
 * none of it.  Edits saved aside after a failed commit (and reported with
 * the saved file's name) need no record until they change again.  A
 * failure is logged once per change (the mount goes on: the edits are
 * still in memory). */
static int file_keep(struct gfs *fs) {
    struct gfs_edits *s = &fs->edits;
    struct gguf_error err = {0};
    int keep = gguf_dirty(fs->ctx) && s->saved_generation != fs->generation;
    if (fs->readonly || (s->kept_gen == fs->generation && s->record == keep))
        return s->kept_failed ? EIO : 0;
    s->kept_gen = fs->generation;
    s->record = keep;
    enum gguf_status st =
        keep ? gguf_pending_save(fs->ctx, &s->disk, &err)
             : gguf_state_remove(fs->path, GGUF_STATE_PENDING, &err);
    s->kept_failed = st != GGUF_OK;
    if (st != GGUF_OK)
        gfs_log(fs, "%s: cannot keep the pending edits durably: %s", fs->path,
                err.msg);
    return st != GGUF_OK ? EIO : 0;
}

static int file_uncommitted(struct gfs *fs) {
    return gguf_dirty(fs->ctx) || atomic_load(&fs->tw_any);
}

static int file_commit(struct gfs *fs, char *what, size_t n,
                       struct gguf_error *err) {
    static const char *const how[] = {"nothing to do", "in place",
                                      "grown by inserting blocks",
                                      "grown by rewriting the file"};
    struct gguf_commit_info info = {0};
    char tw[sizeof fs->edits.commit_msg / 2] = "";
    /* What the rows wrote outside the edits (kinds.h, commit_sync: the
     * tensors written in place, tensorw.c): synced, their names reported,
     * and the file's new times taken before gguf_commit checks them. */
    if (gfs_kinds_commit_sync(fs, tw, sizeof tw, err))
        return GFS_EDITS_FAILED;
    if (!gguf_dirty(fs->ctx) && tw[0]) {
        fstat(gguf_fd(fs->ctx), &fs->st);
        snprintf(what, n, "synced, %s", tw);
        return GFS_EDITS_WROTE;
    }
    if (!gguf_dirty(fs->ctx))
        return GFS_EDITS_CLEAN;
    /* The file changes (or may have, if the commit fails half-way): the
     * pending record's picture of it is made again when next needed. */
    gguf_close(fs->edits.disk);
    fs->edits.disk = NULL;
    /* A new file renamed over while the kernel reads the old one for a
     * row (kinds.h, commit_flags: the live view's passthrough opens and
     * links). */
    unsigned flags = fs->commit_flags | gfs_kinds_commit_flags(fs);
    if (gguf_commit(fs->ctx, flags, &info, err) != GGUF_OK) {
        (void)file_keep(fs); /* the record holds the edits still */
        return GFS_EDITS_FAILED;
    }
    fstat(gguf_fd(fs->ctx), &fs->st);
    gfs_kinds_committed(fs);
    const char *way = how[info.how <= GGUF_COMMIT_REWRITE ? info.how : 0];
    if (info.how == GGUF_COMMIT_REWRITE && (flags & GGUF_COMMIT_NEW_FILE))
        way = "written as a new file: passthrough readers of the live view "
              "keep the old one";
    snprintf(what, n, "committed (%s), data at %llu%s%s", way,
             (unsigned long long)info.new_data_offset, tw[0] ? "; " : "", tw);
    return GFS_EDITS_WROTE;
}

/* The save-aside failed: the edits are in the mount, and in the pending
 * record if it was kept. */
static void file_stranded(struct gfs *fs, const char *why, char *where,
                          size_t n) {
    int kept = fs->edits.record && !fs->edits.kept_failed;
    char rec[512] = "";
    if (kept)
        (void)gguf_state_path(fs->path, GGUF_STATE_PENDING, rec, sizeof rec,
                              NULL);
    snprintf(where, n,
             "the edits were NOT saved to a file (%s): they are still in "
             "the mount at %s%s%s%s",
             why, fs->mnt ? fs->mnt : "?",
             kept ? " and kept durably in " : " only (no durable copy)",
             kept ? rec : "",
             kept ? " ('ggufs --apply-pending' commits them)" : "");
}

const struct gfs_edits_ops gfs_edits_file = {
    .name = "the model file",
    .commit_what = "commit",
    .keep = file_keep,
    .uncommitted = file_uncommitted,
    .commit = file_commit,
    .stranded = file_stranded,
    .free = NULL, /* the pending record stays: it is the durable copy */
};
