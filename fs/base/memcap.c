/*
 * memcap.c - the bound on what edits in flight may make the daemon hold:
 * the drafts of keys open for writing and the FILEs of meta/, together at
 * most fs->max_drafts bytes (-o max_drafts=SIZE).  Each buffer has its own
 * count of what it was granted (gfs_fh.granted, gfs_scratch.granted);
 * gfs_mem_grant moves that count to a new size before the buffer grows
 * and after it shrinks or goes (size 0).  A grant past the bound is
 * ENOSPC, before anything is allocated, and one line is logged: the
 * per-file cap (-o max_value, EFBIG) bounds one file, this bounds all of
 * them (4096 FILEs of 64 MiB would be 256 GiB).
 *
 * And the bound on the texts of the tokenizer's files (made whole at an
 * edit generation, gfs_text_of_gen), all the daemon's models together:
 * GFS_TEXTS_MAX, counted from a text's making to its last put.
 */
#include "../ggufs.h"
#include "base.h"

#include <errno.h>
#include <stdatomic.h>

int gfs_mem_grant(struct gfs *fs, size_t *granted, size_t want) {
    if (want <= *granted) {
        atomic_fetch_sub(&fs->drafts_held, *granted - want);
        *granted = want;
        return 0;
    }
    size_t more = want - *granted;
    size_t held = atomic_fetch_add(&fs->drafts_held, more);
    if (held + more > fs->max_drafts || held + more < held) {
        atomic_fetch_sub(&fs->drafts_held, more);
        static atomic_int said;
        if (!atomic_exchange(&said, 1))
            gfs_log(fs,
                    "%s: edits in flight in meta/ would hold more than %zu "
                    "bytes (-o max_drafts): such writes fail with ENOSPC",
                    fs->path, fs->max_drafts);
        return ENOSPC;
    }
    *granted = want;
    return 0;
}

/* The bytes of texts held (gfs_text_of_gen's), the daemon's whole. */
static atomic_size_t texts_held;

size_t gfs_texts_room(void) {
    size_t h = atomic_load(&texts_held);
    return h < GFS_TEXTS_MAX ? GFS_TEXTS_MAX - h : 0;
}

int gfs_texts_grant(struct gfs *fs, size_t n) {
    size_t held = atomic_fetch_add(&texts_held, n);
    if (held + n <= GFS_TEXTS_MAX && held + n >= held)
        return 0;
    atomic_fetch_sub(&texts_held, n);
    static atomic_int said;
    if (!atomic_exchange(&said, 1))
        gfs_log(fs,
                "%s: the tokenizer's files of the models (tokenizer/, hf/) "
                "would hold more than %zu bytes together: such opens fail "
                "with ENOMEM until others are closed",
                fs->path, GFS_TEXTS_MAX);
    return ENOMEM;
}

void gfs_texts_release(size_t n) {
    atomic_fetch_sub(&texts_held, n);
}
