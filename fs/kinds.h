/*
 * kinds.h - the node kinds of a mount's tree, one row each (issue 22), as
 * libfuse's lowlevel ops or squashfuse's inode schemes: the core (node/'s
 * inode-to-kind map and attributes, the handlers of ops.c, fileops.c and
 * xattr.c) asks the row of a node's kind and never names a kind's file;
 * every node kind is a row, the core has no case of its own.
 *
 * Adding a node kind: its own file (or folder) defining one const struct
 * gfs_kind_ops (below), one line in kinds.c's table, and its inode range
 * and enum value in ggufs.h (the naming scheme); docs/architecture.md has
 * the recipe.  metatsv.c (MNT/meta.tsv) is the smallest example.
 *
 * Locks: stat, lookup, n_entries and dirent are called with fs->lock held
 * (read at least); open with fs->lock held (for writing when open_writes
 * and the open may write, else read); read, write and the other calls
 * on open files without fs->lock (the row takes what it needs: a text
 * held by the handle needs none).
 */
#ifndef GGUFS_KINDS_H
#define GGUFS_KINDS_H

#include "ggufs.h"
#include "node/node.h" /* the helpers every row uses */

/* Where a readdir is in a directory's entries, kept by the handler for
 * one reply: zeroed before its first entry; a row may keep its place in
 * it between consecutive entries (meta/'s list of FILEs). */
struct gfs_dir_pos {
    int64_t k;
    const void *at;
};

struct gfs_kind_ops {
    enum gfs_kind kind;
    fuse_ino_t ino_lo, ino_hi;   /* its inodes: [ino_lo, ino_hi) */
    fuse_ino_t ino_lo2, ino_hi2; /* and a second range (the live view's
                                    later versions), or none */
    /* A kind that is one entry of the root: its name and file type there,
     * listed in table order; root_entry instead when its name and inode
     * change (the live view: NULL while there is none; ino NULL: the name
     * alone, without the work its inode costs). */
    const char *root_name;
    mode_t root_mode;
    const char *(*root_entry)(struct gfs *fs, fuse_ino_t *ino);
    /* The file type of the entry root_entry gave ino (NULL: root_mode);
     * the live view is a link while it is the file (viewlink.c). */
    mode_t (*root_type)(struct gfs *fs, fuse_ino_t ino);
    /* Whether it exists in this mount (NULL: always).  No lock. */
    int (*present)(const struct gfs *fs);
    /* Flags.  changes: its attributes follow the edits: never cached on a
     * writable mount, unless told: each of its inodes (a few: ino_lo to
     * ino_hi) is told to the kernel at the end of each edit generation
     * (the edit section's end, gfs_kinds_edited), so it is cached as any
     * other's.  A directory whose attributes do not follow the edits
     * (its listing may) has neither.  moves: its name moves to a new
     * inode (the live view's versions): entries never cached on a
     * writable mount.
     * editable: a file tools edit in place (meta/'s): on a writable mount
     * a mode change, or a chown to the mounting user, succeeds and is
     * ignored.  commits: fsync of this directory commits every pending
     * edit.  open_writes: an open that may write holds fs->lock for
     * writing.  owner_writes: only the mount's owner or root may open it
     * for writing (gfs_may_commit; others EACCES). */
    unsigned changes : 1, told : 1, moves : 1, editable : 1, commits : 1,
        open_writes : 1, owner_writes : 1;
    /* Attributes: the core has filled inode, owner, times and st_blksize.
     * 0 or an errno. */
    int (*stat)(struct gfs *fs, fuse_ino_t ino, struct stat *st);
    /* Directories (NULL for files): a name in dir; how many entries it
     * has after "." and ".." (asked once a reply); entry k < that many
     * (1 and *name NUL-terminated, *child, *mode; 0 to skip it; -1 out of
     * memory). */
    int (*lookup)(struct gfs *fs, fuse_ino_t dir, const char *name,
                  fuse_ino_t *out);
    int64_t (*n_entries)(struct gfs *fs, fuse_ino_t dir);
    int (*dirent)(struct gfs *fs, fuse_ino_t dir, int64_t k,
                  struct gfs_dir_pos *pos, struct gguf_buf *name,
                  fuse_ino_t *child, mode_t *mode);
    /* Names changed in a directory (NULL: EACCES there).  Called without
     * fs->lock but create's, which the core holds for writing and ends
     * with gfs_edit_end.  0 or an errno. */
    int (*create)(struct gfs *fs, fuse_ino_t dir, const char *name,
                  fuse_ino_t *out);
    int (*unlink)(struct gfs *fs, fuse_ino_t dir, const char *name);
    int (*rename)(struct gfs *fs, fuse_ino_t dir, const char *name,
                  const char *newname, unsigned int flags);
    /* Files (NULL for directories): open (fh->kind and fh->ino set; the
     * row fills the rest of fh and fi; 0 or an errno; a row without a
     * write hook is read-only: the core refuses an open for writing with
     * EROFS, or EACCES on a writable mount, before asking it), and read
     * (reply with the bytes [off, off + size) of the open file). */
    int (*open)(struct gfs *fs, struct gfs_fh *fh, struct fuse_file_info *fi,
                int wants_write);
    void (*read)(fuse_req_t req, struct gfs *fs, struct gfs_fh *fh, off_t off,
                 size_t size);
    /* Writable files (NULL: not writable; each 0 or an errno, called
     * without fs->lock).  write: n bytes at off (the cap included);
     * truncate: to size, through fh when the kernel gives one (else
     * NULL), ino resolved (NULL truncate: EISDIR); flush, release (the
     * core frees fh after), fsync (req: who asks); lost: at unmount, a
     * handle still open whose edit will be dropped (fh->mu held): 1 and
     * one line into line saying what, else 0. */
    int (*write)(struct gfs *fs, struct gfs_fh *fh, const char *p, size_t n,
                 off_t off);
    /* A write that answers req itself (it may answer before the bytes are
     * written: tensorw.c, Pipelining); when set, the core calls it instead
     * of write. */
    void (*write_req)(struct gfs *fs, fuse_req_t req, struct gfs_fh *fh,
                      const char *p, size_t n, off_t off);
    int (*truncate)(struct gfs *fs, struct gfs_fh *fh, fuse_ino_t ino,
                    off_t size);
    int (*flush)(struct gfs *fs, struct gfs_fh *fh);
    void (*release)(struct gfs *fs, struct gfs_fh *fh);
    int (*fsync)(struct gfs *fs, fuse_req_t req, struct gfs_fh *fh);
    int (*lost)(struct gfs *fs, struct gfs_fh *fh, char *line, size_t size);
    /* Extended attributes (NULL: none): get (ENODATA for a name it does
     * not have), list (appends NUL-terminated names), each with fs->lock
     * held (read); set without it (ENOTSUP for a name it does not take).
     * The hashes are hashes.c's, asked first. */
    int (*getxattr)(struct gfs *fs, fuse_ino_t ino, const char *name,
                    struct gguf_buf *out);
    int (*listxattr)(struct gfs *fs, fuse_ino_t ino, struct gguf_buf *out);
    int (*setxattr)(struct gfs *fs, fuse_ino_t ino, const char *name,
                    const char *value, size_t size);
    /* Frees what the row keeps in fs (its cached text), at the model's
     * close (gfs_kinds_free; NULL: nothing). */
    void (*fini)(struct gfs *fs);
    /* Hooks: what changed in the model, told to every row that has the
     * hook by node/rows.c's fan-outs (node.h), in table order, so that a writer
     * never names the rows that show what it wrote (NULL: nothing to do).
     * tensor_changed: bytes [off, off + n) of tensor i changed in the
     * model's files (a write in place; whole: a whole replace applied, the
     * tensor file's own pages too): what shows them drops its copy (the
     * kernel's pages, through gfs_devio_inval; a cached result).  Called
     * with no lock held; the hook may take fs->lock (read) and its leaves,
     * and tells the kernel with none held (a reader holding a page lock
     * may wait for the writer).
     * commit_sync: first in an edit store's commit (fs->lock held for
     * writing): what the row wrote outside the edits made durable, and
     * named in what (n bytes: "tensors written: ..." appended, after "; "
     * if what holds a clause); 0, or an errno with err.
     * commit_flags: gguf_commit's flags the row needs (GGUF_COMMIT_NEW_FILE
     * while the kernel may read the GGUF's file itself); committed: after
     * a commit that wrote the file (fs->st refreshed).  Both with fs->lock
     * held for writing. */
    void (*tensor_changed)(struct gfs *fs, int64_t i, uint64_t off, uint64_t n,
                           int whole);
    int (*commit_sync)(struct gfs *fs, char *what, size_t n,
                       struct gguf_error *err);
    unsigned (*commit_flags)(struct gfs *fs);
    void (*committed)(struct gfs *fs);
};

/* Gives fs this table (model.c, at the model's open, before anything
 * asks a node's kind): node.h's gfs_kind and gfs_kind_row walk it. */
void gfs_kinds_set(struct gfs *fs);

/* The rows, each defined in its kind's file. */
extern const struct gfs_kind_ops gfs_kind_root;     /* rootdir.c */
extern const struct gfs_kind_ops gfs_kind_dir_meta; /* metadir.c */
extern const struct gfs_kind_ops gfs_kind_kv;       /* metafiles.c */
extern const struct gfs_kind_ops gfs_kind_scratch;
extern const struct gfs_kind_ops gfs_kind_live;    /* liveview.c */
extern const struct gfs_kind_ops gfs_kind_metatsv; /* metatsv.c */
extern const struct gfs_kind_ops gfs_kind_dir_f32; /* views.c */
extern const struct gfs_kind_ops gfs_kind_dir_npy;
extern const struct gfs_kind_ops gfs_kind_f32;
extern const struct gfs_kind_ops gfs_kind_npy;
extern const struct gfs_kind_ops gfs_kind_index;
extern const struct gfs_kind_ops gfs_kind_dir_tensors; /* tensors.c */
extern const struct gfs_kind_ops gfs_kind_tensor;
extern const struct gfs_kind_ops gfs_kind_dir_extras; /* extras.c */
extern const struct gfs_kind_ops gfs_kind_extra;
extern const struct gfs_kind_ops gfs_kind_dir_tok; /* tokdir.c */
extern const struct gfs_kind_ops gfs_kind_dir_hf;
extern const struct gfs_kind_ops gfs_kind_tokfile;

/* The largest write: past fs->max_value (or a negative offset) a write is
 * EFBIG, refused before anything is allocated. */
static inline int gfs_write_over_cap(const struct gfs *fs, off_t off,
                                     size_t n) {
    return off < 0 || (uint64_t)off + n > fs->max_value;
}

#endif
