/*
 * tensors.c - tensors/ and its files, as rows of the kinds' table
 * (kinds.h): tensors/NAME is tensor NAME's bytes, served from the GGUF's
 * own offsets (by descriptor for a local file: source/source.h), read
 * only, its size ggml's (gfs_tensor_bytes).  Names are the library's
 * escaped tensor names (tree.c's name index finds them).  Their extended
 * attributes (the hashes are hashes.c's):
 *   user.gguf.type    the ggml type ("q4_K")
 *   user.gguf.shape   dimensions in file order, "4096,32000"
 *   user.gguf.offset  absolute offset of the data in the GGUF
 *   user.gguf.size    bytes of data
 *   user.gguf.file    a shard set's or a mix's: the file holding it
 *   user.gguf.source  that file (or URL) and the offset there, "PATH@OFF"
 */
#include "kinds.h"
#include "mounts.h"
#include "source/source.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int dir_lookup(struct gfs *fs, fuse_ino_t dir, const char *name,
                      fuse_ino_t *out) {
    (void)dir;
    int64_t i = gfs_find_by_fname(fs, name, 1);
    if (i < 0)
        return ENOENT;
    *out = GFS_INO_TENSOR + (fuse_ino_t)i;
    return 0;
}

static int64_t dir_n(struct gfs *fs, fuse_ino_t dir) {
    (void)dir;
    return gfs_n_tensors(fs);
}

static int dir_entry(struct gfs *fs, fuse_ino_t dir, int64_t k,
                     struct gfs_dir_pos *pos, struct gguf_buf *name,
                     fuse_ino_t *child, mode_t *mode) {
    (void)dir, (void)pos;
    if (gfs_tensor_fname(fs, k, name))
        return -1;
    *child = GFS_INO_TENSOR + (fuse_ino_t)k;
    *mode = S_IFREG;
    return 1;
}

/* ---- writes (issue 24) ------------------------------------------------
 * A read-write mount of a local file writes tensors into the GGUF itself:
 * an open without O_TRUNC in place (pwrite at the tensor's offset, as a
 * regular file: what reached the disk is what a crash leaves; fsync is
 * fdatasync of the GGUF), an open with O_TRUNC (cp, a whole tensor) as a
 * replace: its writes go to a journal beside the GGUF and are put in place
 * whole at flush (close) or fsync, crash-safely (gguf/tensorjnl.c: the old
 * or the new tensor, never a mix).  Writes stay within the tensor (EFBIG
 * past it); its size never changes (truncate to another size EINVAL).
 * Hashes are computed again after a write; the views' and the live view's
 * kernel caches are dropped when a writing open is closed. */

/* Why tensors of file shard cannot be written on this mount, or NULL. */
static const char *unwritable(const struct gfs *fs, int shard) {
    if (fs->readonly)
        return "the mount is read-only";
    if (gfs_overlay_where(fs) || fs->picks || !fs->file)
        return "an overlay mount (a mix, a store's model) never writes the "
               "model, and tensors are not kept in overlays yet";
    if (shard != 0)
        return "only the first file of a shard set is open for writing";
    return NULL;
}

static int tensor_stat(struct gfs *fs, fuse_ino_t ino, struct stat *st) {
    int64_t i = gfs_tensor_index(fs, ino);
    if (i < 0)
        return ENOENT;
    int64_t j;
    int shard;
    (void)gfs_tensor_ctx(fs, i, &j, &shard);
    st->st_mode = S_IFREG | (unwritable(fs, shard) ? 0444 : 0644);
    st->st_nlink = 1;
    st->st_size = (off_t)gfs_tensor_bytes(fs, i);
    st->st_blocks = (st->st_size + 511) / 512;
    return 0;
}

static int tensor_open(struct gfs *fs, struct gfs_fh *fh,
                       struct fuse_file_info *fi, int wants_write) {
    int64_t i = gfs_tensor_index(fs, fh->ino);
    if (i < 0)
        return ENOENT;
    int64_t j;
    gguf_ctx *c = gfs_tensor_ctx(fs, i, &j, &fh->shard);
    fh->rel = gguf_tensor_rel_offset(c, j);
    fh->size = gfs_tensor_bytes(fs, i);
    if (wants_write) {
        const char *why = unwritable(fs, fh->shard);
        if (why) {
            gfs_log(fs, "tensors/%s: not writable: %s",
                    gguf_tensor_name(c, j, NULL), why);
            return EROFS;
        }
        fh->writable = 1;
        /* A replace's bytes are not the file's until flush: no page of
         * them may be cached for other readers meanwhile. */
        fh->replace = (fi->flags & O_TRUNC) != 0;
        fi->direct_io = fh->replace;
        return 0;
    }
    /* Tensor bytes never change while mounted: keep the page cache.  Then
     * the GGUF's own copy of bytes that were not cached before is dead
     * weight (the kernel would hold every byte twice). */
    fi->keep_cache = 1;
    fi->noflush = 1;
    fh->drop =
        !gfs_data_cached(fs, fh->shard, gguf_tensor_offset(c, j), fh->size);
    if (fs->tensor_dio) {
        /* -o tensor_direct_io: each read is one request served from the
         * GGUF, no FUSE page cache (so nothing to drop from the GGUF's);
         * an mmap still works (FUSE_DIRECT_IO_ALLOW_MMAP, passthrough.c)
         * through a cache dropped at each mmap.  ggufs(1) has the
         * figures behind the default (off). */
        fi->direct_io = 1;
        fi->keep_cache = 0;
        fh->drop = 0;
    }
    return 0;
}

/* Holds fs->lock (read) for the reply: a commit must not move the data
 * start or replace the descriptor meanwhile. */
static void tensor_read(fuse_req_t req, struct gfs *fs, struct gfs_fh *fh,
                        off_t off, size_t size) {
    uint64_t o = (uint64_t)off < fh->size ? (uint64_t)off : fh->size;
    uint64_t n = fh->size - o < size ? fh->size - o : size;
    pthread_rwlock_rdlock(&fs->lock);
    gguf_ctx *c = fs->shards[fh->shard];
    uint64_t pos = gguf_data_offset(c) + fh->rel + o;
    gfs_data_reply(req, fs, fh->shard, NULL, 0, pos, n, fh->drop);
    pthread_rwlock_unlock(&fs->lock);
}

/* A tensor's size never changes: truncate to it does nothing (O_TRUNC
 * without atomic_o_trunc would come as truncate to 0: refused too). */
static int tensor_truncate(struct gfs *fs, struct gfs_fh *fh, fuse_ino_t ino,
                           off_t size) {
    (void)fh;
    int64_t i = gfs_tensor_index(fs, ino);
    if (i < 0)
        return ENOENT;
    return (uint64_t)size == gfs_tensor_bytes(fs, i) ? 0 : EINVAL;
}

/* The tensor's absolute offset in the GGUF now (a commit of the header
 * may move the data).  Caller holds fs->lock (read). */
static uint64_t abs_off(const struct gfs *fs, const struct gfs_fh *fh) {
    return gguf_data_offset(fs->shards[fh->shard]) + fh->rel;
}

/* n bytes at pos of fd: 0 or errno. */
static int pwrite_all(int fd, const char *p, size_t n, uint64_t pos) {
    while (n) {
        ssize_t w = pwrite(fd, p, n, (off_t)pos);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : EIO;
        p += w, n -= (size_t)w, pos += (uint64_t)w;
    }
    return 0;
}

static int tensor_write(struct gfs *fs, struct gfs_fh *fh, const char *p,
                        size_t n, off_t off) {
    struct gguf_error gerr = {0};
    int err = 0;
    if (off < 0 || (uint64_t)off > fh->size || n > fh->size - (uint64_t)off)
        return EFBIG;
    pthread_mutex_lock(&fh->mu);
    pthread_rwlock_rdlock(&fs->lock);
    if (fh->replace) {
        if (!fh->tj &&
            gguf_tjnl_begin(fs->file, abs_off(fs, fh), fh->size,
                            (struct gguf_tjnl **)&fh->tj, &gerr) != GGUF_OK)
            err = gfs_errno(&gerr);
        else if (gguf_tjnl_write(fh->tj, (uint64_t)off, p, n, &gerr) != GGUF_OK)
            err = gfs_errno(&gerr);
    } else {
        err =
            pwrite_all(gguf_fd(fs->ctx), p, n, abs_off(fs, fh) + (uint64_t)off);
    }
    pthread_rwlock_unlock(&fs->lock);
    if (err && gerr.msg[0])
        gfs_log(fs, "%s: writing a tensor: %s", fs->path, gerr.msg);
    fh->wrote |= !err;
    if (!err)
        atomic_store(&fs->written[gfs_tensor_index(fs, fh->ino)], 1);
    pthread_mutex_unlock(&fh->mu);
    return err;
}

int gfs_tensors_written_note(struct gfs *fs, char *msg, size_t size) {
    int64_t n = gfs_n_tensors(fs), named = 0, more = 0;
    size_t used = strlen(msg);
    struct gguf_buf name = {0};
    for (int64_t i = 0; fs->written && i < n; i++) {
        if (!atomic_exchange(&fs->written[i], 0))
            continue;
        if (gfs_tensor_fname(fs, i, &name) == 0 &&
            used + name.len + 40 < size) {
            used += (size_t)snprintf(
                msg + used, size - used, "%s%s",
                named++ ? ", " : "; tensors written: ", name.p);
        } else {
            more++;
        }
    }
    gguf_buf_free(&name);
    if (more && used < size)
        snprintf(msg + used, size - used, "%s%lld more",
                 named ? " and " : "; tensors written: ", (long long)more);
    if (!named && !more)
        return 0;
    /* In-place writes reach the disk here at the latest. */
    return fdatasync(gguf_fd(fs->ctx)) == 0 ? 0 : errno;
}

/* A replace's bytes put in place (fh->mu held): 0 or errno. */
static int put_in_place(struct gfs *fs, struct gfs_fh *fh) {
    struct gguf_error gerr = {0};
    if (!fh->tj)
        return 0;
    pthread_rwlock_rdlock(&fs->lock);
    enum gguf_status st =
        gguf_tjnl_commit(fh->tj, gguf_fd(fs->ctx), abs_off(fs, fh), &gerr);
    pthread_rwlock_unlock(&fs->lock);
    fh->tj = NULL; /* freed by the commit; a later write begins anew */
    if (st == GGUF_OK)
        return 0;
    gfs_log(fs, "%s: replacing a tensor: %s", fs->path, gerr.msg);
    return gfs_errno(&gerr);
}

/* Caches of what the written tensor shows elsewhere, dropped: its own
 * (a replace wrote around it), the live view's, f32/ and npy/, its hash. */
static void forget_written(struct gfs *fs, struct gfs_fh *fh) {
    int64_t i = gfs_tensor_index(fs, fh->ino);
    struct fuse_session *se = fs->mount ? fs->mount->se : NULL;
    if (!fh->wrote || i < 0)
        return;
    gfs_hashes_forget(fs, i);
    if (!se)
        return;
    fuse_ino_t inos[] = {fh->ino, GFS_INO_LIVE, GFS_INO_F32 + (fuse_ino_t)i,
                         GFS_INO_NPY + (fuse_ino_t)i};
    for (size_t k = 0; k < sizeof inos / sizeof *inos; k++)
        (void)fuse_lowlevel_notify_inval_inode(se, gfs_ino_out(fs, inos[k]), 0,
                                               0);
}

static int tensor_flush(struct gfs *fs, struct gfs_fh *fh) {
    pthread_mutex_lock(&fh->mu);
    int err = put_in_place(fs, fh);
    pthread_mutex_unlock(&fh->mu);
    return err;
}

static int tensor_fsync(struct gfs *fs, fuse_req_t req, struct gfs_fh *fh) {
    (void)req;
    pthread_mutex_lock(&fh->mu);
    int err = put_in_place(fs, fh);
    pthread_rwlock_rdlock(&fs->lock);
    if (!err && fh->writable && fdatasync(gguf_fd(fs->ctx)) != 0)
        err = errno;
    pthread_rwlock_unlock(&fs->lock);
    pthread_mutex_unlock(&fh->mu);
    return err;
}

static void tensor_release(struct gfs *fs, struct gfs_fh *fh) {
    pthread_mutex_lock(&fh->mu);
    if (fh->tj) { /* written after the last flush: put in place too */
        int err = put_in_place(fs, fh);
        if (err)
            gfs_log(fs, "tensors: a replace closed without flush failed: %s",
                    strerror(err));
    }
    pthread_mutex_unlock(&fh->mu);
    forget_written(fs, fh);
}

static int tensor_attr(struct gfs *fs, int64_t g, const char *name,
                       struct gguf_buf *out) {
    char tmp[64];
    int64_t i;
    int shard;
    gguf_ctx *c = gfs_tensor_ctx(fs, g, &i, &shard);
    if (strcmp(name, "user.gguf.type") == 0) {
        uint32_t ty = gguf_tensor_type(c, i);
        const char *tn = gguf_ggml_type_name(ty);
        if (!tn) {
            snprintf(tmp, sizeof tmp, "type%" PRIu32, ty);
            tn = tmp;
        }
        return gfs_add_str(out, tn);
    }
    if (strcmp(name, "user.gguf.shape") == 0) {
        uint32_t nd = gguf_tensor_n_dims(c, i);
        const int64_t *ne = gguf_tensor_ne(c, i);
        for (uint32_t d = 0; d < nd; d++) {
            snprintf(tmp, sizeof tmp, "%s%" PRId64, d ? "," : "", ne[d]);
            if (gfs_add_str(out, tmp))
                return ENOMEM;
        }
        return 0;
    }
    if (strcmp(name, "user.gguf.offset") == 0) {
        snprintf(tmp, sizeof tmp, "%" PRIu64, gguf_tensor_offset(c, i));
        return gfs_add_str(out, tmp);
    }
    if (strcmp(name, "user.gguf.file") == 0 && gfs_view_merged(fs))
        return gfs_add_str(out, gguf_path(c));
    if (strcmp(name, "user.gguf.source") == 0) {
        snprintf(tmp, sizeof tmp, "@%" PRIu64, gguf_tensor_offset(c, i));
        return gfs_add_str(out, gguf_path(c)) || gfs_add_str(out, tmp) ? ENOMEM
                                                                       : 0;
    }
    if (strcmp(name, "user.gguf.size") == 0) {
        snprintf(tmp, sizeof tmp, "%" PRIu64, gfs_tensor_bytes(fs, g));
        return gfs_add_str(out, tmp);
    }
    return ENODATA;
}

static int tensor_getxattr(struct gfs *fs, fuse_ino_t ino, const char *name,
                           struct gguf_buf *out) {
    int64_t i = gfs_tensor_index(fs, ino);
    return i < 0 ? ENOENT : tensor_attr(fs, i, name, out);
}

static int tensor_listxattr(struct gfs *fs, fuse_ino_t ino,
                            struct gguf_buf *out) {
    static const char names[] = "user.gguf.type\0user.gguf.shape\0"
                                "user.gguf.offset\0user.gguf.size\0"
                                "user.gguf.source";
    if (gfs_tensor_index(fs, ino) < 0)
        return ENOENT;
    if (gguf_buf_add(out, names, sizeof names) != GGUF_OK)
        return ENOMEM;
    if (gfs_view_merged(fs) &&
        gguf_buf_add(out, "user.gguf.file", 15) != GGUF_OK)
        return ENOMEM;
    return 0;
}

const struct gfs_kind_ops gfs_kind_dir_tensors = {
    .kind = GFS_DIR_TENSORS,
    .ino_lo = GFS_INO_TENSORS,
    .ino_hi = GFS_INO_TENSORS + 1,
    .root_name = "tensors",
    .root_mode = S_IFDIR,
    .stat = gfs_kind_dir_stat,
    .lookup = dir_lookup,
    .n_entries = dir_n,
    .dirent = dir_entry,
};

const struct gfs_kind_ops gfs_kind_tensor = {
    .kind = GFS_TENSOR,
    .ino_lo = GFS_INO_TENSOR,
    .ino_hi = GFS_INO_KV,
    .stat = tensor_stat,
    .open = tensor_open,
    .read = tensor_read,
    .write = tensor_write,
    .truncate = tensor_truncate,
    .flush = tensor_flush,
    .release = tensor_release,
    .fsync = tensor_fsync,
    .getxattr = tensor_getxattr,
    .listxattr = tensor_listxattr,
};
