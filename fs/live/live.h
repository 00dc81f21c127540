/*
 * live.h - the live view, NAME.gguf: the GGUF as a commit would write it
 * now (liveview.c: a row of kinds.h), and a mount without privileges'
 * unedited view as a link to the file (viewlink.c).  Its versions and
 * passthrough are source/passthrough.c's.
 */
#ifndef GGUFS_FS_LIVE_H
#define GGUFS_FS_LIVE_H

#include "../ggufs.h"

/* The live view's state, behind fs->live.  gfs_live_init: at the
 * model's open, empty; 0, or ENOMEM.  The live row's fini frees it. */
struct gfs_live {
    /* Guarded by fs->text_lock: the view's header (liveview.c), made for
     * generation gen (gfs_text_of_gen); opened_gen, the generation at the
     * last open of the view. */
    struct gfs_text *hdr;
    uint64_t gen;
    uint64_t opened_gen;
    /* A mount without privileges: its unedited view as a link to the
     * file (viewlink.c, its own leaf lock); NULL until first asked.
     * Atomic: made under fs->lock (read) by the first asker, read by
     * others without viewlink.c's lock. */
    struct gfs_vlink *_Atomic vlink;
};
int gfs_live_init(struct gfs *fs);

/* Where a byte range of a shard set's merged live view comes from. */
struct gfs_extent {
    uint64_t merged_rel; /* offset in the merged data section */
    uint64_t size;       /* tensor bytes; zero padding follows up to the next */
    int shard;
    uint64_t rel; /* offset in that shard's data section */
};
/* The merged data section (fs->layout, one allocation): its size and one
 * extent per tensor, in the merged file's order.  No lock: made at the
 * open. */
struct gfs_layout {
    uint64_t size;
    struct gfs_extent ext[];
};

/* liveview.c: the live view.  At mount: gfs_view_number numbers the
 * tensors across shards (t_first); gfs_view_layout (numbering first if
 * not done) lays out the merged data section of a shard set or a mix.
 * 0, or -1 with err. */
int gfs_view_number(struct gfs *fs, struct gguf_error *err);
int gfs_view_layout(struct gfs *fs, struct gguf_error *err);
void gfs_view_layout_free(struct gfs *fs);
/* Returns the view's header (a new reference) as a commit would write it
 * now.  Caller holds lock (read); takes text_lock. */
struct gfs_text *gfs_view_header(struct gfs *fs, int *err);
/* Size of the live view; 0 or errno.  Caller holds lock (read). */
int gfs_view_size(struct gfs *fs, uint64_t *size);
/* Records an open of the view; true if its header is the one of the last
 * open (the kernel may keep its page cache).  Caller holds lock (read). */
int gfs_view_reopened(struct gfs *fs);
/* Where bytes [off, off+size) of the view come from, clamped to its end:
 * hdr_n bytes of the header from hdr_off, then data_n bytes of the data
 * section from data_rel.  One file: that is the GGUF's bytes from
 * data_pos, to be served from its fd.  Caller holds lock (read). */
struct gfs_view_span {
    size_t hdr_off, hdr_n;
    uint64_t data_rel, data_n;
    uint64_t data_pos; /* one file: offset of data_rel in the GGUF */
};
void gfs_view_span(const struct gfs *fs, size_t hdr_len, uint64_t off,
                   size_t size, struct gfs_view_span *sp);
/* A shard set's view: copies the span's bytes (hdr_n + data_n) into buf,
 * the data from the shards' tensors, zeros between; 0 or errno.  Caller
 * holds lock (read). */
int gfs_view_copy(struct gfs *fs, const struct gfs_text *hdr,
                  const struct gfs_view_span *sp, char *buf);
/* viewlink.c: the live view of a mount without privileges as a link to
 * the file while it is the file (the contract: that file's top).
 * gfs_vlink_decide: the root entry gave ino (an epoch), decided once;
 * caller holds fs->lock (read).  gfs_vlink_is: ino is a link;
 * gfs_vlink_stat: fills st and returns 1 if it is; gfs_vlink_readlink
 * replies (EINVAL for any other inode); gfs_vlink_commit_flags:
 * GGUF_COMMIT_NEW_FILE while a reader may hold the file by the link;
 * gfs_vlink_free at the model's close (the live row's fini). */
void gfs_vlink_decide(struct gfs *fs, fuse_ino_t ino);
int gfs_vlink_is(struct gfs *fs, fuse_ino_t ino);
int gfs_vlink_stat(struct gfs *fs, fuse_ino_t ino, struct stat *st);
void gfs_vlink_readlink(struct gfs *fs, fuse_req_t req, fuse_ino_t ino);
unsigned gfs_vlink_commit_flags(struct gfs *fs);
void gfs_vlink_free(struct gfs *fs);

#endif
