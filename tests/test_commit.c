/*
 * test_commit.c - gguf_commit, gguf_recover, gguf_save_edits on real files.
 *
 * Fixtures are built with the library (gguf_new, gguf_set_payload,
 * gguf_add_tensor, gguf_write_file) in a fresh directory under /tmp (ext4
 * here: insert-range works).  Expectations never come from the code under
 * test: "old" is a snapshot of the fixture as opened before any commit,
 * "new" a snapshot of the edited context before its commit, and tensor data
 * is compared as a hash of the whole data section [data offset, EOF)
 * against the fixture's.  Every result is also shown to ggml's own reader
 * (libggml-base.so from node-llama-cpp, dlopened; skipped with a message
 * when absent).
 *
 * Crash safety: for every fault point N a child commits with GGUFS_FAULT=N
 * and dies by SIGKILL just before step N; then gguf_recover and a fresh
 * open must show the file entirely old or entirely new.  The same for
 * kills during recovery itself.  (A SIGKILL keeps the page cache, so this
 * exercises the protocol's states, not a power cut's reordering.)
 *
 * GGUFS_COMMIT_BENCH=1 adds a timing run on a 2 GiB sparse file.
 */
#include "gguf.h"

#include <check.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Paths are PATH_MAX buffers built from a short temp dir: truncation
 * cannot happen, and gcc cannot see that. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define JOURNAL ".ggufs-journal"
#define NEWFILE ".ggufs-new"

/* Number of fault points of each kind of commit (documented in commit.c);
 * a change in the protocol must show up here. */
#define STEPS_INPLACE 9
#define STEPS_INSERT 11
#define STEPS_REWRITE 6
/* Insert tried on tmpfs: the journal's 4, insert-range (refused), the
 * rewrite's 6, unlink journal, fsync directory. */
#define STEPS_FALLBACK 13

/* ---- small helpers -------------------------------------------------- */

static char g_dir[PATH_MAX];

static int rm_one(const char *p, const struct stat *sb, int flag,
                  struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static void make_dir(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/ggufs-commit-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
}

static void remove_dir(void) {
    if (g_dir[0])
        nftw(g_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    g_dir[0] = '\0';
}

static void path_in(char *out, const char *name) {
    snprintf(out, PATH_MAX, "%s/%s", g_dir, name);
}

static bool file_exists(const char *p) {
    struct stat sb;
    return lstat(p, &sb) == 0;
}

static bool sidecar_exists(const char *path, const char *suffix) {
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s%s", path, suffix);
    return file_exists(p);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}
#define FNV0 UINT64_C(0xcbf29ce484222325)

/* Hash of the bytes [from, EOF) of path; *n gets their count. */
static uint64_t hash_from(const char *path, uint64_t from, uint64_t *n) {
    static uint8_t buf[1 << 16];
    uint64_t h = FNV0, total = 0;
    int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    for (uint64_t off = from;;) {
        ssize_t r = pread(fd, buf, sizeof buf, (off_t)off);
        ck_assert_int_ge(r, 0);
        if (r == 0)
            break;
        h = fnv(h, buf, (size_t)r);
        off += (uint64_t)r;
        total += (uint64_t)r;
    }
    close(fd);
    if (n)
        *n = total;
    return h;
}

/* Copies from to to, with from's mode (recovery applies only 0600
 * journals, so a copied journal must stay 0600). */
static void copy_file(const char *from, const char *to) {
    static uint8_t buf[1 << 16];
    struct stat sb;
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(in, 0);
    ck_assert_int_ge(out, 0);
    ck_assert_int_eq(fstat(in, &sb), 0);
    ck_assert_int_eq(fchmod(out, sb.st_mode & 07777), 0);
    for (;;) {
        ssize_t r = read(in, buf, sizeof buf);
        ck_assert_int_ge(r, 0);
        if (r == 0)
            break;
        ck_assert_int_eq(write(out, buf, (size_t)r), r);
    }
    close(in);
    ck_assert_int_eq(close(out), 0);
}

/* ---- payloads -------------------------------------------------------- */

struct pl {
    uint8_t p[65536];
    size_t n;
};

static void pl_raw(struct pl *b, const void *p, size_t n) {
    ck_assert_uint_le(b->n + n, sizeof b->p);
    memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void pl_u32(struct pl *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
                    (uint8_t)(v >> 24)};
    pl_raw(b, x, 4);
}
static void pl_u64(struct pl *b, uint64_t v) {
    pl_u32(b, (uint32_t)v);
    pl_u32(b, (uint32_t)(v >> 32));
}
static void pl_strn(struct pl *b, const char *s, size_t n) {
    pl_u64(b, n);
    pl_raw(b, s, n);
}

static void set_str(gguf_ctx *ctx, const char *key, const char *s) {
    struct gguf_error err = {0};
    size_t n = strlen(s);
    uint8_t *b = malloc(n + 8);
    ck_assert_ptr_nonnull(b);
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(b + 8, s, n);
    ck_assert_msg(gguf_set_payload(ctx, key, strlen(key), GGUF_TYPE_STRING,
                                   b, n + 8, &err) == GGUF_OK,
                  "set %s: %s", key, err.msg);
    free(b);
}

static void set_rep(gguf_ctx *ctx, const char *key, char c, size_t n) {
    char *s = malloc(n + 1);
    ck_assert_ptr_nonnull(s);
    memset(s, c, n);
    s[n] = '\0';
    set_str(ctx, key, s);
    free(s);
}

static void set_u32(gguf_ctx *ctx, const char *key, uint32_t v) {
    struct pl b = {.n = 0};
    struct gguf_error err = {0};
    pl_u32(&b, v);
    ck_assert_msg(gguf_set_payload(ctx, key, strlen(key), GGUF_TYPE_UINT32,
                                   b.p, b.n, &err) == GGUF_OK,
                  "set %s: %s", key, err.msg);
}

/* Removing or renaming a key that an earlier edit already removed or
 * renamed is a no-op here (edit sets are applied one after another). */
static void remove_key(gguf_ctx *ctx, const char *key) {
    struct gguf_error err = {0};
    int64_t i = gguf_find_key(ctx, key, strlen(key));
    if (i < 0)
        return;
    ck_assert_msg(gguf_remove_key(ctx, i, &err) == GGUF_OK, "%s", err.msg);
}

static void rename_key(gguf_ctx *ctx, const char *from, const char *to) {
    struct gguf_error err = {0};
    int64_t i = gguf_find_key(ctx, from, strlen(from));
    if (i < 0)
        return;
    ck_assert_msg(gguf_rename_key(ctx, i, to, strlen(to), &err) == GGUF_OK,
                  "%s", err.msg);
}

/* ---- fixtures -------------------------------------------------------- */

/* Deterministic tensor bytes, different per tensor. */
static uint8_t *g_tdata[8];

static const void *tensor_data(void *u, int64_t i) {
    const gguf_ctx *ctx = u;
    uint64_t n = gguf_tensor_size(ctx, i);
    if (!g_tdata[i]) {
        g_tdata[i] = malloc(n);
        ck_assert_ptr_nonnull(g_tdata[i]);
        uint32_t x = 2463534242u + (uint32_t)i * 7919u;
        for (uint64_t k = 0; k < n; k++) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            g_tdata[i][k] = (uint8_t)x;
        }
    }
    return g_tdata[i];
}

/* A small llama-like file: a few scalar and string keys, a token array,
 * three tensors of different types. */
static void make_fixture(const char *path) {
    struct gguf_error err = {0};
    gguf_ctx *ctx = gguf_new(3);
    ck_assert_ptr_nonnull(ctx);
    set_str(ctx, "general.architecture", "llama");
    set_str(ctx, "general.name", "commit fixture");
    set_rep(ctx, "general.description", 'd', 300);
    set_u32(ctx, "llama.context_length", 4096);
    set_u32(ctx, "llama.embedding_length", 64);
    set_u32(ctx, "llama.rope.dimension_count", 16);
    set_u32(ctx, "general.file_type", 1);

    static struct pl toks;
    toks.n = 0;
    pl_u32(&toks, GGUF_TYPE_STRING);
    pl_u64(&toks, 300);
    for (int i = 0; i < 300; i++) {
        char t[32];
        int n = snprintf(t, sizeof t, "tok%d", i);
        pl_strn(&toks, t, (size_t)n);
    }
    ck_assert(gguf_set_payload(ctx, "tokenizer.ggml.tokens", 21,
                               GGUF_TYPE_ARRAY, toks.p, toks.n, &err) == GGUF_OK);

    int64_t ne1[2] = {64, 32}, ne2[2] = {64, 64}, ne3[2] = {64, 16};
    ck_assert(gguf_add_tensor(ctx, "token_embd.weight", 17, 0, 2, ne1, &err) == GGUF_OK);
    ck_assert(gguf_add_tensor(ctx, "blk.0.attn_q.weight", 19, 1, 2, ne2, &err) == GGUF_OK);
    ck_assert(gguf_add_tensor(ctx, "output.weight", 13, 8, 2, ne3, &err) == GGUF_OK);
    ck_assert_msg(gguf_write_file(ctx, path, tensor_data, ctx, &err) == GGUF_OK,
                  "%s", err.msg);
    for (int i = 0; i < 8; i++) {
        free(g_tdata[i]);
        g_tdata[i] = NULL;
    }
    gguf_close(ctx);
}

/* The master copy, made once per test in g_dir, and a fresh work copy. */
static char g_master[PATH_MAX], g_work[PATH_MAX];

static void setup_files(void) {
    make_dir();
    path_in(g_master, "master.gguf");
    path_in(g_work, "model.gguf");
    make_fixture(g_master);
}

static void fresh_work(void) {
    unlink(g_work);
    copy_file(g_master, g_work);
}

/* Edits.  INPLACE shrinks the header by ~300 bytes (fits with a filler);
 * GROW adds 20 kB (never fits); SMALL is a few bytes either way. */
enum edit { E_INPLACE, E_GROW, E_SMALL };

static void apply_edits(gguf_ctx *ctx, enum edit e) {
    switch (e) {
    case E_INPLACE:
        set_str(ctx, "general.name", "edited in place");
        set_str(ctx, "general.description", "short now");
        remove_key(ctx, "llama.rope.dimension_count");
        set_u32(ctx, "llama.context_length", 8192);
        break;
    case E_GROW:
        set_str(ctx, "general.name", "grown");
        set_rep(ctx, "test.blob", 'b', 20000);
        rename_key(ctx, "general.file_type", "general.file_type_renamed");
        remove_key(ctx, "llama.rope.dimension_count");
        break;
    case E_SMALL:
        set_str(ctx, "general.name", "second edit, a little longer");
        set_u32(ctx, "test.second", 2);
        break;
    }
}

static gguf_ctx *open_rw(const char *path) {
    gguf_ctx *ctx = NULL;
    struct gguf_error err = {0};
    ck_assert_msg(gguf_open(&ctx, path, GGUF_OPEN_RDWR, &err) == GGUF_OK,
                  "open %s: %s", path, err.msg);
    return ctx;
}

/* ---- snapshots: what a file says ------------------------------------ */

struct snap {
    int64_t n;
    char *key[512];
    size_t klen[512];
    uint32_t type[512];
    uint8_t *val[512];
    size_t vlen[512];
    uint64_t tinfo;     /* hash over tensor infos (rel. offsets, shapes) */
    uint64_t data_hash; /* hash of [data offset, EOF) */
    uint64_t data_len;
};

static bool is_filler(const char *k, size_t n) {
    return n == strlen(GGUF_FILLER_KEY) && memcmp(k, GGUF_FILLER_KEY, n) == 0;
}

/* Keys and tensor infos of ctx; data hash of path at ctx's data offset
 * (path NULL: left 0, for expectations that take the old data). */
static void snap_take(struct snap *s, const gguf_ctx *ctx, const char *path) {
    memset(s, 0, sizeof *s);
    for (int64_t i = 0; i < gguf_n_kv(ctx); i++) {
        size_t kl, vl;
        const char *k = gguf_kv_key(ctx, i, &kl);
        if (is_filler(k, kl))
            continue;
        ck_assert_int_lt(s->n, 512);
        const uint8_t *v = gguf_kv_payload(ctx, i, &vl);
        s->key[s->n] = malloc(kl + 1);
        s->val[s->n] = malloc(vl + 1);
        memcpy(s->key[s->n], k, kl);
        memcpy(s->val[s->n], v, vl);
        s->klen[s->n] = kl;
        s->vlen[s->n] = vl;
        s->type[s->n] = gguf_kv_type(ctx, i);
        s->n++;
    }
    uint64_t h = FNV0;
    for (int64_t i = 0; i < gguf_n_tensors(ctx); i++) {
        size_t nl;
        const char *name = gguf_tensor_name(ctx, i, &nl);
        uint64_t x[3] = {gguf_tensor_type(ctx, i), gguf_tensor_rel_offset(ctx, i),
                         gguf_tensor_size(ctx, i)};
        h = fnv(h, name, nl);
        h = fnv(h, x, sizeof x);
        h = fnv(h, gguf_tensor_ne(ctx, i), 4 * sizeof(int64_t));
    }
    s->tinfo = h;
    if (path)
        s->data_hash = hash_from(path, gguf_data_offset(ctx), &s->data_len);
}

static void snap_free(struct snap *s) {
    for (int64_t i = 0; i < s->n; i++) {
        free(s->key[i]);
        free(s->val[i]);
    }
    s->n = 0;
}

/* Empty string when equal, else what differs first. */
static const char *snap_diff(const struct snap *a, const struct snap *b) {
    static char why[256];
    if (a->n != b->n) {
        snprintf(why, sizeof why, "%lld keys vs %lld", (long long)a->n,
                 (long long)b->n);
        return why;
    }
    for (int64_t i = 0; i < a->n; i++)
        if (a->klen[i] != b->klen[i] || memcmp(a->key[i], b->key[i], a->klen[i]) ||
            a->type[i] != b->type[i] || a->vlen[i] != b->vlen[i] ||
            memcmp(a->val[i], b->val[i], a->vlen[i])) {
            snprintf(why, sizeof why, "key %lld (%.*s) differs", (long long)i,
                     (int)a->klen[i], a->key[i]);
            return why;
        }
    if (a->tinfo != b->tinfo)
        return "tensor infos differ";
    if (a->data_hash != b->data_hash || a->data_len != b->data_len)
        return "tensor data differs";
    return "";
}

/* 0: the file at path is `old`; 1: it is `new`; -1 neither (why in msg). */
static int classify(const char *path, const struct snap *old,
                    const struct snap *new, char *msg, size_t n) {
    gguf_ctx *ctx = NULL;
    struct gguf_error err = {0};
    struct snap s;
    if (gguf_open(&ctx, path, 0, &err) != GGUF_OK) {
        snprintf(msg, n, "does not open: %s", err.msg);
        return -1;
    }
    snap_take(&s, ctx, path);
    gguf_close(ctx);
    int r = -1;
    const char *d_old = snap_diff(&s, old);
    if (!*d_old)
        r = 0;
    else {
        const char *d_new = snap_diff(&s, new);
        if (!*d_new)
            r = 1;
        else
            snprintf(msg, n, "neither old (%s) nor new (%s)", d_old, d_new);
    }
    snap_free(&s);
    return r;
}

/* ---- ggml's reader --------------------------------------------------- */

struct ggml_params {
    bool no_alloc;
    void **ctx;
};
typedef void *(*init_fn)(const char *, struct ggml_params);
typedef void (*free_fn)(void *);
static init_fn g_init;
static free_fn g_free;
static int g_ref = -1; /* -1 untried, 0 absent, 1 loaded */

static bool ref_load(void) {
    if (g_ref >= 0)
        return g_ref == 1;
    char lib[PATH_MAX];
    const char *env = getenv("GGUFS_GGML_LIB"), *src = getenv("GGUFS_SRCDIR");
    if (env && *env)
        snprintf(lib, sizeof lib, "%s", env);
    else
        snprintf(lib, sizeof lib,
                 "%s/.deps/node_modules/@node-llama-cpp/linux-x64/bins/"
                 "linux-x64/libggml-base.so", src && *src ? src : ".");
    g_ref = 0;
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (h) {
        g_init = (init_fn)dlsym(h, "gguf_init_from_file");
        g_free = (free_fn)dlsym(h, "gguf_free");
        g_ref = g_init && g_free;
    }
    if (!g_ref)
        fprintf(stderr, "test_commit: ggml reference reader not loaded (%s): "
                        "reference checks skipped\n", h ? "symbols missing" : dlerror());
    return g_ref == 1;
}

/* Asserts ggml accepts the file (when its library is there). */
static void ref_accepts(const char *path) {
    if (!ref_load())
        return;
    void *c = g_init(path, (struct ggml_params){true, NULL});
    ck_assert_msg(c != NULL, "ggml's reader rejects %s", path);
    g_free(c);
}

/* The live view's promise: gguf_plan_header before the commit gives the
 * bytes the commit then writes.  Call before committing; check after. */
struct plan {
    struct gguf_buf hdr;
    uint64_t d;
};

static void plan_take(struct plan *p, const gguf_ctx *ctx) {
    struct gguf_error err = {0};
    memset(p, 0, sizeof *p);
    ck_assert_msg(gguf_plan_header(ctx, &p->hdr, &p->d, &err) == GGUF_OK, "%s",
                  err.msg);
}

static void plan_check(struct plan *p, const char *path,
                       const struct gguf_commit_info *info) {
    ck_assert_uint_eq(p->d, info->new_data_offset);
    ck_assert_uint_eq(p->hdr.len, p->d);
    uint8_t *b = malloc(p->d);
    int fd = open(path, O_RDONLY);
    ck_assert_int_eq(pread(fd, b, p->d, 0), (ssize_t)p->d);
    close(fd);
    ck_assert_msg(memcmp(b, p->hdr.p, p->d) == 0,
                  "the committed header differs from gguf_plan_header's");
    free(b);
    gguf_buf_free(&p->hdr);
}

/* ---- tests: in place ------------------------------------------------- */

START_TEST(commit_in_place) {
    setup_files();
    fresh_work();
    struct gguf_error err = {0};
    struct gguf_commit_info info;
    struct snap old, new, now;
    char msg[512];
    struct stat before, after;

    gguf_ctx *ctx = open_rw(g_work);
    snap_take(&old, ctx, g_work);
    uint64_t d = gguf_data_offset(ctx);
    ck_assert_int_eq(stat(g_work, &before), 0);
    apply_edits(ctx, E_INPLACE);
    ck_assert(gguf_dirty(ctx));
    snap_take(&new, ctx, NULL);
    new.data_hash = old.data_hash;
    new.data_len = old.data_len;
    struct plan plan;
    plan_take(&plan, ctx);

    ck_assert_msg(gguf_commit(ctx, 0, &info, &err) == GGUF_OK, "%s", err.msg);
    plan_check(&plan, g_work, &info);
    ck_assert_int_eq(info.how, GGUF_COMMIT_INPLACE);
    ck_assert_uint_eq(info.old_data_offset, d);
    ck_assert_uint_eq(info.new_data_offset, d);
    ck_assert_uint_eq(info.bytes_written, d);
    ck_assert(!gguf_dirty(ctx));
    ck_assert_uint_eq(gguf_data_offset(ctx), d);
    ck_assert(!sidecar_exists(g_work, JOURNAL));

    /* The context still reads right (payload pointers valid). */
    snap_take(&now, ctx, g_work);
    ck_assert_str_eq(snap_diff(&now, &new), "");
    snap_free(&now);

    /* Committing again with no edits does nothing. */
    ck_assert(gguf_commit(ctx, 0, &info, &err) == GGUF_OK);
    ck_assert_int_eq(info.how, GGUF_COMMIT_NONE);
    gguf_close(ctx);

    ck_assert_int_eq(stat(g_work, &after), 0);
    ck_assert_uint_eq(after.st_ino, before.st_ino);
    ck_assert_uint_eq(after.st_size, before.st_size);
    ck_assert_int_eq(classify(g_work, &old, &new, msg, sizeof msg), 1);

    ctx = open_rw(g_work);
    ck_assert_uint_eq(gguf_data_offset(ctx), d);
    int64_t i = gguf_find_key(ctx, "general.name", 12);
    const char *s;
    size_t n;
    ck_assert(i >= 0 && gguf_kv_get_str(ctx, i, &s, &n));
    ck_assert_int_eq((int)n, 15);
    ck_assert(memcmp(s, "edited in place", n) == 0);
    ck_assert_int_lt(gguf_find_key(ctx, "llama.rope.dimension_count", 26), 0);
    gguf_close(ctx);
    ref_accepts(g_work);
    snap_free(&old);
    snap_free(&new);
    remove_dir();
}
END_TEST

START_TEST(commit_noop) {
    setup_files();
    fresh_work();
    struct gguf_error err = {0};
    struct gguf_commit_info info;
    struct stat before, after;
    uint64_t n0, n1;

    uint64_t h0 = hash_from(g_work, 0, &n0);
    ck_assert_int_eq(stat(g_work, &before), 0);
    gguf_ctx *ctx = open_rw(g_work);

    /* Untouched context. */
    ck_assert(gguf_commit(ctx, 0, &info, &err) == GGUF_OK);
    ck_assert_int_eq(info.how, GGUF_COMMIT_NONE);

    /* Changed and changed back: dirty, but the bytes are the same. */
    set_str(ctx, "general.name", "something else");
    set_str(ctx, "general.name", "commit fixture");
    ck_assert(gguf_dirty(ctx));
    usleep(20000); /* a write now would move the mtime */
    ck_assert_msg(gguf_commit(ctx, 0, &info, &err) == GGUF_OK, "%s", err.msg);
    ck_assert_int_eq(info.how, GGUF_COMMIT_NONE);
    ck_assert_uint_eq(info.bytes_written, 0);
    ck_assert(!gguf_dirty(ctx));
    gguf_close(ctx);

    ck_assert_int_eq(stat(g_work, &after), 0);
    ck_assert_uint_eq(hash_from(g_work, 0, &n1), h0);
    ck_assert_uint_eq(n1, n0);
    ck_assert_int_eq(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
    ck_assert_int_eq(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
    ck_assert(!sidecar_exists(g_work, JOURNAL));
    remove_dir();
}
END_TEST

/* ---- tests: growing -------------------------------------------------- */

START_TEST(commit_grow_insert) {
    setup_files();
    fresh_work();
    struct gguf_error err = {0};
    struct gguf_commit_info info;
    struct snap old, new, new2;
    char msg[512];
    struct stat before, after;

    gguf_ctx *ctx = open_rw(g_work);
    snap_take(&old, ctx, g_work);
    uint64_t d = gguf_data_offset(ctx);
    ck_assert_int_eq(stat(g_work, &before), 0);
    apply_edits(ctx, E_GROW);
    snap_take(&new, ctx, NULL);
    new.data_hash = old.data_hash;
    new.data_len = old.data_len;
    struct plan plan;
    plan_take(&plan, ctx);

    ck_assert_msg(gguf_commit(ctx, 0, &info, &err) == GGUF_OK, "%s", err.msg);
    plan_check(&plan, g_work, &info);
    ck_assert_int_eq(info.how, GGUF_COMMIT_INSERT);
    ck_assert_uint_eq(info.old_data_offset, d);
    ck_assert_uint_gt(info.new_data_offset, d + 20000);
    /* k is whole blocks (and alignments): the tensors moved by k exactly. */
    ck_assert_uint_eq((info.new_data_offset - d) % 4096, 0);
    ck_assert_uint_eq(info.new_data_offset % gguf_alignment(ctx), 0);
    ck_assert_uint_eq(gguf_data_offset(ctx), info.new_data_offset);
    ck_assert(!gguf_dirty(ctx));
    ck_assert(!sidecar_exists(g_work, JOURNAL));
    ck_assert_int_eq(stat(g_work, &after), 0);
    ck_assert_uint_eq(after.st_ino, before.st_ino);
    ck_assert_uint_eq((uint64_t)after.st_size,
                      (uint64_t)before.st_size + info.new_data_offset - d);
    ck_assert_uint_eq(gguf_file_size(ctx), (uint64_t)after.st_size);

    /* Tensor bytes through the context's own fd at their new place. */
    uint8_t buf[64];
    int64_t t = gguf_find_tensor(ctx, "output.weight", 13);
    ck_assert_int_ge(t, 0);
    ck_assert_int_eq(pread(gguf_fd(ctx), buf, sizeof buf,
                           (off_t)gguf_tensor_offset(ctx, t)), (ssize_t)sizeof buf);
    uint8_t want[64];
    int rfd = open(g_master, O_RDONLY);
    ck_assert_int_eq(pread(rfd, want, sizeof want,
                           (off_t)(d + gguf_tensor_rel_offset(ctx, t))),
                     (ssize_t)sizeof want);
    close(rfd);
    ck_assert(memcmp(buf, want, sizeof buf) == 0);

    ck_assert_int_eq(classify(g_work, &old, &new, msg, sizeof msg), 1);
    ref_accepts(g_work);

    /* The headroom takes the next small edit in place. */
    uint64_t d2 = info.new_data_offset;
    apply_edits(ctx, E_SMALL);
    set_rep(ctx, "test.more", 'm', 1000);
    snap_take(&new2, ctx, NULL);
    new2.data_hash = old.data_hash;
    new2.data_len = old.data_len;
    ck_assert_msg(gguf_commit(ctx, 0, &info, &err) == GGUF_OK, "%s", err.msg);
    ck_assert_int_eq(info.how, GGUF_COMMIT_INPLACE);
    ck_assert_uint_eq(info.new_data_offset, d2);
    gguf_close(ctx);
    ck_assert_int_eq(classify(g_work, &old, &new2, msg, sizeof msg), 1);
    ref_accepts(g_work);
    snap_free(&old);
    snap_free(&new);
    snap_free(&new2);
    remove_dir();
}
END_TEST

START_TEST(commit_grow_rewrite) {
    setup_files();
    fresh_work();
    struct gguf_error err = {0};
    struct gguf_commit_info info;
    struct snap old, new, new2;
    char msg[512];
    struct stat before, after;

    ck_assert_int_eq(chmod(g_work, 0640), 0);
    gguf_ctx *ctx = open_rw(g_work);
    snap_take(&old, ctx, g_work);
    uint64_t d = gguf_data_offset(ctx);
    ck_assert_int_eq(stat(g_work, &before), 0);
    apply_edits(ctx, E_GROW);
    snap_take(&new, ctx, NULL);
    new.data_hash = old.data_hash;
    new.data_len = old.data_len;
    struct plan plan;
    plan_take(&plan, ctx);

    ck_assert_msg(gguf_commit(ctx, GGUF_COMMIT_NO_INSERT, &info, &err) == GGUF_OK,
                  "%s", err.msg);
    plan_check(&plan, g_work, &info);
    ck_assert_int_eq(info.how, GGUF_COMMIT_REWRITE);
    ck_assert_uint_eq((info.new_data_offset - d) % 4096, 0);
    ck_assert_uint_ge(info.bytes_written, info.new_data_offset + old.data_len);
    ck_assert(!sidecar_exists(g_work, NEWFILE));
    ck_assert(!sidecar_exists(g_work, JOURNAL));
    ck_assert_int_eq(stat(g_work, &after), 0);
    ck_assert_uint_ne(after.st_ino, before.st_ino);
    ck_assert_uint_eq(after.st_mode & 07777, 0640);
    ck_assert_uint_eq(after.st_uid, before.st_uid);
    ck_assert_uint_eq(after.st_gid, before.st_gid);

    /* ctx->fd is the new file. */
    struct stat fs;
    ck_assert_int_eq(fstat(gguf_fd(ctx), &fs), 0);
    ck_assert_uint_eq(fs.st_ino, after.st_ino);
    ck_assert_int_eq(classify(g_work, &old, &new, msg, sizeof msg), 1);
    ref_accepts(g_work);

    /* And it goes on: the next edit is in place, on the new file. */
    apply_edits(ctx, E_SMALL);
    snap_take(&new2, ctx, NULL);
    new2.data_hash = old.data_hash;
    new2.data_len = old.data_len;
    ck_assert_msg(gguf_commit(ctx, 0, &info, &err) == GGUF_OK, "%s", err.msg);
    ck_assert_int_eq(info.how, GGUF_COMMIT_INPLACE);
    gguf_close(ctx);
    ck_assert_int_eq(classify(g_work, &old, &new2, msg, sizeof msg), 1);
    snap_free(&old);
    snap_free(&new);
    snap_free(&new2);
    remove_dir();
}
END_TEST

/* A real file written by llama.cpp's tools: grow, then in place. */
START_TEST(commit_real_model) {
    char src[PATH_MAX];
    const char *sd = getenv("GGUFS_SRCDIR");
    snprintf(src, sizeof src, "%s/../shared/models/tiny-llama-f32.gguf",
             sd && *sd ? sd : ".");
    if (!file_exists(src)) {
        fprintf(stderr, "test_commit: %s absent: real-model commit skipped\n", src);
        return;
    }
    make_dir();
    path_in(g_work, "tiny.gguf");
    copy_file(src, g_work);
    struct gguf_error err = {0};
    struct gguf_commit_info info;
    struct snap old, new;
    char msg[512];

    gguf_ctx *ctx = open_rw(g_work);
    snap_take(&old, ctx, g_work);
    set_str(ctx, "general.name", "renamed by ggufs");
    set_rep(ctx, "test.blob", 'x', 5000);
    snap_take(&new, ctx, NULL);
    new.data_hash = old.data_hash;
    new.data_len = old.data_len;
    ck_assert_msg(gguf_commit(ctx, 0, &info, &err) == GGUF_OK, "%s", err.msg);
    ck_assert(info.how == GGUF_COMMIT_INSERT || info.how == GGUF_COMMIT_INPLACE);
    gguf_close(ctx);
    ck_assert_int_eq(classify(g_work, &old, &new, msg, sizeof msg), 1);
    ref_accepts(g_work);
    snap_free(&old);
    snap_free(&new);
    remove_dir();
}
END_TEST

/* ---- tests: refusals ------------------------------------------------- */

/* Loop index: 0 mtime moved (touch -d), 1 a byte rewritten, 2 appended,
 * 3 replaced by rename. */
START_TEST(commit_changed) {
    setup_files();
    fresh_work();
    struct gguf_error err = {0};
    struct gguf_commit_info info;
    static const char *what[] = {"mtime", "mtime", "size", "inode"};

    gguf_ctx *ctx = open_rw(g_work);
    apply_edits(ctx, E_INPLACE);
    if (_i == 0) {
        struct timespec ts[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
        ck_assert_int_eq(utimensat(AT_FDCWD, g_work, ts, 0), 0);
    } else if (_i == 1 || _i == 2) {
        int fd = open(g_work, O_WRONLY);
        struct stat sb;
        ck_assert_int_eq(fstat(fd, &sb), 0);
        uint8_t b = 0x5a;
        off_t at = _i == 1 ? sb.st_size - 1 : sb.st_size;
        ck_assert_int_eq(pwrite(fd, &b, 1, at), 1);
        close(fd);
    } else {
        char other[PATH_MAX];
        path_in(other, "other.gguf");
        copy_file(g_master, other);
        ck_assert_int_eq(rename(other, g_work), 0);
    }
    uint64_t h = hash_from(g_work, 0, NULL);
    ck_assert_int_eq(gguf_commit(ctx, 0, &info, &err), GGUF_E_CHANGED);
    ck_assert_int_eq(err.code, GGUF_E_CHANGED);
    ck_assert_msg(strstr(err.msg, what[_i]) != NULL, "message '%s' lacks '%s'",
                  err.msg, what[_i]);
    ck_assert_int_eq(info.how, GGUF_COMMIT_NONE);
    ck_assert(gguf_dirty(ctx));
    ck_assert_uint_eq(hash_from(g_work, 0, NULL), h); /* untouched */
    ck_assert(!sidecar_exists(g_work, JOURNAL));
    gguf_close(ctx);
    remove_dir();
}
END_TEST

START_TEST(commit_refusals) {
    setup_files();
    fresh_work();
    struct gguf_error err = {0};
    struct gguf_commit_info info;
    char jpath[PATH_MAX];

    /* Read-only context. */
    gguf_ctx *ctx = NULL;
    ck_assert(gguf_open(&ctx, g_work, 0, &err) == GGUF_OK);
    apply_edits(ctx, E_INPLACE);
    ck_assert_int_eq(gguf_commit(ctx, 0, &info, &err), GGUF_E_INVAL);
    gguf_close(ctx);

    /* A leftover journal: recover first. */
    snprintf(jpath, sizeof jpath, "%s" JOURNAL, g_work);
    int jfd = open(jpath, O_WRONLY | O_CREAT, 0600);
    ck_assert_int_ge(jfd, 0);
    close(jfd);
    uint64_t h = hash_from(g_work, 0, NULL);
    ctx = open_rw(g_work);
    apply_edits(ctx, E_INPLACE);
    ck_assert_int_eq(gguf_commit(ctx, 0, &info, &err), GGUF_E_BUSY);
    ck_assert_uint_eq(hash_from(g_work, 0, NULL), h);
    unlink(jpath);

    /* Another open file holds the commit lock. */
    int lfd = open(g_work, O_RDWR);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    ck_assert_int_eq(fcntl(lfd, F_OFD_SETLK, &fl), 0);
    ck_assert_int_eq(gguf_commit(ctx, 0, &info, &err), GGUF_E_BUSY);
    bool did = true;
    close(lfd);
    /* Released: now it works. */
    ck_assert_msg(gguf_commit(ctx, 0, &info, &err) == GGUF_OK, "%s", err.msg);
    ck_assert_int_eq(info.how, GGUF_COMMIT_INPLACE);
    gguf_close(ctx);

    /* Memory contexts cannot commit. */
    ctx = gguf_new(3);
    set_str(ctx, "general.name", "x");
    ck_assert_int_eq(gguf_commit(ctx, 0, &info, &err), GGUF_E_INVAL);
    gguf_close(ctx);

    /* Recovery with nothing pending touches nothing, even a missing file. */
    ck_assert(gguf_recover(g_work, &did, &err) == GGUF_OK);
    ck_assert(!did);
    char none[PATH_MAX];
    path_in(none, "absent.gguf");
    ck_assert(gguf_recover(none, &did, &err) == GGUF_OK);
    ck_assert(!did);
    remove_dir();
}
END_TEST

/* The caller's flock on ctx's fd (the mount's lock) survives commits,
 * including a rewrite that replaces the fd. */
START_TEST(commit_keeps_flock) {
    setup_files();
    fresh_work();
    struct gguf_error err = {0};
    struct gguf_commit_info info;
    gguf_ctx *ctx = open_rw(g_work);
    ck_assert_int_eq(flock(gguf_fd(ctx), LOCK_EX | LOCK_NB), 0);

    apply_edits(ctx, E_INPLACE);
    ck_assert_msg(gguf_commit(ctx, 0, &info, &err) == GGUF_OK, "%s", err.msg);
    int probe = open(g_work, O_RDONLY);
    ck_assert_int_eq(flock(probe, LOCK_SH | LOCK_NB), -1);
    close(probe);

    apply_edits(ctx, E_GROW);
    ck_assert_msg(gguf_commit(ctx, GGUF_COMMIT_NO_INSERT, &info, &err) == GGUF_OK,
                  "%s", err.msg);
    ck_assert_int_eq(info.how, GGUF_COMMIT_REWRITE);
    probe = open(g_work, O_RDONLY);
    ck_assert_int_eq(flock(probe, LOCK_SH | LOCK_NB), -1);
    close(probe);
    gguf_close(ctx);
    probe = open(g_work, O_RDONLY);
    ck_assert_int_eq(flock(probe, LOCK_SH | LOCK_NB), 0);
    close(probe);
    remove_dir();
}
END_TEST

/* ---- crash safety ---------------------------------------------------- */

/* M_FALLBACK: an insert commit on tmpfs, which has no insert-range. */
enum mode { M_INPLACE, M_INSERT, M_REWRITE, M_FALLBACK };
static const char *const mode_name[] = {"in place", "insert", "rewrite",
                                        "insert on tmpfs"};
static const int mode_steps[] = {STEPS_INPLACE, STEPS_INSERT, STEPS_REWRITE,
                                 STEPS_FALLBACK};

/* For M_FALLBACK the work file moves to a directory on /dev/shm (tmpfs);
 * false (with a message) when there is none. */
static char g_shm[PATH_MAX];

static bool use_mode_dir(enum mode m) {
    if (m != M_FALLBACK)
        return true;
    struct statfs fs;
    if (statfs("/dev/shm", &fs) < 0 || fs.f_type != TMPFS_MAGIC) {
        fprintf(stderr, "test_commit: no tmpfs at /dev/shm: insert fallback "
                        "cases skipped\n");
        return false;
    }
    snprintf(g_shm, sizeof g_shm, "/dev/shm/ggufs-commit-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_shm));
    snprintf(g_work, sizeof g_work, "%s/model.gguf", g_shm);
    return true;
}

static void remove_mode_dir(void) {
    if (g_shm[0])
        nftw(g_shm, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    g_shm[0] = '\0';
}

/* Forks; the child (0 returned) has GGUFS_FAULT=fault. */
static pid_t fork_faulty(long fault) {
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char n[32];
        snprintf(n, sizeof n, "%ld", fault);
        setenv("GGUFS_FAULT", n, 1);
    }
    return pid;
}

/* Waits for child pid: -signal if it was killed, else its exit code. */
static int child_result(pid_t pid) {
    int ws;
    ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
    return WIFSIGNALED(ws) ? -WTERMSIG(ws) : WEXITSTATUS(ws);
}

/* Child: open, edit, commit with GGUFS_FAULT=fault.  Returns -signal if it
 * was killed, else its exit code (0: commit succeeded). */
static int child_commit(const char *path, enum mode m, long fault) {
    pid_t pid = fork_faulty(fault);
    if (pid == 0) {
        gguf_ctx *ctx = NULL;
        struct gguf_error err = {0};
        struct gguf_commit_info info;
        if (gguf_open(&ctx, path, GGUF_OPEN_RDWR, &err) != GGUF_OK)
            _exit(20);
        apply_edits(ctx, m == M_INPLACE ? E_INPLACE : E_GROW);
        enum gguf_status st = gguf_commit(
            ctx, m == M_REWRITE ? GGUF_COMMIT_NO_INSERT : 0, &info, &err);
        if (st != GGUF_OK) {
            fprintf(stderr, "child commit: %s\n", err.msg);
            _exit(21);
        }
        int want = m == M_INPLACE   ? GGUF_COMMIT_INPLACE
                   : m == M_INSERT ? GGUF_COMMIT_INSERT
                                   : GGUF_COMMIT_REWRITE;
        if (info.how != (enum gguf_commit_how)want)
            fprintf(stderr, "child commit: how %d, expected %d\n",
                    (int)info.how, want);
        _exit(info.how == (enum gguf_commit_how)want ? 0 : 22);
    }
    return child_result(pid);
}

/* Child: gguf_recover with GGUFS_FAULT=fault. */
static int child_recover(const char *path, long fault) {
    pid_t pid = fork_faulty(fault);
    if (pid == 0) {
        struct gguf_error err = {0};
        bool did;
        _exit(gguf_recover(path, &did, &err) == GGUF_OK ? 0 : 21);
    }
    return child_result(pid);
}

/* Expectations for mode m: the fixture and the fixture edited. */
static void expectations(enum mode m, struct snap *old, struct snap *new) {
    fresh_work();
    gguf_ctx *ctx = open_rw(g_work);
    snap_take(old, ctx, g_work);
    apply_edits(ctx, m == M_INPLACE ? E_INPLACE : E_GROW);
    snap_take(new, ctx, NULL);
    new->data_hash = old->data_hash;
    new->data_len = old->data_len;
    gguf_close(ctx);
}

/* Recovers in this process and checks: no sidecar left, all old or all
 * new, ggml accepts.  Returns 0 (old) or 1 (new). */
static int recover_and_judge(const struct snap *old, const struct snap *new,
                             const char *when) {
    struct gguf_error err = {0};
    bool did = false;
    char msg[512] = "";
    ck_assert_msg(gguf_recover(g_work, &did, &err) == GGUF_OK, "%s: recover: %s",
                  when, err.msg);
    ck_assert_msg(!sidecar_exists(g_work, JOURNAL), "%s: journal left", when);
    ck_assert_msg(!sidecar_exists(g_work, NEWFILE), "%s: new file left", when);
    int r = classify(g_work, old, new, msg, sizeof msg);
    ck_assert_msg(r >= 0, "%s: the file is a mix: %s", when, msg);
    ref_accepts(g_work);
    return r;
}

/* Loop index = mode.  Kill before every step; then recover. */
START_TEST(faults_commit) {
    enum mode m = (enum mode)_i;
    struct snap old, new;
    char when[128];
    int kills = 0, olds = 0, news = 0, last = -1;

    setup_files();
    if (!use_mode_dir(m)) {
        remove_dir();
        return;
    }
    expectations(m, &old, &new);
    for (long n = 1; n <= 64; n++) {
        fresh_work();
        int r = child_commit(g_work, m, n);
        snprintf(when, sizeof when, "%s, killed before step %ld", mode_name[m], n);
        if (r == 0) {
            /* Past the last step: the commit completed unharmed. */
            ck_assert_int_eq(recover_and_judge(&old, &new, "completed"), 1);
            break;
        }
        ck_assert_msg(r == -SIGKILL, "%s: child ended with %d", when, r);
        kills++;
        int got = recover_and_judge(&old, &new, when);
        /* Once a step made the commit durable, later kills cannot undo it. */
        ck_assert_msg(got >= last, "%s: old again after new", when);
        last = got;
        got ? news++ : olds++;
    }
    ck_assert_int_eq(kills, mode_steps[m]);
    ck_assert_int_gt(olds, 0);
    ck_assert_int_gt(news, 0);
    snap_free(&old);
    snap_free(&new);
    remove_mode_dir();
    remove_dir();
}
END_TEST

/* Loop index = mode (in place, insert).  Kill the commit before step n,
 * then kill the recovery before each of its steps, then recover. */
START_TEST(faults_recover) {
    enum mode m = (enum mode)_i;
    struct snap old, new;
    char when[160];
    int recover_kills = 0;

    setup_files();
    if (!use_mode_dir(m)) {
        remove_dir();
        return;
    }
    expectations(m, &old, &new);
    for (long n = 1; n <= mode_steps[m]; n++) {
        for (long k = 1; k <= 32; k++) {
            fresh_work();
            ck_assert_int_eq(child_commit(g_work, m, n), -SIGKILL);
            int r = child_recover(g_work, k);
            snprintf(when, sizeof when, "%s, commit killed before step %ld, "
                     "recovery killed before step %ld", mode_name[m], n, k);
            ck_assert_msg(r == 0 || r == -SIGKILL, "%s: recovery ended with %d",
                          when, r);
            recover_and_judge(&old, &new, when);
            if (r == 0)
                break;
            recover_kills++;
        }
    }
    ck_assert_int_gt(recover_kills, 0);
    snap_free(&old);
    snap_free(&new);
    remove_mode_dir();
    remove_dir();
}
END_TEST

/* A journal that does not match the file (changed after the crash) is
 * refused and kept; an incomplete one is dropped; a stale new file too. */
/* Two contexts committing at once on two threads: each commit counts its
 * own fault points, so with GGUFS_FAULT one past an in-place commit's steps
 * neither reaches it (shared counters would, together), and with
 * GGUFS_FAULT at its last step each commit does. */
struct thread_commit {
    gguf_ctx *ctx;
    enum gguf_status st;
    enum gguf_commit_how how;
};

static void *commit_thread(void *arg) {
    struct thread_commit *t = arg;
    struct gguf_error err = {0};
    struct gguf_commit_info info = {0};
    t->st = gguf_commit(t->ctx, 0, &info, &err);
    t->how = info.how;
    return NULL;
}

/* Child: both commits, on two threads, with GGUFS_FAULT=fault.  Returns
 * -signal if it was killed, else 0 if both committed in place. */
static int child_two_threads(gguf_ctx *a, gguf_ctx *b, long fault) {
    pid_t pid = fork_faulty(fault);
    if (pid == 0) {
        struct thread_commit t[2] = {{.ctx = a}, {.ctx = b}};
        pthread_t th[2];
        for (int i = 0; i < 2; i++)
            if (pthread_create(&th[i], NULL, commit_thread, &t[i]) != 0)
                _exit(30);
        for (int i = 0; i < 2; i++)
            pthread_join(th[i], NULL);
        for (int i = 0; i < 2; i++)
            if (t[i].st != GGUF_OK || t[i].how != GGUF_COMMIT_INPLACE)
                _exit(31 + i);
        _exit(0);
    }
    return child_result(pid);
}

START_TEST(faults_two_threads) {
    char other[PATH_MAX];
    setup_files();
    path_in(other, "other.gguf");
    for (long fault = STEPS_INPLACE + 1; fault >= STEPS_INPLACE; fault--) {
        fresh_work();
        unlink(other);
        copy_file(g_master, other);
        gguf_ctx *a = open_rw(g_work), *b = open_rw(other);
        apply_edits(a, E_INPLACE);
        apply_edits(b, E_INPLACE);
        int r = child_two_threads(a, b, fault);
        if (fault > STEPS_INPLACE)
            ck_assert_msg(r == 0, "two commits with GGUFS_FAULT=%ld: %d "
                          "(fault points shared between commits?)", fault, r);
        else
            ck_assert_msg(r == -SIGKILL, "two commits with GGUFS_FAULT=%ld: "
                          "%d, not killed at the last step", fault, r);
        gguf_close(a);
        gguf_close(b);
    }
    remove_dir();
}
END_TEST

START_TEST(recover_cases) {
    struct snap old, new;
    struct gguf_error err = {0};
    bool did = false;
    char jpath[PATH_MAX], npath[PATH_MAX];

    setup_files();
    expectations(M_INPLACE, &old, &new);
    snprintf(jpath, sizeof jpath, "%s" JOURNAL, g_work);
    snprintf(npath, sizeof npath, "%s" NEWFILE, g_work);

    /* Killed just before the header write: journal complete, file old. */
    fresh_work();
    ck_assert_int_eq(child_commit(g_work, M_INPLACE, 5), -SIGKILL);
    ck_assert(file_exists(jpath));
    int fd = open(g_work, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, "XYZ", 3, 40), 3); /* inside the first key */
    close(fd);
    uint64_t h = hash_from(g_work, 0, NULL);
    ck_assert_int_eq(gguf_recover(g_work, &did, &err), GGUF_E_CHANGED);
    ck_assert(file_exists(jpath));
    ck_assert_uint_eq(hash_from(g_work, 0, NULL), h);
    ck_assert_int_eq(unlink(jpath), 0);

    /* Incomplete journal (cut anywhere): dropped, file untouched. */
    fresh_work();
    ck_assert_int_eq(child_commit(g_work, M_INPLACE, 5), -SIGKILL);
    struct stat sb;
    ck_assert_int_eq(stat(jpath, &sb), 0);
    char keep[PATH_MAX];
    snprintf(keep, sizeof keep, "%s.keep", jpath);
    copy_file(jpath, keep);
    /* Cut inside the trailer, at its start, in the new header, in the old
     * one, in the fixed part, in the magic, and empty. */
    off_t cuts[] = {sb.st_size - 1, sb.st_size - 8, sb.st_size - 16,
                    sb.st_size - 17, sb.st_size / 2, 100, 72, 71, 8, 7, 0};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        copy_file(keep, jpath);
        ck_assert_int_eq(truncate(jpath, cuts[c]), 0);
        h = hash_from(g_work, 0, NULL);
        ck_assert_msg(gguf_recover(g_work, &did, &err) == GGUF_OK, "%s", err.msg);
        ck_assert(did);
        ck_assert_msg(!file_exists(jpath), "journal cut at %lld kept",
                      (long long)cuts[c]);
        ck_assert_uint_eq(hash_from(g_work, 0, NULL), h);
    }
    /* Corrupted in the middle (a torn write): checksum fails, dropped. */
    {
        copy_file(keep, jpath);
        fd = open(jpath, O_WRONLY);
        ck_assert_int_eq(pwrite(fd, "\0\0\0\0", 4, 200), 4);
        close(fd);
        ck_assert(gguf_recover(g_work, &did, &err) == GGUF_OK);
        ck_assert(did && !file_exists(jpath));
        ck_assert_int_eq(classify(g_work, &old, &new, (char[256]){0}, 256), 0);
        unlink(keep);
    }

    /* Stale new file. */
    fresh_work();
    fd = open(npath, O_WRONLY | O_CREAT, 0600);
    ck_assert_int_eq(write(fd, "partial", 7), 7);
    close(fd);
    ck_assert(gguf_recover(g_work, &did, &err) == GGUF_OK);
    ck_assert(did);
    ck_assert(!file_exists(npath));
    ck_assert_int_eq(classify(g_work, &old, &new, (char[256]){0}, 256), 0);
    snap_free(&old);
    snap_free(&new);
    remove_dir();
}
END_TEST

/* ---- no space -------------------------------------------------------- */

/* Runs body in a child with a small tmpfs mounted at g_dir/small (own
 * mount namespace); skipped when that is not allowed.  The child reports
 * failures on stderr and through its exit code. */
#define CHILD_CHECK(cond)                                                     \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "test_commit: %s:%d: %s failed\n", __FILE__,      \
                    __LINE__, #cond);                                         \
            _exit(1);                                                         \
        }                                                                     \
    } while (0)

/* Fills the filesystem of dir until less than `leave` bytes are free. */
static void fill(const char *dir, long leave) {
    char p[PATH_MAX];
    static char blk[4096];
    snprintf(p, sizeof p, "%s/fill", dir);
    int fd = open(p, O_WRONLY | O_CREAT | O_APPEND, 0600);
    CHILD_CHECK(fd >= 0);
    long written = 0;
    for (;;) {
        struct statvfs vs;
        CHILD_CHECK(fstatvfs(fd, &vs) == 0);
        if ((long)(vs.f_bavail * vs.f_frsize) < leave)
            break;
        if (write(fd, blk, sizeof blk) != (ssize_t)sizeof blk)
            break;
        written += (long)sizeof blk;
    }
    fsync(fd);
    close(fd);
    (void)written;
}

static int nospace_child(void) {
    char small[PATH_MAX], f[PATH_MAX], jp[PATH_MAX], np[PATH_MAX];
    struct gguf_error err = {0};
    struct gguf_commit_info info;

    snprintf(small, sizeof small, "%s/small", g_dir);
    if (mkdir(small, 0755) < 0)
        return 1;
    if (unshare(CLONE_NEWNS) < 0 ||
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        mount("ggufs-test", small, "tmpfs", 0, "size=1m") < 0) {
        fprintf(stderr, "test_commit: cannot mount a small tmpfs (%s): "
                        "no-space cases skipped\n", strerror(errno));
        return 77;
    }
    snprintf(f, sizeof f, "%s/model.gguf", small);
    snprintf(jp, sizeof jp, "%s" JOURNAL, f);
    snprintf(np, sizeof np, "%s" NEWFILE, f);
    copy_file(g_master, f);
    uint64_t h = hash_from(f, 0, NULL);

    /* tmpfs has no insert-range: the grow falls back to a rewrite. */
    gguf_ctx *ctx = NULL;
    CHILD_CHECK(gguf_open(&ctx, f, GGUF_OPEN_RDWR, &err) == GGUF_OK);
    fill(small, 100 << 10);
    apply_edits(ctx, E_GROW);
    enum gguf_status st = gguf_commit(ctx, 0, &info, &err);
    fprintf(stderr, "test_commit: grow on a full tmpfs: %s: %s\n",
            gguf_status_name(st), err.msg);
    CHILD_CHECK(st == GGUF_E_NOSPACE);
    CHILD_CHECK(hash_from(f, 0, NULL) == h);
    CHILD_CHECK(!file_exists(jp) && !file_exists(np));
    CHILD_CHECK(gguf_dirty(ctx));

    /* In place, with no room even for the journal. */
    char fillp[PATH_MAX];
    snprintf(fillp, sizeof fillp, "%s/fill", small);
    gguf_close(ctx);
    ctx = NULL;
    CHILD_CHECK(gguf_open(&ctx, f, GGUF_OPEN_RDWR, &err) == GGUF_OK);
    fill(small, 1);
    apply_edits(ctx, E_INPLACE);
    st = gguf_commit(ctx, 0, &info, &err);
    fprintf(stderr, "test_commit: in place on a full tmpfs: %s: %s\n",
            gguf_status_name(st), err.msg);
    CHILD_CHECK(st == GGUF_E_NOSPACE);
    CHILD_CHECK(hash_from(f, 0, NULL) == h);
    CHILD_CHECK(!file_exists(jp));

    /* With room again, both go through; the grow by rewrite. */
    unlink(fillp);
    st = gguf_commit(ctx, 0, &info, &err);
    CHILD_CHECK(st == GGUF_OK && info.how == GGUF_COMMIT_INPLACE);
    apply_edits(ctx, E_GROW);
    st = gguf_commit(ctx, 0, &info, &err);
    CHILD_CHECK(st == GGUF_OK && info.how == GGUF_COMMIT_REWRITE);
    CHILD_CHECK(!file_exists(jp) && !file_exists(np));
    gguf_close(ctx);
    ctx = NULL;
    CHILD_CHECK(gguf_open(&ctx, f, 0, &err) == GGUF_OK);
    CHILD_CHECK(gguf_find_key(ctx, "test.blob", 9) >= 0);
    gguf_close(ctx);
    umount(small);
    return 0;
}

START_TEST(commit_no_space) {
    setup_files();
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(nospace_child());
    int ws;
    ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
    ck_assert_msg(WIFEXITED(ws) && (WEXITSTATUS(ws) == 0 || WEXITSTATUS(ws) == 77),
                  "no-space child failed (status %d)", ws);
    remove_dir();
}
END_TEST

/* ---- save_edits ------------------------------------------------------ */

static void check_saved(const char *saved, const gguf_ctx *ctx,
                        const char *removed) {
    gguf_ctx *s = NULL;
    struct gguf_error err = {0};
    ck_assert_msg(gguf_open(&s, saved, 0, &err) == GGUF_OK, "%s: %s", saved, err.msg);
    ck_assert_int_eq(gguf_n_tensors(s), 0);
    /* Every key of ctx, same bytes. */
    for (int64_t i = 0; i < gguf_n_kv(ctx); i++) {
        size_t kl, vl, vl2;
        const char *k = gguf_kv_key(ctx, i, &kl);
        if (is_filler(k, kl))
            continue;
        int64_t j = gguf_find_key(s, k, kl);
        ck_assert_msg(j >= 0, "key %s not saved", k);
        const uint8_t *v = gguf_kv_payload(ctx, i, &vl);
        const uint8_t *v2 = gguf_kv_payload(s, j, &vl2);
        ck_assert_int_eq(gguf_kv_type(ctx, i), gguf_kv_type(s, j));
        ck_assert(vl == vl2 && memcmp(v, v2, vl) == 0);
    }
    int64_t r = gguf_find_key(s, "ggufs.removed_keys", 18);
    if (!removed) {
        ck_assert_int_lt(r, 0);
    } else {
        ck_assert_int_ge(r, 0);
        size_t vl;
        const uint8_t *v = gguf_kv_payload(s, r, &vl);
        ck_assert(memmem(v, vl, removed, strlen(removed)) != NULL);
    }
    gguf_close(s);
    ref_accepts(saved);
}

START_TEST(save_edits) {
    setup_files();
    fresh_work();
    struct gguf_error err = {0};
    char out[PATH_MAX];

    gguf_ctx *ctx = open_rw(g_work);
    apply_edits(ctx, E_GROW);
    ck_assert_msg(gguf_save_edits(ctx, out, sizeof out, &err) == GGUF_OK, "%s",
                  err.msg);
    ck_assert_msg(strncmp(out, g_work, strlen(g_work)) == 0, "saved at %s", out);
    ck_assert(strstr(out, ".ggufs-edits-") != NULL);
    check_saved(out, ctx, "llama.rope.dimension_count");
    check_saved(out, ctx, "general.file_type");

    /* A second save does not overwrite the first. */
    char out2[PATH_MAX];
    ck_assert(gguf_save_edits(ctx, out2, sizeof out2, &err) == GGUF_OK);
    ck_assert_str_ne(out, out2);
    ck_assert(file_exists(out) && file_exists(out2));

    /* Too small a buffer: refused, nothing written. */
    char tiny[8];
    ck_assert_int_eq(gguf_save_edits(ctx, tiny, sizeof tiny, &err), GGUF_E_RANGE);
    gguf_close(ctx);

    /* A memory context goes to $TMPDIR. */
    setenv("TMPDIR", g_dir, 1);
    ctx = gguf_new(3);
    set_str(ctx, "general.name", "from memory");
    ck_assert_msg(gguf_save_edits(ctx, out, sizeof out, &err) == GGUF_OK, "%s",
                  err.msg);
    ck_assert_msg(strncmp(out, g_dir, strlen(g_dir)) == 0, "saved at %s", out);
    check_saved(out, ctx, NULL);
    gguf_close(ctx);
    remove_dir();
}
END_TEST

/* The GGUF's directory is not writable: the edits go to $TMPDIR. */
static int readonly_dir_child(void) {
    char dir[PATH_MAX], f[PATH_MAX], out[PATH_MAX], tmpd[PATH_MAX];
    struct gguf_error err = {0};
    snprintf(dir, sizeof dir, "%s/ro", g_dir);
    snprintf(tmpd, sizeof tmpd, "%s/tmp", g_dir);
    snprintf(f, sizeof f, "%s/model.gguf", dir);
    CHILD_CHECK(mkdir(dir, 0755) == 0 && mkdir(tmpd, 0755) == 0);
    copy_file(g_master, f);
    if (geteuid() == 0) {
        /* Permissions do not stop root: a read-only bind mount does. */
        if (unshare(CLONE_NEWNS) < 0 ||
            mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount(dir, dir, NULL, MS_BIND, NULL) < 0 ||
            mount(NULL, dir, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0) {
            fprintf(stderr, "test_commit: cannot make a read-only directory "
                            "(%s): skipped\n", strerror(errno));
            return 77;
        }
    } else {
        CHILD_CHECK(chmod(dir, 0555) == 0);
    }
    setenv("TMPDIR", tmpd, 1);
    gguf_ctx *ctx = NULL;
    CHILD_CHECK(gguf_open(&ctx, f, 0, &err) == GGUF_OK);
    set_str(ctx, "general.name", "saved elsewhere");
    CHILD_CHECK(gguf_save_edits(ctx, out, sizeof out, &err) == GGUF_OK);
    fprintf(stderr, "test_commit: read-only directory: edits saved in %s\n", out);
    CHILD_CHECK(strncmp(out, tmpd, strlen(tmpd)) == 0);
    CHILD_CHECK(strstr(out, "model.gguf.ggufs-edits-") != NULL);
    gguf_ctx *s = NULL;
    CHILD_CHECK(gguf_open(&s, out, 0, &err) == GGUF_OK);
    CHILD_CHECK(gguf_find_key(s, "general.name", 12) >= 0);
    gguf_close(s);
    gguf_close(ctx);
    if (geteuid() != 0)
        chmod(dir, 0755);
    return 0;
}

START_TEST(save_edits_readonly_dir) {
    setup_files();
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(readonly_dir_child());
    int ws;
    ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
    ck_assert_msg(WIFEXITED(ws) && (WEXITSTATUS(ws) == 0 || WEXITSTATUS(ws) == 77),
                  "read-only directory child failed (status %d)", ws);
    remove_dir();
}
END_TEST

/* A user's model in a directory the user cannot write (issue 11): the
 * journal goes to the user's private state directory, named by device and
 * inode.  As nobody (root ignores directory permissions): kill the commit
 * before each step, then recover; every outcome is all old or all new, no
 * journal is left anywhere, and at least one kill left the journal in the
 * state directory (so recovery found it there). */
START_TEST(commit_unwritable_dir) {
    struct snap old, new;
    char ro[PATH_MAX], state[PATH_MAX], sj[PATH_MAX * 2], when[128];
    setup_files();
    expectations(M_INPLACE, &old, &new);
    snprintf(ro, sizeof ro, "%s/ro", g_dir);
    snprintf(state, sizeof state, "%s/state", g_dir);
    ck_assert_int_eq(chmod(g_dir, 0755), 0);
    ck_assert_int_eq(chmod(g_master, 0644), 0);
    ck_assert_int_eq(mkdir(ro, 0755), 0);
    ck_assert_int_eq(mkdir(state, 0700), 0);
    ck_assert_int_eq(chown(state, 65534, 65534), 0);
    snprintf(g_work, sizeof g_work, "%s/model.gguf", ro);
    copy_file(g_master, g_work);
    ck_assert_int_eq(chown(g_work, 65534, 65534), 0);
    fflush(NULL);
    pid_t pid = check_fork();
    if (pid == 0) {
        setenv("XDG_STATE_HOME", state, 1);
        ck_assert_int_eq(setgid(65534), 0);
        ck_assert_int_eq(setuid(65534), 0);
        ck_assert_int_ne(access(ro, W_OK), 0);
        int in_state = 0, n;
        for (n = 1; n <= 64; n++) {
            copy_file(g_master, g_work); /* the file is ours, not the dir */
            int r = child_commit(g_work, M_INPLACE, n);
            snprintf(when, sizeof when, "unwritable dir, killed before step %d",
                     n);
            struct stat sb;
            ck_assert_int_eq(stat(g_work, &sb), 0);
            snprintf(sj, sizeof sj, "%s/ggufs/%llx-%llx.journal", state,
                     (unsigned long long)sb.st_dev,
                     (unsigned long long)sb.st_ino);
            if (r == 0) {
                ck_assert_int_eq(recover_and_judge(&old, &new, "completed"), 1);
                break;
            }
            ck_assert_msg(r == -SIGKILL, "%s: child ended with %d", when, r);
            in_state += access(sj, F_OK) == 0;
            recover_and_judge(&old, &new, when);
            ck_assert_msg(access(sj, F_OK) != 0, "%s: %s left", when, sj);
        }
        ck_assert_int_eq(n, STEPS_INPLACE + 1);
        ck_assert_int_gt(in_state, 0);
    }
    check_waitpid_and_exit(pid);
    snap_free(&old);
    snap_free(&new);
    remove_dir();
}
END_TEST

/* ---- timing (GGUFS_COMMIT_BENCH=1) ----------------------------------- */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

START_TEST(bench_2g) {
    const char *b = getenv("GGUFS_COMMIT_BENCH");
    if (!b || !*b || !strcmp(b, "0")) {
        fprintf(stderr, "test_commit: timing run skipped (GGUFS_COMMIT_BENCH=1)\n");
        return;
    }
    make_dir();
    char big[PATH_MAX];
    path_in(big, "big.gguf");
    struct gguf_error err = {0};
    struct gguf_commit_info info;

    /* 2 GiB of F32 tensors, sparse (data NULL). */
    gguf_ctx *ctx = gguf_new(3);
    set_str(ctx, "general.architecture", "llama");
    set_str(ctx, "general.name", "bench");
    for (int i = 0; i < 16; i++) {
        char name[32];
        int n = snprintf(name, sizeof name, "blk.%d.weight", i);
        int64_t ne[2] = {4096, 8192}; /* 128 MiB each */
        ck_assert(gguf_add_tensor(ctx, name, (size_t)n, 0, 2, ne, &err) == GGUF_OK);
    }
    ck_assert(gguf_write_file(ctx, big, NULL, NULL, &err) == GGUF_OK);
    gguf_close(ctx);
    struct stat sb;
    stat(big, &sb);

    const char *label[] = {"grow by insert-range", "in place", "grow by rewrite (sparse)"};
    ctx = open_rw(big);
    for (int r = 0; r < 3; r++) {
        if (r == 1)
            set_str(ctx, "general.name", "bench, edited in place");
        else
            set_rep(ctx, r == 0 ? "test.blob" : "test.blob2", 'b', 100000);
        double t0 = now_ms();
        ck_assert_msg(gguf_commit(ctx, r == 2 ? GGUF_COMMIT_NO_INSERT : 0, &info,
                                  &err) == GGUF_OK, "%s", err.msg);
        double t1 = now_ms();
        fprintf(stderr, "test_commit: %llu-byte file: %s: how %d, data %llu -> "
                        "%llu, %.2f ms\n",
                (unsigned long long)gguf_file_size(ctx), label[r], (int)info.how,
                (unsigned long long)info.old_data_offset,
                (unsigned long long)info.new_data_offset, t1 - t0);
    }
    gguf_close(ctx);
    ref_accepts(big);

    /* A dense rewrite: the tensors hold real blocks. */
    ctx = open_rw(big);
    int fd = open(big, O_WRONLY);
    static char mb[1 << 20];
    memset(mb, 0x11, sizeof mb);
    for (uint64_t off = gguf_data_offset(ctx); off < (uint64_t)gguf_file_size(ctx);
         off += sizeof mb)
        ck_assert_int_gt(pwrite(fd, mb, sizeof mb, (off_t)off), 0);
    fsync(fd);
    close(fd);
    gguf_close(ctx);
    ctx = open_rw(big);
    set_rep(ctx, "test.blob3", 'c', 200000);
    double t0 = now_ms();
    ck_assert_msg(gguf_commit(ctx, GGUF_COMMIT_NO_INSERT, &info, &err) == GGUF_OK,
                  "%s", err.msg);
    fprintf(stderr, "test_commit: dense file: grow by rewrite: %.0f ms, %llu bytes\n",
            now_ms() - t0, (unsigned long long)info.bytes_written);
    set_rep(ctx, "test.blob4", 'c', 400000);
    t0 = now_ms();
    ck_assert_msg(gguf_commit(ctx, 0, &info, &err) == GGUF_OK, "%s", err.msg);
    fprintf(stderr, "test_commit: dense file: grow by insert-range: how %d, %.2f ms\n",
            (int)info.how, now_ms() - t0);
    gguf_close(ctx);
    ref_accepts(big);
    remove_dir();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("commit");
    TCase *c = tcase_create("commit");
    tcase_set_timeout(c, 120);
    tcase_add_test(c, commit_in_place);
    tcase_add_test(c, commit_noop);
    tcase_add_test(c, commit_grow_insert);
    tcase_add_test(c, commit_grow_rewrite);
    tcase_add_test(c, commit_real_model);
    tcase_add_loop_test(c, commit_changed, 0, 4);
    tcase_add_test(c, commit_refusals);
    tcase_add_test(c, commit_keeps_flock);
    tcase_add_test(c, commit_no_space);
    suite_add_tcase(s, c);

    TCase *f = tcase_create("faults");
    tcase_set_timeout(f, 300);
    tcase_add_loop_test(f, faults_commit, M_INPLACE, M_FALLBACK + 1);
    tcase_add_loop_test(f, faults_recover, M_INPLACE, M_FALLBACK + 1);
    tcase_add_test(f, recover_cases);
    tcase_add_test(f, faults_two_threads);
    suite_add_tcase(s, f);

    TCase *e = tcase_create("save_edits");
    tcase_add_test(e, save_edits);
    tcase_add_test(e, save_edits_readonly_dir);
    tcase_add_test(e, commit_unwritable_dir);
    suite_add_tcase(s, e);

    TCase *b = tcase_create("bench");
    tcase_set_timeout(b, 600);
    tcase_add_test(b, bench_2g);
    suite_add_tcase(s, b);
    return s;
}

int main(void) {
    SRunner *r = srunner_create(suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
