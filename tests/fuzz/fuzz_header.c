/*
 * fuzz_header.c - libFuzzer target: any bytes as a GGUF file.
 *
 *   gguf_open_mem on the bytes, without and with GGUF_OPEN_ALLOW_NESTED;
 *   a refusal must carry a one-line message and the status it returns.
 *   On success every getter is walked and checked against the others:
 *   counts, find-by-name/-id, offsets inside the file, tensor sizes;
 *   every value is rendered with gguf_render and parsed back, which must
 *   give the identical payload (bool bytes other than 0/1, which the reader
 *   accepts with a warning as ggml does, come back as 1); every key and
 *   tensor name is escaped to a file name that is a legal, distinct name
 *   and unescapes back.  Then the header is serialized with
 *   gguf_write_header at the file's own data offset, the data section is
 *   appended, and the result is opened again: the KVs (filler key aside)
 *   and the tensor infos must be identical, and when the file had no
 *   misplaced filler and zero padding the header is byte-identical
 *   (write.c's promise).
 *
 * Any violated property aborts with a message on stderr, which libFuzzer
 * (and tests/fuzz/replay.c) report as a crash.
 */
#include "gguf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

__attribute__((noreturn, format(printf, 1, 2))) static void bug(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "fuzz_header: property violated: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

static void check_err(enum gguf_status st, const struct gguf_error *err,
                      const char *what)
{
    if (st == GGUF_OK)
        return;
    size_t n = strnlen(err->msg, sizeof err->msg);
    if (n == sizeof err->msg)
        bug("%s: error message not NUL-terminated", what);
    if (n == 0)
        bug("%s: status %s with an empty message", what, gguf_status_name(st));
    if (memchr(err->msg, '\n', n))
        bug("%s: message is more than one line: %s", what, err->msg);
    if (err->code != st)
        bug("%s: returned %s but err.code is %s", what, gguf_status_name(st),
            gguf_status_name(err->code));
}


/* b is the reparsed payload of a, whose bool bytes > 1 may have become 1. */
static bool same_but_bools(const uint8_t *a, size_t na, const uint8_t *b,
                           size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++)
        if (a[i] != b[i] && !(a[i] > 1 && b[i] == 1))
            return false;
    return true;
}

static void check_names(const gguf_ctx *ctx, bool tensors)
{
    int64_t n = tensors ? gguf_n_tensors(ctx) : gguf_n_kv(ctx);
    struct gguf_buf all = {0}; /* escaped names, each followed by '/' */
    for (int64_t i = 0; i < n; i++) {
        size_t len;
        const char *s = tensors ? gguf_tensor_name(ctx, i, &len)
                                : gguf_kv_key(ctx, i, &len);
        struct gguf_buf f = {0}, back = {0};
        struct gguf_error err = {0};
        if (gguf_name_escape(s, len, &f) != GGUF_OK)
            bug("name_escape failed");
        if (f.len == 0 || f.len > 255)
            bug("escaped name of %zu bytes", f.len);
        if (memchr(f.p, '/', f.len) || memchr(f.p, '\0', f.len))
            bug("escaped name contains '/' or NUL");
        if ((f.len == 1 && f.p[0] == '.') ||
            (f.len == 2 && f.p[0] == '.' && f.p[1] == '.'))
            bug("escaped name is . or ..");
        if (!gguf_utf8_valid(f.p, f.len))
            bug("escaped name is not valid UTF-8");
        bool hashed = false;
        for (size_t j = 0; j + 1 < f.len; j++)
            if (f.p[j] == '%' && f.p[j + 1] == '~')
                hashed = true;
        enum gguf_status st = gguf_name_unescape((const char *)f.p, f.len, &back, &err);
        check_err(st, &err, "name_unescape");
        if (!hashed && (st != GGUF_OK || back.len != len || memcmp(back.p, s, len)))
            bug("escaped name does not unescape to the name (%s)", gguf_status_name(st));
        if (hashed && st == GGUF_OK)
            bug("a hashed file name unescaped");
        /* Distinct: a name seen before in this list? (quadratic but
         * bounded by what the file can hold; small in practice.) */
        for (size_t p = 0; p < all.len;) {
            const uint8_t *e = memchr(all.p + p, '/', all.len - p);
            size_t l = (size_t)(e - (all.p + p));
            if (l == f.len && !memcmp(all.p + p, f.p, l))
                bug("two %s escape to the same file name", tensors ? "tensors" : "keys");
            p += l + 1;
        }
        if (n <= 2000) {
            gguf_buf_add(&all, f.p, f.len);
            gguf_buf_add(&all, "/", 1);
        }
        gguf_buf_free(&f);
        gguf_buf_free(&back);
    }
    gguf_buf_free(&all);
}

static void walk(const gguf_ctx *ctx, size_t size, bool nested)
{
    uint32_t a = gguf_alignment(ctx);
    uint64_t d = gguf_data_offset(ctx);
    if (gguf_version(ctx) != 2 && gguf_version(ctx) != 3)
        bug("version %u accepted", gguf_version(ctx));
    if (a == 0 || (a & (a - 1)))
        bug("alignment %u", a);
    if (gguf_file_size(ctx) != size)
        bug("file size %llu, input %zu", (unsigned long long)gguf_file_size(ctx), size);
    /* A file without tensor data may end before its padded header does. */
    if (d % a || (d > size && (d - size >= a || gguf_n_tensors(ctx) > 0)))
        bug("data offset %llu (alignment %u, size %zu)", (unsigned long long)d, a, size);
    if (gguf_fd(ctx) != -1)
        bug("memory context with an fd");
    for (int i = 0; i < gguf_n_warnings(ctx); i++) {
        const char *w = gguf_warning(ctx, i);
        if (!w || !*w || strchr(w, '\n'))
            bug("warning %d is empty or several lines", i);
    }
    if (gguf_header_size(ctx) > d)
        bug("header size %llu beyond the data offset %llu",
            (unsigned long long)gguf_header_size(ctx), (unsigned long long)d);

    int64_t nkv = gguf_n_kv(ctx);
    if (nkv < 0 || (uint64_t)nkv > size)
        bug("n_kv %lld", (long long)nkv);
    for (int64_t i = 0; i < nkv; i++) {
        size_t klen, plen;
        const char *k = gguf_kv_key(ctx, i, &klen);
        if (!k || k[klen] != '\0')
            bug("key %lld not NUL-terminated", (long long)i);
        if (gguf_find_key(ctx, k, klen) != i)
            bug("find_key of key %lld gives %lld", (long long)i,
                (long long)gguf_find_key(ctx, k, klen));
        uint32_t id = gguf_kv_id(ctx, i);
        if (gguf_find_id(ctx, id) != i)
            bug("find_id(%u) of key %lld", id, (long long)i);
        enum gguf_type t = gguf_kv_type(ctx, i);
        enum gguf_type at = gguf_kv_arr_type(ctx, i);
        uint64_t an = gguf_kv_arr_n(ctx, i);
        const uint8_t *p = gguf_kv_payload(ctx, i, &plen);
        if ((unsigned)t >= GGUF_TYPE_COUNT)
            bug("key %lld: type %u", (long long)i, (unsigned)t);
        if (t == GGUF_TYPE_ARRAY) {
            if ((unsigned)at >= GGUF_TYPE_COUNT || (at == GGUF_TYPE_ARRAY && !nested))
                bug("key %lld: array of %u", (long long)i, (unsigned)at);
            if (an > GGUF_MAX_ARRAY)
                bug("key %lld: %llu elements", (long long)i, (unsigned long long)an);
        } else if (at != GGUF_TYPE_COUNT || an != 0) {
            bug("key %lld: scalar with arr_type %u n %llu", (long long)i,
                (unsigned)at, (unsigned long long)an);
        }
        if (plen > size || (plen && !p))
            bug("key %lld: payload of %zu bytes", (long long)i, plen);
        char tb[64];
        const char *ts = gguf_kv_type_str(ctx, i, tb, sizeof tb);
        if (!ts || !*ts)
            bug("key %lld: no type string", (long long)i);
        uint64_t u;
        int64_t s64;
        const char *str;
        size_t sl;
        bool gu = gguf_kv_get_u64(ctx, i, &u);
        (void)gguf_kv_get_i64(ctx, i, &s64);
        bool gs = gguf_kv_get_str(ctx, i, &str, &sl);
        if (gs != (t == GGUF_TYPE_STRING))
            bug("key %lld: get_str %d for type %u", (long long)i, gs, (unsigned)t);
        if (gs && (sl + 8 != plen || memcmp(str, p + 8, sl)))
            bug("key %lld: get_str disagrees with the payload", (long long)i);
        if (gu && t != GGUF_TYPE_UINT8 && t != GGUF_TYPE_UINT16 &&
            t != GGUF_TYPE_UINT32 && t != GGUF_TYPE_UINT64)
            bug("key %lld: get_u64 on type %u", (long long)i, (unsigned)t);

        /* Render, then parse back. */
        struct gguf_buf txt = {0}, back = {0};
        struct gguf_error err = {0};
        enum gguf_status st = gguf_render(t, p, plen, &txt, &err);
        check_err(st, &err, "render");
        if (st != GGUF_OK)
            bug("key %lld (%s): an accepted value does not render: %s",
                (long long)i, ts, err.msg);
        st = gguf_parse_text(t, at, (const char *)txt.p, txt.len, &back, &err);
        check_err(st, &err, "parse_text");
        if (st != GGUF_OK)
            bug("key %lld (%s): rendered text does not parse: %s",
                (long long)i, ts, err.msg);
        if (back.len != plen || memcmp(back.p, p, plen)) {
            if (!same_but_bools(p, plen, back.p, back.len) || gguf_n_warnings(ctx) == 0)
                bug("key %lld (%s): render/parse changed the payload (%zu -> %zu bytes)",
                    (long long)i, ts, plen, back.len);
        }
        gguf_buf_free(&txt);
        gguf_buf_free(&back);
    }
    (void)gguf_find_key(ctx, "\xff\xfe no such key", 15);
    (void)gguf_find_id(ctx, UINT32_MAX);

    int64_t nt = gguf_n_tensors(ctx);
    if (nt < 0 || (uint64_t)nt > size)
        bug("n_tensors %lld", (long long)nt);
    for (int64_t i = 0; i < nt; i++) {
        size_t nlen;
        const char *n = gguf_tensor_name(ctx, i, &nlen);
        if (!n || n[nlen] != '\0' || nlen > GGUF_MAX_TENSOR_NAME)
            bug("tensor %lld: name of %zu bytes", (long long)i, nlen);
        if (gguf_find_tensor(ctx, n, nlen) != i)
            bug("find_tensor of tensor %lld", (long long)i);
        uint32_t nd = gguf_tensor_n_dims(ctx, i);
        if (nd > GGUF_MAX_DIMS)
            bug("tensor %lld: %u dims", (long long)i, nd);
        const int64_t *ne = gguf_tensor_ne(ctx, i);
        for (int j = 0; j < GGUF_MAX_DIMS; j++)
            if (ne[j] < 0 || ((uint32_t)j >= nd && ne[j] != 1))
                bug("tensor %lld: ne[%d] = %lld", (long long)i, j, (long long)ne[j]);
        uint32_t ty = gguf_tensor_type(ctx, i);
        uint64_t off = gguf_tensor_offset(ctx, i), rel = gguf_tensor_rel_offset(ctx, i);
        uint64_t sz = gguf_tensor_size(ctx, i);
        if (off != d + rel || off < d || off > size || sz > size - off)
            bug("tensor %lld: data at %llu+%llu (data offset %llu, size %zu)",
                (long long)i, (unsigned long long)off, (unsigned long long)sz,
                (unsigned long long)d, size);
        if (rel % a)
            bug("tensor %lld: offset %llu not aligned", (long long)i, (unsigned long long)rel);
        if (gguf_ggml_type_known(ty)) {
            uint64_t want;
            if (!gguf_ggml_nbytes(ty, nd, ne, &want) || want != sz)
                bug("tensor %lld: size %llu, type says %llu", (long long)i,
                    (unsigned long long)sz, (unsigned long long)want);
            if (!gguf_ggml_type_name(ty))
                bug("known type %u without a name", ty);
        }
    }
    check_names(ctx, false);
    check_names(ctx, true);
}

static void roundtrip(const gguf_ctx *ctx, const uint8_t *data, size_t size,
                      unsigned flags)
{
    uint64_t d = gguf_data_offset(ctx);
    struct gguf_buf hdr = {0};
    struct gguf_error err = {0};
    enum gguf_status st = gguf_write_header(ctx, d, &hdr, &err);
    check_err(st, &err, "write_header");
    if (st == GGUF_E_RANGE) {
        /* The header cannot be rewritten at its own data offset: only
         * possible when the file carries a filler KV that does not fit its
         * slack any more.  Fall back to the minimal header. */
        st = gguf_write_header(ctx, 0, &hdr, &err);
        check_err(st, &err, "write_header(0)");
    }
    /* A header ggufs does not make: its padding to the alignment alone
     * passes the writer's bound (write.c, GGUF_MAX_HEADER_WRITE: 1 GiB). */
    if (st == GGUF_E_RANGE &&
        gguf_alignment(ctx) > (UINT64_C(1) << 30) - 4096) {
        gguf_buf_free(&hdr);
        return;
    }
    if (st != GGUF_OK)
        bug("write_header: %s: %s", gguf_status_name(st), err.msg);
    if (hdr.len % gguf_alignment(ctx))
        bug("written header of %zu bytes is not aligned", hdr.len);

    /* Byte-identical when nothing had to move: no filler KV, or one that is
     * last, and zero padding. */
    int64_t nkv = gguf_n_kv(ctx), filler = -1;
    for (int64_t i = 0; i < nkv; i++)
        if (gguf_kv_is_padding(ctx, i)) /* ggufs's own; a key merely named
                                           so is someone else's */
            filler = i;
    uint64_t hs = gguf_header_size(ctx);
    bool zero_pad = true;
    uint64_t end = hs; /* end of the stored tensor infos, filler included */
    if (filler >= 0) {
        size_t kl, pl;
        gguf_kv_key(ctx, filler, &kl);
        gguf_kv_payload(ctx, filler, &pl);
        end += 8 + kl + 4 + pl;
    }
    uint64_t have = d < size ? d : size; /* the file may end in the padding */
    for (uint64_t j = end; j < have; j++)
        if (data[j])
            zero_pad = false;
    if (hdr.len == d && zero_pad && (filler < 0 || filler == nkv - 1) &&
        memcmp(hdr.p, data, have))
        bug("header written back at its own offset differs from the file's");

    /* Reopen header + the original data section. */
    struct gguf_buf file = {0};
    if (gguf_buf_add(&file, hdr.p, hdr.len) != GGUF_OK ||
        (d < size && gguf_buf_add(&file, data + d, size - d) != GGUF_OK))
        bug("out of memory");
    gguf_ctx *c2 = NULL;
    st = gguf_open_mem(&c2, file.p, file.len, flags, &err);
    check_err(st, &err, "reopen");
    if (st != GGUF_OK)
        bug("the written header does not open again: %s", err.msg);
    int64_t j = 0, n2 = gguf_n_kv(c2);
    for (int64_t i = 0; i < nkv; i++) {
        size_t kl, pl, kl2, pl2;
        const char *k = gguf_kv_key(ctx, i, &kl);
        if (gguf_kv_is_padding(ctx, i))
            continue;
        while (j < n2 && gguf_kv_is_padding(c2, j))
            j++;
        if (j >= n2)
            bug("reopened file lacks key %lld", (long long)i);
        const char *k2 = gguf_kv_key(c2, j, &kl2);
        const uint8_t *p = gguf_kv_payload(ctx, i, &pl);
        const uint8_t *p2 = gguf_kv_payload(c2, j, &pl2);
        if (kl != kl2 || memcmp(k, k2, kl) || gguf_kv_type(ctx, i) != gguf_kv_type(c2, j) ||
            pl != pl2 || memcmp(p, p2, pl))
            bug("key %lld differs after write_header and reopen", (long long)i);
        j++;
    }
    for (; j < n2; j++)
        if (!gguf_kv_is_padding(c2, j))
            bug("reopened file has an extra key %lld", (long long)j);
    if (gguf_n_tensors(c2) != gguf_n_tensors(ctx) || gguf_version(c2) != gguf_version(ctx) ||
        gguf_alignment(c2) != gguf_alignment(ctx) || gguf_data_offset(c2) != hdr.len)
        bug("counts, version, alignment or data offset differ after reopen");
    for (int64_t i = 0; i < gguf_n_tensors(ctx); i++) {
        size_t l1, l2;
        const char *n1 = gguf_tensor_name(ctx, i, &l1);
        const char *n2s = gguf_tensor_name(c2, i, &l2);
        if (l1 != l2 || memcmp(n1, n2s, l1) ||
            gguf_tensor_type(ctx, i) != gguf_tensor_type(c2, i) ||
            gguf_tensor_n_dims(ctx, i) != gguf_tensor_n_dims(c2, i) ||
            memcmp(gguf_tensor_ne(ctx, i), gguf_tensor_ne(c2, i), 4 * sizeof(int64_t)) ||
            gguf_tensor_rel_offset(ctx, i) != gguf_tensor_rel_offset(c2, i) ||
            gguf_tensor_size(ctx, i) != gguf_tensor_size(c2, i))
            bug("tensor %lld differs after write_header and reopen", (long long)i);
    }
    gguf_close(c2);
    gguf_buf_free(&file);
    gguf_buf_free(&hdr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gguf_ctx *strict = NULL, *loose = NULL;
    struct gguf_error e1 = {0}, e2 = {0};
    enum gguf_status s1 = gguf_open_mem(&strict, data, size, 0, &e1);
    check_err(s1, &e1, "open");
    enum gguf_status s2 =
        gguf_open_mem(&loose, data, size, GGUF_OPEN_ALLOW_NESTED, &e2);
    check_err(s2, &e2, "open(nested)");
    if (s1 == GGUF_OK && s2 != GGUF_OK)
        bug("opens without allow_nested but not with it: %s", e2.msg);
    if (s1 == GGUF_OK) {
        if (gguf_n_kv(strict) != gguf_n_kv(loose) ||
            gguf_n_tensors(strict) != gguf_n_tensors(loose) ||
            gguf_data_offset(strict) != gguf_data_offset(loose))
            bug("allow_nested changes what an ordinary file holds");
        walk(strict, size, false);
        roundtrip(strict, data, size, 0);
    }
    if (s2 == GGUF_OK && s1 != GGUF_OK) {
        walk(loose, size, true);
        roundtrip(loose, data, size, GGUF_OPEN_ALLOW_NESTED);
    }
    gguf_close(strict);
    gguf_close(loose);
    return 0;
}
