/*
 * index.c - the vocabulary's texts found by value (arr.h, struct
 * voc_index): each token's element found once, then an open-addressing
 * table of ids by a 64-bit hash of their text (at most 3/4 full, linear
 * probing), so that a lookup is a probe or two and a text held by two ids
 * is found while the table is made.  The hash is a polynomial of the
 * bytes (mod 2^61 - 1, at a random point: key) with the length, mixed.
 * A byte a slot of fingerprints (8 bits of its text's hash, a few
 * hundred kilobytes that stay in the cache) passes the other texts by,
 * so that only a text that is there costs a read of the ids and of the
 * vocabulary.  Memory: 5 bytes a slot and 24 a token (38 a token at
 * most), in one mapping of its own, handed back to the system by
 * voc_index_free (the allocator would keep a freed block of this size in
 * its arena: a daemon that checked a 150k vocabulary held 7 MB more);
 * huge pages asked for it.  Without by_text, the texts by id alone (no
 * table: 16 bytes a token): the splits of a SentencePiece vocabulary are
 * found by sorting (cuts.c), not here.
 */
#include "arr.h"

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#define P ((UINT64_C(1) << 61) - 1) /* a prime */

static uint64_t mulmod(uint64_t a, uint64_t b) {
    unsigned __int128 r = (unsigned __int128)a * b;
    uint64_t x = ((uint64_t)r & P) + (uint64_t)(r >> 61);
    x = (x & P) + (x >> 61);
    return x >= P ? x - P : x;
}

static uint64_t addmod(uint64_t a, uint64_t c) {
    a += c;
    return a >= P ? a - P : a;
}

/* The key of ix's hash: a random base (a text's polynomial at an unknown
 * point: two texts of n bytes collide with odds n / 2^61 whatever they
 * are, where a fixed base, or any odd one mod 2^64, lets a crafted
 * vocabulary pile its texts into one probe sequence), and its powers. */
static void key(struct voc_index *ix) {
    uint64_t r = UINT64_C(0x9e3779b97f4a7c15);
    (void)getrandom(&r, sizeof r, GRND_NONBLOCK); /* else the fixed one */
    ix->base = 2 + r % (P - 2);
    ix->pows[0] = 1;
    for (int i = 1; i < VOC_POWS; i++)
        ix->pows[i] = mulmod(ix->pows[i - 1], ix->base);
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

/* sum s[i] base^(n-1-i) mod P: four bytes a step, Horner's rule by
 * base^4, so that the chain of products a text waits on is a quarter as
 * long (the same value as a byte a step). */
static uint64_t poly(const struct voc_index *ix, const uint8_t *s, uint64_t n) {
    const uint64_t *b = ix->pows;
    uint64_t h = 0, i = 0;
    for (; i + 4 <= n; i += 4) {
        uint64_t q = addmod(addmod(mulmod(s[i], b[3]), mulmod(s[i + 1], b[2])),
                            addmod(mulmod(s[i + 2], b[1]), s[i + 3]));
        h = addmod(mulmod(h, b[4]), q);
    }
    for (; i < n; i++)
        h = addmod(mulmod(h, b[1]), s[i]);
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

/* Token i into the table (its poly made), in id order: the first of
 * two texts alike keeps the slot, the second is ix->dup.  The slot of a
 * token a few ids on is asked for first (the table is megabytes). */
static void insert(struct voc_index *ix, size_t i) {
    enum { AHEAD = 8 };
    if (i + AHEAD < ix->n) {
        uint64_t h = mix(ix->poly[i + AHEAD], ix->len[i + AHEAD]);
        __builtin_prefetch(&ix->print[(size_t)h & (ix->cap - 1)]);
    }
    uint64_t h = mix(ix->poly[i], ix->len[i]);
    size_t k = probe(ix, ix->text[i], ix->len[i], h);
    if (ix->print[k]) {
        if (ix->dup < 0)
            ix->dup = (int64_t)i;
        return;
    }
    ix->print[k] = print_of(h);
    ix->slot[k] = (uint32_t)i + 1;
}

void voc_huge(void *p, size_t n) {
    const uintptr_t blk = (uintptr_t)2 << 20;
    uintptr_t lo = ((uintptr_t)p + blk - 1) & ~(blk - 1);
    uintptr_t hi = ((uintptr_t)p + n) & ~(blk - 1);
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
}

/* Stack of voc_halves' thread: cuts.c's radix sort takes some 4 KB a
 * byte of its keys, 32 KB at most;
 * a sanitizer's runtime asks for up to 900 KB (ThreadSanitizer refuses
 * less).  Mapped, only its touched pages cost memory. */
#define HALF_STACK (1 << 20)

void voc_halves(void *(*fn)(void *), void *a, void *b, bool two) {
    long ps = sysconf(_SC_PAGESIZE);
    size_t page = ps > 0 && ps < HALF_STACK / 4 ? (size_t)ps : 4096;
    /* a stack of its own, unmapped after the join: a stack of glibc's
     * stays cached, its touched pages held, once the thread is done */
    uint8_t *stk = two ? mmap(NULL, HALF_STACK, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0)
                       : MAP_FAILED;
    pthread_attr_t at;
    pthread_t th;
    two = stk != MAP_FAILED && pthread_attr_init(&at) == 0;
    if (two) {
        (void)mprotect(stk, page, PROT_NONE); /* a guard page below it */
        two = pthread_attr_setstack(&at, stk + page, HALF_STACK - page) == 0 &&
              pthread_create(&th, &at, fn, b) == 0;
        pthread_attr_destroy(&at);
    }
    fn(a);
    if (two)
        pthread_join(th, NULL);
    else
        fn(b);
    if (stk != MAP_FAILED)
        munmap(stk, HALF_STACK);
}

/* A part of hash_all: tokens lo..hi-1's polys, and the first of them
 * not UTF-8 (bad, or -1). */
struct hash_part {
    struct voc_index *ix;
    size_t lo, hi;
    int64_t bad;
};

static void *hash_part(void *arg) {
    struct hash_part *h = arg;
    struct voc_index *ix = h->ix;
    h->bad = -1;
    for (size_t i = h->lo; i < h->hi; i++) {
        const uint8_t *s = ix->text[i];
        uint64_t n = ix->len[i];
        if (h->bad < 0 && !gguf_utf8_valid(s, (size_t)n))
            h->bad = (int64_t)i; /* while its bytes are at hand */
        ix->poly[i] = poly(ix, s, n);
    }
    return NULL;
}

/* Every token's poly and ix->bad_utf8, the two halves of the texts at
 * once (voc_halves). */
static void hash_all(struct voc_index *ix) {
    size_t mid = voc_index_mid(ix);
    struct hash_part h[2] = {{ix, 0, mid, -1}, {ix, mid, ix->n, -1}};
    voc_halves(hash_part, &h[0], &h[1], mid < ix->n);
    ix->bad_utf8 = h[0].bad >= 0 ? h[0].bad : h[1].bad;
}

bool voc_index_make(const struct voc_arr *toks, bool by_text,
                    struct voc_index *ix) {
    memset(ix, 0, sizeof *ix);
    ix->dup = ix->bad_utf8 = -1;
    if (toks->n > UINT32_MAX - 1 || toks->n > SIZE_MAX / 64)
        return false;
    ix->n = (size_t)toks->n;
    ix->cap = by_text ? 16 : 0;
    if (by_text)
        key(ix);
    while (by_text && ix->cap < ix->n + ix->n / 3) /* 3/4 full at most */
        ix->cap *= 2;
    ix->bytes = ix->cap * (sizeof *ix->slot + 1) +
                ix->n * (sizeof *ix->text + sizeof *ix->len) +
                (by_text ? ix->n * sizeof *ix->poly : 0);
    if (!ix->bytes) /* no tokens, no table */
        return true;
    void *m = mmap(NULL, ix->bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        ix->bytes = 0;
        return false;
    }
    voc_huge(m, ix->bytes);
    ix->len = m; /* the 8-byte aligned parts first; zero-filled (print 0) */
    ix->text = (const uint8_t **)(ix->len + ix->n);
    ix->poly = (uint64_t *)(ix->text + ix->n);
    ix->slot = (uint32_t *)(ix->poly + (by_text ? ix->n : 0));
    ix->print = (uint8_t *)(ix->slot + ix->cap);
    const uint8_t *pos = toks->p;
    ix->end = toks->end;
    for (size_t i = 0; i < ix->n; i++)
        if (!voc_arr_next_str(toks, &pos, &ix->text[i], &ix->len[i])) {
            voc_index_free(ix);
            return false;
        }
    if (by_text)
        hash_all(ix);
    ix->checked = by_text;
    for (size_t i = 0; by_text && i < ix->n; i++)
        insert(ix, i);
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
    return find(ix, s, n, mix(poly(ix, s, n), n));
}

int64_t voc_index_duplicate(const struct voc_index *ix) {
    return ix->dup;
}

size_t voc_index_mid(const struct voc_index *ix) {
    size_t lo = 0, hi = ix->n;
    if (ix->n < VOC_SPLIT_MIN)
        return ix->n;
    /* the texts lie in id order in one payload: the half of its bytes */
    uintptr_t half =
        (uintptr_t)ix->text[0] +
        ((uintptr_t)ix->text[ix->n - 1] - (uintptr_t)ix->text[0]) / 2;
    while (lo < hi) {
        size_t m = lo + (hi - lo) / 2;
        if ((uintptr_t)ix->text[m] < half)
            lo = m + 1;
        else
            hi = m;
    }
    return lo;
}
