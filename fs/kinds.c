/*
 * kinds.c - the table of node kinds (kinds.h): one line per kind, in the
 * order their root entries are listed.
 */
#include "kinds.h"

static const struct gfs_kind_ops *const table[] = {
    &gfs_kind_metatsv,     &gfs_kind_dir_f32, &gfs_kind_dir_npy,
    &gfs_kind_index,       &gfs_kind_f32,     &gfs_kind_npy,
    &gfs_kind_dir_tensors, &gfs_kind_tensor,  &gfs_kind_dir_extras,
    &gfs_kind_extra,
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
        if (ino >= table[r]->ino_lo && ino < table[r]->ino_hi)
            return table[r]->kind;
    return GFS_NONE;
}

const struct gfs_kind_ops *gfs_kind_root_entry(const struct gfs *fs,
                                               int64_t k) {
    for (size_t r = 0; r < N_ROWS; r++) {
        const struct gfs_kind_ops *row = table[r];
        if (!row->root_name || (row->present && !row->present(fs)))
            continue;
        if (k-- == 0)
            return row;
    }
    return NULL;
}
