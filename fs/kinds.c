/*
 * kinds.c - the table of node kinds (kinds.h): one line per kind; the
 * root lists the rows that are its entries in the table's order.
 */
#include "kinds.h"

#include <errno.h>

static const struct gfs_kind_ops *const table[] = {
    &gfs_kind_root,        /* rootdir.c */
    &gfs_kind_dir_meta,    /* metadir.c */
    &gfs_kind_kv,          /* metafiles.c */
    &gfs_kind_scratch,     /* metafiles.c */
    &gfs_kind_dir_tensors, /* tensors.c */
    &gfs_kind_tensor,      /* tensors.c */
    &gfs_kind_live,        /* liveview.c */
    &gfs_kind_metatsv,     /* metatsv.c */
    &gfs_kind_dir_tok,     /* tokdir.c */
    &gfs_kind_dir_hf,      /* tokdir.c */
    &gfs_kind_tokfile,     /* tokdir.c */
    &gfs_kind_dir_f32,     /* views.c */
    &gfs_kind_dir_npy,     /* views.c */
    &gfs_kind_index,       /* views.c */
    &gfs_kind_f32,         /* views.c */
    &gfs_kind_npy,         /* views.c */
    &gfs_kind_dir_extras,  /* extras.c */
    &gfs_kind_extra,       /* extras.c */
};
#define N_ROWS (sizeof table / sizeof *table)

const struct gfs_kind_ops *gfs_kind_row(enum gfs_kind k) {
    for (size_t r = 0; r < N_ROWS; r++)
        if (table[r]->kind == k)
            return table[r];
    return NULL;
}

enum gfs_kind gfs_kind_of_ino(fuse_ino_t ino) {
    for (size_t r = 0; r < N_ROWS; r++)
        if ((ino >= table[r]->ino_lo && ino < table[r]->ino_hi) ||
            (ino >= table[r]->ino_lo2 && ino < table[r]->ino_hi2))
            return table[r]->kind;
    return GFS_NONE;
}

int gfs_kind_root_entry(struct gfs *fs, int64_t k, const char **name,
                        fuse_ino_t *ino, mode_t *mode) {
    for (size_t r = 0; r < N_ROWS; r++) {
        const struct gfs_kind_ops *row = table[r];
        if (row->present && !row->present(fs))
            continue;
        /* The rows before entry k: their names alone (an inode can
         * cost a rendering: the live view's header). */
        if (row->root_entry)
            *name = row->root_entry(fs, NULL);
        else
            *name = row->root_name;
        if (!*name || k-- > 0)
            continue;
        if (ino && row->root_entry)
            *name = row->root_entry(fs, ino);
        else if (ino)
            *ino = row->ino_lo;
        if (!*name)
            return ENOENT;
        *mode =
            ino && row->root_type ? row->root_type(fs, *ino) : row->root_mode;
        return 0;
    }
    return ENOENT;
}

void gfs_kinds_free(struct gfs *fs) {
    for (size_t r = 0; r < N_ROWS; r++)
        if (table[r]->fini)
            table[r]->fini(fs);
}

/* The fan-outs of the hooks (kinds.h): every row that has one, in table
 * order. */
void gfs_kinds_tensor_changed(struct gfs *fs, int64_t i, uint64_t off,
                              uint64_t n, int whole) {
    for (size_t r = 0; r < N_ROWS; r++)
        if (table[r]->tensor_changed)
            table[r]->tensor_changed(fs, i, off, n, whole);
}

int gfs_kinds_commit_sync(struct gfs *fs, char *what, size_t n,
                          struct gguf_error *err) {
    int e = 0;
    for (size_t r = 0; r < N_ROWS && !e; r++)
        if (table[r]->commit_sync)
            e = table[r]->commit_sync(fs, what, n, err);
    return e;
}

unsigned gfs_kinds_commit_flags(struct gfs *fs) {
    unsigned flags = 0;
    for (size_t r = 0; r < N_ROWS; r++)
        if (table[r]->commit_flags)
            flags |= table[r]->commit_flags(fs);
    return flags;
}

void gfs_kinds_committed(struct gfs *fs) {
    for (size_t r = 0; r < N_ROWS; r++)
        if (table[r]->committed)
            table[r]->committed(fs);
}

int gfs_kind_dir_stat(struct gfs *fs, fuse_ino_t ino, struct stat *st) {
    (void)fs, (void)ino;
    st->st_mode = S_IFDIR | 0555;
    st->st_nlink = 2;
    return 0;
}

int gfs_kind_text_stat(struct gfs_text *t, int err, struct stat *st) {
    if (!t)
        return err;
    st->st_mode = S_IFREG | 0444;
    st->st_nlink = 1;
    st->st_size = (off_t)t->len;
    st->st_blocks = (st->st_size + 511) / 512;
    gfs_text_put(t);
    return 0;
}

int gfs_kind_text_open(struct gfs *fs, struct gfs_fh *fh,
                       struct fuse_file_info *fi, struct gfs_text *t, int err) {
    if (!(fh->text = t))
        return err;
    fi->noflush = 1;
    if (fs->readonly)
        fi->keep_cache = 1; /* never changes */
    else
        fi->direct_io = 1;
    return 0;
}
