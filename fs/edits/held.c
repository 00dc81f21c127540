/*
 * held.c - the edit section's checks (edits.h, invariants 1 and 6), below
 * both section.c, which enters and leaves the section, and edits.c, whose
 * keep and commit assert they run inside one: a file of its own so that
 * neither calls the other back.  Release builds answer 1 and check nothing.
 */
#include "edits.h"

#include "../ggufs.h"

#include <assert.h>
#include <unistd.h>

/* This thread's id (never 0), asked of the kernel once a thread. */
int gfs_edit_thread(void) {
    static _Thread_local int tid;
    if (!tid)
        tid = (int)gettid();
    return tid;
}

int gfs_edit_held(const struct gfs *fs) {
#ifndef NDEBUG
    return atomic_load_explicit(&fs->edits.sect_owner, memory_order_relaxed) ==
           gfs_edit_thread();
#else
    (void)fs;
    return 1;
#endif
}

int gfs_edits_check(const struct gfs *fs) {
#ifndef NDEBUG
    const struct gfs_edits *s = &fs->edits;
    assert(gfs_edit_held(fs)); /* 1: inside, on this thread */
    assert(s->ops);            /* 6: a store chosen at mount */
    assert(s->sect_gen <= fs->generation);
    assert(s->kept_gen <= fs->generation);
    assert(s->saved_generation <= fs->generation);
    assert(!s->record || s->ops == &gfs_edits_file);
#endif
    (void)fs;
    return 1;
}
