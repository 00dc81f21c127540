/*
 * fuzz_text.c - libFuzzer target for the text codec and file-name escaping.
 *
 * Input: byte 0 picks the value type (b0 % 13) and, for arrays, the element
 * type (b0 / 13 % 13); the rest is the text.
 *
 *   - gguf_parse_text of the text: if accepted, the payload passes the
 *     validator (gguf_payload_check, nested allowed), renders, and the
 *     rendering parses back to the identical payload;
 *   - gguf_text_check_prefix never refuses a prefix of text that parses
 *     (fed growing prefixes with one `checked` cursor, as the FUSE layer
 *     feeds it writes; and each prefix from scratch);
 *   - the rest as a raw payload of that type: gguf_render never crashes, and
 *     a payload the validator accepts renders and parses back identically;
 *   - gguf_name_escape: a legal file name (1..255 bytes, no '/', no NUL, not
 *     "." or "..", valid UTF-8) that gguf_name_unescape maps back, unless
 *     hashed; a file name gguf_name_unescape accepts escapes back to itself;
 *   - gguf_escape_line gives one line that gguf_unescape_line maps back.
 *
 * Any violated property aborts (a crash for libFuzzer and for replay.c).
 */
#include "gguf.h"
#include "internal.h" /* gguf_payload_check */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

__attribute__((noreturn, format(printf, 1, 2))) static void bug(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "fuzz_text: property violated: ");
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
    if (n == sizeof err->msg || n == 0 || memchr(err->msg, '\n', n))
        bug("%s: status %s with a bad message (%zu bytes)", what,
            gguf_status_name(st), n);
    if (err->code != st)
        bug("%s: returned %s but err.code is %s", what, gguf_status_name(st),
            gguf_status_name(err->code));
}

static bool same(const struct gguf_buf *a, const void *p, size_t n)
{
    return a->len == n && (n == 0 || memcmp(a->p, p, n) == 0);
}

/* parse(render(payload)) == payload; render must succeed. */
static void render_parse(enum gguf_type t, enum gguf_type at, const uint8_t *p,
                         size_t n, const char *what)
{
    struct gguf_buf txt = {0}, back = {0};
    struct gguf_error err = {0};
    enum gguf_status st = gguf_render(t, p, n, &txt, &err);
    check_err(st, &err, "render");
    if (st != GGUF_OK)
        bug("%s: a valid %s payload does not render: %s", what,
            gguf_type_name(t), err.msg);
    st = gguf_parse_text(t, at, (const char *)txt.p, txt.len, &back, &err);
    check_err(st, &err, "parse_text");
    if (st != GGUF_OK)
        bug("%s: rendered %s text does not parse: %s", what, gguf_type_name(t),
            err.msg);
    if (!same(&back, p, n))
        bug("%s: %s payload of %zu bytes renders to text that parses to %zu "
            "different bytes", what, gguf_type_name(t), n, back.len);
    gguf_buf_free(&txt);
    gguf_buf_free(&back);
}

static void check_prefixes(enum gguf_type t, enum gguf_type at,
                           const char *s, size_t n)
{
    struct gguf_error err = {0};
    size_t checked = 0;
    /* Growing prefixes, one cursor: at most ~64 steps. */
    size_t step = n / 64 + 1;
    for (size_t k = 0;; k += step) {
        if (k > n)
            k = n;
        enum gguf_status st = gguf_text_check_prefix(t, at, s, k, &checked, &err);
        check_err(st, &err, "text_check_prefix");
        if (st != GGUF_OK)
            bug("text_check_prefix refuses the first %zu of %zu bytes of a "
                "valid %s (incremental): %s", k, n, gguf_type_name(t), err.msg);
        if (checked > k)
            bug("text_check_prefix: checked %zu past the %zu bytes given", checked, k);
        size_t fresh = 0;
        st = gguf_text_check_prefix(t, at, s, k, &fresh, &err);
        if (st != GGUF_OK)
            bug("text_check_prefix refuses the first %zu of %zu bytes of a "
                "valid %s: %s", k, n, gguf_type_name(t), err.msg);
        if (k == n)
            break;
    }
}

static void check_name(const uint8_t *s, size_t n)
{
    struct gguf_buf f = {0}, back = {0};
    struct gguf_error err = {0};
    if (gguf_name_escape((const char *)s, n, &f) != GGUF_OK)
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
    if (hashed ? st == GGUF_OK : (st != GGUF_OK || !same(&back, s, n)))
        bug("name of %zu bytes: escape/unescape round trip fails (hashed %d, %s)",
            n, hashed, gguf_status_name(st));
    if (hashed && n * 3 <= 255 && n > 0)
        bug("a name of %zu bytes was hashed", n);
    gguf_buf_free(&f);
    gguf_buf_free(&back);

    /* The input as a file name: accepted only if canonical. */
    st = gguf_name_unescape((const char *)s, n, &back, &err);
    check_err(st, &err, "name_unescape(raw)");
    if (st == GGUF_OK) {
        if (gguf_name_escape((const char *)back.p, back.len, &f) != GGUF_OK ||
            !same(&f, s, n))
            bug("file name accepted by unescape does not escape back to itself");
    }
    gguf_buf_free(&f);
    gguf_buf_free(&back);
}

static void check_line(const uint8_t *s, size_t n)
{
    struct gguf_buf e = {0}, back = {0};
    struct gguf_error err = {0};
    if (gguf_escape_line(s, n, &e) != GGUF_OK)
        bug("escape_line failed");
    if (memchr(e.p, '\n', e.len))
        bug("escape_line output has a newline");
    enum gguf_status st = gguf_unescape_line((const char *)e.p, e.len, &back, &err);
    check_err(st, &err, "unescape_line");
    if (st != GGUF_OK || !same(&back, s, n))
        bug("escape_line/unescape_line round trip fails");
    back.len = 0;
    st = gguf_unescape_line((const char *)s, n, &back, &err);
    check_err(st, &err, "unescape_line(raw)");
    gguf_buf_free(&e);
    gguf_buf_free(&back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    enum gguf_type t = (enum gguf_type)(data[0] % GGUF_TYPE_COUNT);
    enum gguf_type at = (enum gguf_type)(data[0] / GGUF_TYPE_COUNT % GGUF_TYPE_COUNT);
    const uint8_t *rest = data + 1;
    const char *text = (const char *)rest;
    size_t n = size - 1;

    /* 1. Text -> payload -> text -> payload. */
    struct gguf_buf pl = {0};
    struct gguf_error err = {0};
    enum gguf_status st = gguf_parse_text(t, at, text, n, &pl, &err);
    check_err(st, &err, "parse_text");
    if (st == GGUF_OK) {
        uint64_t used = 0;
        st = gguf_payload_check(t, pl.p, pl.len, true, &used, "fuzz", 0, &err);
        if (st != GGUF_OK || used != pl.len)
            bug("parse_text produced a payload the validator refuses: %s", err.msg);
        render_parse(t, at, pl.p, pl.len, "parsed text");
        check_prefixes(t, at, text, n);
    }
    gguf_buf_free(&pl);
    /* The prefix check agrees with the parser where it sees complete text:
     * a scalar with its newline, an array whose last line is complete. */
    bool complete = t == GGUF_TYPE_ARRAY ? (n == 0 || text[n - 1] == '\n')
                                         : (t != GGUF_TYPE_STRING && memchr(text, '\n', n));
    if (complete) {
        size_t checked = 0;
        struct gguf_error e2 = {0};
        enum gguf_status cs = gguf_text_check_prefix(t, at, text, n, &checked, &e2);
        check_err(cs, &e2, "text_check_prefix(complete)");
        if ((cs == GGUF_OK) != (st == GGUF_OK))
            bug("complete %s text: parse says %s, text_check_prefix says %s",
                gguf_type_name(t), gguf_status_name(st), gguf_status_name(cs));
    }

    /* 2. The rest as a raw payload. */
    struct gguf_buf txt = {0};
    st = gguf_render(t, rest, n, &txt, &err);
    check_err(st, &err, "render(raw)");
    gguf_buf_free(&txt);
    uint64_t used = 0;
    if (gguf_payload_check(t, rest, n, true, &used, "fuzz", 0, &err) == GGUF_OK &&
        used == n) {
        enum gguf_type rat = GGUF_TYPE_COUNT;
        if (t == GGUF_TYPE_ARRAY && n >= 4)
            rat = (enum gguf_type)gguf_rd32(rest);
        render_parse(t, rat, rest, n, "raw payload");
    }

    /* 3. Names and lines. */
    check_name(rest, n);
    check_line(rest, n);
    return 0;
}
