/*
 * live.c - the header a commit would write, computed without writing.
 *
 * The live view (MNT/<name>.gguf) shows the file as it will be after the
 * commit; both must agree byte for byte, so gguf_commit lays out a grown
 * header with the same rule as here: D' = D + k, k the smallest multiple of
 * the growth unit (filesystem block and alignment) that leaves at least
 * max(64 KiB, header/8) of headroom.
 */
#include "internal.h"

#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#define LIVE_HEADROOM_MIN (UINT64_C(64) << 10)

static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Least common multiple, or 0 when it would exceed 1 GiB (nonsense). */
static uint64_t lcm(uint64_t a, uint64_t b)
{
    if (!a || !b)
        return a ? a : b;
    uint64_t l = a / gcd(a, b) * b;
    return l > (UINT64_C(1) << 30) ? 0 : l;
}

uint64_t gguf_grow_unit(int fd, uint32_t align)
{
    struct statfs sfs;
    struct stat sb;
    uint64_t u = align ? align : GGUF_DEFAULT_ALIGNMENT;
    if (fd >= 0 && fstatfs(fd, &sfs) == 0 && sfs.f_bsize > 0)
        u = lcm(u, (uint64_t)sfs.f_bsize);
    if (u && fd >= 0 && fstat(fd, &sb) == 0 && sb.st_blksize > 0)
        u = lcm(u, (uint64_t)sb.st_blksize);
    if (!u)
        u = lcm(align ? align : GGUF_DEFAULT_ALIGNMENT, 4096);
    return u ? u : 4096;
}

enum gguf_status gguf_grown_offset(const gguf_ctx *ctx, uint64_t *d2,
                                   struct gguf_error *err)
{
    uint64_t unit = gguf_grow_unit(ctx->fd, ctx->alignment);
    uint64_t h = gguf_header_size(ctx), d = ctx->data_offset;
    uint64_t room = h / 8 > LIVE_HEADROOM_MIN ? h / 8 : LIVE_HEADROOM_MIN;
    if (h > UINT64_MAX / 4 || d > UINT64_MAX / 4)
        return gguf_fail(err, GGUF_E_RANGE, "header too large");
    uint64_t want = h + room > d ? h + room - d : 1;
    *d2 = d + (want + unit - 1) / unit * unit;
    return GGUF_OK;
}

enum gguf_status gguf_plan_header(const gguf_ctx *ctx, struct gguf_buf *out,
                                  uint64_t *data_offset,
                                  struct gguf_error *err)
{
    struct gguf_error fit = {0};
    enum gguf_status st;
    uint64_t d = ctx->data_offset;

    out->len = 0;
    if (!ctx->dirty && ctx->fd >= 0) {
        /* Unedited: the file's own bytes, whatever its padding holds.  A
         * file without tensors may end before the padded data start. */
        if (d > ctx->file_size)
            d = ctx->file_size;
        if ((st = gguf_buf_reserve(out, (size_t)d)) != GGUF_OK)
            return gguf_fail(err, st, "out of memory for a %llu-byte header",
                             (unsigned long long)d);
        size_t got = 0;
        while (got < d) {
            ssize_t r = pread(ctx->fd, out->p + got, (size_t)d - got,
                              (off_t)got);
            if (r <= 0)
                return gguf_fail(err, GGUF_E_IO, "reading the header at %zu",
                                 got);
            got += (size_t)r;
        }
        out->len = got;
        *data_offset = ctx->data_offset;
        return GGUF_OK;
    }
    st = gguf_write_header(ctx, d, out, &fit);
    if (st == GGUF_OK) {
        *data_offset = d;
        return GGUF_OK;
    }
    if (st != GGUF_E_RANGE) {
        if (err)
            *err = fit;
        return st;
    }
    uint64_t d2;
    if ((st = gguf_grown_offset(ctx, &d2, err)) != GGUF_OK)
        return st;
    out->len = 0;
    if ((st = gguf_write_header(ctx, d2, out, err)) != GGUF_OK)
        return st;
    *data_offset = d2;
    return GGUF_OK;
}
