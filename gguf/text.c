/*
 * text.c - the text codec: a value's on-disk payload <-> the text shown in
 * meta/KEY (man/ggufs.1, TEXT FORMAT).  Rendering is lossless: parsing the
 * rendered text gives back the identical payload, bit for bit (NaN payloads,
 * -0, denormals, invalid UTF-8 included), with one exception: a bool byte
 * other than 0 and 1, which ggml reads as true, renders as "true".
 * Floats are printed and parsed by textfloat.c, escapes and UTF-8 are
 * handled by textesc.c; the rules for both are stated here.
 *
 * Rendering (payload -> text):
 *   string    the bytes, then "\n"
 *   integers  decimal, then "\n"
 *   bool      "true" / "false", then "\n"
 *   floats    the shortest decimal that reads back to the same bits
 *             (fewest significant digits, computed exactly, of those the
 *             nearest; never longer than the first %.Pg that reads
 *             back); fixed notation for decimal exponents -4..16 (an
 *             integral value is printed exactly there: float 123456792 is
 *             "123456792", which is no longer than "123456790"), %g-style
 *             scientific otherwise ("1e-05", "1e+20"); "-0", "inf", "-inf";
 *             "nan"/"-nan" for the default quiet NaN, "nan(0xMANTISSA)"
 *             otherwise.
 *   arrays    one element per line, each ending in "\n"; string elements
 *             escaped by gguf_escape_line; arrays of arrays one inner array
 *             per line in the bracketed form TYPE[e1, e2] (strings quoted).
 *
 * Parsing (text -> payload) decisions, part of the user contract:
 *   - strings: the whole text minus one trailing "\n" if present.  A CR
 *     before it stays a byte of the string: "a\r\n" is "a\r".  Rendering
 *     writes a string's bytes raw, so a string that ends in CR renders as
 *     "...\r\n"; taking that CR as part of the line end would lose it.
 *   - numbers and bools are one line: the text, minus one trailing line end
 *     ("\n" or "\r\n"), must hold no newline ("1\n2\n" is refused as two
 *     lines, naming the second).
 *   - integers: [-]DIGITS and the line end.  No spaces, no '+', no hex.
 *     Leading zeros are accepted ("007" is 7).  A negative number for an
 *     unsigned type is out of range (GGUF_E_RANGE), except "-0" which is 0.
 *   - bool: true, false, 1, 0 (lower case), and the line end.
 *   - floats: whatever strtod/strtof accepts for a finite value (decimal or
 *     hex, optional sign, exponent) but no leading white space or trailing
 *     junk; overflow of the type is GGUF_E_RANGE, underflow rounds (to a
 *     denormal or zero).  Non-finite values are parsed here, not by strtod:
 *     [+-]inf, [+-]infinity, [+-]nan (case-insensitive) and
 *     [+-]nan(0xHEX) with HEX the non-zero mantissa bits (either case).
 *   - arrays: the text is empty or ends in "\n"; each line is one element;
 *     a line ends in "\n" or "\r\n", for every element type (the renderer
 *     never writes a raw CR in an array: string elements escape it as
 *     "\r", so this loses nothing).  An empty line is an empty string in a
 *     string array and an error otherwise.  Other raw bytes in string lines
 *     (a tab, a CR not before the newline, invalid UTF-8) are taken as they
 *     are; only '\' starts an escape.
 *   - messages name lines of the whole text (1-based; gguf_text_check_prefix
 *     counts from the start of the file too) and show the offending bytes
 *     as typed (gguf_text_snippet).
 *   - bracketed inner arrays: the type name and '[' must be adjacent; any
 *     number of spaces is accepted after '[', around each element and before
 *     ']' (the renderer writes exactly ", " between elements and no other
 *     spaces).  Nothing may follow the final ']' on the line.
 *
 * Nesting levels (as gguf_payload_check counts them): a top-level array is
 * level 1, the arrays inside an array of arrays level 2, and so on; no array
 * may be deeper than GGUF_MAX_NESTING, so an array at that level cannot be
 * an array of arrays, not even an empty one.  Refused both when rendering
 * and when parsing.
 *
 * Formatting and parsing of floats run in the "C" locale (uselocale), so a
 * daemon that called setlocale() still reads and writes "0.5".
 */
#include "internal.h"

#include <inttypes.h>
#include <locale.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- output helpers (the rest: internal.h) ------------------------- */

static enum gguf_status put32(struct gguf_buf *b, uint32_t v) {
    enum gguf_status st = gguf_text_room(b, 4);
    if (st != GGUF_OK)
        return st;
    gguf_wr32(b->p + b->len, v);
    b->len += 4;
    return GGUF_OK;
}

static enum gguf_status put64(struct gguf_buf *b, uint64_t v) {
    enum gguf_status st = gguf_text_room(b, 8);
    if (st != GGUF_OK)
        return st;
    gguf_wr64(b->p + b->len, v);
    b->len += 8;
    return GGUF_OK;
}

static const char *tname(enum gguf_type t) {
    const char *n = gguf_type_name(t);
    return n ? n : "?";
}

/* ---- locale -------------------------------------------------------- */

static _Atomic(locale_t) c_loc;

static locale_t enter_c_locale(void) {
    locale_t l = atomic_load(&c_loc);
    if (!l) {
        locale_t n = newlocale(LC_ALL_MASK, "C", (locale_t)0);
        if (!n)
            return (locale_t)0;
        locale_t expected = (locale_t)0;
        if (atomic_compare_exchange_strong(&c_loc, &expected, n)) {
            l = n;
        } else {
            freelocale(n);
            l = expected;
        }
    }
    return uselocale(l);
}

static void leave_c_locale(locale_t old) {
    if (old)
        uselocale(old);
}

/* ---- numbers: formatting ------------------------------------------- */

static size_t fmt_i64(int64_t v, char *o) {
    if (v < 0) {
        o[0] = '-';
        return 1 + gguf_fmt_u64((uint64_t)0 - (uint64_t)v, o + 1);
    }
    return gguf_fmt_u64((uint64_t)v, o);
}

/* Formats one scalar of fixed-size type t at p; returns the length (o: 48
 * bytes), 0 if t is not a fixed-size type. */
static size_t fmt_scalar(enum gguf_type t, const uint8_t *p, char *o) {
    switch (t) {
    case GGUF_TYPE_UINT8:
        return gguf_fmt_u64(p[0], o);
    case GGUF_TYPE_INT8:
        return fmt_i64((int8_t)p[0], o);
    case GGUF_TYPE_UINT16:
        return gguf_fmt_u64((uint16_t)(p[0] | p[1] << 8), o);
    case GGUF_TYPE_INT16:
        return fmt_i64((int16_t)(uint16_t)(p[0] | p[1] << 8), o);
    case GGUF_TYPE_UINT32:
        return gguf_fmt_u64(gguf_rd32(p), o);
    case GGUF_TYPE_INT32:
        return fmt_i64((int32_t)gguf_rd32(p), o);
    case GGUF_TYPE_UINT64:
        return gguf_fmt_u64(gguf_rd64(p), o);
    case GGUF_TYPE_INT64:
        return fmt_i64((int64_t)gguf_rd64(p), o);
    case GGUF_TYPE_FLOAT32:
        return gguf_fmt_float(gguf_rd32(p), true, o);
    case GGUF_TYPE_FLOAT64:
        return gguf_fmt_float(gguf_rd64(p), false, o);
    case GGUF_TYPE_BOOL:
        /* A byte other than 0 or 1 is outside the specification; ggml
         * reads any nonzero byte as true, and so do we (the one lossy
         * case; docs/format.md, Value types). */
        memcpy(o, p[0] ? "true" : "false", p[0] ? 4 : 5);
        return p[0] ? 4 : 5;
    default:
        return 0;
    }
}

static bool is_signed(enum gguf_type t) {
    return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 ||
           t == GGUF_TYPE_INT32 || t == GGUF_TYPE_INT64;
}

static bool is_fixed(enum gguf_type t) {
    return t < GGUF_TYPE_COUNT && t != GGUF_TYPE_STRING && t != GGUF_TYPE_ARRAY;
}

/* ---- rendering ----------------------------------------------------- */

struct rd {
    const uint8_t *p;
    size_t n, i;
};

static bool rd_has(const struct rd *r, uint64_t k) {
    return k <= r->n - r->i;
}

static enum gguf_status bad_payload(struct gguf_error *err, const char *what,
                                    size_t off) {
    return gguf_fail(err, GGUF_E_FORMAT, "malformed value: %s at byte %zu",
                     what, off);
}

static enum gguf_status render_scalar_at(struct rd *r, enum gguf_type t,
                                         struct gguf_buf *out,
                                         struct gguf_error *err) {
    size_t sz = gguf_type_size(t);
    if (!rd_has(r, sz))
        return bad_payload(err, "truncated element", r->i);
    enum gguf_status st = gguf_text_room(out, 48);
    if (st != GGUF_OK)
        return st;
    size_t k = fmt_scalar(t, r->p + r->i, (char *)out->p + out->len);
    if (!k)
        return bad_payload(err, "element of no fixed size", r->i);
    out->len += k;
    r->i += sz;
    return GGUF_OK;
}

/* Where rendered text goes (one renderer for every use, so a size, a window
 * and the whole text can never disagree):
 *   - append (out set): all of it is appended to out (gguf_render);
 *   - pass on (out NULL): it is made in tmp a piece at a time (an element,
 *     or part of an inner array's line) and passed on: counted in n
 *     (gguf_render_size, gguf_render_map), and, with win set, the bytes
 *     of [lo, hi) appended to win (gguf_render_window), rendering stopping
 *     once hi is reached.  Memory: the largest piece, never the text.
 *   - with map set, a mark (text offset, payload position, element) is
 *     recorded at the first element boundary every GGUF_TEXT_STEP bytes,
 *     where gguf_render_window can start again. */
struct sink {
    struct gguf_buf *out;
    struct gguf_buf tmp;
    uint64_t n; /* bytes passed on */
    struct gguf_buf *win;
    uint64_t lo, hi;
    bool stopped; /* win: hi reached, the rest is not rendered */
    struct gguf_text_map *map;
};

/* Pieces are passed on once this long (an inner array's line may be long). */
#define SINK_PIECE 65536

static struct gguf_buf *sink_buf(struct sink *s) {
    return s->out ? s->out : &s->tmp;
}

/* Passes tmp on (pass-on mode); a no-op when appending. */
static enum gguf_status sink_pass(struct sink *s) {
    if (s->out)
        return GGUF_OK;
    uint64_t a = s->n, b = s->n + s->tmp.len;
    s->n = b;
    if (s->win && a < s->hi && b > s->lo) {
        uint64_t from = a > s->lo ? a : s->lo, to = b < s->hi ? b : s->hi;
        enum gguf_status st =
            gguf_buf_add(s->win, s->tmp.p + (from - a), (size_t)(to - from));
        if (st != GGUF_OK)
            return st;
    }
    if (s->win && b >= s->hi)
        s->stopped = true;
    s->tmp.len = 0;
    return GGUF_OK;
}

/* Within a piece: passes tmp on once it is long. */
static enum gguf_status sink_maybe_pass(struct sink *s) {
    return !s->out && s->tmp.len >= SINK_PIECE ? sink_pass(s) : GGUF_OK;
}

/* At the start of top-level element j, at payload position pos. */
static enum gguf_status sink_mark(struct sink *s, size_t pos, uint64_t j) {
    struct gguf_text_map *m = s->map;
    if (!m || (m->n && s->n - m->marks[m->n - 1].text < GGUF_TEXT_STEP))
        return GGUF_OK;
    if (m->n == m->cap) {
        size_t c = m->cap ? m->cap * 2 : 16;
        struct gguf_text_mark *k = realloc(m->marks, c * sizeof *k);
        if (!k)
            return GGUF_E_NOMEM;
        m->marks = k;
        m->cap = c;
    }
    m->marks[m->n++] = (struct gguf_text_mark){s->n, pos, j};
    return GGUF_OK;
}

/* A string at r (length, bytes): *sp and *sl, r moved past it. */
static enum gguf_status rd_str(struct rd *r, const uint8_t **sp, uint64_t *sl,
                               struct gguf_error *err) {
    if (!rd_has(r, 8))
        return bad_payload(err, "truncated string", r->i);
    *sl = gguf_rd64(r->p + r->i);
    r->i += 8;
    if (!rd_has(r, *sl))
        return bad_payload(err, "truncated string", r->i);
    *sp = r->p + r->i;
    r->i += (size_t)*sl;
    return GGUF_OK;
}

/* An inner array at r in the bracketed one-line form. */
static enum gguf_status render_inline(struct rd *r, int level, struct sink *s,
                                      struct gguf_error *err) {
    enum gguf_status st;
    if (level > GGUF_MAX_NESTING)
        return bad_payload(err, "arrays nested too deeply", r->i);
    if (!rd_has(r, 12))
        return bad_payload(err, "truncated array header", r->i);
    uint32_t et = gguf_rd32(r->p + r->i);
    uint64_t n = gguf_rd64(r->p + r->i + 4);
    if (et >= GGUF_TYPE_COUNT)
        return bad_payload(err, "unknown element type", r->i);
    if (et == GGUF_TYPE_ARRAY && level >= GGUF_MAX_NESTING)
        return bad_payload(err, "arrays nested too deeply", r->i);
    r->i += 12;
    const char *name = tname(et);
    struct gguf_buf *out = sink_buf(s);
    if ((st = gguf_text_put(out, name, strlen(name))) != GGUF_OK ||
        (st = gguf_text_put1(out, '[')) != GGUF_OK)
        return st;
    if (is_fixed(et) && n > (r->n - r->i) / gguf_type_size(et))
        return bad_payload(err, "array longer than its value", r->i);
    for (uint64_t j = 0; j < n && !s->stopped; j++) {
        if (j && (st = gguf_text_put(out, ", ", 2)) != GGUF_OK)
            return st;
        if (et == GGUF_TYPE_STRING) {
            const uint8_t *sp;
            uint64_t sl;
            if ((st = rd_str(r, &sp, &sl, err)) != GGUF_OK ||
                (st = gguf_text_put1(out, '"')) != GGUF_OK ||
                (st = gguf_text_escape(sp, sl, true, out)) != GGUF_OK ||
                (st = gguf_text_put1(out, '"')) != GGUF_OK)
                return st;
        } else if (et == GGUF_TYPE_ARRAY) {
            if ((st = render_inline(r, level + 1, s, err)) != GGUF_OK)
                return st;
        } else if ((st = render_scalar_at(r, et, out, err)) != GGUF_OK) {
            return st;
        }
        if ((st = sink_maybe_pass(s)) != GGUF_OK)
            return st;
    }
    return s->stopped ? GGUF_OK : gguf_text_put1(out, ']');
}

/* One top-level element of an array of type et at r (a line). */
static enum gguf_status render_element(struct rd *r, uint32_t et,
                                       struct sink *s, struct gguf_error *err) {
    enum gguf_status st;
    struct gguf_buf *out = sink_buf(s);
    if (et == GGUF_TYPE_STRING) {
        const uint8_t *sp;
        uint64_t sl;
        if ((st = rd_str(r, &sp, &sl, err)) == GGUF_OK)
            st = gguf_text_escape(sp, sl, false, out);
    } else if (et == GGUF_TYPE_ARRAY) {
        st = render_inline(r, 2, s, err);
    } else {
        st = render_scalar_at(r, et, out, err);
    }
    if (st != GGUF_OK || s->stopped)
        return st;
    if ((st = gguf_text_put1(out, '\n')) != GGUF_OK)
        return st;
    return sink_pass(s);
}

/* The elements of an array value, from its first or from mark from (a
 * mark of this payload's map: its element index and position are
 * trusted as far as the bounds checks below). */
static enum gguf_status render_array(struct rd *r, struct sink *s,
                                     const struct gguf_text_mark *from,
                                     struct gguf_error *err) {
    enum gguf_status st;
    if (!rd_has(r, 12))
        return bad_payload(err, "truncated array header", r->i);
    uint32_t et = gguf_rd32(r->p);
    uint64_t n = gguf_rd64(r->p + 4);
    if (et >= GGUF_TYPE_COUNT)
        return bad_payload(err, "unknown element type", 0);
    r->i = 12;
    size_t rest = r->n - r->i;
    if (et == GGUF_TYPE_STRING) {
        if (n > rest / 8)
            return bad_payload(err, "array longer than its value", r->i);
        /* string bytes plus one newline each; escapes grow it as needed */
        if (s->out &&
            (st = gguf_text_room(s->out, rest - n * 8 + n)) != GGUF_OK)
            return st;
    } else if (et != GGUF_TYPE_ARRAY) {
        size_t sz = gguf_type_size(et);
        if (n > rest / sz)
            return bad_payload(err, "array longer than its value", r->i);
        size_t per = sz == 1 ? 5 : sz == 2 ? 7 : sz == 4 ? 12 : 21;
        if (s->out && n <= SIZE_MAX / per &&
            (st = gguf_text_room(s->out, n * per)) != GGUF_OK)
            return st;
    }
    uint64_t j = 0;
    if (from) {
        if (from->elem > n || from->pos < 12 || from->pos > r->n)
            return gguf_fail(err, GGUF_E_INVAL, "text mark out of the value");
        j = from->elem;
        r->i = (size_t)from->pos;
        s->n = from->text;
    }
    for (; j < n && !s->stopped; j++) {
        if ((st = sink_mark(s, r->i, j)) != GGUF_OK ||
            (st = render_element(r, et, s, err)) != GGUF_OK)
            return st;
    }
    return GGUF_OK;
}

static enum gguf_status render(enum gguf_type type, const uint8_t *p,
                               size_t len, struct sink *s,
                               const struct gguf_text_mark *from,
                               struct gguf_error *err) {
    enum gguf_status st;
    struct rd r = {p, len, 0};
    if (type == GGUF_TYPE_STRING) {
        if (len < 8)
            return bad_payload(err, "truncated string", 0);
        uint64_t sl = gguf_rd64(p);
        if (sl != len - 8)
            return gguf_fail(err, GGUF_E_FORMAT,
                             "malformed value: string length %" PRIu64
                             " but %zu bytes follow",
                             sl, len - 8);
        /* the bytes as they are, and a newline: [lo, hi) of them */
        uint64_t body = len - 8;
        struct gguf_buf *out = s->out ? s->out : s->win;
        uint64_t lo = s->out ? 0 : s->lo, hi = s->out ? body + 1 : s->hi;
        uint64_t bend = hi < body ? hi : body;
        s->n += body + 1;
        if (!out)
            return GGUF_OK;
        if (lo < bend && (st = gguf_buf_add(out, p + 8 + lo,
                                            (size_t)(bend - lo))) != GGUF_OK)
            return st;
        return hi > body && lo <= body ? gguf_text_put1(out, '\n') : GGUF_OK;
    }
    if (type == GGUF_TYPE_ARRAY) {
        if ((st = render_array(&r, s, from, err)) != GGUF_OK)
            return st;
    } else if (is_fixed(type)) {
        if ((st = render_scalar_at(&r, type, sink_buf(s), err)) != GGUF_OK ||
            (st = gguf_text_put1(sink_buf(s), '\n')) != GGUF_OK ||
            (st = sink_pass(s)) != GGUF_OK)
            return st;
    } else {
        return gguf_fail(err, GGUF_E_INVAL, "unknown value type %u",
                         (unsigned)type);
    }
    if (!s->stopped && r.i != len)
        return gguf_fail(err, GGUF_E_FORMAT,
                         "malformed value: %zu stray bytes after the %s",
                         len - r.i, tname(type));
    return GGUF_OK;
}

/* Runs render in the C locale; a failure out of memory is said as such. */
static enum gguf_status render_c(enum gguf_type type, const uint8_t *p,
                                 size_t len, struct sink *s,
                                 const struct gguf_text_mark *from,
                                 const char *doing, struct gguf_error *err) {
    locale_t old = enter_c_locale();
    enum gguf_status st = render(type, p, len, s, from, err);
    leave_c_locale(old);
    gguf_buf_free(&s->tmp);
    if (st == GGUF_E_NOMEM)
        gguf_fail(err, st, "out of memory %s a %s", doing, tname(type));
    return st;
}

enum gguf_status gguf_render(enum gguf_type type, const uint8_t *payload,
                             size_t len, struct gguf_buf *out,
                             struct gguf_error *err) {
    size_t mark = out->len;
    struct sink s = {.out = out};
    enum gguf_status st =
        render_c(type, payload, len, &s, NULL, "rendering", err);
    if (st != GGUF_OK)
        out->len = mark;
    return st;
}

enum gguf_status gguf_render_size(enum gguf_type type, const uint8_t *payload,
                                  size_t len, uint64_t *size,
                                  struct gguf_error *err) {
    struct sink s = {0};
    enum gguf_status st =
        render_c(type, payload, len, &s, NULL, "measuring", err);
    *size = st == GGUF_OK ? s.n : 0;
    return st;
}

enum gguf_status gguf_render_map(enum gguf_type type, const uint8_t *payload,
                                 size_t len, struct gguf_text_map *map,
                                 struct gguf_error *err) {
    gguf_text_map_free(map);
    struct sink s = {.map = map};
    enum gguf_status st =
        render_c(type, payload, len, &s, NULL, "measuring", err);
    if (st != GGUF_OK)
        gguf_text_map_free(map);
    else
        map->size = s.n;
    return st;
}

enum gguf_status gguf_render_window(enum gguf_type type, const uint8_t *payload,
                                    size_t len, const struct gguf_text_map *map,
                                    uint64_t off, size_t n,
                                    struct gguf_buf *out,
                                    struct gguf_error *err) {
    size_t was = out->len;
    if (n == 0 || off >= UINT64_MAX - n)
        return GGUF_OK;
    /* the last mark at or before off */
    const struct gguf_text_mark *from = NULL;
    if (map && map->n && type == GGUF_TYPE_ARRAY) {
        size_t lo = 0, hi = map->n;
        while (hi - lo > 1) {
            size_t mid = lo + (hi - lo) / 2;
            if (map->marks[mid].text <= off)
                lo = mid;
            else
                hi = mid;
        }
        if (map->marks[lo].text <= off)
            from = &map->marks[lo];
    }
    struct sink s = {.win = out, .lo = off, .hi = off + n};
    enum gguf_status st =
        render_c(type, payload, len, &s, from, "rendering", err);
    if (st != GGUF_OK)
        out->len = was;
    return st;
}

void gguf_text_map_free(struct gguf_text_map *map) {
    free(map->marks);
    *map = (struct gguf_text_map){0};
}

/* ---- numbers: parsing ---------------------------------------------- */

/* Parses an integer of type t; GGUF_OK, GGUF_E_INVAL or GGUF_E_RANGE. */
static enum gguf_status parse_int(const char *s, size_t n, enum gguf_type t,
                                  uint64_t *out) {
    size_t i = 0;
    bool neg = false;
    if (n && s[0] == '-') {
        neg = true;
        i = 1;
    }
    if (i == n)
        return GGUF_E_INVAL;
    uint64_t m = 0;
    bool over = false;
    for (; i < n; i++) {
        unsigned d = (unsigned char)s[i] - '0';
        if (d > 9)
            return GGUF_E_INVAL;
        if (m > (UINT64_MAX - d) / 10)
            over = true;
        else
            m = m * 10 + d;
    }
    if (over)
        return GGUF_E_RANGE;
    bool sgn = is_signed(t);
    unsigned bits = (unsigned)gguf_type_size(t) * 8;
    if (sgn) {
        uint64_t lim = UINT64_C(1) << (bits - 1); /* |min| */
        if (neg ? m > lim : m >= lim)
            return GGUF_E_RANGE;
        *out = neg ? (uint64_t)0 - m : m;
    } else {
        uint64_t max = bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
        if ((neg && m != 0) || m > max)
            return GGUF_E_RANGE;
        *out = m;
    }
    return GGUF_OK;
}

enum gguf_status gguf_text_bad_value(struct gguf_error *err,
                                     enum gguf_status st, uint64_t line,
                                     const char *s, size_t n,
                                     enum gguf_type t) {
    char sn[200];
    gguf_text_snippet(s, n, sn, sizeof sn);
    if (st == GGUF_E_RANGE)
        return gguf_fail(err, st, "line %" PRIu64 ": %s is out of range for %s",
                         line, sn, tname(t));
    return gguf_fail(err, GGUF_E_INVAL, "line %" PRIu64 ": '%s' is not a%s %s",
                     line, sn, is_signed(t) ? "n" : "", tname(t));
}

/* Parses one scalar of fixed-size type t from s[0..n) and appends its
 * bytes.  Messages: gguf_text_bad_value's. */
static enum gguf_status parse_scalar(enum gguf_type t, const char *s, size_t n,
                                     struct gguf_buf *out,
                                     struct gguf_error *err, uint64_t line) {
    uint64_t v = 0;
    enum gguf_status st;
    switch (t) {
    case GGUF_TYPE_BOOL:
        if ((n == 4 && !memcmp(s, "true", 4)) || (n == 1 && s[0] == '1'))
            v = 1, st = GGUF_OK;
        else if ((n == 5 && !memcmp(s, "false", 5)) || (n == 1 && s[0] == '0'))
            v = 0, st = GGUF_OK;
        else
            st = GGUF_E_INVAL;
        break;
    case GGUF_TYPE_FLOAT32:
        st = gguf_parse_float(s, n, true, &v);
        break;
    case GGUF_TYPE_FLOAT64:
        st = gguf_parse_float(s, n, false, &v);
        break;
    default:
        st = parse_int(s, n, t, &v);
    }
    if (st == GGUF_E_INVAL || st == GGUF_E_RANGE)
        return gguf_text_bad_value(err, st, line, s, n, t);
    if (st != GGUF_OK)
        return st;
    size_t sz = gguf_type_size(t);
    if ((st = gguf_text_room(out, sz)) != GGUF_OK)
        return st;
    uint8_t *o = out->p + out->len;
    for (size_t k = 0; k < sz; k++)
        o[k] = (uint8_t)(v >> (8 * k));
    out->len += sz;
    return GGUF_OK;
}

/* ---- parsing ------------------------------------------------------- */

static enum gguf_status too_long(struct gguf_error *err, uint64_t line,
                                 uint64_t n) {
    return gguf_fail(err, GGUF_E_RANGE,
                     "line %" PRIu64 ": string of %" PRIu64
                     " bytes is longer than %" PRIu64,
                     line, n, (uint64_t)GGUF_MAX_STRING);
}

/* The "TYPE[" that opens a bracketed inner array at s[*pos..n): *et is
 * the element type, *pos moves past the '['.  Also refuses an array that
 * would be nested too deeply at this level. */
static enum gguf_status parse_inline_head(const char *s, size_t n, size_t *pos,
                                          int level, uint64_t line, int *et,
                                          struct gguf_error *err) {
    size_t i = *pos, t0 = i;
    char sn[200];
    while (i < n &&
           ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
        i++;
    if (i - t0 == 5 && !memcmp(s + t0, "array", 5))
        *et = GGUF_TYPE_ARRAY;
    else
        *et = gguf_type_from_name(s + t0, i - t0);
    if (*et < 0 || *et >= GGUF_TYPE_COUNT || i == n || s[i] != '[') {
        size_t e = t0;
        while (e < n && e - t0 < 40 && s[e] != '[' && s[e] != ',' &&
               s[e] != ']' && s[e] != ' ')
            e++;
        if (e == t0 && e < n)
            e++; /* show at least the offending character */
        return gguf_fail(err, GGUF_E_INVAL,
                         "line %" PRIu64 ", column %zu: expected a type and "
                         "'[' (like uint32[1, 2]), found '%s'",
                         line, t0 + 1,
                         gguf_text_snippet(s + t0, e - t0, sn, sizeof sn));
    }
    if (level > GGUF_MAX_NESTING ||
        (*et == GGUF_TYPE_ARRAY && level >= GGUF_MAX_NESTING))
        return gguf_fail(err, GGUF_E_INVAL,
                         "line %" PRIu64 ", column %zu: arrays nested more "
                         "than %d levels deep",
                         line, t0 + 1, GGUF_MAX_NESTING);
    *pos = i + 1;
    return GGUF_OK;
}

static enum gguf_status parse_inline(const char *s, size_t n, size_t *pos,
                                     int level, uint64_t line,
                                     struct gguf_buf *out,
                                     struct gguf_error *err);

/* One element of type et at s[*pos..n) inside a bracketed inner array;
 * *pos moves past it. */
static enum gguf_status parse_inline_elem(const char *s, size_t n, size_t *pos,
                                          int et, int level, uint64_t line,
                                          struct gguf_buf *out,
                                          struct gguf_error *err) {
    enum gguf_status st;
    size_t i = *pos;
    if (et == GGUF_TYPE_STRING) {
        if (s[i] != '"')
            return gguf_fail(err, GGUF_E_INVAL,
                             "line %" PRIu64 ", column %zu: expected '\"' "
                             "to start a string",
                             line, i + 1);
        size_t used = 0, at = out->len;
        if ((st = put64(out, 0)) != GGUF_OK ||
            (st = gguf_text_unescape(s + i + 1, n - i - 1, true, &used, out,
                                     err, line, i + 2)) != GGUF_OK)
            return st;
        uint64_t sl = out->len - at - 8;
        if (sl > GGUF_MAX_STRING)
            return too_long(err, line, sl);
        gguf_wr64(out->p + at, sl);
        *pos = i + used + 2;
        return GGUF_OK;
    }
    if (et == GGUF_TYPE_ARRAY)
        return parse_inline(s, n, pos, level + 1, line, out, err);
    size_t e = i;
    while (e < n && s[e] != ',' && s[e] != ']' && s[e] != ' ')
        e++;
    if ((st = parse_scalar(et, s + i, e - i, out, err, line)) != GGUF_OK)
        return st;
    *pos = e;
    return GGUF_OK;
}

/* One bracketed inner array TYPE[...] at s[*pos..n) of line `line`, at
 * nesting level `level`; *pos moves past the ']'. */
static enum gguf_status parse_inline(const char *s, size_t n, size_t *pos,
                                     int level, uint64_t line,
                                     struct gguf_buf *out,
                                     struct gguf_error *err) {
    enum gguf_status st;
    size_t i = *pos;
    char sn[200];
    int et;
    if ((st = parse_inline_head(s, n, &i, level, line, &et, err)) != GGUF_OK)
        return st;
    if ((st = put32(out, (uint32_t)et)) != GGUF_OK)
        return st;
    size_t cnt_at = out->len;
    if ((st = put64(out, 0)) != GGUF_OK)
        return st;
    uint64_t cnt = 0;
    while (i < n && s[i] == ' ')
        i++;
    if (i < n && s[i] == ']') {
        *pos = i + 1;
        return GGUF_OK;
    }
    for (;;) {
        while (i < n && s[i] == ' ')
            i++;
        if (i == n)
            break;
        if ((st = parse_inline_elem(s, n, &i, et, level, line, out, err)) !=
            GGUF_OK)
            return st;
        cnt++;
        while (i < n && s[i] == ' ')
            i++;
        if (i < n && s[i] == ',') {
            i++;
            continue;
        }
        if (i < n && s[i] == ']') {
            if (cnt > GGUF_MAX_ARRAY)
                return gguf_fail(err, GGUF_E_RANGE,
                                 "line %" PRIu64 ": array of %" PRIu64
                                 " elements is longer than %" PRIu64,
                                 line, cnt, (uint64_t)GGUF_MAX_ARRAY);
            gguf_wr64(out->p + cnt_at, cnt);
            *pos = i + 1;
            return GGUF_OK;
        }
        if (i == n)
            break;
        return gguf_fail(
            err, GGUF_E_INVAL,
            "line %" PRIu64 ", column %zu: expected ',' or ']', "
            "found '%s'",
            line, i + 1,
            gguf_text_snippet(s + i,
                              gguf_utf8_seq((const uint8_t *)s + i, n - i), sn,
                              sizeof sn));
    }
    return gguf_fail(err, GGUF_E_INVAL,
                     "line %" PRIu64 ", column %zu: missing ']'", line, n + 1);
}

/* An array's text; its first line is line `first` of the whole text. */
static enum gguf_status parse_array(enum gguf_type et, const char *text,
                                    size_t len, uint64_t first,
                                    struct gguf_buf *out,
                                    struct gguf_error *err) {
    enum gguf_status st;
    if (et >= GGUF_TYPE_COUNT)
        return gguf_fail(err, GGUF_E_INVAL, "unknown array element type %u",
                         (unsigned)et);
    /* count the lines (one fast pass) */
    uint64_t lines = 0;
    for (const char *q = text, *e = text + len;
         q < e && (q = memchr(q, '\n', (size_t)(e - q))); q++)
        lines++;
    if (len && text[len - 1] != '\n')
        return gguf_fail(err, GGUF_E_INVAL,
                         "line %" PRIu64 ": last line is incomplete "
                         "(no trailing newline)",
                         first + lines);
    if (lines > GGUF_MAX_ARRAY)
        return gguf_fail(err, GGUF_E_RANGE,
                         "array of %" PRIu64
                         " elements is longer than %" PRIu64,
                         lines, (uint64_t)GGUF_MAX_ARRAY);
    size_t est = et == GGUF_TYPE_STRING  ? len + (size_t)lines * 8
                 : et == GGUF_TYPE_ARRAY ? len
                                         : (size_t)lines * gguf_type_size(et);
    if ((st = gguf_text_room(out, 12 + est)) != GGUF_OK ||
        (st = put32(out, et)) != GGUF_OK || (st = put64(out, lines)) != GGUF_OK)
        return st;
    const char *q = text, *e = text + len;
    for (uint64_t k = 0; k < lines; k++) {
        uint64_t ln = first + k;
        const char *nl = memchr(q, '\n', (size_t)(e - q));
        size_t n = (size_t)(nl - q);
        if (n && q[n - 1] == '\r')
            n--; /* a "\r\n" line end */
        if (et == GGUF_TYPE_STRING) {
            size_t at = out->len;
            if ((st = put64(out, 0)) != GGUF_OK ||
                (st = gguf_text_unescape(q, n, false, NULL, out, err, ln, 1)) !=
                    GGUF_OK)
                return st;
            uint64_t sl = out->len - at - 8;
            if (sl > GGUF_MAX_STRING)
                return too_long(err, ln, sl);
            gguf_wr64(out->p + at, sl);
        } else if (et == GGUF_TYPE_ARRAY) {
            size_t pos = 0;
            if ((st = parse_inline(q, n, &pos, 2, ln, out, err)) != GGUF_OK)
                return st;
            if (pos != n) {
                char sn[200];
                return gguf_fail(
                    err, GGUF_E_INVAL,
                    "line %" PRIu64 ", column %zu: unexpected "
                    "'%s' after the array",
                    ln, pos + 1,
                    gguf_text_snippet(q + pos, n - pos, sn, sizeof sn));
            }
        } else if ((st = parse_scalar(et, q, n, out, err, ln)) != GGUF_OK) {
            return st;
        }
        q = nl + 1;
    }
    return GGUF_OK;
}

static enum gguf_status parse(enum gguf_type type, enum gguf_type arr_type,
                              const char *text, size_t len, uint64_t first,
                              struct gguf_buf *out, struct gguf_error *err) {
    enum gguf_status st;
    if (type == GGUF_TYPE_ARRAY)
        return parse_array(arr_type, text, len, first, out, err);
    bool nl = len && text[len - 1] == '\n';
    if (nl)
        len--;
    if (type == GGUF_TYPE_STRING) {
        if (len > GGUF_MAX_STRING)
            return too_long(err, 1, len);
        if ((st = gguf_text_room(out, 8 + len)) != GGUF_OK)
            return st;
        gguf_wr64(out->p + out->len, len);
        if (len)
            memcpy(out->p + out->len + 8, text, len);
        out->len += 8 + len;
        return GGUF_OK;
    }
    if (!is_fixed(type))
        return gguf_fail(err, GGUF_E_INVAL, "unknown value type %u",
                         (unsigned)type);
    if (nl && len && text[len - 1] == '\r')
        len--; /* a "\r\n" line end */
    const char *extra = memchr(text, '\n', len);
    if (extra) {
        uint64_t lines = 2;
        for (const char *q = extra + 1, *e = text + len;
             q < e && (q = memchr(q, '\n', (size_t)(e - q))); q++)
            lines++;
        return gguf_fail(err, GGUF_E_INVAL,
                         "line %" PRIu64 ": a%s %s value is one line; the "
                         "text has %" PRIu64 " lines",
                         first + 1, is_signed(type) ? "n" : "", tname(type),
                         lines);
    }
    return parse_scalar(type, text, len, out, err, first);
}

enum gguf_status gguf_parse_text(enum gguf_type type, enum gguf_type arr_type,
                                 const char *text, size_t len,
                                 struct gguf_buf *out, struct gguf_error *err) {
    return gguf_parse_text_from(type, arr_type, text, len, 1, out, err);
}

enum gguf_status gguf_parse_text_from(enum gguf_type type,
                                      enum gguf_type arr_type, const char *text,
                                      size_t len, uint64_t first,
                                      struct gguf_buf *out,
                                      struct gguf_error *err) {
    size_t mark = out->len;
    if (!text) /* an empty gguf_buf: NULL + 0 is undefined in C (UBSan) */
        text = "";
    locale_t old = enter_c_locale();
    enum gguf_status st = parse(type, arr_type, text, len, first, out, err);
    leave_c_locale(old);
    if (st != GGUF_OK) {
        out->len = mark;
        if (st == GGUF_E_NOMEM)
            gguf_fail(err, st, "out of memory parsing a %s", tname(type));
    }
    return st;
}
