/*
 * storeops.c - a store's own nodes (storefs.c has the store): its
 * directories of names, the links of aliases, and models.tsv, answered
 * for the session by gfs_store_ops (dispatch.c routes slot 0 here).
 * Attributes of store nodes are the store directory's times, the mount's
 * owner, 0555 directories and 0444 files; names come and go with the
 * store, so entries and attributes are trusted for a second.
 */
#include "../edits/edits.h"
#include "storefs.h"
#include "../node/node.h" /* gfs_add_str, gfs_reply_bytes, gfs_add_dirent */
#include "../ops.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* ---- models.tsv --------------------------------------------------------- */

/* s[0, len) as a field of models.tsv, escaped as meta.tsv escapes a
 * string (gguf_escape_line: \\ \n \r \t \xHH), so that no name, path or
 * value can add a row or a column or write a raw escape sequence; cut
 * (before an escape, never inside one) to at most n - 1 bytes. */
static void tsv_esc(const char *s, size_t len, char *out, size_t n) {
    struct gguf_buf b = {0};
    for (size_t l = len < n - 1 ? len : n - 1;; l--) {
        b.len = 0;
        if (gguf_escape_line((const uint8_t *)s, l, &b) != GGUF_OK)
            b.len = 0, l = 0;
        if (b.len <= n - 1 || l == 0)
            break;
    }
    snprintf(out, n, "%.*s", b.len <= n - 1 ? (int)b.len : 0,
             b.p ? (const char *)b.p : "");
    gguf_buf_free(&b);
}

/* Value of key (a string, escaped, or a number printed) of ctx into out,
 * or "-". */
static void kv_text(const gguf_ctx *ctx, const char *key, char *out, size_t n) {
    int64_t i = gguf_find_key(ctx, key, strlen(key));
    const char *s;
    size_t len;
    uint64_t u;
    int64_t v;
    snprintf(out, n, "-");
    if (i < 0)
        return;
    if (gguf_kv_get_str(ctx, i, &s, &len))
        tsv_esc(s, len, out, n);
    else if (gguf_kv_get_u64(ctx, i, &u))
        snprintf(out, n, "%" PRIu64, u);
    else if (gguf_kv_get_i64(ctx, i, &v))
        snprintf(out, n, "%" PRId64, v);
}

/* The models.tsv line of a model named name (size: its files' bytes)
 * from its (first) header. */
static char *tsv_line(const char *name, uint64_t size, const gguf_ctx *ctx,
                      int64_t n_tensors, const char *source) {
    char arch[128], params[64], ft[64], ctxlen[64], key[200];
    char ename[4 * PATH_MAX + 1], esrc[4 * PATH_MAX + 1];
    kv_text(ctx, "general.architecture", arch, sizeof arch);
    kv_text(ctx, "general.size_label", params, sizeof params);
    kv_text(ctx, "general.file_type", ft, sizeof ft);
    const char *ftn = gguf_file_type_name(strtoull(ft, NULL, 10));
    if (ftn && ft[0] != '-')
        snprintf(ft, sizeof ft, "%s", ftn);
    snprintf(key, sizeof key, "%s.context_length", arch);
    kv_text(ctx, key, ctxlen, sizeof ctxlen);
    tsv_esc(name, strlen(name), ename, sizeof ename);
    tsv_esc(source, strlen(source), esrc, sizeof esrc);
    char *line = NULL;
    if (asprintf(&line, "%s\t%s\t%s\t%s\t%" PRIu64 "\t%s\t%" PRId64 "\t%s\n",
                 ename, arch, params, ft, size, ctxlen, n_tensors, esrc) < 0)
        return NULL;
    return line;
}

/* A local model whose line is not made yet: what reading its header
 * needs, copied under st->mu (the header is read without it), and the
 * line made. */
struct line_job {
    size_t k;
    struct cat_file f0; /* path: the copy's own */
    char *name, *line;
    uint64_t size;
    size_t n_files;
};

/* A local model's line: its first file's header parsed alone, read-only,
 * through the descriptor the store's check opens (cat_open_file: beneath
 * the store, a regular file, the file the scan saw), never by path
 * again.  src names it in the line and in a failure's log line.  No lock
 * held. */
static void local_line(struct gfs_storefs *st, struct line_job *j,
                       const char *src) {
    struct gguf_error err = {0};
    struct gguf_file gf;
    gguf_ctx *ctx = NULL;
    gguf_file_init(&gf);
    gf.fd = cat_open_file(st->dirfd, &j->f0, O_RDONLY);
    gf.path = (char *)src;
    if (gf.fd < 0) {
        char line[600];
        snprintf(line, sizeof line, "%s: %s", src, cat_strerror(errno));
        gfs_st_log(st, line);
        return;
    }
    if (gguf_open_file(&ctx, &gf, 0, &err) == GGUF_OK) {
        int64_t nt = gguf_n_tensors(ctx);
        int64_t i = gguf_find_key(ctx, "split.tensors.count", 19);
        int64_t total; /* llama.cpp's gguf-split writes an int32 */
        if (j->n_files > 1 && i >= 0 && gguf_kv_get_i64(ctx, i, &total) &&
            total >= 0)
            nt = total;
        j->line = tsv_line(j->name, j->size, ctx, nt, src);
        gguf_close(ctx);
    } else {
        gfs_st_log(st, err.msg);
    }
    close(gf.fd);
}

/* The lines of the local models that have none yet, their headers read
 * with st->mu let go (a slow file holds this request only); kept by each
 * node whose first file is still the one read.  Caller holds st->mu
 * (let go and taken again: nodes may move).  0 or ENOMEM. */
static int local_lines(struct gfs_storefs *st) {
    struct line_job *v = NULL;
    size_t n = 0, cap = 0;
    int err = 0;
    for (size_t i = 0; i < st->list.n && !err; i++) {
        struct node *nd = &st->nodes[st->node_of[i]];
        if (nd->line || !nd->cm)
            continue;
        struct line_job *w =
            n < cap ? v : realloc(v, (cap = cap * 2 + 16) * sizeof *v);
        if (!w) {
            err = ENOMEM;
            break;
        }
        v = w;
        struct line_job *j = &v[n++];
        *j = (struct line_job){.k = st->node_of[i],
                               .f0 = nd->cm->files[0],
                               .size = nd->cm->size,
                               .n_files = nd->cm->n_files};
        j->f0.name = NULL;
        if (!(j->f0.path = strdup(nd->cm->files[0].path)) ||
            !(j->name = strdup(nd->path)))
            err = ENOMEM;
    }
    pthread_mutex_unlock(&st->mu);
    for (size_t i = 0; i < n && !err; i++) {
        char *src = NULL;
        if (asprintf(&src, "%s/%s", st->dir, v[i].f0.path) < 0)
            err = ENOMEM;
        else
            local_line(st, &v[i], src);
        free(src);
    }
    pthread_mutex_lock(&st->mu);
    for (size_t i = 0; i < n; i++) {
        struct node *nd = &st->nodes[v[i].k];
        const struct cat_file *f0 = nd->cm ? &nd->cm->files[0] : NULL;
        if (v[i].line && f0 && !nd->line && f0->dev == v[i].f0.dev &&
            f0->ino == v[i].f0.ino && nd->cm->size == v[i].size) {
            nd->line = v[i].line;
            nd->line_dev = f0->dev, nd->line_ino = f0->ino;
            nd->line_size = v[i].size;
        } else {
            free(v[i].line);
        }
        free(v[i].f0.path);
        free(v[i].name);
    }
    free(v);
    return err;
}

/* A model's line: from its header as its file holds it (edits not yet
 * committed and overlays are meta/'s to show), read once: a local file's
 * header by local_lines; a Hub model is opened as a request would open
 * it. */
static char *model_line(struct gfs_storefs *st, size_t k) {
    struct node *nd = &st->nodes[k];
    if (nd->line || !nd->cm || !gfs_st_remote(st))
        return nd->line;
    char *src = strdup(nd->cm->files[0].path);
    if (!src)
        return NULL;
    /* Open (a Hub model) as a request would; it stays open (least
     * recently used first to go). */
    int err = gfs_st_ensure_open(st, k);
    nd = &st->nodes[k];
    if (!err && nd->fs && nd->cm) {
        pthread_rwlock_rdlock(&nd->fs->lock);
        nd->line = tsv_line(nd->path, nd->cm->size, nd->fs->ctx,
                            gfs_n_tensors(nd->fs), src);
        pthread_rwlock_unlock(&nd->fs->lock);
    }
    free(src);
    return nd->line;
}

/* models.tsv now: every present model in name order.  Caller holds
 * st->mu (let go while local headers are read). */
static int tsv_make(struct gfs_storefs *st, struct gguf_buf *b) {
    if (!gfs_st_remote(st) && local_lines(st) != 0)
        return ENOMEM;
    if (gguf_buf_add(b, TSV_HEADER, strlen(TSV_HEADER)) != GGUF_OK)
        return ENOMEM;
    for (size_t i = 0; i < st->list.n; i++) {
        const char *name = st->list.models[i].name;
        size_t k = st->node_of[i];
        const char *line = model_line(st, k);
        if (!line) {
            char ename[4 * PATH_MAX + 1], miss[sizeof ename + 20];
            tsv_esc(name, strlen(name), ename, sizeof ename);
            int n =
                snprintf(miss, sizeof miss, "%s\t-\t-\t-\t-\t-\t-\t-\n", ename);
            if (gguf_buf_add(b, miss, (size_t)n) != GGUF_OK)
                return ENOMEM;
        } else if (gguf_buf_add(b, line, strlen(line)) != GGUF_OK) {
            return ENOMEM;
        }
    }
    return 0;
}

/* ---- the store's own nodes ------------------------------------------------ */

/* The directory node of a slot-0 inode, or -1 (models.tsv, or none). */
static int64_t dir_of(const struct gfs_storefs *st, fuse_ino_t ino) {
    if (ino == FUSE_ROOT_ID)
        return 0;
    if (ino < GFS_STORE_DIR0 || ino - GFS_STORE_DIR0 >= st->n_nodes ||
        st->nodes[ino - GFS_STORE_DIR0].model ||
        st->nodes[ino - GFS_STORE_DIR0].freed)
        return -1;
    return (int64_t)(ino - GFS_STORE_DIR0);
}

static fuse_ino_t node_ino(const struct gfs_storefs *st, size_t k) {
    if (k == 0)
        return FUSE_ROOT_ID;
    if (st->nodes[k].model && st->nodes[k].alias < 0)
        return ((fuse_ino_t)k << GFS_INO_SLOT_SHIFT) + GFS_INO_ROOT;
    return GFS_STORE_DIR0 + k;
}

/* The alias node of a slot-0 inode, or -1. */
static int64_t alias_of(const struct gfs_storefs *st, fuse_ino_t ino) {
    if (ino < GFS_STORE_DIR0 || ino - GFS_STORE_DIR0 >= st->n_nodes)
        return -1;
    const struct node *nd = &st->nodes[ino - GFS_STORE_DIR0];
    return nd->model && !nd->freed && nd->alias >= 0
               ? (int64_t)(ino - GFS_STORE_DIR0)
               : -1;
}

/* An alias's link: the way from its directory to its model's
 * ("../NAME" for each level it is below the root). */
static char *link_target(const struct gfs_storefs *st, size_t k) {
    const struct node *nd = &st->nodes[k];
    const char *to = st->nodes[nd->alias].path;
    size_t up = 0;
    for (const char *p = nd->path; *p; p++)
        up += *p == '/';
    char *t = malloc(3 * up + strlen(to) + 1);
    if (!t)
        return NULL;
    for (size_t i = 0; i < up; i++)
        memcpy(t + 3 * i, "../", 3);
    strcpy(t + 3 * up, to);
    return t;
}

/* Attributes of a store node or of a model's root not opened yet (a
 * directory; the model's own once it is open), of models.tsv, or of an
 * alias (a link).  Caller holds st->mu. */
static void node_attr(const struct gfs_storefs *st, fuse_ino_t ino, int dir,
                      struct stat *sb) {
    memset(sb, 0, sizeof *sb);
    sb->st_ino = ino;
    sb->st_mode = dir ? S_IFDIR | 0555 : S_IFREG | 0444;
    int64_t a = dir ? -1 : alias_of(st, ino);
    char *t = a >= 0 ? link_target(st, (size_t)a) : NULL;
    if (t) {
        sb->st_mode = S_IFLNK | 0777;
        sb->st_size = (off_t)strlen(t);
        free(t);
    }
    if (dir && (ino >> GFS_INO_SLOT_SHIFT) && !st->o.readonly)
        sb->st_mode = S_IFDIR | 0755; /* a model's root, as it shows open */
    sb->st_nlink = dir ? 2 : 1;
    sb->st_uid = getuid();
    sb->st_gid = getgid();
    sb->st_atim = st->st.st_atim;
    sb->st_mtim = st->st.st_mtim;
    sb->st_ctim = st->st.st_ctim;
    sb->st_blksize = 4096;
}

static void store_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
    struct gfs_storefs *st = gfs_st_of(req);
    struct fuse_entry_param e;
    memset(&e, 0, sizeof e);
    int err = ENOENT;
    pthread_mutex_lock(&st->mu);
    gfs_st_refresh(st);
    int64_t d = dir_of(st, parent);
    size_t at;
    if (d == 0 && strcmp(name, "models.tsv") == 0) {
        node_attr(st, GFS_STORE_TSV, 0, &e.attr);
        e.ino = GFS_STORE_TSV;
        err = 0;
    } else if (d >= 0) {
        int64_t k = gfs_st_kid_find(st, &st->nodes[d], name, strlen(name), &at);
        if (k >= 0 && st->nodes[k].present) {
            e.ino = node_ino(st, (size_t)k);
            e.generation = st->nodes[k].gen;
            node_attr(st, e.ino, st->nodes[k].alias < 0, &e.attr);
            st->nodes[k].nlookup++; /* the kernel's, until FORGET */
            err = 0;
        }
    }
    pthread_mutex_unlock(&st->mu);
    /* Names come and go with the store: trusted for a second. */
    e.attr_timeout = e.entry_timeout = RESCAN_EVERY_S;
    if (err)
        e.ino = 0; /* a negative entry, for as long */
    fuse_reply_entry(req, &e);
}

static void store_getattr(fuse_req_t req, fuse_ino_t ino,
                          struct fuse_file_info *fi) {
    (void)fi;
    struct gfs_storefs *st = gfs_st_of(req);
    struct stat sb;
    pthread_mutex_lock(&st->mu);
    int64_t d = dir_of(st, ino);
    int ok = d >= 0 || ino == GFS_STORE_TSV || alias_of(st, ino) >= 0;
    if (ok)
        node_attr(st, ino, d >= 0, &sb);
    pthread_mutex_unlock(&st->mu);
    if (ok)
        fuse_reply_attr(req, &sb, RESCAN_EVERY_S);
    else
        fuse_reply_err(req, ENOENT);
}

int gfs_store_root_attr(struct gfs_storefs *st, fuse_req_t req,
                        fuse_ino_t ino) {
    size_t k = (size_t)(ino >> GFS_INO_SLOT_SHIFT);
    struct stat sb;
    if (!k || (ino & (GFS_INO_MODEL_SPAN - 1)) != GFS_INO_ROOT)
        return 0;
    pthread_mutex_lock(&st->mu);
    int unopened = k < st->n_nodes && st->nodes[k].model && !st->nodes[k].fs &&
                   !st->nodes[k].opening && !st->nodes[k].freed;
    if (unopened)
        node_attr(st, ino, 1, &sb);
    pthread_mutex_unlock(&st->mu);
    if (unopened)
        fuse_reply_attr(req, &sb, RESCAN_EVERY_S);
    return unopened;
}

/* Whether the store answers for closed model k's root (a read-only
 * store's, or a fresh one's: storefs.h).  Caller holds st->mu. */
static int answers_closed(const struct gfs_storefs *st, size_t k) {
    if (k >= st->n_nodes)
        return 0;
    const struct node *nd = &st->nodes[k];
    return nd->model && !nd->freed && !nd->fs && !nd->opening &&
           (st->o.readonly || nd->fresh);
}

/* Whether closed fresh model k's first file is still the one the model
 * had open (a file rewritten in place leaves the store's scan as it
 * was): its stat against the model's at its close; the node is fresh no
 * more if not.  Caller holds st->mu, let go while the file is stat'ed:
 * no open (a second find of the store opens no file; a FIFO cannot hold
 * it), and no symlink followed at the end of the path (one planted there
 * is not the file: the model's open refuses it too, cat_open_file). */
static int same_file(struct gfs_storefs *st, size_t k) {
    struct node *nd = &st->nodes[k];
    struct stat was = nd->file_st, now;
    uint32_t gen = nd->gen;
    char *path =
        st->dirfd >= 0 && nd->cm ? strdup(nd->cm->files[0].path) : NULL;
    if (!path)
        return 0;
    pthread_mutex_unlock(&st->mu);
    int same = fstatat(st->dirfd, path, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
               S_ISREG(now.st_mode) && now.st_dev == was.st_dev &&
               now.st_ino == was.st_ino && now.st_size == was.st_size &&
               now.st_mtim.tv_sec == was.st_mtim.tv_sec &&
               now.st_mtim.tv_nsec == was.st_mtim.tv_nsec &&
               now.st_ctim.tv_sec == was.st_ctim.tv_sec &&
               now.st_ctim.tv_nsec == was.st_ctim.tv_nsec;
    free(path);
    pthread_mutex_lock(&st->mu);
    nd = &st->nodes[k];
    if (!same && !nd->freed && nd->gen == gen)
        nd->fresh = 0;
    return same;
}

/* The user's check of closed model k (as gfs_store_route asks) for the
 * store to answer for its root (a writable store's: its file unchanged
 * too): 0; an errno to reply; or -1: the model opened meanwhile (or
 * went, or changed), it answers.  Caller holds st->mu, which is let go
 * meanwhile. */
static int closed_check(struct gfs_storefs *st, fuse_req_t req, size_t k) {
    uint32_t gen = st->nodes[k].gen;
    int err = gfs_st_may_read(st, req, k);
    if (!err && !st->o.readonly && !same_file(st, k))
        return -1;
    const struct node *nd = &st->nodes[k]; /* st->mu was let go */
    if (!err && (nd->freed || nd->gen != gen))
        return ENOENT;
    if (!err && !answers_closed(st, k))
        return -1;
    if (!err && !nd->present)
        return ENOENT; /* gone from the store: its listing too */
    return err;
}

int gfs_store_root_opendir(struct gfs_storefs *st, fuse_req_t req,
                           fuse_ino_t ino, struct fuse_file_info *fi) {
    size_t k = (size_t)(ino >> GFS_INO_SLOT_SHIFT);
    int err = -1;
    if (!k || (ino & (GFS_INO_MODEL_SPAN - 1)) != GFS_INO_ROOT)
        return 0;
    pthread_mutex_lock(&st->mu);
    if (answers_closed(st, k))
        err = closed_check(st, req, k);
    pthread_mutex_unlock(&st->mu);
    if (err > 0)
        fuse_reply_err(req, err);
    if (err)
        return err > 0;
    /* What gfs_op_opendir gives a read-only model's directory, and a
     * writable one's root while the kernel's listing is what it lists. */
    fi->cache_readdir = fi->keep_cache = 1;
    fuse_reply_open(req, fi);
    return 1;
}

int gfs_store_root_lookup(struct gfs_storefs *st, fuse_req_t req,
                          fuse_ino_t parent, const char *name) {
    size_t k = (size_t)(parent >> GFS_INO_SLOT_SHIFT);
    struct fuse_entry_param e;
    int err = -1;
    if (!k || (parent & (GFS_INO_MODEL_SPAN - 1)) != GFS_INO_ROOT ||
        st->o.readonly)
        return 0;
    pthread_mutex_lock(&st->mu);
    if (answers_closed(st, k) && gfs_st_is_live(&st->nodes[k], name))
        err = closed_check(st, req, k);
    if (!err)
        e = st->nodes[k].live_e;
    pthread_mutex_unlock(&st->mu);
    if (err > 0)
        fuse_reply_err(req, err);
    else if (!err)
        fuse_reply_entry(req, &e);
    return err >= 0;
}

static void store_opendir(fuse_req_t req, fuse_ino_t ino,
                          struct fuse_file_info *fi) {
    struct gfs_storefs *st = gfs_st_of(req);
    pthread_mutex_lock(&st->mu);
    int64_t d = dir_of(st, ino);
    if (d >= 0)
        gfs_st_refresh(st);
    pthread_mutex_unlock(&st->mu);
    if (d < 0)
        fuse_reply_err(req, ino == GFS_STORE_TSV ? ENOTDIR : ENOENT);
    else
        fuse_reply_open(req, fi);
}

/* A store directory's listing; plus: with each entry's lookup reply
 * (readdirplus), as store_lookup would give it. */
static void store_list(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       int plus) {
    struct gfs_storefs *st = gfs_st_of(req);
    struct gguf_buf out = {0};
    pthread_mutex_lock(&st->mu);
    int64_t d = dir_of(st, ino);
    if (d < 0) {
        pthread_mutex_unlock(&st->mu);
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    const struct node *dn = &st->nodes[d];
    int64_t extra = d == 0 ? 1 : 0; /* models.tsv */
    for (int64_t k = off; k < 2 + extra + (int64_t)dn->n_kids; k++) {
        const char *nm;
        fuse_ino_t child;
        size_t kid = 0; /* the node an entry's lookup counts in */
        if (k < 2) {
            nm = k ? ".." : ".";
            child = k ? node_ino(st, dn->parent) : ino;
        } else if (k < 2 + extra) {
            nm = "models.tsv", child = GFS_STORE_TSV;
        } else {
            kid = dn->kids[k - 2 - extra];
            nm = st->nodes[kid].base, child = node_ino(st, kid);
        }
        int dir = child != GFS_STORE_TSV && alias_of(st, child) < 0;
        mode_t mode = child == GFS_STORE_TSV ? S_IFREG
                      : dir                  ? S_IFDIR
                                             : S_IFLNK;
        struct fuse_entry_param e = {0};
        const struct fuse_entry_param *ep = NULL;
        if (plus && k >= 2) { /* "." and "..": names only */
            e.ino = child;
            e.generation = kid ? st->nodes[kid].gen : 0;
            node_attr(st, child, dir, &e.attr);
            e.attr_timeout = e.entry_timeout = RESCAN_EVERY_S;
            ep = &e;
        } else if (plus) {
            ep = GFS_DIRENT_PLUS_NONE;
        }
        if (!gfs_add_dirent(req, &out, size, nm, child, mode, k + 1, ep))
            break;
        if (ep == &e && kid)
            st->nodes[kid].nlookup++; /* an entry: a lookup, until FORGET */
    }
    pthread_mutex_unlock(&st->mu);
    fuse_reply_buf(req, (char *)out.p, out.len);
    gguf_buf_free(&out);
}

static void store_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
                          off_t off, struct fuse_file_info *fi) {
    (void)fi;
    store_list(req, ino, size, off, 0);
}

static void store_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
                              off_t off, struct fuse_file_info *fi) {
    (void)fi;
    store_list(req, ino, size, off, 1);
}

/* models.tsv: made at open (every header read once, then cached by
 * model), served from the open's text; direct I/O (its size is known only
 * once made: 0 before). */
static void store_open(fuse_req_t req, fuse_ino_t ino,
                       struct fuse_file_info *fi) {
    struct gfs_storefs *st = gfs_st_of(req);
    struct gguf_buf b = {0};
    if (ino != GFS_STORE_TSV) {
        fuse_reply_err(req, dir_of(st, ino) >= 0 ? EISDIR : ENOENT);
        return;
    }
    if ((fi->flags & O_ACCMODE) != O_RDONLY) {
        fuse_reply_err(req, st->o.readonly ? EROFS : EACCES);
        return;
    }
    pthread_mutex_lock(&st->mu);
    gfs_st_refresh(st);
    int err = tsv_make(st, &b);
    uint32_t *nodes = NULL; /* each line's model, for another user's copy */
    size_t n = st->list.n;
    if (!err && !gfs_st_owner(fuse_req_ctx(req)->uid) &&
        (nodes = malloc((n ? n : 1) * sizeof *nodes)))
        memcpy(nodes, st->node_of, n * sizeof *nodes);
    else if (!err && !gfs_st_owner(fuse_req_ctx(req)->uid))
        err = ENOMEM;
    if (nodes)
        err = gfs_st_tsv_for(st, req, nodes, n, &b);
    free(nodes);
    pthread_mutex_unlock(&st->mu);
    struct gfs_text *t = err ? NULL : gfs_text_new(&b);
    gguf_buf_free(&b);
    if (!t) {
        fuse_reply_err(req, err ? err : ENOMEM);
        return;
    }
    fi->fh = (uintptr_t)t;
    fi->direct_io = 1;
    if (fuse_reply_open(req, fi) == -ENOENT)
        gfs_text_put(t);
}

static void store_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi) {
    (void)ino;
    /* A reference for the reply, as gfs_read_text takes: the reader may
     * close, and the release free the text, as soon as the kernel has the
     * bytes, before writev has returned here. */
    struct gfs_text *t = (struct gfs_text *)(uintptr_t)fi->fh;
    atomic_fetch_add(&t->refs, 1);
    gfs_reply_bytes(req, t->data, t->len, off, size);
    gfs_text_put(t);
}

static void store_release(fuse_req_t req, fuse_ino_t ino,
                          struct fuse_file_info *fi) {
    (void)ino;
    gfs_text_put((struct gfs_text *)(uintptr_t)fi->fh);
    fuse_reply_err(req, 0);
}

/* fsync of the store's root: every open model's edits committed (ggufs
 * -u); only the mount's owner or root.  The first failure is the answer;
 * the reports of the models that had something to commit, one line each
 * named by the model ("NAME: what", not the blob's path), are the root's
 * user.ggufs.commit. */
struct commit_all {
    int err;
    struct gguf_buf report;
    const struct gfs_storefs *st; /* its st->mu held: gfs_store_each */
};
static void commit_one(struct gfs *fs, void *u) {
    struct commit_all *c = u;
    const char *name = c->st->nodes[fs->ino_base >> GFS_INO_SLOT_SHIFT].path;
    if (fs->readonly)
        return;
    /* A model edited since it was opened: its report (an overlay holds
     * its edits already, and says so). */
    pthread_rwlock_rdlock(&fs->lock);
    int work = fs->generation > 0 || fs->edits.commit_failed;
    pthread_rwlock_unlock(&fs->lock);
    if (!work)
        return;
    int err = gfs_model_commit(fs);
    if (err && !c->err)
        c->err = err;
    const char *msg = fs->edits.commit_msg; /* the commit's, just made */
    size_t pl = strlen(fs->path);
    if (!strncmp(msg, fs->path, pl) && !strncmp(msg + pl, ": ", 2))
        msg += pl + 2; /* "PATH: what" (edits/edits.c): the name says it */
    size_t at = c->report.len + (c->report.len ? 1 : 0);
    if ((c->report.len && gguf_buf_add(&c->report, "\n", 1) != GGUF_OK) ||
        gguf_buf_add(&c->report, name, strlen(name)) != GGUF_OK ||
        gguf_buf_add(&c->report, ": ", 2) != GGUF_OK ||
        gguf_buf_add(&c->report, msg, strlen(msg)) != GGUF_OK) {
        c->err = c->err ? c->err : ENOMEM;
        return;
    }
    /* One line per model, whatever the store's (hostile) names hold. */
    for (size_t i = at; i < c->report.len; i++)
        if (c->report.p[i] < 0x20 || c->report.p[i] == 0x7f)
            c->report.p[i] = '?';
}

static void store_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
                           struct fuse_file_info *fi) {
    (void)datasync;
    (void)fi;
    struct gfs_storefs *st = gfs_st_of(req);
    struct commit_all c = {.st = st};
    uid_t uid = fuse_req_ctx(req)->uid;
    if (ino == FUSE_ROOT_ID && uid != 0 && uid != getuid()) {
        c.err = EACCES;
    } else if (ino == FUSE_ROOT_ID) {
        gfs_store_each(st, commit_one, &c);
        pthread_mutex_lock(&st->mu);
        if (c.report.len)
            snprintf(st->commit_msg, sizeof st->commit_msg, "%.*s",
                     (int)c.report.len, (const char *)c.report.p);
        else
            snprintf(st->commit_msg, sizeof st->commit_msg,
                     "%s: nothing to commit", st->dir);
        pthread_mutex_unlock(&st->mu);
    }
    gguf_buf_free(&c.report);
    fuse_reply_err(req, c.err);
}

/* The status's models: each open model's pending edits (its own
 * status's lines, after its name), then where those of the others are.
 * Caller holds st->mu (a model's lock is taken after it). */
static int status_models(struct gfs_storefs *st, struct gguf_buf *b) {
    int err = 0;
    size_t shown = b->len;
    for (size_t k = 1; !err && k < st->n_nodes; k++)
        if (st->nodes[k].fs && st->nodes[k].present)
            err = gfs_status_model_edits(st->nodes[k].fs, st->nodes[k].path, b);
    if (!err && b->len == shown)
        err = gfs_add_str(b, "pending edits: none in the models open now\n");
    if (!err && st->n_open < st->list.n)
        err = gfs_add_str(b, "(models not open now have no edits pending; "
                             "those of ollama and HF stores keep theirs in "
                             "overlays: 'ggufs --status MNT/MODEL' opens one "
                             "and shows them)\n");
    return err;
}

/* The root's attributes, as a single-file mount's root has them:
 * user.ggufs.pid (ggufs -u waits for the daemon), user.ggufs.commit (the
 * last fsync's reports), user.ggufs.status (the store, its models, the
 * log's last lines).  Only to the mount's owner or root, but the pid. */
static int root_xattr(struct gfs_storefs *st, fuse_req_t req, const char *name,
                      struct gguf_buf *b) {
    char line[128];
    uid_t uid = fuse_req_ctx(req)->uid;
    int commit = strcmp(name, "user.ggufs.commit") == 0;
    if (strcmp(name, "user.ggufs.pid") == 0) {
        snprintf(line, sizeof line, "%ld", (long)getpid());
        return gfs_add_str(b, line);
    }
    if (!commit && strcmp(name, "user.ggufs.status") != 0)
        return ENODATA;
    if (uid != 0 && uid != getuid())
        return EACCES;
    pthread_mutex_lock(&st->mu);
    int err = 0;
    if (commit) {
        err = st->commit_msg[0] ? gfs_add_str(b, st->commit_msg) : ENODATA;
    } else {
        snprintf(line, sizeof line,
                 "models: %zu listed, %zu open (at most %zu)\n", st->list.n,
                 st->n_open, st->max_open);
        err = gfs_add_str(b, "store: ") || gfs_add_str(b, st->dir) ||
                      gfs_add_str(b, " (") ||
                      gfs_add_str(b, cat_kind_name(st->kind)) ||
                      gfs_add_str(b, ")\nmount: ") || gfs_add_str(b, st->mnt) ||
                      gfs_add_str(b, st->o.readonly ? " (read-only)\n"
                                                    : " (read-write)\n") ||
                      gfs_add_str(b, line)
                  ? ENOMEM
                  : 0;
        if (!err)
            err = status_models(st, b);
    }
    pthread_mutex_unlock(&st->mu);
    return err;
}

static void store_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                           size_t size) {
    struct gfs_storefs *st = gfs_st_of(req);
    struct gguf_buf b = {0};
    int err = ino == FUSE_ROOT_ID ? root_xattr(st, req, name, &b) : ENODATA;
    gfs_reply_xattr(req, size, err, &b);
    gguf_buf_free(&b);
}

static void store_readlink(fuse_req_t req, fuse_ino_t ino) {
    struct gfs_storefs *st = gfs_st_of(req);
    pthread_mutex_lock(&st->mu);
    int64_t a = alias_of(st, ino);
    char *t = a >= 0 ? link_target(st, (size_t)a) : NULL;
    pthread_mutex_unlock(&st->mu);
    if (t)
        fuse_reply_readlink(req, t);
    else
        fuse_reply_err(req, a >= 0 ? ENOMEM : EINVAL);
    free(t);
}

static void store_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
    static const char names[] =
        "user.ggufs.pid\0user.ggufs.commit\0user.ggufs.status";
    struct gguf_buf b = {0};
    int err = ino == FUSE_ROOT_ID && gguf_buf_add(&b, names, sizeof names)
                  ? ENOMEM
                  : 0;
    gfs_reply_xattr(req, size, err, &b);
    gguf_buf_free(&b);
}

static void store_statfs(fuse_req_t req, fuse_ino_t ino) {
    (void)ino;
    struct gfs_storefs *st = gfs_st_of(req);
    struct statvfs sv;
    memset(&sv, 0, sizeof sv);
    sv.f_bsize = sv.f_frsize = 4096;
    pthread_mutex_lock(&st->mu);
    for (size_t i = 0; i < st->list.n; i++)
        sv.f_blocks += (st->list.models[i].size + 4095) / 4096;
    sv.f_files = st->n_nodes - st->n_free + 1;
    pthread_mutex_unlock(&st->mu);
    sv.f_namemax = 255;
    if (st->o.readonly)
        sv.f_flag = ST_RDONLY;
    fuse_reply_statfs(req, &sv);
}

/* What the store's nodes answer; the rest: dispatch.c's defaults (a
 * read-only directory's errors). */
const struct fuse_lowlevel_ops gfs_store_ops = {
    .lookup = store_lookup,
    .getattr = store_getattr,
    .opendir = store_opendir,
    .readdir = store_readdir,
    .readdirplus = store_readdirplus,
    .open = store_open,
    .read = store_read,
    .release = store_release,
    .fsyncdir = store_fsyncdir,
    .getxattr = store_getxattr,
    .listxattr = store_listxattr,
    .statfs = store_statfs,
    .readlink = store_readlink,
};
