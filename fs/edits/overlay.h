/*
 * overlay.h - the overlay's place, lock and loading, shared by the
 * overlay store (edits/overlay.c: mounts with -o overlay) and the overlay
 * commands (fs/cmd/overlaycmds.c: --overlay-apply, --overlay-drop,
 * --overlay-rebase), which call down to it.  Each says what went wrong
 * in one line on stderr, naming file (the source as the user named it).
 */
#ifndef GGUFS_STORE_OVERLAY_H
#define GGUFS_STORE_OVERLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

/* arg made absolute without resolving it (the daemon runs in /); NULL
 * with errno. */
char *gfs_overlay_absolute(const char *arg);
/* Where the overlay is: opt (made absolute into *path) or the default for
 * source (*path NULL); shown (n bytes) says where, for messages.  0, or
 * -1 after one line. */
int gfs_overlay_locate(const char *file, const char *source, const char *opt,
                       char **path, char *shown, size_t n);
/* Whether an overlay made for made was made for the source id names (an
 * earlier version of it): --overlay-rebase may carry it over.  A local
 * source's path is not compared (a model moved with its overlay named
 * still is that model). */
bool gfs_overlay_same_source(const struct gguf_overlay_id *made,
                             const struct gguf_overlay_id *id);
/* Loads the overlay at opath (NULL: the default; shown in messages) for
 * the source identified by id and applies it to ctx when it belongs
 * there (*set, *removed count the keys; *t, *nt, unless t is NULL, the
 * tensors it holds: gguf_overlay_tensors_free).  1 applied, 0 none, -1
 * refused (one line said why). */
int gfs_overlay_load_apply(const char *file, const char *opath,
                           const char *shown, const struct gguf_overlay_id *id,
                           gguf_ctx *ctx, int64_t *set, int64_t *removed,
                           struct gguf_overlay_tensor **t, size_t *nt);
/* The overlay's lock for a writer (a read-write mount, --overlay-apply,
 * --overlay-drop, --overlay-rebase) of source, as mounted at mnt (NULL
 * for a command): the lock's descriptor, or -1 after one line.  A holder
 * whose mount is still there is refused at once; with wait, a holder
 * whose mount is gone (a daemon finishing its last write after an
 * unmount) is waited for, at most WAIT_MS (edits/overlay.c), saying so
 * once. */
int gfs_overlay_take_lock(const char *file, const char *source,
                          const char *opath, const char *shown, const char *mnt,
                          int wait);

struct gfs;
/* carry.c: a store model's edits follow its name.  key is "STORE\nNAME"
 * (gfs_overlay_args.name_key).  gfs_carry_record: the source whose
 * overlay holds the name's edits is now source (written only if it
 * changed; a failure said).  gfs_carry_find: the blob file (identified by
 * id) has no overlay: the overlay of the source the name's record names,
 * if another, applied to fs->shards[0] and, unless readonly, written as
 * id's default overlay; 1 carried (*set, *removed counted), 0 none or
 * refused (one line: conflicting keys by name, tensors), -1 failed (one
 * line). */
void gfs_carry_record(const char *key, const char *source);
int gfs_carry_find(struct gfs *fs, const char *key, const char *file,
                   const struct gguf_overlay_id *id, int readonly, int64_t *set,
                   int64_t *removed);

#endif
