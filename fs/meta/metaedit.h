/*
 * metaedit.h - what the two halves of the edits through meta/ share:
 * metaedit.c (the names: KEY, GHOST, FILE; create, unlink, rename) and
 * metavalues.c (the values: texts, types, refusals).  Their entry points
 * for the handlers are in ggufs.h.  Caller is inside an edit section
 * (fs->lock held for writing: edits/edits.h; the entry points assert it).
 */
#ifndef GGUFS_METAEDIT_H
#define GGUFS_METAEDIT_H

#include "../ggufs.h"

/* A refused edit of kv i (-1: no key): logs err naming the key, records
 * it as the key's user.gguf.error; returns its errno. */
int gfs_meta_refuse(struct gfs *fs, int64_t i, const struct gguf_error *err);
/* An edit applied (to kv i, or -1): a new generation of the edits, the
 * key's cached text and refusal dropped. */
void gfs_meta_edited(struct gfs *fs, int64_t i);
/* Frees the refusals kept for user.gguf.error (at unmount). */
void gfs_meta_errors_free(struct gfs *fs);

#endif
