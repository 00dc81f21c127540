/*
 * index.c - the vocabulary's texts found by value (arr.h, struct
 * voc_index): each token's element found once, then an open-addressing
 * table of ids by a 64-bit hash of their text (at most 3/4 full, linear
 * probing), so that a lookup is a probe or two and a text held by two ids
 * is found while the table is made.  The hash is a polynomial of the
 * bytes (mod 2^64) with the length, mixed: a text's prefixes and
 * suffixes then hash in O(1) each from the whole's (voc_split: the
 * splits of a token, linear in its length, where lookups that hashed
 * each prefix and suffix anew were quadratic: 80,000 tokens of 250 bytes
 * took 12 s).  The splits of a 262k vocabulary are two million lookups,
 * most of which wait on memory: a byte a slot of fingerprints (8 bits of
 * its text's hash, a few hundred kilobytes that stay in the cache)
 * passes the other texts by, so that only a text that is there costs a
 * read of the ids and of the vocabulary.  Memory: 5 bytes a slot and 16
 * a token (30 a token at most), in one mapping of its own, handed back
 * to the system by voc_index_free (the allocator would keep a freed block
 * of this size in its arena: a daemon that checked a 150k vocabulary held
 * 7 MB more).  Without by_text, the texts by id alone (no table: 16 bytes
 * a token).
 */
#include "arr.h"

#include <string.h>
#include <sys/mman.h>

#define B UINT64_C(0x9e3779b97f4a7c15) /* odd: invertible mod 2^64 */

/* B's inverse mod 2^64 (Newton's iteration: 3, 6, ..., 96 bits). */
static uint64_t b_inverse(void) {
    uint64_t x = B;
    for (int i = 0; i < 5; i++)
        x *= 2 - B * x;
    return x;
}

/* The hash of a text of n bytes whose polynomial is poly: mixed
 * (murmur3's finalizer), so that its low bits pick the slot. */
static uint64_t mix(uint64_t poly, uint64_t n) {
    uint64_t h = poly + n * UINT64_C(0xc2b2ae3d27d4eb4f);
    h ^= h >> 33;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    h *= UINT64_C(0xc4ceb9fe1a85ec53);
    return h ^ (h >> 33);
}

/* sum s[i] B^(n-1-i) */
static uint64_t poly(const uint8_t *s, uint64_t n) {
    uint64_t h = 0;
    for (uint64_t i = 0; i < n; i++)
        h = h * B + s[i];
    return h;
}

static bool same(const struct voc_index *ix, uint32_t id, const uint8_t *s,
                 uint64_t n) {
    return ix->len[id] == n && memcmp(ix->text[id], s, n) == 0;
}

/* The fingerprint of hash h: never 0 (an empty slot). */
static uint8_t print_of(uint64_t h) {
    uint8_t f = (uint8_t)(h >> 56);
    return f ? f : 1;
}

/* The slot of text s (hash h): the one holding its id, or the empty one
 * where it goes.  The fingerprints pass other texts by, a few hundred
 * kilobytes that stay in the cache: only a text that matches one costs
 * a read of the slots. */
static size_t probe(const struct voc_index *ix, const uint8_t *s, uint64_t n,
                    uint64_t h) {
    size_t mask = ix->cap - 1, k = (size_t)h & mask;
    uint8_t f = print_of(h);
    while (ix->print[k] &&
           (ix->print[k] != f || !same(ix, ix->slot[k] - 1, s, n)))
        k = (k + 1) & mask;
    return k;
}

bool voc_index_make(const struct voc_arr *toks, bool by_text,
                    struct voc_index *ix) {
    memset(ix, 0, sizeof *ix);
    ix->dup = -1;
    if (toks->n > UINT32_MAX - 1 || toks->n > SIZE_MAX / 64)
        return false;
    ix->n = (size_t)toks->n;
    ix->cap = by_text ? 16 : 0;
    while (by_text && ix->cap < ix->n + ix->n / 3) /* 3/4 full at most */
        ix->cap *= 2;
    ix->bytes = ix->cap * (sizeof *ix->slot + 1) +
                ix->n * (sizeof *ix->text + sizeof *ix->len);
    if (!ix->bytes) /* no tokens, no table */
        return true;
    void *m = mmap(NULL, ix->bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        ix->bytes = 0;
        return false;
    }
    ix->len = m; /* the 8-byte aligned parts first; zero-filled (print 0) */
    ix->text = (const uint8_t **)(ix->len + ix->n);
    ix->slot = (uint32_t *)(ix->text + ix->n);
    ix->print = (uint8_t *)(ix->slot + ix->cap);
    const uint8_t *pos = toks->p;
    for (size_t i = 0; i < ix->n; i++) {
        if (!voc_arr_next_str(toks, &pos, &ix->text[i], &ix->len[i])) {
            voc_index_free(ix);
            return false;
        }
        if (!by_text)
            continue;
        const uint8_t *s = ix->text[i];
        uint64_t n = ix->len[i], h = mix(poly(s, n), n);
        size_t k = probe(ix, s, n, h);
        if (ix->print[k]) {
            if (ix->dup < 0)
                ix->dup = (int64_t)i;
            continue;
        }
        ix->print[k] = print_of(h);
        ix->slot[k] = (uint32_t)i + 1;
    }
    return true;
}

void voc_index_free(struct voc_index *ix) {
    if (ix->bytes)
        munmap(ix->len, ix->bytes);
    memset(ix, 0, sizeof *ix);
}

/* The id of text s of hash h, or -1. */
static int64_t find(const struct voc_index *ix, const uint8_t *s, uint64_t n,
                    uint64_t h) {
    if (!ix->cap)
        return -1;
    size_t k = probe(ix, s, n, h);
    return ix->print[k] ? (int64_t)ix->slot[k] - 1 : -1;
}

int64_t voc_index_find(const struct voc_index *ix, const uint8_t *s,
                       uint64_t n) {
    return find(ix, s, n, mix(poly(s, n), n));
}

int64_t voc_index_duplicate(const struct voc_index *ix) {
    return ix->dup;
}

void voc_split_start(struct voc_split *sp, const struct voc_index *ix,
                     size_t t) {
    sp->ix = ix;
    sp->s = ix->text[t];
    sp->n = ix->len[t];
    sp->k = 0;
    sp->pre = 0;
    sp->whole = 0;
    sp->pow = 1; /* B^n, then B^(n-k) as k grows */
    sp->inv = b_inverse();
    for (uint64_t i = 0; i < sp->n; i++) {
        sp->whole = sp->whole * B + sp->s[i];
        sp->pow *= B;
    }
}

bool voc_split_next(struct voc_split *sp) {
    if (sp->k >= sp->n)
        return false;
    do {
        sp->pre = sp->pre * B + sp->s[sp->k++];
        sp->pow *= sp->inv;
    } while (sp->k < sp->n && (sp->s[sp->k] & 0xc0) == 0x80);
    return sp->k < sp->n;
}

int64_t voc_split_left(const struct voc_split *sp) {
    return find(sp->ix, sp->s, sp->k, mix(sp->pre, sp->k));
}

int64_t voc_split_right(const struct voc_split *sp) {
    /* s[k..n)'s polynomial: the whole's less the prefix's, shifted */
    return find(sp->ix, sp->s + sp->k, sp->n - sp->k,
                mix(sp->whole - sp->pre * sp->pow, sp->n - sp->k));
}
