/*
 * extras.c - MODEL/ollama/: the other layers of an ollama model (its
 * template, system prompt, parameters, license, messages; its projector
 * and adapters as GGUF files), as rows of the kinds' table (kinds.h).
 * Read-only, the blobs' own bytes.  The store (storefs.c) gives a model
 * its layers when it opens it (gfs_model_args.extras); a model without
 * layers has no ollama/.
 *
 * Each read opens its blob beneath the store again (cat_open_file: no
 * symlink on the path, the file the store's scan saw, else ESTALE) and
 * closes it: these files are small or rarely read, and no descriptor is
 * held between requests.
 */
#include "../kinds.h"
#include "../model.h"

#include "catalog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int present(const struct gfs *fs) {
    return fs->extras && fs->extras->n > 0;
}

static int64_t extra_index(const struct gfs *fs, fuse_ino_t ino) {
    if (!present(fs) || ino < GFS_INO_EXTRA ||
        ino - GFS_INO_EXTRA >= (fuse_ino_t)fs->extras->n)
        return -1;
    return (int64_t)(ino - GFS_INO_EXTRA);
}

static int dir_lookup(struct gfs *fs, fuse_ino_t dir, const char *name,
                      fuse_ino_t *out) {
    (void)dir;
    for (size_t i = 0; present(fs) && i < fs->extras->n; i++)
        if (strcmp(fs->extras->v[i].name, name) == 0) {
            *out = GFS_INO_EXTRA + (fuse_ino_t)i;
            return 0;
        }
    return ENOENT;
}

static int64_t dir_n(struct gfs *fs, fuse_ino_t dir) {
    (void)dir;
    return present(fs) ? (int64_t)fs->extras->n : 0;
}

static int dir_entry(struct gfs *fs, fuse_ino_t dir, int64_t k,
                     struct gfs_dir_pos *pos, struct gguf_buf *name,
                     fuse_ino_t *child, mode_t *mode) {
    (void)dir, (void)pos;
    const char *n = fs->extras->v[k].name;
    name->len = 0;
    if (gguf_buf_add(name, n, strlen(n) + 1) != GGUF_OK)
        return -1;
    *child = GFS_INO_EXTRA + (fuse_ino_t)k;
    *mode = S_IFREG;
    return 1;
}

static int file_stat(struct gfs *fs, fuse_ino_t ino, struct stat *st) {
    int64_t i = extra_index(fs, ino);
    if (i < 0)
        return ENOENT;
    st->st_mode = S_IFREG | 0444;
    st->st_nlink = 1;
    st->st_size = (off_t)fs->extras->v[i].file.size;
    st->st_blocks = (st->st_size + 511) / 512;
    return 0;
}

static int file_open(struct gfs *fs, struct gfs_fh *fh,
                     struct fuse_file_info *fi, int wants_write) {
    (void)wants_write; /* read-only: the core refuses writes */
    int64_t i = extra_index(fs, fh->ino);
    if (i < 0)
        return ENOENT;
    fh->size = fs->extras->v[i].file.size;
    fi->keep_cache = 1; /* a blob named by its hash never changes */
    return 0;
}

static void file_read(fuse_req_t req, struct gfs *fs, struct gfs_fh *fh,
                      off_t off, size_t size) {
    int64_t i = extra_index(fs, fh->ino);
    uint64_t o = (uint64_t)off < fh->size ? (uint64_t)off : fh->size;
    size_t n = fh->size - o < size ? (size_t)(fh->size - o) : size;
    char *buf = NULL;
    ssize_t got = 0;
    int err = 0;
    if (i < 0) {
        err = ENOENT;
    } else if (n > 0) {
        int fd =
            cat_open_file(fs->extras->dirfd, &fs->extras->v[i].file, O_RDONLY);
        if (fd < 0)
            err = errno;
        else if (!(buf = malloc(n)))
            err = ENOMEM;
        else if ((got = pread(fd, buf, n, (off_t)o)) < 0)
            err = errno;
        if (fd >= 0)
            close(fd);
    }
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_buf(req, buf, (size_t)got);
    free(buf);
}

const struct gfs_kind_ops gfs_kind_dir_extras = {
    .kind = GFS_DIR_EXTRAS,
    .ino_lo = GFS_INO_DIR_EXTRAS,
    .ino_hi = GFS_INO_DIR_EXTRAS + 1,
    .root_name = "ollama",
    .root_mode = S_IFDIR,
    .present = present,
    .stat = gfs_kind_dir_stat,
    .lookup = dir_lookup,
    .n_entries = dir_n,
    .dirent = dir_entry,
};

const struct gfs_kind_ops gfs_kind_extra = {
    .kind = GFS_EXTRA,
    .ino_lo = GFS_INO_EXTRA,
    .ino_hi = GFS_INO_EXTRA_END,
    .stat = file_stat,
    .open = file_open,
    .read = file_read,
};
