/*
 * liveview.c - the live view: MNT/NAME.gguf, a complete GGUF whose header is
 * what a commit would write now and whose data section is the backing
 * file's, served without copying.  Before any edit it is byte-identical to
 * the source; after `echo ... > meta/X` it is the file the commit would
 * produce, so llama.cpp can load edited metadata without waiting.
 *
 * This file owns the view's byte mapping: the header, then the data
 * section (one file: the GGUF's own; a shard set: the merged layout, laid
 * out once at mount from the library's gguf_merge), and the numbering of
 * tensors across shards.  Prefix gfs_view_.  Its row of the kinds' table
 * (kinds.h), gfs_kind_live, is at the end: the view is a root entry named
 * fs->live_name, whose inode moves to a new number with each version
 * (source/passthrough.c), read only.
 */
#include "../base/base.h"
#include "../kinds.h"
#include "../base/devio.h"
#include "../source/source.h"
#include "live.h"
#include "../base/mount.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int gfs_view_number(struct gfs *fs, struct gguf_error *err) {
    fs->t_first = calloc((size_t)fs->n_shards + 1, sizeof *fs->t_first);
    if (!fs->t_first) {
        gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        return -1;
    }
    for (int s = 0; s < fs->n_shards; s++)
        fs->t_first[s + 1] = fs->t_first[s] + gguf_n_tensors(fs->shards[s]);
    return 0;
}

/* The context of the file the view shows, tensors and keys as they are
 * now: gguf-split --merge's of a shard set, the mix's (every tensor as
 * gfs_tensor_ctx picks it, offsets laid out anew).  NULL and err. */
static gguf_ctx *merged_ctx(struct gfs *fs, struct gguf_error *err) {
    if (!fs->picks)
        return gguf_merge(fs->shards, fs->n_shards, err);
    int64_t n = gfs_n_tensors(fs);
    struct gguf_pick *t = calloc(n ? (size_t)n : 1, sizeof *t);
    if (!t) {
        gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        return NULL;
    }
    for (int64_t g = 0; g < n; g++)
        t[g].ctx = gfs_tensor_ctx(fs, g, &t[g].i, NULL);
    gguf_ctx *m = gguf_merge_picks(fs->ctx, fs->n_shards > 1, t, n, err);
    free(t);
    return m;
}

int gfs_view_layout(struct gfs *fs, struct gguf_error *err) {
    int rc = -1;
    gguf_ctx *m = NULL;
    if (!fs->t_first && gfs_view_number(fs, err) != 0)
        return -1;
    if (!gfs_data_merged(fs))
        return 0;
    /* The merged file's tensor offsets never change (edits touch keys
     * only): lay them out once. */
    if (!(m = merged_ctx(fs, err)))
        goto out;
    int64_t n = gfs_n_tensors(fs);
    struct gfs_layout *l =
        (uint64_t)n < (SIZE_MAX - sizeof *l) / sizeof *l->ext
            ? calloc(1, sizeof *l + (size_t)n * sizeof *l->ext)
            : NULL;
    if (!l) {
        gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        goto out;
    }
    fs->layout = l;
    uint64_t a = gguf_alignment(m);
    for (int64_t g = 0; g < n; g++) {
        int64_t i;
        int s;
        gguf_ctx *c = gfs_tensor_ctx(fs, g, &i, &s);
        l->ext[g].merged_rel = gguf_tensor_rel_offset(m, g);
        l->ext[g].size = gguf_tensor_size(c, i);
        l->ext[g].shard = s;
        l->ext[g].rel = gguf_tensor_rel_offset(c, i);
        uint64_t end = l->ext[g].merged_rel + l->ext[g].size;
        l->size = gguf_align_up(end, a);
    }
    rc = 0;
out:
    gguf_close(m);
    return rc;
}

void gfs_view_layout_free(struct gfs *fs) {
    free(fs->t_first);
    free(fs->layout);
    fs->t_first = NULL;
    fs->layout = NULL;
}

/* The pieces of [off, off+n) of a merged data section, in order: tensor
 * bytes of their files, zeros between (gfs_data_piece's shard -1), at
 * most max of them.  Returns the bytes they cover (less than n when max
 * was reached, or at the section's end).  Caller holds lock (read). */
static uint64_t merged_pieces(const struct gfs *fs, uint64_t off, uint64_t n,
                              struct gfs_data_piece *p, int max, int *np) {
    int64_t nt = gfs_n_tensors(fs), lo = 0, hi = nt;
    uint64_t done = 0;
    *np = 0;
    /* The last extent starting at or before off. */
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (fs->layout->ext[mid].merged_rel <= off)
            lo = mid;
        else
            hi = mid;
    }
    for (int64_t g = lo; g < nt && done < n && *np < max; g++) {
        const struct gfs_extent *e = &fs->layout->ext[g];
        uint64_t pos = off + done;
        uint64_t next =
            g + 1 < nt ? fs->layout->ext[g + 1].merged_rel : fs->layout->size;
        if (pos >= next || pos < e->merged_rel)
            continue; /* before the first tensor: cannot happen */
        uint64_t in = pos - e->merged_rel;
        if (in < e->size) {
            uint64_t m = e->size - in < n - done ? e->size - in : n - done;
            const gguf_ctx *c = fs->shards[e->shard];
            p[(*np)++] = (struct gfs_data_piece){
                e->shard, gguf_data_offset(c) + e->rel + in, m};
            done += m;
            pos += m;
        }
        if (done < n && pos < next && *np < max) { /* padding */
            uint64_t m = next - pos < n - done ? next - pos : n - done;
            p[(*np)++] = (struct gfs_data_piece){-1, 0, m};
            done += m;
        }
    }
    return done;
}

/* Reads [off, off+n) of a merged data section into buf; 0 or errno.
 * Caller holds lock (read). */
static int merged_read(struct gfs *fs, char *buf, size_t n, uint64_t off) {
    struct gfs_data_piece p[16];
    size_t done = 0;
    while (done < n) {
        int np;
        uint64_t got = merged_pieces(fs, off + done, n - done, p, 16, &np);
        if (!got)
            return EIO;
        int r = gfs_data_read_pieces(fs, p, np, buf + done);
        if (r)
            return r;
        done += got;
    }
    return 0;
}

/* Pieces a read of the merged view is served in by descriptor. */
#define GFS_VIEW_PIECES 16

/* The header the view shows now (gfs_text_of_gen's make). */
static int view_make(struct gfs *fs, void *arg, struct gguf_buf *b) {
    (void)arg;
    struct gguf_error gerr = {0};
    uint64_t d2;
    if (gfs_data_merged(fs)) {
        /* The merged file gguf-split --merge would write (or the mix),
         * from the current (edited) keys of the first shard. */
        gguf_ctx *m = merged_ctx(fs, &gerr);
        enum gguf_status st = m ? gguf_write_header(m, 0, b, &gerr) : gerr.code;
        gguf_close(m);
        return st != GGUF_OK ? gfs_errno(&gerr) : 0;
    }
    return gguf_plan_header(fs->ctx, b, &d2, &gerr) != GGUF_OK
               ? gfs_errno(&gerr)
               : 0;
}

struct gfs_text *gfs_view_header(struct gfs *fs, int *err) {
    /* every gfs_text through gfs_text_new: fields zeroed */
    return gfs_text_of_gen(fs, &fs->live->hdr, &fs->live->gen, view_make, NULL,
                           0, err);
}

/* Bytes of the view's data section: a shard set's merged one, else the
 * GGUF's own. */
static uint64_t data_size(const struct gfs *fs) {
    if (gfs_data_merged(fs))
        return fs->layout->size;
    uint64_t d = gguf_data_offset(fs->ctx), fsz = gguf_file_size(fs->ctx);
    return fsz > d ? fsz - d : 0;
}

int gfs_view_size(struct gfs *fs, uint64_t *size) {
    int err = 0;
    struct gfs_text *t = gfs_view_header(fs, &err);
    if (!t)
        return err;
    *size = t->len + data_size(fs);
    gfs_text_put(t);
    return 0;
}

int gfs_view_reopened(struct gfs *fs) {
    pthread_mutex_lock(&fs->text_lock);
    int same = fs->live->opened_gen == fs->generation;
    fs->live->opened_gen = fs->generation;
    pthread_mutex_unlock(&fs->text_lock);
    return same;
}

void gfs_view_span(const struct gfs *fs, size_t hdr_len, uint64_t off,
                   size_t size, struct gfs_view_span *sp) {
    uint64_t end = hdr_len + data_size(fs);
    uint64_t o = off < end ? off : end;
    uint64_t n = end - o < size ? end - o : size;
    sp->hdr_off = o < hdr_len ? (size_t)o : hdr_len;
    sp->hdr_n =
        o < hdr_len ? (hdr_len - o < n ? (size_t)(hdr_len - o) : (size_t)n) : 0;
    sp->data_n = n - sp->hdr_n;
    /* Bytes of the data section follow the header's only once it ends. */
    sp->data_rel = sp->data_n ? o + sp->hdr_n - hdr_len : 0;
    sp->data_pos = gguf_data_offset(fs->ctx) + sp->data_rel;
}

int gfs_view_copy(struct gfs *fs, const struct gfs_text *hdr,
                  const struct gfs_view_span *sp, char *buf) {
    if (sp->hdr_n)
        memcpy(buf, hdr->data + sp->hdr_off, sp->hdr_n);
    if (!sp->data_n)
        return 0;
    return merged_read(fs, buf + sp->hdr_n, sp->data_n, sp->data_rel);
}

/* ---- the row --------------------------------------------------------- */

static const char *live_root_entry(struct gfs *fs, fuse_ino_t *ino) {
    int err = 0;
    uint64_t size = 0;
    if (!fs->live_name || !ino)
        return fs->live_name; /* the header is made for the inode only */
    struct gfs_text *hdr = gfs_view_header(fs, &err);
    if (hdr && gfs_view_size(fs, &size) != 0) {
        gfs_text_put(hdr);
        hdr = NULL;
    }
    *ino = gfs_pt_view_ino(fs, hdr, size); /* the first inode if none */
    if (hdr)
        gfs_vlink_decide(fs, *ino); /* a link while it is the file */
    gfs_text_put(hdr);
    return fs->live_name;
}

static mode_t live_type(struct gfs *fs, fuse_ino_t ino) {
    return gfs_vlink_is(fs, ino) ? S_IFLNK : S_IFREG;
}

static int live_stat(struct gfs *fs, fuse_ino_t ino, struct stat *st) {
    uint64_t size;
    if (gfs_vlink_stat(fs, ino, st))
        return 0;
    int err = gfs_view_size(fs, &size);
    if (err)
        return err;
    gfs_pt_view_size(fs, ino, &size);
    /* Never written through (an open for writing is refused), but 0644:
     * the mode a copy of it gets (cp), the user's own model file. */
    st->st_mode = S_IFREG | 0644;
    st->st_nlink = 1;
    st->st_size = (off_t)size;
    st->st_blocks = (st->st_size + 511) / 512;
    return 0;
}

static int live_open(struct gfs *fs, struct gfs_fh *fh,
                     struct fuse_file_info *fi, int wants_write) {
    (void)wants_write; /* read-only: the core refuses writes */
    int err = 0;
    if (!(fh->text = gfs_view_header(fs, &err)))
        return err;
    fi->noflush = 1;
    if (!gfs_data_merged(fs)) {
        uint64_t d = gguf_data_offset(fs->ctx), fsz = gguf_file_size(fs->ctx);
        fh->drop = fsz > d && !gfs_data_cached(fs, 0, d, fsz - d);
    }
    /* Passthrough, or the page cache of this version's own inode. */
    uint64_t size = 0;
    int bad = gfs_view_size(fs, &size) != 0;
    gfs_pt_view_open(fs, fh, fi, bad ? NULL : fh->text, size,
                     fs->pt ? 0 : gfs_view_reopened(fs));
    return 0;
}

/* The header as at open, then the data section (see gfs_view_span).  One
 * file's section is the GGUF's own, served from its fd; a shard set's
 * merged section gathers pieces of several files, so it is copied.
 * Holds fs->lock (read) for the reply. */
static void live_read(fuse_req_t req, struct gfs *fs, struct gfs_fh *fh,
                      off_t off, size_t size) {
    struct gfs_text *hdr = fh->text;
    struct gfs_view_span sp;
    int drop = fh->drop;

    pthread_rwlock_rdlock(&fs->lock);
    atomic_fetch_add(&hdr->refs, 1);
    gfs_view_span(fs, hdr->len, (uint64_t)off, size, &sp);
    if (!gfs_data_merged(fs)) {
        gfs_data_reply(req, fs, 0, hdr->data + sp.hdr_off, sp.hdr_n,
                       sp.data_pos, sp.data_n, drop);
    } else {
        /* The pieces of the data by descriptor (no copy), when they are
         * few enough to be served at once. */
        struct gfs_data_piece p[GFS_VIEW_PIECES];
        int np = 0;
        uint64_t got = sp.data_n ? merged_pieces(fs, sp.data_rel, sp.data_n, p,
                                                 GFS_VIEW_PIECES, &np)
                                 : 0;
        if (got == sp.data_n) {
            gfs_data_reply_pieces(req, fs, hdr->data + sp.hdr_off, sp.hdr_n, p,
                                  np);
        } else {
            size_t len = sp.hdr_n + sp.data_n;
            char *buf = gfs_tbuf(GFS_TBUF_REPLY, len ? len : 1);
            int err = buf ? gfs_view_copy(fs, hdr, &sp, buf) : ENOMEM;
            if (err)
                fuse_reply_err(req, err);
            else
                fuse_reply_buf(req, buf, len);
        }
    }
    gfs_text_put(hdr);
    pthread_rwlock_unlock(&fs->lock);
}

/* Bytes [off, off + n) of tensor i changed (kinds.h, tensor_changed):
 * the versions of the view served from the page cache drop them
 * (passthrough.c; passthrough ones read the file), or, with no versions
 * kept (fs->pt NULL: out of memory at start), the view's one inode.  A
 * link (viewlink.c) is the file itself. */
static void live_changed(struct gfs *fs, int64_t i, uint64_t off, uint64_t n,
                         int whole) {
    (void)whole;
    int err = 0;
    int64_t j;
    uint64_t at = 0;
    if (!gfs_io(fs) || i < 0)
        return; /* no session: nothing cached */
    pthread_rwlock_rdlock(&fs->lock);
    uint64_t rel =
        fs->layout ? fs->layout->ext[i].merged_rel
                   : gguf_tensor_rel_offset(gfs_tensor_ctx(fs, i, &j, NULL), j);
    struct gfs_text *hdr = NULL;
    if (fs->pt)
        gfs_pt_inval_data(fs, rel + off, n);
    else if ((hdr = gfs_view_header(fs, &err)))
        at = hdr->len + rel + off;
    pthread_rwlock_unlock(&fs->lock);
    if (hdr)
        gfs_devio_inval(gfs_io(fs), gfs_ino_out(fs, GFS_INO_LIVE), (int64_t)at,
                        (int64_t)n);
    gfs_text_put(hdr);
}

/* GGUF_COMMIT_NEW_FILE while the kernel may read the GGUF's file itself
 * for the view: passthrough opens (passthrough.c), a link resolved
 * (viewlink.c). */
static unsigned live_commit_flags(struct gfs *fs) {
    return gfs_pt_commit_flags(fs) | gfs_vlink_commit_flags(fs);
}

int gfs_live_init(struct gfs *fs) {
    fs->live = calloc(1, sizeof *fs->live);
    return fs->live ? 0 : ENOMEM;
}

/* The model's close (no lock: nothing runs): the link's state, the header
 * and fs->live. */
static void live_fini(struct gfs *fs) {
    if (!fs->live)
        return;
    gfs_vlink_free(fs);
    gfs_text_put(fs->live->hdr);
    free(fs->live);
    fs->live = NULL;
}

const struct gfs_kind_ops gfs_kind_live = {
    .kind = GFS_LIVE,
    .ino_lo = GFS_INO_LIVE,
    .ino_hi = GFS_INO_LIVE + 1,
    .ino_lo2 = GFS_INO_VIEW + 1,
    .ino_hi2 = GFS_INO_VIEW_END,
    .root_mode = S_IFREG,
    .root_entry = live_root_entry,
    .root_type = live_type,
    .fini = live_fini,
    .changes = 1,
    .moves = 1,
    .stat = live_stat,
    .open = live_open,
    .read = live_read,
    .tensor_changed = live_changed,
    .commit_flags = live_commit_flags,
    .committed = gfs_pt_committed,
};
