/*
 * section.c - the edit section (edits.h draws its calling sequence and
 * numbers its invariants): the one place that takes a model's fs->lock
 * for writing, the one place that bumps fs->generation, the one place
 * that keeps the edits and unlocks.
 *
 * Builds without NDEBUG (meson's debug and debugoptimized, the default
 * build and dev/test's sanitizer build) record the thread inside and the
 * generation at its begin, and assert the invariants at every step, as
 * SQLite's pager asserts its state (assert_pager_state): a generation
 * bumped outside a section, a keep or commit outside one, a section left
 * on another thread or begun twice on one, edits left unkept: each aborts
 * at its line instead of racing or losing an edit quietly.  Release
 * builds and the Debian package (b_ndebug=true) record nothing and check
 * nothing: the functions are the lock, the bump and the keep.
 */
#include "edits.h"

#include "../ggufs.h"
#include "../node/node.h" /* gfs_kinds_edited */

#include <assert.h>

void gfs_edit_begin(struct gfs *fs) {
    assert(!gfs_edit_held(fs)); /* 1: no nesting (it would deadlock) */
    int rc = pthread_rwlock_wrlock(&fs->lock);
    assert(rc == 0);
    (void)rc;
#ifndef NDEBUG
    struct gfs_edits *s = &fs->edits;
    assert(!s->sect_dropped); /* the model was to close */
    /* 5: between sections every generation went through a keep */
    assert(fs->readonly || s->kept_gen == fs->generation);
    atomic_store_explicit(&s->sect_owner, gfs_edit_thread(),
                          memory_order_relaxed);
    s->sect_gen = fs->generation;
    assert(gfs_edits_check(fs));
#endif
}

void gfs_edit_changed(struct gfs *fs) {
    assert(gfs_edit_held(fs)); /* 2: only inside a section */
    assert(!fs->readonly);
    fs->generation++;
}

/* Leaves the section (the checks first, while still inside); tell:
 * then tells the kernel of a generation it was not told of.  The kernel
 * is told after the unlock (devio.h: no lock held) and before the caller
 * answers its request, so a stat that follows the edit's answer asks
 * anew; the told generation is recorded inside, so each is told once. */
static void leave(struct gfs *fs, int tell) {
    assert(gfs_edits_check(fs));
#ifndef NDEBUG
    atomic_store_explicit(&fs->edits.sect_owner, 0, memory_order_relaxed);
#endif
    tell = tell && fs->edits.told_gen != fs->generation;
    if (tell)
        fs->edits.told_gen = fs->generation;
    pthread_rwlock_unlock(&fs->lock);
    if (tell)
        gfs_kinds_edited(fs);
}

int gfs_edit_end(struct gfs *fs) {
    int err = gfs_edits_keep(fs);
    /* 4: kept, or tried (a failure stays EDITED, logged) */
    assert(fs->readonly || fs->edits.kept_gen == fs->generation);
    leave(fs, 1);
    return err;
}

void gfs_edit_abort(struct gfs *fs) {
    /* 4: nothing changed, or what changed went through a keep here */
    assert(fs->edits.sect_gen == fs->generation ||
           fs->edits.kept_gen == fs->generation);
    leave(fs, 1);
}

void gfs_edit_drop(struct gfs *fs) {
#ifndef NDEBUG
    fs->edits.sect_dropped = 1;
#endif
    leave(fs, 0); /* the model closes next: nothing to tell */
}
