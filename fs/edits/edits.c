/*
 * edits.c - what both edit stores share (edits.h draws the states): the
 * dispatch to the backend chosen at mount, the commit's report and the
 * save-aside after a failed commit, each written once.
 *
 * The report (commit_msg, user.ggufs.commit, the log): "PATH: CLAUSE, T
 * ms" after a write (the backend's clause), "PATH: CLAUSE" when the
 * durable copy already held every edit, "PATH: VERB failed: WHY; WHERE"
 * after a failure, WHERE being the saved file or the backend's stranded
 * clause; then the caller's note (the FILEs in meta/, never committed).
 */
#include "../base/base.h"
#include "edits.h"

#include "../ggufs.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void gfs_edits_use_file(struct gfs *fs) {
    fs->edits.ops = &gfs_edits_file;
}

int gfs_edits_keep(struct gfs *fs) {
    assert(gfs_edits_check(fs)); /* 3: inside a section */
    return fs->edits.ops->keep(fs);
}

int gfs_edits_uncommitted(struct gfs *fs) {
    return fs->edits.ops->uncommitted(fs);
}

int gfs_edits_may_commit(const struct gfs *fs, uid_t uid) {
    return uid == 0 || uid == fs->uid;
}

int gfs_may_commit(const struct gfs *fs, fuse_req_t req) {
    return gfs_edits_may_commit(fs, fuse_req_ctx(req)->uid);
}

/* FAILED -> SAVED: the edits saved to a file once per generation:
 * saved_path, "" when saving failed (why in serr, which may be NULL). */
static const char *save_aside(struct gfs *fs, struct gguf_error *serr) {
    struct gfs_edits *s = &fs->edits;
    assert(gfs_edits_check(fs)); /* 3 */
    if (s->saved_generation != fs->generation || !s->saved_path[0]) {
        if (gguf_save_edits(fs->ctx, s->saved_path, sizeof s->saved_path,
                            serr) == GGUF_OK)
            s->saved_generation = fs->generation;
        else
            s->saved_path[0] = '\0';
    }
    return s->saved_path;
}

/* After a failed commit: saves the edits to a file (save_aside)
 * and says in where (one clause) where they are now: that file, or, if
 * saving failed, the backend's stranded clause. */
static void whereabouts(struct gfs *fs, char *where, size_t n) {
    struct gguf_error serr = {0};
    if (!save_aside(fs, &serr)[0] && !serr.msg[0])
        snprintf(serr.msg, sizeof serr.msg, "unknown error");
    if (fs->edits.saved_path[0]) {
        if (snprintf(where, n, "edits saved in %s", fs->edits.saved_path) < 0)
            where[0] = '\0';
        return;
    }
    fs->edits.ops->stranded(fs, serr.msg, where, n);
}

static double ms_between(const struct timespec *t0, const struct timespec *t1) {
    return (double)(t1->tv_sec - t0->tv_sec) * 1e3 +
           (double)(t1->tv_nsec - t0->tv_nsec) / 1e6;
}

int gfs_edits_commit(struct gfs *fs, gfs_edits_note_fn note) {
    struct gfs_edits *s = &fs->edits;
    struct gguf_error err = {0};
    char what[sizeof s->commit_msg] = "";
    struct timespec t0, t1;
    assert(gfs_edits_check(fs)); /* 3 */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int done = s->ops->commit(fs, what, sizeof what, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    int w = 0;
    if (done == GFS_EDITS_CLEAN) {
        note(fs, NULL, 0, 1);
        return 0;
    }
    if (done == GFS_EDITS_FAILED) {
        char where[1024];
        s->commit_failed = 1;
        whereabouts(fs, where, sizeof where);
        w = snprintf(s->commit_msg, sizeof s->commit_msg,
                     "%s: %s failed: %s; %s", fs->path, s->ops->commit_what,
                     err.msg, where);
    } else if (done == GFS_EDITS_WROTE) {
        s->commit_failed = 0;
        w = snprintf(s->commit_msg, sizeof s->commit_msg, "%s: %s, %.1f ms",
                     fs->path, what, ms_between(&t0, &t1));
    } else {
        s->commit_failed = 0;
        w = snprintf(s->commit_msg, sizeof s->commit_msg, "%s: %s", fs->path,
                     what);
    }
    if (w < 0)
        s->commit_msg[0] = '\0';
    if (done != GFS_EDITS_HELD)
        gfs_log(fs, "%s", s->commit_msg);
    note(fs, s->commit_msg, sizeof s->commit_msg, 1);
    if (done == GFS_EDITS_FAILED)
        return gfs_errno(&err);
    (void)s->ops->keep(fs); /* nothing is left to keep: a record goes */
    return 0;
}

void gfs_edits_free(struct gfs *fs) {
    if (fs->edits.ops && fs->edits.ops->free)
        fs->edits.ops->free(fs);
    gguf_close(fs->edits.disk);
    fs->edits.disk = NULL;
}
