/*
 * kinds.c - the table of node kinds (kinds.h): one line per kind; the
 * root lists the rows that are its entries in the table's order.  Each
 * model is given it (fs->kinds, gfs_kinds_set) and node/rows.c walks it:
 * only this file, above the rows, names them.
 */
#include "kinds.h"

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

void gfs_kinds_set(struct gfs *fs) {
    fs->kinds = table;
    fs->n_kinds = sizeof table / sizeof *table;
}
