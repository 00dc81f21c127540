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
#include "kinds.h"

#include <errno.h>
#include <string.h>

/* The text now: caller holds fs->lock (read at least); takes text_lock. */
static struct gfs_text *metatsv_text(struct gfs *fs, int *err) {
    struct gfs_text *t = NULL;
    struct gguf_buf b = {0};
    struct gguf_error gerr = {0};
    pthread_mutex_lock(&fs->text_lock);
    if (fs->metatsv && fs->metatsv_gen == fs->generation) {
        t = fs->metatsv;
        atomic_fetch_add(&t->refs, 1);
        goto out;
    }
    if (gguf_buf_add(&b, GGUF_SUMMARY_HEADER, strlen(GGUF_SUMMARY_HEADER)) !=
        GGUF_OK) {
        *err = ENOMEM;
        goto out;
    }
    for (int64_t i = 0; i < gguf_n_kv(fs->ctx); i++) {
        if (gfs_kv_hidden(fs, i))
            continue;
        if (gguf_kv_summary(fs->ctx, i, &b, &gerr) != GGUF_OK) {
            *err = gfs_errno(&gerr);
            goto out;
        }
        if (b.len > GFS_MAX_TEXT) { /* a few hundred bytes a key: never */
            *err = EFBIG;
            goto out;
        }
    }
    if (!(t = gfs_text_new(&b))) {
        *err = ENOMEM;
        goto out;
    }
    atomic_store(&t->refs, 2); /* the cache's and the caller's */
    gfs_text_put(fs->metatsv);
    fs->metatsv = t;
    fs->metatsv_gen = fs->generation;
out:
    pthread_mutex_unlock(&fs->text_lock);
    gguf_buf_free(&b);
    return t;
}

static int metatsv_stat(struct gfs *fs, fuse_ino_t ino, struct stat *st) {
    (void)ino;
    int err = 0;
    struct gfs_text *t = metatsv_text(fs, &err);
    if (!t)
        return err;
    st->st_mode = S_IFREG | 0444;
    st->st_nlink = 1;
    st->st_size = (off_t)t->len;
    st->st_blocks = (st->st_size + 511) / 512;
    gfs_text_put(t);
    return 0;
}

static int metatsv_open(struct gfs *fs, struct gfs_fh *fh,
                        struct fuse_file_info *fi, int wants_write) {
    int err = 0;
    if (wants_write)
        return fs->readonly ? EROFS : EACCES;
    if (!(fh->text = metatsv_text(fs, &err)))
        return err;
    fi->noflush = 1;
    if (fs->readonly)
        fi->keep_cache = 1; /* never changes */
    else
        fi->direct_io = 1;
    return 0;
}

const struct gfs_kind_ops gfs_kind_metatsv = {
    .kind = GFS_META_TSV,
    .ino_lo = GFS_INO_META_TSV,
    .ino_hi = GFS_INO_META_TSV + 1,
    .root_name = "meta.tsv",
    .root_mode = S_IFREG,
    .changes = 1,
    .stat = metatsv_stat,
    .open = metatsv_open,
    .read = gfs_read_text,
};

void gfs_metatsv_free(struct gfs *fs) {
    gfs_text_put(fs->metatsv);
    fs->metatsv = NULL;
}
