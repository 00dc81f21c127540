/*
 * views.c - the converted views of a mount: f32/NAME (a tensor's values
 * as little-endian float32, in ggml's element order), npy/NAME.npy (the
 * same after a NumPy format 1.0 header) and index.tsv (hashes.c renders
 * it): their inodes, names, attributes, opens and reads.
 *
 * A read of a byte range converts only the blocks that cover it
 * (gfs_vconv_get, vconv.c), into a buffer the size of the request plus at
 * most two blocks: memory stays bounded by the request size, whatever the
 * tensor's.
 *
 * f32/ and npy/ files are opened with direct I/O when the kernel can still
 * map such files shared (FUSE_DIRECT_IO_ALLOW_MMAP, asked for in
 * passthrough.c): each read() becomes one request answered straight into
 * the reader's buffer.  Through the page cache the same read costs a
 * second copy, an allocation of fresh page-cache pages for every 4 KiB
 * (which on this kind of VM sometimes costs the daemon 2 CPU-s/GB, the
 * host backing each page anew) and fills the cache with values 4 to 8
 * times the size of the tensor's blocks.  ggufs(1), SPEED, has the
 * figures.  A mapping still goes through the page cache (the kernel drops
 * the file's cache at each mmap).  index.tsv is small: cached.
 *
 * Which tensors have a view is decided once, at mount (gfs_views_init):
 * those whose type ggufs's own code or ggml's converts (gguf.h),
 * whose shape fits the type and whose data holds all its blocks.
 */
#include "views.h"
#include "../base/devio.h"
#include "../kinds.h"
#include "../source/source.h"
#include "../base/mount.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#define NPY_SUFFIX ".npy"

static enum gfs_kind gfs_views_kind(fuse_ino_t ino) {
    switch (ino) {
    case GFS_INO_DIR_F32:
        return GFS_DIR_F32;
    case GFS_INO_DIR_NPY:
        return GFS_DIR_NPY;
    case GFS_INO_INDEX:
        return GFS_INDEX;
    default:
        break;
    }
    if (ino >= GFS_INO_F32 && ino < GFS_INO_NPY)
        return GFS_F32;
    if (ino >= GFS_INO_NPY && ino < GFS_INO_NPY + (UINT64_C(1) << 32))
        return GFS_NPY;
    return GFS_NONE;
}

/* Tensor index of a view inode that has a view, else -1. */
static int64_t view_index(const struct gfs *fs, fuse_ino_t ino) {
    const struct gfs_views *v = fs->views;
    enum gfs_kind k = gfs_views_kind(ino);
    uint64_t i = k == GFS_F32   ? ino - GFS_INO_F32
                 : k == GFS_NPY ? ino - GFS_INO_NPY
                                : UINT64_MAX;
    if (!v || i >= (uint64_t)v->n || !v->t[i].dq.to_float)
        return -1;
    return (int64_t)i;
}

/* NumPy format 1.0: magic, version 1.0, a uint16 header length, then a
 * Python dict literal padded with spaces and ended by '\n' so that the
 * data starts at a multiple of 64.  The shape is ggml's ne reversed
 * (ne[0], the fastest, is NumPy's last axis in C order). */
size_t gfs_npy_header(const struct gfs *fs, int64_t i, char *buf) {
    int64_t j;
    gguf_ctx *c = gfs_tensor_ctx(fs, i, &j, NULL);
    uint32_t nd = gguf_tensor_n_dims(c, j);
    const int64_t *ne = gguf_tensor_ne(c, j);
    char shape[128] = "";
    size_t n = 0;
    for (uint32_t d = nd; d-- > 0;)
        n += (size_t)snprintf(shape + n, sizeof shape - n, "%" PRId64 ", ",
                              ne[d]);
    if (nd > 1)
        shape[n - 2] = '\0'; /* (a, b) but (a,) */
    else if (nd == 1)
        shape[n - 1] = '\0';
    int len = snprintf(buf + 10, 200,
                       "{'descr': '<f4', 'fortran_order': False, 'shape': "
                       "(%s), }",
                       shape);
    size_t total = (10 + (size_t)len + 1 + 63) / 64 * 64;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    size_t hl = total - 10;
    buf[8] = (char)(hl & 0xff);
    buf[9] = (char)(hl >> 8);
    memset(buf + 10 + len, ' ', total - 10 - (size_t)len - 1);
    buf[total - 1] = '\n';
    return total;
}

/* Whether f32/ and npy/ files are opened in direct I/O (gfs_views_open):
 * only where the kernel still lets them be mapped. */
static int views_direct(struct gfs *fs) {
    return gfs_devio_dio_mmap(gfs_io(fs));
}

/* st_blksize of f32/ and npy/ files in direct I/O: each read(2) of such a
 * file is one request to the daemon, and programs that size their reads
 * by st_blksize (Python's io, coreutils' cat and cp) then read 1 MiB at a
 * time instead of 4 KiB (one request each, at a fifth of the speed). */
#define VIEW_BLKSIZE (1 << 20)

static int views_stat(struct gfs *fs, fuse_ino_t ino, struct stat *st) {
    int64_t i;
    switch (gfs_views_kind(ino)) {
    case GFS_DIR_F32:
    case GFS_DIR_NPY:
        return gfs_kind_dir_stat(fs, ino, st);
    case GFS_INDEX: {
        int err = 0;
        struct gfs_text *t = gfs_views_index(fs, &err);
        if (!t)
            return err;
        st->st_mode = S_IFREG | 0444;
        st->st_nlink = 1;
        st->st_size = (off_t)t->len;
        gfs_text_put(t);
        break;
    }
    case GFS_F32:
    case GFS_NPY:
        if ((i = view_index(fs, ino)) < 0)
            return ENOENT;
        st->st_mode = S_IFREG | 0444;
        st->st_nlink = 1;
        st->st_size = (off_t)(fs->views->t[i].elems * 4);
        if (gfs_views_kind(ino) == GFS_NPY)
            st->st_size += fs->views->t[i].hdr;
        if (views_direct(fs))
            st->st_blksize = VIEW_BLKSIZE;
        break;
    default:
        return ENOENT;
    }
    st->st_blocks = (st->st_size + 511) / 512;
    return 0;
}

static int views_lookup(struct gfs *fs, fuse_ino_t parent, const char *name,
                        fuse_ino_t *out) {
    enum gfs_kind k = gfs_views_kind(parent);
    size_t len = strlen(name), sl = strlen(NPY_SUFFIX);
    struct gguf_buf base = {0};
    if (k == GFS_DIR_NPY) {
        if (len <= sl || strcmp(name + len - sl, NPY_SUFFIX) != 0)
            return ENOENT;
        len -= sl;
    }
    if (gguf_buf_add(&base, name, len) != GGUF_OK ||
        gguf_buf_add(&base, "", 1) != GGUF_OK) {
        gguf_buf_free(&base);
        return ENOMEM;
    }
    fuse_ino_t tino = 0;
    int err = gfs_lookup_name(fs, GFS_INO_TENSORS, (char *)base.p, &tino);
    gguf_buf_free(&base);
    if (err)
        return err;
    fuse_ino_t ino = (k == GFS_DIR_NPY ? GFS_INO_NPY : GFS_INO_F32) +
                     (tino - GFS_INO_TENSOR);
    if (view_index(fs, ino) < 0)
        return ENOENT;
    *out = ino;
    return 0;
}

/* Entry k of f32/ or npy/ (dir): 1 and its name and inode, or 0 when
 * tensor k has no view (skipped); -1 out of memory. */
static int views_dirent(struct gfs *fs, fuse_ino_t dir, int64_t k,
                        struct gfs_dir_pos *pos, struct gguf_buf *name,
                        fuse_ino_t *child, mode_t *mode) {
    (void)pos;
    enum gfs_kind kind = gfs_views_kind(dir);
    *mode = S_IFREG;
    fuse_ino_t ino =
        (kind == GFS_DIR_NPY ? GFS_INO_NPY : GFS_INO_F32) + (fuse_ino_t)k;
    if (view_index(fs, ino) < 0)
        return 0;
    if (gfs_tensor_fname(fs, k, name))
        return -1;
    if (kind == GFS_DIR_NPY) {
        name->len--; /* the NUL */
        if (gguf_buf_add(name, NPY_SUFFIX, sizeof NPY_SUFFIX) != GGUF_OK)
            return -1;
    }
    *child = ino;
    return 1;
}

static int views_open(struct gfs *fs, struct gfs_fh *fh,
                      struct fuse_file_info *fi, int wants_write) {
    (void)wants_write; /* read-only: the core refuses writes */
    int err = 0;
    if (fh->kind == GFS_INDEX) {
        if (!(fh->text = gfs_views_index(fs, &err)))
            return err;
    } else if (view_index(fs, fh->ino) < 0) {
        return ENOENT;
    }
    /* The values never change while mounted. */
    fi->keep_cache = 1;
    fi->noflush = 1;
    if (fh->kind != GFS_INDEX && views_direct(fs)) {
        fi->direct_io = 1;
        fi->keep_cache = 0;
    }
    return 0;
}

/* Replies with bytes [off, off + size) of tensor i's npy file (npy) or
 * f32 file: the header's part from memory, the values' part converted
 * from the blocks that cover it. */
static void read_values(fuse_req_t req, struct gfs *fs, int64_t i, int npy,
                        uint64_t off, size_t size) {
    const struct gfs_vt *vt = &fs->views->t[i];
    char hdr[256];
    size_t hl = npy ? gfs_npy_header(fs, i, hdr) : 0;
    uint64_t total = hl + vt->elems * 4;
    uint64_t a = off < total ? off : total;
    uint64_t b = total - a < size ? total : a + size;
    struct iovec iov[2] = {{0}};
    int n_iov = 0;
    if (a < hl) {
        iov[n_iov].iov_base = hdr + a;
        iov[n_iov++].iov_len = (b < hl ? b : hl) - a;
    }
    struct gfs_vout out = {0};
    uint64_t da = a > hl ? a - hl : 0, db = b > hl ? b - hl : 0;
    if (db > da) {
        uint64_t bb = (uint64_t)vt->dq.blck * 4; /* bytes of floats */
        uint64_t b0 = da / bb, b1 = (db + bb - 1) / bb;
        int err = gfs_vconv_get(fs, i, b0, b1, &out);
        if (err) {
            fuse_reply_err(req, err);
            return;
        }
        iov[n_iov].iov_base = (char *)out.p + (da - b0 * bb);
        iov[n_iov++].iov_len = (size_t)(db - da);
    }
    fuse_reply_iov(req, iov, n_iov);
    gfs_vconv_put(fs, &out);
}

static void views_read_locked(fuse_req_t req, struct gfs *fs, struct gfs_fh *fh,
                              off_t off, size_t size) {
    if (fh->kind == GFS_INDEX) {
        const struct gfs_text *t = fh->text;
        size_t o = (uint64_t)off < t->len ? (size_t)off : t->len;
        fuse_reply_buf(req, t->data + o, t->len - o < size ? t->len - o : size);
        return;
    }
    int64_t i = view_index(fs, fh->ino);
    if (i < 0)
        fuse_reply_err(req, ENOENT);
    else
        read_values(req, fs, i, fh->kind == GFS_NPY, (uint64_t)off, size);
}

/* ---- at mount -------------------------------------------------------- */

/* Decides tensor i's view with converters of g (may be NULL). */
static void decide(struct gfs *fs, const gguf_ggml *g, int64_t i,
                   struct gfs_vt *vt) {
    int64_t j;
    gguf_ctx *c = gfs_tensor_ctx(fs, i, &j, NULL);
    uint32_t type = gguf_tensor_type(c, j);
    memset(vt, 0, sizeof *vt);
    if (!gguf_dq_find(g, type, &vt->dq) ||
        !gguf_dq_extent(g, type, GGUF_MAX_DIMS, gguf_tensor_ne(c, j),
                        &vt->elems, &vt->bytes) ||
        vt->bytes > gguf_tensor_size(c, j) ||
        vt->elems > (UINT64_MAX - 4096) / 4) {
        memset(vt, 0, sizeof *vt);
        return;
    }
    char hdr[256];
    vt->hdr = (uint32_t)gfs_npy_header(fs, i, hdr);
}

/* Integer tensors (i8 to i64: ids 24-27) hold no weights: they have no
 * float view and nobody misses one. */
static int is_integer(struct gfs *fs, int64_t i) {
    int64_t j;
    gguf_ctx *c = gfs_tensor_ctx(fs, i, &j, NULL);
    uint32_t ty = gguf_tensor_type(c, j);
    return ty >= 24 && ty <= 27;
}

/* The types of the tensors without a view ("q4_K, q6_K"), and how many;
 * integer tensors left out. */
static int64_t missing(struct gfs *fs, char *types, size_t n) {
    int64_t count = 0;
    size_t used = 0;
    types[0] = '\0';
    for (int64_t i = 0; i < fs->views->n; i++) {
        if (fs->views->t[i].dq.to_float || is_integer(fs, i))
            continue;
        count++;
        int64_t j;
        gguf_ctx *c = gfs_tensor_ctx(fs, i, &j, NULL);
        uint32_t ty = gguf_tensor_type(c, j);
        const char *nm = NULL;
        uint32_t bl, sz;
        char tmp[32];
        if (!gguf_dq_type(fs->views->ggml, ty, &nm, &bl, &sz)) {
            snprintf(tmp, sizeof tmp, "type%" PRIu32, ty);
            nm = tmp;
        }
        char *hit = strstr(types, nm);
        size_t nl = strlen(nm);
        if (hit && (hit[nl] == ',' || hit[nl] == '\0') &&
            (hit == types || hit[-1] == ' '))
            continue;
        if (used + nl + 3 < n)
            used += (size_t)snprintf(types + used, n - used, "%s%s",
                                     used ? ", " : "", nm);
    }
    return count;
}

/* Loads ggml as the option, the environment or the usual places say;
 * why (>= 512 bytes) says why not.  -1: an explicit path that fails. */
static int find_ggml(struct gfs *fs, const char *opt, const char *file,
                     char *why, size_t n) {
    struct gguf_error err = {0};
    const char *env = getenv("GGUFS_GGML_LIB");
    if (opt && strcmp(opt, "none") == 0) {
        snprintf(why, n, "-o ggml=none");
        return 0;
    }
    const char *path = opt ? opt : env && *env ? env : NULL;
    if (gguf_ggml_load(&fs->views->ggml, path, &err) == GGUF_OK)
        return 0;
    if (opt) {
        fprintf(stderr, "ggufs: %s: -o ggml=%s: %s\n", file, opt, err.msg);
        return -1;
    }
    if (path)
        snprintf(why, n, "GGUFS_GGML_LIB: %s", err.msg);
    else if (err.code == GGUF_E_NOTFOUND)
        snprintf(why, n,
                 "ggml's libggml-base.so was not found in the usual places "
                 "(-o ggml=PATH or GGUFS_GGML_LIB names one)");
    else
        snprintf(why, n, "%s", err.msg);
    return 0;
}

/* The warnings of the open said how the library sized unknown ids;
 * where ggml knows them, its size is the one used (gfs_tensor_bytes): one
 * line says so. */
static void say_newer(struct gfs *fs, const char *file) {
    struct gfs_views *v = fs->views;
    char types[200] = "";
    int64_t known = 0;
    size_t used = 0;
    for (int64_t i = 0; i < v->n && v->ggml; i++) {
        int64_t j;
        gguf_ctx *c = gfs_tensor_ctx(fs, i, &j, NULL);
        uint32_t ty = gguf_tensor_type(c, j), bl, sz;
        const char *nm;
        if (gguf_ggml_type_known(ty) ||
            !gguf_dq_type(v->ggml, ty, &nm, &bl, &sz))
            continue;
        if (!strstr(types, nm) && used + strlen(nm) + 3 < sizeof types)
            used += (size_t)snprintf(types + used, sizeof types - used, "%s%s",
                                     used ? ", " : "", nm);
        known++;
    }
    if (known)
        fprintf(stderr,
                "ggufs: %s: ggml (%s) knows the type ids ggufs does not: "
                "%" PRId64 " tensor%s (%s) sized and converted as it says\n",
                file, gguf_ggml_path(v->ggml), known, known == 1 ? "" : "s",
                types);
}

int gfs_views_init(struct gfs *fs, const char *ggml, const char *file) {
    struct gfs_views *v = calloc(1, sizeof *v);
    int64_t n = gfs_n_tensors(fs);
    if (!v || !(v->t = calloc((size_t)n + 1, sizeof *v->t)) ||
        !(v->h = calloc((size_t)n + 1, sizeof *v->h))) {
        if (v)
            free(v->t);
        free(v);
        fprintf(stderr, "ggufs: %s: out of memory\n", file);
        return -1;
    }
    pthread_mutex_init(&v->mu, NULL);
    gfs_hashes_init(v);
    v->n = n;
    fs->views = v;
    /* ggufs's own converters first: ggml is loaded only when a tensor
     * needs it (a library is code run by a daemon that may be root). */
    int need = 0;
    for (int64_t i = 0; i < n; i++) {
        decide(fs, NULL, i, &v->t[i]);
        need |= !v->t[i].dq.to_float && !is_integer(fs, i);
    }
    char why[600] = "", types[200];
    if (need || (ggml && strcmp(ggml, "none") != 0)) {
        if (find_ggml(fs, ggml, file, why, sizeof why) != 0)
            return -1;
        fs->ggml = v->ggml;
        for (int64_t i = 0; i < n && v->ggml; i++)
            if (!v->t[i].dq.to_float)
                decide(fs, v->ggml, i, &v->t[i]);
    }
    say_newer(fs, file);
    int64_t m = missing(fs, types, sizeof types);
    if (m && v->ggml)
        snprintf(why, sizeof why, "neither ggufs nor ggml (%s) converts them",
                 gguf_ggml_path(v->ggml));
    if (m)
        fprintf(stderr,
                "ggufs: %s: f32/ and npy/ leave out %" PRId64
                " tensor%s (%s): %s\n",
                file, m, m == 1 ? "" : "s", types, why);
    return 0;
}

int gfs_views_any(const struct gfs *fs) {
    for (int64_t i = 0; fs->views && i < fs->views->n; i++)
        if (fs->views->t[i].dq.to_float)
            return 1;
    return 0;
}

void gfs_views_free(struct gfs *fs) {
    struct gfs_views *v = fs->views;
    if (!v)
        return;
    gfs_pool_stop(v);
    fs->ggml = NULL;
    gguf_ggml_unload(v->ggml);
    gfs_text_put(v->index);
    gfs_hashes_free(v);
    pthread_mutex_destroy(&v->mu);
    free(v->t);
    free(v->h);
    free(v);
    fs->views = NULL;
}

/* ---- the views' node kinds (kinds.h) ------------------------------------ */

static int views_present(const struct gfs *fs) {
    return fs->views != NULL;
}

static int64_t views_n(struct gfs *fs, fuse_ino_t dir) {
    (void)dir;
    return gfs_n_tensors(fs);
}

static void views_read(fuse_req_t req, struct gfs *fs, struct gfs_fh *fh,
                       off_t off, size_t size) {
    pthread_rwlock_rdlock(&fs->lock);
    views_read_locked(req, fs, fh, off, size);
    pthread_rwlock_unlock(&fs->lock);
}

#define VIEWS_DIR(k, ino, nm)                                                  \
    {                                                                          \
        .kind = k, .ino_lo = ino, .ino_hi = ino + 1, .root_name = nm,          \
        .root_mode = S_IFDIR, .present = views_present, .stat = views_stat,    \
        .lookup = views_lookup, .n_entries = views_n, .dirent = views_dirent,  \
    }
/* Tensor i's bytes changed (kinds.h, tensor_changed): the kernel drops
 * its f32/ (and the hashes of it and of tensors/ are forgotten: the views'
 * state, hashes.c) or its npy/ pages.  No lock held. */
static void f32_changed(struct gfs *fs, int64_t i, uint64_t off, uint64_t n,
                        int whole) {
    (void)off, (void)n, (void)whole;
    gfs_hashes_forget(fs, i);
    if (fs->views && i >= 0)
        gfs_devio_inval(gfs_io(fs), gfs_ino_out(fs, GFS_INO_F32 + (uint64_t)i),
                        0, 0);
}

static void npy_changed(struct gfs *fs, int64_t i, uint64_t off, uint64_t n,
                        int whole) {
    (void)off, (void)n, (void)whole;
    if (fs->views && i >= 0)
        gfs_devio_inval(gfs_io(fs), gfs_ino_out(fs, GFS_INO_NPY + (uint64_t)i),
                        0, 0);
}

#define VIEWS_FILE(k, lo, hi, nm, changed)                                     \
    {                                                                          \
        .kind = k, .ino_lo = lo, .ino_hi = hi, .root_name = nm,                \
        .root_mode = S_IFREG, .present = views_present, .stat = views_stat,    \
        .open = views_open, .read = views_read, .tensor_changed = changed,     \
    }
const struct gfs_kind_ops gfs_kind_dir_f32 =
    VIEWS_DIR(GFS_DIR_F32, GFS_INO_DIR_F32, "f32");
const struct gfs_kind_ops gfs_kind_dir_npy =
    VIEWS_DIR(GFS_DIR_NPY, GFS_INO_DIR_NPY, "npy");
const struct gfs_kind_ops gfs_kind_index =
    VIEWS_FILE(GFS_INDEX, GFS_INO_INDEX, GFS_INO_INDEX + 1, "index.tsv", NULL);
const struct gfs_kind_ops gfs_kind_f32 =
    VIEWS_FILE(GFS_F32, GFS_INO_F32, GFS_INO_NPY, NULL, f32_changed);
const struct gfs_kind_ops gfs_kind_npy = VIEWS_FILE(
    GFS_NPY, GFS_INO_NPY, GFS_INO_NPY + (UINT64_C(1) << 32), NULL, npy_changed);

/* ---- index.tsv --------------------------------------------------------
 * One line per tensor in file order, NAME<TAB>TYPE<TAB>SHAPE<TAB>BYTES,
 * NAME as in tensors/, SHAPE as user.gguf.shape (ne, comma-separated): no
 * offsets, so it changes only when tensors do and diff(1) of two
 * quantizations of a model lists what differs.  A mix's lines end with
 * <TAB>SOURCE, the file (or URL) each tensor is taken from. */

static int index_line(struct gfs *fs, int64_t i, struct gguf_buf *out,
                      struct gguf_buf *name) {
    int64_t j;
    gguf_ctx *c = gfs_tensor_ctx(fs, i, &j, NULL);
    uint32_t ty = gguf_tensor_type(c, j), nd = gguf_tensor_n_dims(c, j);
    const int64_t *ne = gguf_tensor_ne(c, j);
    const char *tn;
    uint32_t blck, size;
    uint64_t bytes = gfs_tensor_bytes(fs, i);
    char tmp[64];
    if (!gguf_dq_type(fs->views->ggml, ty, &tn, &blck, &size)) {
        snprintf(tmp, sizeof tmp, "type%" PRIu32, ty);
        tn = tmp;
    }
    if (gfs_tensor_fname(fs, i, name))
        return ENOMEM;
    int ok = gguf_buf_add(out, name->p, name->len - 1) == GGUF_OK &&
             gguf_buf_add(out, "\t", 1) == GGUF_OK &&
             gguf_buf_add(out, tn, strlen(tn)) == GGUF_OK;
    for (uint32_t d = 0; ok && d < nd; d++) {
        int n = snprintf(tmp, sizeof tmp, "%s%" PRId64, d ? "," : "\t", ne[d]);
        ok = gguf_buf_add(out, tmp, (size_t)n) == GGUF_OK;
    }
    int n = snprintf(tmp, sizeof tmp, "%s\t%" PRIu64, nd ? "" : "\t", bytes);
    ok = ok && gguf_buf_add(out, tmp, (size_t)n) == GGUF_OK;
    if (ok && fs->picks)
        ok = gguf_buf_add(out, "\t", 1) == GGUF_OK &&
             gguf_buf_add(out, gguf_path(c), strlen(gguf_path(c))) == GGUF_OK;
    return ok && gguf_buf_add(out, "\n", 1) == GGUF_OK ? 0 : ENOMEM;
}

struct gfs_text *gfs_views_index(struct gfs *fs, int *err) {
    struct gfs_views *v = fs->views;
    struct gfs_text *t = NULL;
    struct gguf_buf b = {0}, name = {0};
    pthread_mutex_lock(&v->mu);
    if ((t = v->index)) {
        atomic_fetch_add(&t->refs, 1);
        goto out;
    }
    for (int64_t i = 0; i < v->n; i++)
        if ((*err = index_line(fs, i, &b, &name)))
            goto out;
    if (!(t = gfs_text_new(&b))) {
        *err = ENOMEM;
        goto out;
    }
    atomic_fetch_add(&t->refs, 1); /* the cache's and the caller's */
    v->index = t;
out:
    pthread_mutex_unlock(&v->mu);
    gguf_buf_free(&b);
    gguf_buf_free(&name);
    return t;
}
