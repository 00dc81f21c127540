/*
 * test_cuts.c - vocab/cuts.c's splits of every token into two tokens,
 * found by sorting, against the plain reading of what they are: for each
 * token t and each byte offset k, whether t's bytes 0..k-1 (k < len) are
 * the text of some token, and whether its bytes k.. (k >= 1) are; the
 * first token whose text an earlier id has; the first that is not UTF-8;
 * the merges (every k where both are, in id order, k rising, the two
 * tokens' ids).  The oracle looks texts up in a sorted copy with
 * bsearch: nothing of cuts.c's.  The vocabularies are made to hit the
 * sort's edges: texts that share 8 and 16 bytes and more (its keys are 8
 * bytes), texts that end inside a key and the zero bytes that pad a key
 * ("a" and "a\0"), an empty text, texts past 64 bytes (a second word of
 * bits), twins, 2- and 3-byte characters; small ones (one thread) and
 * ones past VOC_SPLIT_MIN (two).
 */
#include "arr.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct text {
    const uint8_t *s;
    uint64_t n;
};

static int by_bytes(const void *a, const void *b) {
    const struct text *x = a, *y = b;
    uint64_t m = x->n < y->n ? x->n : y->n;
    int c = m ? memcmp(x->s, y->s, m) : 0;
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

/* The oracle's lookup: the id of text s (n bytes), or -1. */
struct oracle {
    struct text *sorted;
    uint32_t *ids;
    size_t n;
};

static int64_t look(const struct oracle *o, const uint8_t *s, uint64_t n) {
    size_t lo = 0, hi = o->n;
    struct text key = {s, n};
    while (lo < hi) {
        size_t m = lo + (hi - lo) / 2;
        int c = by_bytes(&o->sorted[m], &key);
        if (c == 0)
            return o->ids[m];
        if (c < 0)
            lo = m + 1;
        else
            hi = m;
    }
    return -1;
}

/* A vocabulary as the GGUF holds it: a length and the bytes each. */
struct vocab {
    uint8_t *payload;
    size_t len, cap, n;
};

static void add(struct vocab *v, const uint8_t *s, uint64_t n) {
    if (v->len + 8 + n > v->cap) {
        v->cap = (v->len + 8 + n) * 2;
        v->payload = realloc(v->payload, v->cap);
        ck_assert_ptr_nonnull(v->payload);
    }
    memcpy(v->payload + v->len, &n, 8); /* little-endian, as GGUF */
    memcpy(v->payload + v->len + 8, s, n);
    v->len += 8 + n;
    v->n++;
}

static uint64_t rnd(uint64_t *x) { /* xorshift64 */
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* A random symbol: a letter, a zero byte, U+00E9, U+2581. */
static size_t symbol(uint64_t *r, uint8_t *o) {
    static const char *const sym[] = {"a",  "b",        "c",
                                      "\0", "\xc3\xa9", "\xe2\x96\x81"};
    const char *s = sym[rnd(r) % 6];
    size_t n = *s ? strlen(s) : 1;
    memcpy(o, s, n);
    return n;
}

/* Whether text s (n bytes) is one of t[0..m) (FNV-1a into a table of
 * cap slots, ids + 1); if not, it goes in as id m. */
static bool seen(uint32_t *tab, size_t cap, const struct text *t, size_t m,
                 const uint8_t *s, uint64_t n) {
    uint64_t h = 1469598103934665603u;
    for (uint64_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211u;
    for (size_t k = h % cap;; k = (k + 1) % cap) {
        if (!tab[k]) {
            tab[k] = (uint32_t)m + 1;
            return false;
        }
        const struct text *e = &t[tab[k] - 1];
        if (e->n == n && (!n || !memcmp(e->s, s, n)))
            return true;
    }
}

/* n tokens, seeded: new texts, and earlier ones with symbols added
 * before or after or long runs shared (so that many texts begin and
 * end others), no two alike; twins (an earlier text again, every 997th)
 * when twins; one text not UTF-8 when bad. */
static void make(struct vocab *v, size_t n, uint64_t seed, bool twins,
                 bool bad) {
    uint64_t r = seed * 2654435761u + 1;
    struct text *t = calloc(n, sizeof *t);
    uint8_t *store = malloc(n * 160), buf[160];
    uint32_t *tab = calloc(4 * n + 1, sizeof *tab);
    ck_assert(t && store && tab);
    memset(v, 0, sizeof *v);
    add(v, (const uint8_t *)"", 0); /* the empty text: token 0 */
    t[0] = (struct text){store, 0};
    (void)seen(tab, 4 * n + 1, t, 0, store, 0);
    for (size_t i = 1; i < n;) {
        size_t len = 0, kind = rnd(&r) % 8;
        const struct text *e = &t[rnd(&r) % i];
        if (kind < 3 && e->n < 140) { /* an earlier text and more */
            memcpy(buf, e->s, e->n);
            len = e->n;
            len += symbol(&r, buf + len);
        } else if (kind < 6 && e->n < 140) { /* more, then the earlier */
            len = symbol(&r, buf);
            memcpy(buf + len, e->s, e->n);
            len += e->n;
        } else if (kind == 6) { /* a long shared run: 20 or 70 bytes */
            size_t run = rnd(&r) % 2 ? 20 : 70;
            memset(buf, 'a', run);
            len = run + symbol(&r, buf + run);
        } else
            for (size_t k = rnd(&r) % 12; k--;)
                len += symbol(&r, buf + len);
        bool twin = twins && i % 997 == 0;
        if (twin) { /* an earlier text again */
            memcpy(buf, t[i / 2].s, t[i / 2].n);
            len = t[i / 2].n;
        }
        if (bad && i == n - 3)
            buf[len++] = 0xff;
        t[i] = (struct text){store + 160 * i, len};
        memcpy(store + 160 * i, buf, len);
        if (!twin && seen(tab, 4 * n + 1, t, i, buf, len))
            continue; /* made again: another */
        add(v, buf, len);
        i++;
    }
    free(tab);
    free(t);
    free(store);
}

struct entry {
    struct text t;
    uint32_t id;
};

static int by_text_id(const void *a, const void *b) {
    const struct entry *x = a, *y = b;
    int c = by_bytes(&x->t, &y->t);
    return c ? c : (x->id > y->id) - (x->id < y->id);
}

/* The index of v's texts (by id) and the oracle's sorted copy (twins in
 * id order, each answering with the first's id). */
static void index_of(const struct vocab *v, struct voc_index *ix,
                     struct oracle *o) {
    struct voc_arr a = {GGUF_TYPE_STRING, v->n, v->payload, v->payload + v->len,
                        0};
    ck_assert(voc_index_make(&a, false, ix));
    o->n = ix->n;
    o->sorted = malloc(o->n * sizeof *o->sorted);
    o->ids = malloc(o->n * sizeof *o->ids);
    struct entry *e = malloc(o->n * sizeof *e);
    ck_assert(o->sorted && o->ids && e);
    for (size_t i = 0; i < o->n; i++)
        e[i] = (struct entry){{ix->text[i], ix->len[i]}, (uint32_t)i};
    qsort(e, o->n, sizeof *e, by_text_id);
    for (size_t i = 0; i < o->n; i++) {
        o->sorted[i] = e[i].t;
        o->ids[i] = e[i].id;
    }
    free(e);
    for (size_t i = 1; i < o->n; i++) /* a twin group's first id for all */
        if (by_bytes(&o->sorted[i - 1], &o->sorted[i]) == 0)
            o->ids[i] = o->ids[i - 1];
}

/* Bit k of token t (len bytes) in p's set pre or suf is want. */
static void expect(const struct voc_pairs *p, bool suf, size_t t, uint64_t len,
                   uint64_t k, bool want, const char *what) {
    bool got = voc_pairs_bit(p, suf ? p->suf : p->pre, t, k);
    ck_assert_msg(got == want,
                  "%s: token %zu (%llu bytes), its bytes %s %llu: a token "
                  "%d, cuts.c says %d",
                  what, t, (unsigned long long)len, suf ? "from" : "before",
                  (unsigned long long)k, want, got);
}

/* Everything cuts.c says of vocabulary v, checked. */
static void check_vocab(const struct vocab *v, const char *what) {
    struct voc_index ix;
    struct oracle o;
    struct voc_pairs p;
    index_of(v, &ix, &o);
    ck_assert(voc_pairs_make(&ix, &p));
    int64_t dup = -1, bad = -1;
    for (size_t i = 0; i < ix.n; i++) {
        if (bad < 0 && !gguf_utf8_valid(ix.text[i], ix.len[i]))
            bad = (int64_t)i;
        if (dup < 0 && look(&o, ix.text[i], ix.len[i]) != (int64_t)i)
            dup = (int64_t)i;
    }
    ck_assert_msg(p.dup == dup, "%s: twin %lld, cuts.c says %lld", what,
                  (long long)dup, (long long)p.dup);
    ck_assert_msg(p.bad_utf8 == bad, "%s: not UTF-8 %lld, cuts.c says %lld",
                  what, (long long)bad, (long long)p.bad_utf8);
    size_t want_n = 0;
    struct voc_merge *want = malloc(ix.n * 160 * sizeof *want);
    ck_assert_ptr_nonnull(want);
    for (size_t t = 0; t < ix.n; t++)
        for (uint64_t k = 0; k <= ix.len[t]; k++) {
            const uint8_t *s = ix.text[t];
            int64_t l = k < ix.len[t] ? look(&o, s, k) : -1;
            int64_t r = k >= 1 ? look(&o, s + k, ix.len[t] - k) : -1;
            expect(&p, false, t, ix.len[t], k, l >= 0, what);
            expect(&p, true, t, ix.len[t], k, r >= 0, what);
            if (l >= 0 && r >= 0)
                want[want_n++] = (struct voc_merge){0, (uint32_t)t, (uint32_t)l,
                                                    (uint32_t)r};
        }
    if (dup < 0 && bad < 0) {
        struct gguf_buf b = {0};
        ck_assert(voc_pairs_merges(&p, &ix, &b));
        size_t got_n = b.len / sizeof(struct voc_merge);
        const struct voc_merge *got = (const struct voc_merge *)b.p;
        ck_assert_msg(got_n == want_n, "%s: %zu merges, cuts.c made %zu", what,
                      want_n, got_n);
        for (size_t i = 0; i < want_n; i++)
            ck_assert_msg(!memcmp(&got[i], &want[i], sizeof *got),
                          "%s: merge %zu: token %u = %u + %u, cuts.c says "
                          "%u = %u + %u",
                          what, i, want[i].id, want[i].l, want[i].r, got[i].id,
                          got[i].l, got[i].r);
        gguf_buf_free(&b);
    }
    free(want);
    voc_pairs_free(&p);
    voc_index_free(&ix);
    free(o.sorted);
    free(o.ids);
}

START_TEST(splits_as_the_oracle_reads_them) {
    static const size_t sizes[] = {1, 2, 40, 700, VOC_SPLIT_MIN + 1500};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (uint64_t seed = 1; seed <= 3; seed++) {
            struct vocab v;
            char what[64];
            make(&v, sizes[s], seed, false, false);
            snprintf(what, sizeof what, "%zu tokens, seed %llu", sizes[s],
                     (unsigned long long)seed);
            check_vocab(&v, what);
            free(v.payload);
        }
}
END_TEST

START_TEST(twins_and_bad_utf8) {
    for (int bad = 0; bad < 2; bad++) {
        struct vocab v;
        make(&v, VOC_SPLIT_MIN + 1500, 7, !bad, bad);
        check_vocab(&v, bad ? "one text not UTF-8" : "twins");
        free(v.payload);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("cuts");
    TCase *tc = tcase_create("cuts");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, splits_as_the_oracle_reads_them);
    tcase_add_test(tc, twins_and_bad_utf8);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
