/*
 * overlay.c - the edits of a model that must not change, kept in a file
 * of their own (gguf.h, overlays): which source an overlay belongs to,
 * reading it as hostile input, applying it, and writing it crash-safely.
 *
 * The file.  A tensor-less GGUF, version 3 (2 for a v2 source): first the
 * overlay's own keys
 *   ggufs.overlay.version             uint32  GGUF_OVERLAY_VERSION
 *   ggufs.overlay.source              string  absolute path, or URL
 *   ggufs.overlay.source_size         uint64  bytes, every shard counted
 *   ggufs.overlay.source_shards       uint32  files in the set
 *   ggufs.overlay.source_header_hash  string  "xxh3-128:" 32 hex digits
 *   ggufs.overlay.source_etag         string  remote sources only
 *   ggufs.overlay.base                array of strings: for each key the
 *                                     edits set or remove, its base (its
 *                                     value in the source the overlay was
 *                                     written against) as "HASH KEY", HASH
 *                                     "xxh3-128:" and 32 hex digits of the
 *                                     value's payload seeded with its type,
 *                                     or "none" (the source lacked it)
 * then the edits file of the edited model against the source, changes
 * only, as saved.c writes it (gguf_edits_serialize: one rule for what an
 * edit is): every key the source lacks or holds with another type or
 * value, in the edited model's order (ggufs's padding left out), then,
 * when keys of the source are gone,
 *   ggufs.removed_keys                array of their names  So the overlay costs what the edits cost,
 * not what the header does (a mount with one reads and checks a few keys,
 * not a second copy of a 150k-token vocabulary), and shows exactly what
 * was changed.  Any
 * GGUF reader (ggml's included) reads it; ggufs never shows the overlay's
 * own keys in meta/ (they never enter the model's context).
 *
 * Rebase.  When the source changes (a new ETag, a local file edited),
 * the bases tell which edited keys upstream also changed: a key whose
 * value in the new source is neither its base nor the overlay's value
 * (gguf_overlay_conflicts).  Hashes, not values: the question is only
 * "changed?", and an edit of a 150k-token array must not cost a second
 * copy.  An overlay written before bases were recorded (no
 * ggufs.overlay.base; older ggufs ignore the key) has none: every edited
 * key whose upstream value is not the overlay's counts as changed.
 *
 * Where.  -o overlay=PATH names it; by default it is in the user's state
 * directory (state.c: checked as hostile, created 0700) as
 * HASH.overlay.gguf, HASH the 64-bit FNV-1a of the source's absolute path
 * (or URL), so that a model in a directory nobody may write (an ollama
 * blob, a read-only store, a remote file) can have one (ovplace.c, with
 * the trust rule's checks of the file's kind, owner, mode and links).
 *
 * Trust.  ggufs may run as root and the overlay's directory may be shared:
 * the overlay is opened relative to its directory's descriptor with
 * O_NOFOLLOW and O_NONBLOCK, and used only if it is a regular file with
 * one link, owned by the effective user, writable by nobody else, at most
 * GGUF_STATE_MAX bytes, and a valid GGUF with the keys above.  Anything
 * else is refused with one line naming the file, never followed, never
 * removed.
 *
 * Crash safety.  The source is never opened for writing.  The overlay is
 * replaced whole (gguf_replace, durable.c): a new file beside it
 * (NAME.ggufs-tmp-RANDOM, created exclusively, 0600), written, fsync'ed,
 * renamed over NAME, the directory fsync'ed.  A kill at any instant leaves the old overlay or the new one,
 * never a mix; a temporary file left by a kill is removed by the next
 * write (only regular files of the effective user with exactly that
 * name pattern).  Fault points (GGUFS_FAULT=N, as commit.c's), per write:
 *   1 create new overlay   2 write new overlay   3 fsync new overlay
 *   4 rename over overlay  5 fsync directory
 *
 * Lock.  One writer per overlay: two mounts given the same -o
 * overlay=PATH (or two mounts of one URL, which has no file to lock)
 * would each rewrite it.  The overlay itself is replaced by rename, so
 * the lock is a file of its own beside it, NAME.ggufs-lock (named by
 * gguf_sidecar_path), created 0600, opened O_NOFOLLOW and trusted only
 * as the overlay is; held by flock(LOCK_EX) until its descriptor is closed
 * (the process's end releases it).  It exists only while held: the holder
 * removes it, still holding it, as it lets go (gguf_overlay_unlock), and a
 * taker that got the flock checks that the name still leads to the file
 * it locked, else takes the new one (a removed lock file must never let
 * two holders lock two different files).  A killed holder leaves it; the
 * next one takes it over and removes it in turn.  The holder
 * writes a line of its own into it (who holds it, for the next one's
 * message); that text is read back bounded and with control bytes
 * replaced, never trusted.
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define K_VERSION GGUF_OVERLAY_NS "version"
#define K_SOURCE GGUF_OVERLAY_NS "source"
#define K_SIZE GGUF_OVERLAY_NS "source_size"
#define K_SHARDS GGUF_OVERLAY_NS "source_shards"
#define K_HASH GGUF_OVERLAY_NS "source_header_hash"
#define K_ETAG GGUF_OVERLAY_NS "source_etag"
#define K_BASE GGUF_OVERLAY_NS "base"
#define BASE_NONE "none"
#define BASE_HASH_LEN 41 /* "xxh3-128:" and 32 hex digits */
#define TMP_SUFFIX ".ggufs-tmp-"
#define LOCK_SUFFIX ".ggufs-lock"

enum gguf_status gguf_overlay_identify(gguf_ctx *const *v, int n,
                                       const char *source, bool remote,
                                       const char *etag,
                                       struct gguf_overlay_id *id,
                                       struct gguf_error *err) {
    memset(id, 0, sizeof *id);
    if (!source || strlen(source) >= sizeof id->source ||
        (etag && strlen(etag) >= sizeof id->etag))
        return gguf_fail(err, GGUF_E_RANGE,
                         "the source's name or ETag is too long for an "
                         "overlay");
    /* The overlay's own keys would clash with the model's. */
    for (int64_t i = 0; n > 0 && i < gguf_n_kv(v[0]); i++) {
        size_t kl;
        const char *k = gguf_kv_key(v[0], i, &kl);
        char q[GGUF_QUOTE_MAX];
        if (gguf_key_is_overlay(k, kl))
            return gguf_fail(err, GGUF_E_PERM,
                             "the model has a key '%s' in the namespace of "
                             "ggufs's overlays (" GGUF_OVERLAY_NS "): it "
                             "cannot have an overlay",
                             gguf_quote(q, sizeof q, k, kl));
    }
    XXH3_state_t *h = XXH3_createState();
    if (!h)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    XXH3_128bits_reset(h);
    for (int s = 0; s < n; s++) {
        XXH3_128bits_update(h, v[s]->hdr, v[s]->hdr_len);
        id->size += v[s]->file_size;
    }
    XXH128_hash_t x = XXH3_128bits_digest(h);
    XXH3_freeState(h);
    snprintf(id->hash, sizeof id->hash, "xxh3-128:%016" PRIx64 "%016" PRIx64,
             (uint64_t)x.high64, (uint64_t)x.low64);
    snprintf(id->source, sizeof id->source, "%s", source);
    if (etag)
        snprintf(id->etag, sizeof id->etag, "%s", etag);
    id->remote = remote;
    id->shards = (uint32_t)n;
    return GGUF_OK;
}

/* The string value of key k in ov into out (n bytes); false if absent,
 * not a string, or too long. */
static bool get_str(const gguf_ctx *ov, const char *k, char *out, size_t n) {
    const char *s;
    size_t len;
    int64_t i = gguf_find_key(ov, k, strlen(k));
    if (i < 0 || !gguf_kv_get_str(ov, i, &s, &len) || len >= n ||
        memchr(s, '\0', len))
        return false;
    memcpy(out, s, len);
    out[len] = '\0';
    return true;
}

static bool get_u64(const gguf_ctx *ov, const char *k, uint64_t *out) {
    int64_t i = gguf_find_key(ov, k, strlen(k));
    return i >= 0 && gguf_kv_get_u64(ov, i, out);
}

/* The identity an overlay records. */
static enum gguf_status id_of(const gguf_ctx *ov, const char *shown,
                              struct gguf_overlay_id *id,
                              struct gguf_error *err) {
    uint64_t ver = 0, shards = 0;
    memset(id, 0, sizeof *id);
    const char *missing =
        !get_u64(ov, K_VERSION, &ver)                           ? K_VERSION
        : !get_str(ov, K_SOURCE, id->source, sizeof id->source) ? K_SOURCE
        : !get_u64(ov, K_SIZE, &id->size)                       ? K_SIZE
        : !get_u64(ov, K_SHARDS, &shards)                       ? K_SHARDS
        : !get_str(ov, K_HASH, id->hash, sizeof id->hash)       ? K_HASH
                                                                : NULL;
    if (missing)
        return gguf_fail(err, GGUF_E_FORMAT,
                         "%s is not a ggufs overlay (no valid key %s)", shown,
                         missing);
    if (ver != GGUF_OVERLAY_VERSION || shards == 0 || shards > 99999)
        return gguf_fail(err, GGUF_E_FORMAT,
                         "%s is an overlay of version %llu for %llu files: "
                         "not understood",
                         shown, (unsigned long long)ver,
                         (unsigned long long)shards);
    id->shards = (uint32_t)shards;
    id->remote = get_str(ov, K_ETAG, id->etag, sizeof id->etag);
    return GGUF_OK;
}

enum gguf_status gguf_overlay_parse(const uint8_t *p, size_t n,
                                    const char *shown, gguf_ctx **ov,
                                    struct gguf_overlay_id *id,
                                    struct gguf_error *err) {
    struct gguf_error e2 = {0};
    enum gguf_status st;
    *ov = NULL;
    if (gguf_open_mem(ov, p, n, GGUF_OPEN_ALLOW_NESTED, &e2) != GGUF_OK)
        return gguf_fail(err, GGUF_E_FORMAT,
                         "overlay %s is not a valid GGUF: %s", shown, e2.msg);
    if ((st = id_of(*ov, shown, id, err)) != GGUF_OK) {
        gguf_close(*ov);
        *ov = NULL;
    }
    return st;
}

enum gguf_status gguf_overlay_load(const char *path, const char *source,
                                   gguf_ctx **ov, struct gguf_overlay_id *id,
                                   bool *found, struct gguf_error *err) {
    char base[256], shown[4096];
    bool absent;
    struct stat sb;
    uint8_t *p = NULL;
    enum gguf_status st = GGUF_OK;
    int fd = -1;

    *ov = NULL;
    *found = false;
    int dfd = gguf_ovl_open_parent(path, source, false, base, sizeof base,
                                   shown, sizeof shown, &absent, err);
    if (dfd < 0)
        return absent ? GGUF_OK : (err && err->code ? err->code : GGUF_E_IO);
    /* O_NONBLOCK: a FIFO planted under the name must not hang us. */
    fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            goto out;
        st = errno == ELOOP
                 ? gguf_fail(err, GGUF_E_PERM,
                             "overlay %s is a symbolic link: not "
                             "used",
                             shown)
                 : gguf_sys_fail(err, errno, "cannot open overlay %s", shown);
        goto out;
    }
    if (fstat(fd, &sb) < 0) {
        st = gguf_sys_fail(err, errno, "cannot stat overlay %s", shown);
        goto out;
    }
    if ((st = gguf_ovl_check_trusted(&sb, "overlay", shown, err)) != GGUF_OK)
        goto out;
    if ((uint64_t)sb.st_size > GGUF_STATE_MAX) {
        st = gguf_fail(err, GGUF_E_RANGE,
                       "overlay %s is %lld bytes, more than the %llu an "
                       "overlay may have",
                       shown, (long long)sb.st_size,
                       (unsigned long long)GGUF_STATE_MAX);
        goto out;
    }
    size_t n = (size_t)sb.st_size;
    if (!(p = malloc(n ? n : 1))) {
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory reading %s", shown);
        goto out;
    }
    if ((st = gguf_pread_full(fd, p, n, 0, shown, err)) != GGUF_OK)
        goto out;
    if ((st = gguf_overlay_parse(p, n, shown, ov, id, err)) != GGUF_OK)
        goto out;
    *found = true;
out:
    if (st != GGUF_OK && *ov) {
        gguf_close(*ov);
        *ov = NULL;
    }
    free(p);
    if (fd >= 0)
        close(fd);
    close(dfd);
    return st;
}

/* Appends ", " (unless first) and a printf'ed clause to why. */
static void clause(char *why, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void clause(char *why, size_t n, const char *fmt, ...) {
    size_t used = strlen(why);
    if (used && used + 2 < n) {
        strcat(why, ", ");
        used += 2;
    }
    if (used + 1 >= n)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why + used, n - used, fmt, ap);
    va_end(ap);
}

bool gguf_overlay_matches(const struct gguf_overlay_id *made,
                          const struct gguf_overlay_id *now, char *why,
                          size_t n) {
    why[0] = '\0';
    if (made->remote != now->remote)
        clause(why, n, "made for a %s source, this one is %s",
               made->remote ? "remote" : "local",
               now->remote ? "remote" : "local");
    if (made->remote && now->remote && strcmp(made->source, now->source) != 0)
        clause(why, n, "made for %s", made->source);
    if (made->remote && now->remote && strcmp(made->etag, now->etag) != 0)
        clause(why, n, "made for the server's version (%s), it now has %s",
               made->etag, now->etag);
    if (made->shards != now->shards)
        clause(why, n, "made for a set of %u files, the source has %u",
               (unsigned)made->shards, (unsigned)now->shards);
    if (made->size != now->size)
        clause(why, n, "made for %llu bytes, the source has %llu",
               (unsigned long long)made->size, (unsigned long long)now->size);
    if (strcmp(made->hash, now->hash) != 0)
        clause(why, n, "made for the header %s, the source's is %s", made->hash,
               now->hash);
    return why[0] == '\0';
}

/* True if key i of a has the same type and value in b (found by name). */
static bool same_kv(const gguf_ctx *a, int64_t i, const gguf_ctx *b) {
    size_t kl;
    const char *k = gguf_kv_key(a, i, &kl);
    return gguf_kv_same(a, i, b, gguf_find_key(b, k, kl));
}

enum gguf_status gguf_overlay_apply(gguf_ctx *ctx, const gguf_ctx *ov,
                                    int64_t *set, int64_t *removed,
                                    struct gguf_error *err) {
    return gguf_edits_apply(ctx, ov, NULL, set, removed, err);
}

/* The hash text of key k's value in ctx (type and payload, as same_kv
 * compares them) into out: "xxh3-128:" and 32 hex digits, or "none"
 * when ctx has no such key. */
static void value_hash(const gguf_ctx *ctx, const char *k, size_t kl,
                       char out[BASE_HASH_LEN + 1]) {
    int64_t j = gguf_find_key(ctx, k, kl);
    if (j < 0) {
        strcpy(out, BASE_NONE);
        return;
    }
    size_t pl;
    const uint8_t *pay = gguf_kv_payload(ctx, j, &pl);
    /* The type as the seed: one payload under two types differs. */
    XXH128_hash_t x =
        XXH3_128bits_withSeed(pay, pl, (XXH64_hash_t)gguf_kv_type(ctx, j));
    snprintf(out, BASE_HASH_LEN + 1, "xxh3-128:%016" PRIx64 "%016" PRIx64,
             (uint64_t)x.high64, (uint64_t)x.low64);
}

/* Whether key k's value in src is the one the overlay ov recorded as its
 * base (K_BASE, its bi-th key); false when ov recorded none for k.  The
 * bases are in the order of the keys they are for, so the search starts
 * at *cur, where the last one left off (one pass for an overlay ggufs
 * wrote), and goes round once. */
static bool base_is(const gguf_ctx *ov, int64_t bi, const gguf_ctx *src,
                    const char *k, size_t kl, size_t *cur) {
    char h[BASE_HASH_LEN + 1];
    size_t n, el;
    uint64_t start = *cur ? *cur : 12;
    const uint8_t *p = gguf_kv_payload(ov, bi, &n);
    /* From start to the end, then from the first base to start (the
     * payload was validated by the parser: whole strings to its end). */
    for (int pass = 0; pass < 2; pass++) {
        uint64_t off = pass ? 12 : start, end = pass ? start : n;
        while (off < end) {
            const char *e = gguf_edits_next_name(p, &off, &el);
            const char *sp = memchr(e, ' ', el);
            if (!sp || (size_t)(e + el - sp - 1) != kl ||
                memcmp(sp + 1, k, kl) != 0)
                continue;
            *cur = off;
            value_hash(src, k, kl, h);
            return (size_t)(sp - e) == strlen(h) &&
                   memcmp(e, h, strlen(h)) == 0;
        }
    }
    return false;
}

/* Appends key k to the conflict list (", " between). */
static enum gguf_status add_name(struct gguf_buf *names, int64_t *n,
                                 const char *k, size_t kl) {
    enum gguf_status st = ++*n > 1 ? gguf_buf_add(names, ", ", 2) : GGUF_OK;
    return st == GGUF_OK ? gguf_buf_add(names, k, kl) : st;
}

enum gguf_status gguf_overlay_conflicts(const gguf_ctx *ov, const gguf_ctx *src,
                                        struct gguf_buf *names, int64_t *n,
                                        bool *based, struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    int64_t bi = gguf_find_key(ov, K_BASE, sizeof K_BASE - 1);
    size_t cur = 0; /* base_is's place in the bases */
    *n = 0;
    *based = bi >= 0 && gguf_kv_type(ov, bi) == GGUF_TYPE_ARRAY &&
             gguf_kv_arr_type(ov, bi) == GGUF_TYPE_STRING;
    for (int64_t i = 0; st == GGUF_OK && i < gguf_n_kv(ov); i++) {
        size_t kl, pl;
        const char *k = gguf_kv_key(ov, i, &kl);
        if (gguf_key_is_overlay(k, kl) || gguf_kv_is_padding(ov, i))
            continue;
        if (!gguf_edits_is_removal(ov, i)) {
            /* Set: no conflict when upstream holds the overlay's value. */
            if (!same_kv(ov, i, src) &&
                !(*based && base_is(ov, bi, src, k, kl, &cur)))
                st = add_name(names, n, k, kl);
            continue;
        }
        if (gguf_kv_arr_type(ov, i) != GGUF_TYPE_STRING)
            continue; /* applying it says what is wrong */
        const uint8_t *p = gguf_kv_payload(ov, i, &pl);
        size_t rl;
        for (uint64_t off = 12; st == GGUF_OK && off < pl;) {
            const char *r = gguf_edits_next_name(p, &off, &rl);
            if (gguf_find_key(src, r, rl) >= 0 &&
                !(*based && base_is(ov, bi, src, r, rl, &cur)))
                st = add_name(names, n, r, rl);
        }
    }
    return st == GGUF_OK ? GGUF_OK
                         : gguf_fail(err, st, "out of memory comparing keys");
}

/* ---- writing ------------------------------------------------------- */

/* One of the overlay's own keys, as a payload. */
struct own_kv {
    const char *key;
    uint32_t type;
    uint8_t val[8];
    const char *str; /* strings: the bytes, val unused */
};

static uint64_t own_len(const struct own_kv *o) {
    return o->str ? 8 + strlen(o->str) : gguf_type_size(o->type);
}

static uint8_t *put_own(uint8_t *p, const struct own_kv *o) {
    uint64_t kl = strlen(o->key);
    if (o->str) {
        p = gguf_put_kv(p, o->key, kl, o->type, NULL, 0);
        return gguf_put_str(p, o->str, strlen(o->str));
    }
    return gguf_put_kv(p, o->key, kl, o->type, o->val, own_len(o));
}

/* One entry of K_BASE for key k (its value in disk), as an array element
 * (uint64 length, bytes) appended to list; *n counts it. */
static enum gguf_status add_base(struct gguf_buf *list, const gguf_ctx *disk,
                                 const char *k, size_t kl, uint64_t *n) {
    char h[BASE_HASH_LEN + 1];
    uint8_t len[8];
    value_hash(disk, k, kl, h);
    size_t hl = strlen(h);
    gguf_wr64(len, hl + 1 + kl);
    ++*n;
    enum gguf_status st = gguf_buf_add(list, len, sizeof len);
    if (st == GGUF_OK)
        st = gguf_buf_add(list, h, hl);
    if (st == GGUF_OK)
        st = gguf_buf_add(list, " ", 1);
    return st == GGUF_OK ? gguf_buf_add(list, k, kl) : st;
}

/* The elements of K_BASE (header comment) for the edits of ctx against
 * disk: every key ctx sets that disk lacks or holds otherwise, then every
 * key of disk ctx lacks; *n counts them. */
static enum gguf_status base_list(const gguf_ctx *ctx, const gguf_ctx *disk,
                                  struct gguf_buf *list, uint64_t *n) {
    enum gguf_status st = GGUF_OK;
    size_t kl;
    *n = 0;
    for (int64_t i = 0; st == GGUF_OK && i < gguf_n_kv(ctx); i++) {
        const char *k = gguf_kv_key(ctx, i, &kl);
        if (!gguf_kv_is_padding(ctx, i) && !same_kv(ctx, i, disk))
            st = add_base(list, disk, k, kl, n);
    }
    for (int64_t i = 0; st == GGUF_OK && i < gguf_n_kv(disk); i++) {
        const char *k = gguf_kv_key(disk, i, &kl);
        if (!gguf_kv_is_padding(disk, i) && gguf_find_key(ctx, k, kl) < 0)
            st = add_base(list, disk, k, kl, n);
    }
    return st;
}

/* The overlay's bytes (header comment) into b: its own keys, then the
 * edits file of ctx against disk (the source as opened) that saved.c
 * writes, changes only: one rule for what an edit is. */
static enum gguf_status serialize(const gguf_ctx *ctx, const gguf_ctx *disk,
                                  const struct gguf_overlay_id *id,
                                  const struct gguf_overlay_tensor *t,
                                  size_t nt, struct gguf_buf *b,
                                  struct gguf_error *err) {
    struct own_kv own[6] = {
        {.key = K_VERSION, .type = GGUF_TYPE_UINT32},
        {.key = K_SOURCE, .type = GGUF_TYPE_STRING, .str = id->source},
        {.key = K_SIZE, .type = GGUF_TYPE_UINT64},
        {.key = K_SHARDS, .type = GGUF_TYPE_UINT32},
        {.key = K_HASH, .type = GGUF_TYPE_STRING, .str = id->hash},
        {.key = K_ETAG, .type = GGUF_TYPE_STRING, .str = id->etag},
    };
    gguf_wr32(own[0].val, GGUF_OVERLAY_VERSION);
    gguf_wr64(own[2].val, id->size);
    gguf_wr32(own[3].val, id->shards);
    int n_own = id->remote ? 6 : 5;
    struct gguf_buf list = {0}, lead = {0};
    uint64_t n_base = 0, size = 0;
    enum gguf_status st = base_list(ctx, disk, &list, &n_base);
    if (st != GGUF_OK) {
        st = gguf_fail(err, st, "out of memory writing the overlay");
        goto out;
    }
    for (int o = 0; o < n_own; o++)
        size += gguf_kv_record_size(strlen(own[o].key), own_len(&own[o]));
    size += gguf_kv_record_size(sizeof K_BASE - 1, 12 + list.len);
    if (size > SIZE_MAX || gguf_buf_reserve(&lead, (size_t)size) != GGUF_OK) {
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory writing the overlay");
        goto out;
    }
    uint8_t *p = lead.p;
    for (int o = 0; o < n_own; o++)
        p = put_own(p, &own[o]);
    p = gguf_put_kv(p, K_BASE, sizeof K_BASE - 1, GGUF_TYPE_ARRAY, NULL, 0);
    gguf_wr32(p, GGUF_TYPE_STRING);
    gguf_wr64(p + 4, n_base);
    if (list.len)
        memcpy(p + 12, list.p, list.len);
    lead.len = (size_t)size;
    /* The tensors it holds (ovtensors.c), when it holds any. */
    if (nt && gguf_ovl_tensors_kv(t, nt, &lead) != GGUF_OK) {
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory writing the overlay");
        goto out;
    }
    st = gguf_edits_serialize_led(ctx, disk, true, lead.p, lead.len,
                                  (uint64_t)n_own + 1 + (nt ? 1 : 0), b, err);
out:
    gguf_buf_free(&list);
    gguf_buf_free(&lead);
    return st;
}

/* The temporary name's prefix for base: the name beside it, cut like
 * every name ggufs makes beside a file, up to the random part. */
static char *tmp_prefix(const char *base) {
    char *s = gguf_sidecar_path(base, TMP_SUFFIX "00000000");
    if (s)
        s[strlen(s) - 8] = '\0';
    return s;
}

/* Removes what a killed write left in dfd: regular files of ours named
 * prefix and 8 hex digits. */
static void remove_stale(int dfd, const char *prefix) {
    int d2 = dup(dfd);
    DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
    size_t pl = strlen(prefix);
    if (!d) {
        if (d2 >= 0)
            close(d2);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat sb;
        const char *r = e->d_name + pl;
        if (strncmp(e->d_name, prefix, pl) != 0 || strlen(r) != 8 ||
            strspn(r, "0123456789abcdef") != 8 ||
            fstatat(dfd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(sb.st_mode) || sb.st_uid != geteuid())
            continue;
        (void)unlinkat(dfd, e->d_name, 0);
    }
    closedir(d);
}

/* The steps of the header comment, into dfd as base (gguf_replace). */
static enum gguf_status replace(int dfd, const char *base, const char *shown,
                                const struct gguf_buf *b,
                                struct gguf_error *err) {
    struct gguf_faults f;
    enum gguf_status st = GGUF_OK;
    struct gguf_replace r = {.dfd = dfd,
                             .name = base,
                             .shown = shown,
                             .what = "overlay",
                             .f = &f,
                             .same_as = -1};
    char *prefix = tmp_prefix(base);
    if (!prefix)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    remove_stale(dfd, prefix);
    snprintf(r.tmp, sizeof r.tmp, "%sXXXXXXXX", prefix);
    free(prefix);
    gguf_faults_init(&f);
    st = gguf_replace_open(&r, 0600, GGUF_REPLACE_RANDOM, err);
    if (st != GGUF_OK)
        goto out;
    gguf_fault_point(&f, "write new overlay");
    st = gguf_pwrite_full(r.fd, b->p, b->len, 0, "the new overlay", err);
    if (st == GGUF_OK)
        st = gguf_replace_commit(&r, err);
out:
    gguf_replace_end(&r);
    return st;
}

enum gguf_status gguf_overlay_write(const char *path, const gguf_ctx *ctx,
                                    const gguf_ctx *disk,
                                    const struct gguf_overlay_id *id,
                                    const struct gguf_overlay_tensor *t,
                                    size_t nt, struct gguf_error *err) {
    char base[256], shown[4096];
    struct gguf_buf b = {0};
    struct stat sb;
    bool absent;
    int dfd = gguf_ovl_open_parent(path, id->source, true, base, sizeof base,
                                   shown, sizeof shown, &absent, err);
    if (dfd < 0)
        return err && err->code ? err->code : GGUF_E_IO;
    /* What is there must be ours to replace: never a rename over a file
     * someone else put there (a rename replaces a symlink itself, but a
     * hostile name is a sign to stop, not to overwrite). */
    enum gguf_status st = GGUF_OK;
    if (fstatat(dfd, base, &sb, AT_SYMLINK_NOFOLLOW) == 0)
        st = gguf_ovl_check_trusted(&sb, "overlay", shown, err);
    else if (errno != ENOENT)
        st = gguf_sys_fail(err, errno, "cannot stat overlay %s", shown);
    if (st == GGUF_OK)
        st = serialize(ctx, disk, id, t, nt, &b, err);
    if (st == GGUF_OK)
        st = replace(dfd, base, shown, &b, err);
    gguf_buf_free(&b);
    close(dfd);
    return st;
}

enum gguf_status gguf_overlay_remove(const char *path, const char *source,
                                     bool *found, struct gguf_error *err) {
    char base[256], shown[4096];
    struct stat sb;
    bool absent;
    *found = false;
    int dfd = gguf_ovl_open_parent(path, source, false, base, sizeof base,
                                   shown, sizeof shown, &absent, err);
    if (dfd < 0)
        return absent ? GGUF_OK : (err && err->code ? err->code : GGUF_E_IO);
    enum gguf_status st = GGUF_OK;
    if (fstatat(dfd, base, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno != ENOENT)
            st = gguf_sys_fail(err, errno, "cannot stat overlay %s", shown);
        goto out;
    }
    if ((st = gguf_ovl_check_trusted(&sb, "overlay", shown, err)) != GGUF_OK)
        goto out;
    if (unlinkat(dfd, base, 0) < 0) {
        st = gguf_sys_fail(err, errno, "cannot remove overlay %s", shown);
        goto out;
    }
    *found = true;
    st = gguf_fsync_dirfd(dfd, shown, err);
    if (st == GGUF_OK) /* its tensors' bytes go with it */
        st = gguf_overlay_data_remove(path, source, err);
out:
    close(dfd);
    return st;
}

/* What the holder of a busy lock wrote there, bounded, control bytes
 * other than newlines made '?'. */
static void read_holder(int fd, char *out, size_t n) {
    if (!out || !n)
        return;
    ssize_t r = pread(fd, out, n - 1, 0);
    out[r > 0 ? r : 0] = '\0';
    for (char *p = out; *p; p++)
        if ((*p != '\n' && (unsigned char)*p < 0x20) || *p == 0x7f)
            *p = '?';
}

/* Opens the lock file lname in dfd, checked (the lock's name shown). */
static enum gguf_status open_lock(int dfd, const char *lname, const char *shown,
                                  int *fd, struct gguf_error *err) {
    struct stat sb;
    /* O_NONBLOCK, O_NOCTTY: whatever was planted there must not hang or
     * take us; nothing is written before the checks. */
    *fd = openat(dfd, lname,
                 O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
                     O_CLOEXEC,
                 0600);
    if (*fd < 0)
        return errno == ELOOP
                   ? gguf_fail(err, GGUF_E_PERM,
                               "overlay lock %s is a symbolic link: not used",
                               shown)
                   : gguf_sys_fail(err, errno, "cannot open overlay lock %s",
                                   shown);
    enum gguf_status st =
        fstat(*fd, &sb) < 0
            ? gguf_sys_fail(err, errno, "cannot stat overlay lock %s", shown)
            : gguf_ovl_check_trusted(&sb, "overlay lock", shown, err);
    if (st != GGUF_OK) {
        close(*fd);
        *fd = -1;
    }
    return st;
}

/* Whether name in dfd is (still) the file open as fd. */
static bool same_file(int dfd, const char *name, int fd) {
    struct stat a, b;
    return fstatat(dfd, name, &a, AT_SYMLINK_NOFOLLOW) == 0 &&
           fstat(fd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

enum gguf_status gguf_overlay_lock(const char *path, const char *source,
                                   const char *holder, int *fd, char *held_by,
                                   size_t hn, struct gguf_error *err) {
    char base[256], shown[4096];
    char *lname = NULL, *lshown = NULL;
    bool absent;
    enum gguf_status st = GGUF_OK;
    *fd = -1;
    if (held_by && hn)
        held_by[0] = '\0';
    int dfd = gguf_ovl_open_parent(path, source, true, base, sizeof base, shown,
                                   sizeof shown, &absent, err);
    if (dfd < 0)
        return err && err->code ? err->code : GGUF_E_IO;
    if (!(lname = gguf_sidecar_path(base, LOCK_SUFFIX)) ||
        !(lshown = gguf_sidecar_path(shown, LOCK_SUFFIX))) {
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        goto out;
    }
    /* A holder removes the file as it lets go (header comment): the
     * file locked must still be the one the name leads to. */
    for (int tries = 0;; tries++) {
        if ((st = open_lock(dfd, lname, lshown, fd, err)) != GGUF_OK)
            goto out;
        if (flock(*fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            if (e == EWOULDBLOCK)
                read_holder(*fd, held_by, hn);
            st = e == EWOULDBLOCK
                     ? gguf_fail(err, GGUF_E_BUSY,
                                 "the overlay %s is in use (its lock %s is "
                                 "held)",
                                 shown, lshown)
                     : gguf_sys_fail(err, e, "cannot lock overlay lock %s",
                                     lshown);
            goto out;
        }
        if (same_file(dfd, lname, *fd))
            break;
        close(*fd);
        *fd = -1;
        if (tries >= 100) {
            st = gguf_fail(err, GGUF_E_BUSY,
                           "the overlay lock %s keeps being replaced", lshown);
            goto out;
        }
    }
    size_t hl = holder ? strlen(holder) : 0;
    if (ftruncate(*fd, 0) < 0)
        st = gguf_sys_fail(err, errno, "cannot write overlay lock %s", lshown);
    else if (hl)
        st = gguf_pwrite_full(*fd, holder, hl, 0, lshown, err);
out:
    if (st != GGUF_OK && *fd >= 0) {
        close(*fd);
        *fd = -1;
    }
    free(lname);
    free(lshown);
    close(dfd);
    return st;
}

void gguf_overlay_unlock(const char *path, const char *source, int fd) {
    char base[256], shown[4096];
    bool absent;
    if (fd < 0)
        return;
    int dfd = gguf_ovl_open_parent(path, source, false, base, sizeof base,
                                   shown, sizeof shown, &absent, NULL);
    char *lname = dfd >= 0 ? gguf_sidecar_path(base, LOCK_SUFFIX) : NULL;
    /* Only the file this fd locked: never one planted or taken since. */
    if (lname && same_file(dfd, lname, fd))
        (void)unlinkat(dfd, lname, 0);
    free(lname);
    if (dfd >= 0)
        close(dfd);
    close(fd); /* after the unlink: the lock is held until then */
}
