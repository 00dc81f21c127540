/*
 * live.c - the header a commit writes, decided once (gguf_plan_commit) for
 * both gguf_commit and the live view.
 *
 * The live view (MNT/<name>.gguf) shows the file as it will be after the
 * commit; both must agree byte for byte, so both take their plan from
 * gguf_plan_commit: the header at the current data start D if
 * gguf_write_header can fill it to end exactly there, else a grown one
 * at D' = D + k, k the smallest multiple of the growth unit (filesystem
 * block and alignment) that leaves at least max(64 KiB, header/8) of
 * headroom.
 */
#include "internal.h"

#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#define LIVE_HEADROOM_MIN (UINT64_C(64) << 10)

static uint64_t gcd(uint64_t a, uint64_t b) {
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Least common multiple, or 0 when it would exceed 1 GiB (nonsense). */
static uint64_t lcm(uint64_t a, uint64_t b) {
    if (!a || !b)
        return a ? a : b;
    uint64_t l = a / gcd(a, b) * b;
    return l > (UINT64_C(1) << 30) ? 0 : l;
}

/* The multiple a grown data start moves by: the alignment (align > 0)
 * and the filesystem's block sizes. */
static uint64_t grow_unit(int fd, uint32_t align) {
    struct statfs sfs;
    struct stat sb;
    uint64_t u = align;
    if (fd >= 0 && fstatfs(fd, &sfs) == 0 && sfs.f_bsize > 0)
        u = lcm(u, (uint64_t)sfs.f_bsize);
    if (u && fd >= 0 && fstat(fd, &sb) == 0 && sb.st_blksize > 0)
        u = lcm(u, (uint64_t)sb.st_blksize);
    if (!u)
        u = lcm(align, 4096);
    return u ? u : 4096;
}

/* The data start a growing commit chooses. */
static enum gguf_status grown_offset(const gguf_ctx *ctx, uint64_t *d2,
                                     struct gguf_error *err) {
    uint64_t unit = grow_unit(ctx->fd, gguf_ctx_alignment(ctx));
    uint64_t h = gguf_header_size(ctx), d = ctx->data_offset;
    uint64_t room = h / 8 > LIVE_HEADROOM_MIN ? h / 8 : LIVE_HEADROOM_MIN;
    if (h > UINT64_MAX / 4 || d > UINT64_MAX / 4)
        return gguf_fail(err, GGUF_E_RANGE, "header too large");
    uint64_t want = h + room > d ? h + room - d : 1;
    *d2 = d + (want + unit - 1) / unit * unit;
    return GGUF_OK;
}

/* A file-backed context without edits: the file's own bytes, whatever its
 * padding holds.  A file without tensors may end before the padded data
 * start. */
static enum gguf_status own_header(const gguf_ctx *ctx, struct gguf_buf *out,
                                   struct gguf_error *err) {
    enum gguf_status st;
    uint64_t d = ctx->data_offset;

    if (d > ctx->file_size)
        d = ctx->file_size;
    if ((st = gguf_buf_reserve(out, (size_t)d)) != GGUF_OK)
        return gguf_fail(err, st, "out of memory for a %llu-byte header",
                         (unsigned long long)d);
    size_t got = 0;
    while (got < d) {
        size_t r = 0;
        if (ctx->fd < 0) {
            st = ctx->rd.read(ctx->rd.u, got, out->p + got, (size_t)d - got, &r,
                              err);
            if (st != GGUF_OK)
                return st;
        } else {
            ssize_t k =
                pread(ctx->fd, out->p + got, (size_t)d - got, (off_t)got);
            r = k > 0 ? (size_t)k : 0;
        }
        if (r == 0)
            return gguf_fail(err, GGUF_E_IO, "reading the header at %zu", got);
        got += r;
    }
    out->len = got;
    return GGUF_OK;
}

/* A header for data at d must be exactly d bytes: gguf_write_header's
 * contract, checked because a commit writes these bytes over [0, d). */
static enum gguf_status check_len(const struct gguf_buf *hdr, uint64_t d,
                                  struct gguf_error *err) {
    if (hdr->len == d)
        return GGUF_OK;
    return gguf_fail(err, GGUF_E_RANGE,
                     "the header writer made %zu bytes for a data offset of "
                     "%llu",
                     hdr->len, (unsigned long long)d);
}

enum gguf_status gguf_plan_commit(const gguf_ctx *ctx, struct gguf_buf *hdr,
                                  enum gguf_plan_how *how,
                                  uint64_t *data_offset,
                                  struct gguf_error *err) {
    struct gguf_error fit = {0};
    enum gguf_status st;
    uint64_t d = ctx->data_offset, d2 = 0;

    hdr->len = 0;
    *how = GGUF_PLAN_UNCHANGED;
    *data_offset = d;
    if (!ctx->dirty && (ctx->fd >= 0 || ctx->rd.read))
        return own_header(ctx, hdr, err);
    st = gguf_write_header(ctx, d, hdr, &fit);
    if (st == GGUF_OK) {
        if ((st = check_len(hdr, d, err)) == GGUF_OK)
            *how = GGUF_PLAN_INPLACE;
        return st;
    }
    if (st != GGUF_E_RANGE) {
        if (err)
            *err = fit;
        return st;
    }
    if ((st = grown_offset(ctx, &d2, err)) != GGUF_OK)
        return st;
    /* A file's data moves by whole blocks (insert-range needs that, and
     * grow_unit includes the block size). */
    if (d2 <= d || (ctx->fd >= 0 && (d2 - d) % 512 != 0))
        return gguf_fail(err, GGUF_E_RANGE,
                         "bad grown data offset %llu (from %llu)",
                         (unsigned long long)d2, (unsigned long long)d);
    hdr->len = 0;
    if ((st = gguf_write_header(ctx, d2, hdr, err)) != GGUF_OK ||
        (st = check_len(hdr, d2, err)) != GGUF_OK)
        return st;
    *how = GGUF_PLAN_GROWN;
    *data_offset = d2;
    return GGUF_OK;
}

enum gguf_status gguf_plan_header(const gguf_ctx *ctx, struct gguf_buf *out,
                                  uint64_t *data_offset,
                                  struct gguf_error *err) {
    enum gguf_plan_how how;
    return gguf_plan_commit(ctx, out, &how, data_offset, err);
}
