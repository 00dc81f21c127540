/*
 * ggmlrt.c - ggml's own tensor conversion code, found at run time.
 *
 * libggml-base is dlopen'ed with RTLD_LOCAL (its symbols stay out of the
 * process's namespace) from the file descriptor of a file checked first:
 * regular, owned by root or the effective user, writable by nobody else,
 * in a directory of the same kind.  ggufs runs as root; a library is code.
 *
 * What ggufs calls (ggml.h of ggml 0.5 and earlier releases since late
 * 2024): ggml_get_type_traits(type) returns a pointer to
 *   { const char *type_name; int64_t blck_size; int64_t
 *     blck_size_interleave; size_t type_size; bool is_quantized;
 *     ggml_to_float_t to_float; ggml_from_float_t from_float_ref; }
 * with to_float(const void *x, float *y, int64_t k) converting k elements
 * (whole blocks); ggml_blck_size(type) and ggml_type_size(type) report
 * the same sizes.  That layout is trusted only when, for every type id
 * ggufs knows (0-39), the traits' name, block size and block bytes equal
 * both ggml_blck_size/ggml_type_size and ggufs's own table (gguf/types.c):
 * another layout, or another numbering, disagrees somewhere and the
 * library is refused.
 *
 * None of ggml's functions may be called with an id it does not have
 * (they index an array of GGML_TYPE_COUNT entries without a check in
 * release builds).  So the ids from 40 up are first shown to ggml's own
 * GGUF reader, which does check: a one-tensor GGUF of that type in a
 * memfd, parsed by gguf_init_from_file.  Ids are contiguous, so probing
 * stops at the first one refused.
 */
#include "dequant.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_TYPES 256 /* ids probed at most */

const char *const gguf_ggml_places[] = {
    "/usr/local/lib/libggml-base.so",
    "/usr/local/lib64/libggml-base.so",
    "/usr/lib/x86_64-linux-gnu/libggml-base.so",
    "/usr/lib/x86_64-linux-gnu/libggml-base.so.0",
    "/usr/lib/aarch64-linux-gnu/libggml-base.so",
    "/usr/lib/aarch64-linux-gnu/libggml-base.so.0",
    "/usr/lib64/libggml-base.so",
    "/usr/lib/libggml-base.so",
    "/opt/llama.cpp/lib/libggml-base.so",
    NULL,
};

/* ggml's ABI, as declared in its ggml.h and gguf.h. */
struct abi_traits {
    const char *type_name;
    int64_t blck_size;
    int64_t blck_size_interleave;
    size_t type_size;
    bool is_quantized;
    gguf_to_float_fn to_float;
    void *from_float_ref;
};
struct abi_gguf_params {
    bool no_alloc;
    void **ctx;
};
typedef void (*abi_log_fn)(int level, const char *text, void *user);

struct gguf_ggml {
    void *h;
    char *path;
    uint32_t n_types; /* ids below this one are ggml's */
    struct gguf_dq t[MAX_TYPES];
    char names[MAX_TYPES][32]; /* copies of ggml's names of ids >= 40 */
};

static void quiet_log(int level, const char *text, void *user) {
    (void)level;
    (void)text;
    (void)user;
}

/* True if st is owned by root or euid and writable by nobody else. */
static int owned_safely(const struct stat *st) {
    return (st->st_uid == 0 || st->st_uid == geteuid()) &&
           !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* Opens the library file at path (symlinks resolved) after the checks in
 * the top comment; the fd, or -1 with err. */
static int open_checked(const char *path, char **real, struct gguf_error *err) {
    struct stat st, dst;
    *real = realpath(path, NULL);
    if (!*real) {
        gguf_fail(err, GGUF_E_IO, "%s: %s", path, strerror(errno));
        err->sys_errno = errno;
        return -1;
    }
    int fd = open(*real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 || fstat(fd, &st) != 0) {
        gguf_fail(err, GGUF_E_IO, "%s: %s", *real, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    char *slash = strrchr(*real, '/'); /* realpath: absolute */
    *slash = '\0';
    int dir_ok =
        stat(slash == *real ? "/" : *real, &dst) == 0 && owned_safely(&dst);
    *slash = '/';
    if (!S_ISREG(st.st_mode) || !owned_safely(&st) || !dir_ok) {
        gguf_fail(err, GGUF_E_PERM,
                  "%s: not used: a library must be a regular file owned by "
                  "root (or you) and writable by nobody else, in such a "
                  "directory",
                  *real);
        close(fd);
        return -1;
    }
    return fd;
}

/* Writes a GGUF with one empty tensor of type t into a memfd; the fd or
 * -1. */
static int probe_file(uint32_t t) {
    uint8_t b[64] = "GGUF";
    size_t n = 4;
#define PUT(v, w)                                                              \
    do {                                                                       \
        uint64_t v_ = (v);                                                     \
        for (int i_ = 0; i_ < (w); i_++)                                       \
            b[n++] = (uint8_t)(v_ >> (8 * i_));                                \
    } while (0)
    PUT(3, 4); /* version */
    PUT(1, 8); /* tensors */
    PUT(0, 8); /* keys */
    PUT(1, 8); /* name length */
    b[n++] = 't';
    PUT(1, 4); /* dimensions */
    PUT(0, 8); /* ne[0]: no elements, a multiple of any block */
    PUT(t, 4); /* type */
    PUT(0, 8); /* offset */
#undef PUT
    n = (n + 31) / 32 * 32; /* the data section starts here, empty */
    int fd = memfd_create("ggufs-probe", MFD_CLOEXEC);
    if (fd >= 0 && write(fd, b, n) != (ssize_t)n) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Records type t of ggml (traits tr) in g; false if its sizes make no
 * sense. */
static bool take(gguf_ggml *g, uint32_t t, const struct abi_traits *tr,
                 const char *name) {
    if (!tr->to_float || tr->blck_size < 1 || tr->blck_size > 4096 ||
        tr->type_size < 1 || tr->type_size > 65536)
        return false;
    g->t[t] = (struct gguf_dq){.type = t,
                               .name = name,
                               .blck = (uint32_t)tr->blck_size,
                               .size = (uint32_t)tr->type_size,
                               .to_float = tr->to_float,
                               .ggml = true};
    return true;
}

/* The checks and the table (top comment).  GGUF_OK or a refusal. */
static enum gguf_status learn(gguf_ggml *g, struct gguf_error *err) {
    const struct abi_traits *(*traits)(int) =
        (const struct abi_traits *(*)(int))dlsym(g->h, "ggml_get_type_traits");
    int64_t (*blck)(int) = (int64_t(*)(int))dlsym(g->h, "ggml_blck_size");
    size_t (*tsize)(int) = (size_t(*)(int))dlsym(g->h, "ggml_type_size");
    void *(*init)(const char *, struct abi_gguf_params) =
        (void *(*)(const char *, struct abi_gguf_params))dlsym(
            g->h, "gguf_init_from_file");
    void (*gfree)(void *) = (void (*)(void *))dlsym(g->h, "gguf_free");
    void (*log_set)(abi_log_fn, void *) =
        (void (*)(abi_log_fn, void *))dlsym(g->h, "ggml_log_set");
    if (!traits || !blck || !tsize || !init || !gfree)
        return gguf_fail(err, GGUF_E_UNSUPPORTED,
                         "%s: not used: it lacks ggml_get_type_traits, "
                         "ggml_blck_size, ggml_type_size or "
                         "gguf_init_from_file",
                         g->path);
    for (uint32_t t = 0; t < 40; t++) {
        if (!gguf_ggml_type_known(t))
            continue;
        const struct abi_traits *tr = traits((int)t);
        uint32_t b = gguf_ggml_blck_size(t), s = gguf_ggml_type_size(t);
        if (!tr || !tr->type_name ||
            strcmp(tr->type_name, gguf_ggml_type_name(t)) != 0 ||
            tr->blck_size != (int64_t)b || tr->type_size != s ||
            blck((int)t) != (int64_t)b || tsize((int)t) != s)
            return gguf_fail(err, GGUF_E_UNSUPPORTED,
                             "%s: not used: its type %u is not ggufs's %s "
                             "(%u elements in %u bytes per block)",
                             g->path, t, gguf_ggml_type_name(t), b, s);
        if (t != 0) /* f32 has no to_float: a copy */
            take(g, t, tr, gguf_ggml_type_name(t));
    }
    g->n_types = 40;
    if (log_set)
        log_set(quiet_log, NULL);
    for (uint32_t t = 40; t < MAX_TYPES; t++) {
        int fd = probe_file(t);
        char p[64];
        snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
        void *c =
            fd >= 0 ? init(p, (struct abi_gguf_params){true, NULL}) : NULL;
        if (fd >= 0)
            close(fd);
        if (!c)
            break;
        gfree(c);
        g->n_types = t + 1;
        const struct abi_traits *tr = traits((int)t);
        if (!tr || !tr->type_name)
            continue;
        snprintf(g->names[t], sizeof g->names[t], "%s", tr->type_name);
        take(g, t, tr, g->names[t]);
    }
    if (log_set)
        log_set(NULL, NULL);
    return GGUF_OK;
}

static enum gguf_status load_one(gguf_ggml *g, const char *path,
                                 struct gguf_error *err) {
    int fd = open_checked(path, &g->path, err);
    if (fd < 0)
        return err->code;
    char p[64];
    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    g->h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
    close(fd);
    if (!g->h)
        return gguf_fail(err, GGUF_E_UNSUPPORTED, "%s: not used: %s", g->path,
                         dlerror());
    return learn(g, err);
}

static void clear(gguf_ggml *g) {
    if (g->h)
        dlclose(g->h);
    free(g->path);
    memset(g, 0, sizeof *g);
}

enum gguf_status gguf_ggml_load(gguf_ggml **out, const char *path,
                                struct gguf_error *err) {
    gguf_ggml *g = calloc(1, sizeof *g);
    enum gguf_status st = GGUF_E_NOTFOUND;
    *out = NULL;
    if (!g)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory loading ggml");
    if (path) {
        st = load_one(g, path, err);
    } else {
        for (int i = 0; gguf_ggml_places[i]; i++) {
            if (access(gguf_ggml_places[i], F_OK) != 0)
                continue;
            if ((st = load_one(g, gguf_ggml_places[i], err)) == GGUF_OK)
                break;
            clear(g);
        }
        if (st == GGUF_E_NOTFOUND)
            gguf_fail(
                err, st, "no libggml-base.so in %s, ... (%d places)",
                gguf_ggml_places[0],
                (int)(sizeof gguf_ggml_places / sizeof *gguf_ggml_places - 1));
    }
    if (st != GGUF_OK) {
        gguf_ggml_unload(g);
        return st;
    }
    *out = g;
    return GGUF_OK;
}

void gguf_ggml_unload(gguf_ggml *g) {
    if (!g)
        return;
    clear(g);
    free(g);
}

const char *gguf_ggml_path(const gguf_ggml *g) {
    return g ? g->path : NULL;
}

bool gguf_ggml_dq(const gguf_ggml *g, uint32_t t, struct gguf_dq *dq) {
    if (!g || t >= g->n_types || !g->t[t].to_float)
        return false;
    *dq = g->t[t];
    return true;
}
