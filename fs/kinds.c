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
