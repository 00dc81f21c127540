/*
 * metatsv.c - MNT/meta.tsv: the metadata on one screen, for grep, diff
 * and a look: a header line, then one line per key in the file's order
 * (the hidden filler left out): its file name in meta/, type, element
 * count and value shortened, tab-separated.  The lines are the library's
 * (gguf_kv_summary, gguf/summary.c, which holds the shortening rule).
 *
 * It shows the keys as they are now, pending edits included, like the
 * live view: the text is made again after each applied edit (one text per
 * fs->generation, cached under text_lock) and an open serves the text of
 * its open.  Read-write mounts open it in direct I/O with attributes never
 * cached, so that a size taken before an edit never cuts the text read
 * after it.  Read-only.
 */
#include "../base/base.h"
#include "../kinds.h"
#include "meta.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* meta.tsv's lines for the keys now (gfs_text_of_gen's make). */
static int metatsv_make(struct gfs *fs, void *arg, struct gguf_buf *b) {
    (void)arg;
    struct gguf_error gerr = {0};
    if (gguf_buf_add(b, GGUF_SUMMARY_HEADER, strlen(GGUF_SUMMARY_HEADER)) !=
        GGUF_OK)
        return ENOMEM;
    for (int64_t i = 0; i < gguf_n_kv(fs->ctx); i++) {
        if (gfs_kv_hidden(fs, i))
            continue;
        if (gguf_kv_summary(fs->ctx, i, b, &gerr) != GGUF_OK)
            return gfs_errno(&gerr);
        if (b->len > GFS_MAX_TEXT) /* a few hundred bytes a key: never */
            return EFBIG;
    }
    return 0;
}

/* The text now: caller holds fs->lock (read at least); takes text_lock. */
static struct gfs_text *metatsv_text(struct gfs *fs, int *err) {
    return gfs_text_of_gen(fs, &fs->metatsv->text, &fs->metatsv->gen,
                           metatsv_make, NULL, 0, err);
}

static int metatsv_stat(struct gfs *fs, fuse_ino_t ino, struct stat *st) {
    (void)ino;
    int err = 0;
    struct gfs_text *t = metatsv_text(fs, &err);
    return gfs_kind_text_stat(t, err, st);
}

static int metatsv_open(struct gfs *fs, struct gfs_fh *fh,
                        struct fuse_file_info *fi, int wants_write) {
    (void)wants_write; /* read-only: the core refuses writes */
    int err = 0;
    struct gfs_text *t = metatsv_text(fs, &err);
    return gfs_kind_text_open(fs, fh, fi, t, err);
}

int gfs_metatsv_init(struct gfs *fs) {
    fs->metatsv = calloc(1, sizeof *fs->metatsv);
    return fs->metatsv ? 0 : ENOMEM;
}

/* The model's close (no lock: nothing runs): the text and fs->metatsv. */
static void metatsv_fini(struct gfs *fs) {
    if (fs->metatsv)
        gfs_text_put(fs->metatsv->text);
    free(fs->metatsv);
    fs->metatsv = NULL;
}

const struct gfs_kind_ops gfs_kind_metatsv = {
    .kind = GFS_META_TSV,
    .ino_lo = GFS_INO_META_TSV,
    .ino_hi = GFS_INO_META_TSV + 1,
    .root_name = "meta.tsv",
    .root_mode = S_IFREG,
    .changes = 1,
    .told = 1, /* one inode: ls -l of a model's root asks no GETATTR */
    .stat = metatsv_stat,
    .open = metatsv_open,
    .read = gfs_read_text,
    .fini = metatsv_fini,
};
