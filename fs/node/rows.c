/*
 * rows.c - which row of the kinds' table serves a node: the table the
 * model was given (fs->kinds, set by model.c from kinds.c's, which names
 * the rows), walked here without naming any row, so that the core's
 * bottom calls no file above it (node.h).
 */
#include "../kinds.h"
#include "../base/devio.h"
#include "../base/mount.h"

#include <errno.h>

const struct gfs_kind_ops *gfs_kind_row_of(const struct gfs *fs,
                                           fuse_ino_t ino) {
    for (size_t r = 0; r < fs->n_kinds; r++) {
        const struct gfs_kind_ops *row = fs->kinds[r];
        if ((ino >= row->ino_lo && ino < row->ino_hi) ||
            (ino >= row->ino_lo2 && ino < row->ino_hi2))
            return row;
    }
    return NULL;
}

enum gfs_kind gfs_kind(const struct gfs *fs, fuse_ino_t ino) {
    const struct gfs_kind_ops *row = gfs_kind_row_of(fs, ino);
    return row ? row->kind : GFS_NONE;
}

const struct gfs_kind_ops *gfs_kind_row(const struct gfs *fs, enum gfs_kind k) {
    for (size_t r = 0; r < fs->n_kinds; r++)
        if (fs->kinds[r]->kind == k)
            return fs->kinds[r];
    return NULL;
}

int gfs_kind_root_entry(struct gfs *fs, int64_t k, const char **name,
                        fuse_ino_t *ino, mode_t *mode) {
    for (size_t r = 0; r < fs->n_kinds; r++) {
        const struct gfs_kind_ops *row = fs->kinds[r];
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
    for (size_t r = 0; r < fs->n_kinds; r++)
        if (fs->kinds[r]->fini)
            fs->kinds[r]->fini(fs);
}

/* The fan-outs of the hooks (kinds.h): every row of fs->kinds that has
 * one, in table order; named by no row, so a wing, edits/ or source/ tells
 * the others through them without calling up or across. */
void gfs_kinds_tensor_changed(struct gfs *fs, int64_t i, uint64_t off,
                              uint64_t n, int whole) {
    for (size_t r = 0; r < fs->n_kinds; r++)
        if (fs->kinds[r]->tensor_changed)
            fs->kinds[r]->tensor_changed(fs, i, off, n, whole);
}

int gfs_kinds_commit_sync(struct gfs *fs, char *what, size_t n,
                          struct gguf_error *err) {
    int e = 0;
    for (size_t r = 0; r < fs->n_kinds && !e; r++)
        if (fs->kinds[r]->commit_sync)
            e = fs->kinds[r]->commit_sync(fs, what, n, err);
    return e;
}

unsigned gfs_kinds_commit_flags(struct gfs *fs) {
    unsigned flags = 0;
    for (size_t r = 0; r < fs->n_kinds; r++)
        if (fs->kinds[r]->commit_flags)
            flags |= fs->kinds[r]->commit_flags(fs);
    return flags;
}

void gfs_kinds_committed(struct gfs *fs) {
    for (size_t r = 0; r < fs->n_kinds; r++)
        if (fs->kinds[r]->committed)
            fs->kinds[r]->committed(fs);
}

void gfs_kinds_edited(struct gfs *fs) {
    for (size_t r = 0; r < fs->n_kinds && !fs->readonly; r++) {
        const struct gfs_kind_ops *row = fs->kinds[r];
        for (fuse_ino_t i = row->ino_lo; row->told && i < row->ino_hi; i++)
            gfs_devio_inval(gfs_io(fs), gfs_ino_out(fs, i), -1, 0);
    }
}
