/*
 * meta.h - meta/ and its edits: what the other parts call of the edit
 * code (metaedit.c: the names, KEY, GHOST and FILE; metavalues.c: the
 * values; metanames.c: editors' scratch names).  The rows of meta/
 * (metadir.c, metafiles.c, metatsv.c) are kinds.h's; what the edit code's
 * halves share is metaedit.h.
 */
#ifndef GGUFS_FS_META_H
#define GGUFS_FS_META_H

#include "../ggufs.h"

/* Bounds on what names in meta/ can make a mount hold: FILEs (count and
 * bytes each), GHOSTs and inode aliases (the oldest are forgotten). */
#define GFS_MAX_FILES 4096
/* GFS_MAX_FILE_BYTES: daemon.h */
#define GFS_MAX_GHOSTS 65536
#define GFS_MAX_ALIASES 65536
/* GFS_MAX_VALUE_DEFAULT, GFS_MAX_DRAFTS_DEFAULT: daemon.h */

/* A GHOST: a key that left meta/ (unlink, or a rename that made its text a
 * FILE).  Not listed.  Creating its file name again, or renaming a FILE
 * onto it, brings the key back with its type and its place in the KV
 * order. */
struct gfs_ghost {
    struct gfs_ghost *next;
    char *key;
    size_t klen;
    char *fname; /* its file name in meta/ (escaped, maybe hashed) */
    enum gguf_type type, arr_type;
    uint64_t ord; /* its place in the KV order (metaedit.c, key_ord) */
};

/* The edit code's own state (metaedit.c, metavalues.c; metadir.c reads
 * name_error), behind fs->meta: made by gfs_meta_init at the model's open
 * (0, or ENOMEM), freed by gfs_meta_free at its close.  Guarded by
 * fs->lock: held for reading to look, for writing to change. */
struct gfs_meta {
    struct gfs_ghost *ghosts;
    size_t n_ghosts;
    fuse_ino_t (*aliases)[2]; /* {old, new}: see gfs_meta_resolve */
    size_t n_aliases;
    struct gfs_ord {
        uint32_t id;
        uint64_t ord;
    } * ords; /* keys brought back from GHOSTs: their ordinal (key_ord) */
    size_t n_ords;
    char **errors; /* by kv id: why the last edit was refused */
    size_t n_errors;
    char name_error[512]; /* why the last name in meta/ was refused
                             (user.gguf.error of meta/), or "" */
};
int gfs_meta_init(struct gfs *fs);

/* meta.tsv's text (metatsv.c), for generation gen (gfs_text_of_gen),
 * behind fs->metatsv.  Guarded by fs->text_lock (taken with fs->lock
 * held, for reading at least).  gfs_metatsv_init: at the model's open,
 * empty; 0, or ENOMEM.  The row's fini frees it at the model's close. */
struct gfs_metatsv {
    struct gfs_text *text;
    uint64_t gen;
};
int gfs_metatsv_init(struct gfs *fs);

/* metaedit.c: changes through meta/ and the commit.  Caller holds lock
 * for writing unless noted. */
/* After a rename that turns a temporary file into a key (sed -i, vim) or
 * back, the kernel keeps the source's inode number for the target name:
 * gfs_meta_resolve maps such an old number to the object that now holds
 * the name.  Caller holds lock (read at least). */
fuse_ino_t gfs_meta_resolve(const struct gfs *fs, fuse_ino_t ino);
/* Records (msg) or clears (NULL) the refusal reason shown in
 * user.gguf.error of key id; gfs_meta_get_error reads it (lock held for
 * reading suffices). */
void gfs_meta_set_error(struct gfs *fs, uint32_t id, const char *msg);
const char *gfs_meta_get_error(struct gfs *fs, uint32_t id);
/* Why kv i may not be changed while mounted (general.alignment; split.no,
 * split.count, split.tensors.count of a shard set), or NULL.  Caller
 * holds lock (read at least). */
const char *gfs_meta_protected(const struct gfs *fs, int64_t i);
/* Why the value of kv i may not be written (open for writing, truncate):
 * gfs_meta_protected's reasons, and arrays of arrays (-o allow_nested
 * shows them; the library cannot write them).  Caller holds lock (read at
 * least). */
const char *gfs_meta_unwritable(const struct gfs *fs, int64_t i);
/* Refuses a change (what: "opening for writing", "truncate") of protected
 * kv i: logs the reason, records it in user.gguf.error; returns EPERM. */
int gfs_meta_refuse_protected(struct gfs *fs, int64_t i, const char *what);
/* The FILEs in meta/ (never committed): logs "meta/X: not a key, not
 * committed (N bytes)" for each if log, and appends the same, "; "
 * separated, to msg (NUL-terminated, size bytes) if msg: as many as fit,
 * then "; K more files in meta/ ..." for the rest.  Returns their number.
 * Caller holds lock (read at least). */
size_t gfs_meta_files_note(struct gfs *fs, char *msg, size_t size, int log);
/* Parses text as the value of kv i and stores it; 0 or errno.  quiet: a
 * refusal is not logged nor recorded (flush of a file still being
 * written: bash's redirection flushes right after open). */
int gfs_meta_apply_text(struct gfs *fs, int64_t i, const char *text, size_t len,
                        int quiet);
int gfs_meta_create(struct gfs *fs, const char *name, fuse_ino_t *ino);
/* A key made by create (ino) whose first write failed: removed again if it
 * still holds the zero value create gave it, so that a failed write never
 * leaves a key that was not there (logged). */
void gfs_meta_drop_new(struct gfs *fs, fuse_ino_t ino);
/* metanames.c: editors' scratch names in meta/ (the patterns are its top
 * comment and ggufs(1), NAMES IN META/).  gfs_meta_backup_name: a backup
 * or temporary name, even if it is a valid key name; gfs_meta_scratch_name:
 * that, or a name with a random part.  No lock. */
int gfs_meta_backup_name(const char *name);
int gfs_meta_scratch_name(const char *name);
int gfs_meta_unlink(struct gfs *fs, const char *name);
int gfs_meta_rename(struct gfs *fs, const char *from, const char *to,
                    unsigned flags);
int gfs_meta_set_type(struct gfs *fs, fuse_ino_t ino, const char *type,
                      size_t len);
int gfs_meta_truncate(struct gfs *fs, fuse_ino_t ino, off_t size);
/* At the model's close: the GHOSTs, aliases, FILEs and refusals. */
void gfs_meta_free(struct gfs *fs);

#endif
