/*
 * cuts.c - every split of every token into two tokens, found by sorting
 * (arr.h, struct voc_pairs): no hash, no lookup, exact by construction.
 *
 * The texts sorted by their bytes (a text before every longer text it
 * begins), the tokens that begin token t are the ones still on a stack
 * when t's turn comes (each pushed in its turn, popped when the next
 * text does not begin with it: between a prefix and t in that order
 * every text begins with the prefix); sorted by their bytes read from
 * the end, the same stack holds the tokens that end t.  So one sort and
 * one pass each way give, for every token, the bit set of the byte
 * offsets k where t[0..k) is a token (pre) and where t[k..) is one
 * (suf); the check and the merges of a SentencePiece vocabulary are the
 * two sets read side by side in id order (hfcheck.c).  The two ways run
 * at once (voc_halves); a second pass each way names the two tokens of
 * every merge (voc_pairs_merges).
 *
 * Why not the hash table (index.c): a 262k vocabulary's splits were two
 * million lookups, each waiting on up to three reads of megabytes of
 * table and texts (most of the 262k tokenizer.json's 100 ms); the sort
 * reads the texts in runs, and a pass reads its order in turn and the
 * stack, which stays in the cache: a text's first 8 bytes are its key
 * (k0), so that only a part longer than 8 bytes reads the texts.
 *
 * The sort: by 8 bytes at a time (depth d: bytes 8d..8d+7, from the end
 * for the reversed order, zero past the text's end) packed in a 64-bit
 * key, a radix sort of the key, most significant byte first; a run of
 * equal keys holds first the texts that end inside those 8 bytes (each
 * a prefix of the longer ones of the run: shortest first, equal lengths
 * are equal texts) and then the longer ones, sorted again at depth d + 1
 * (depth by depth, not by recursion: a crafted text of a megabyte is
 * 131072 depths; the texts of a depth's ranges asked for ahead, each
 * range a few texts anywhere in megabytes).  Work: linear in the texts'
 * bytes times a radix pass.
 *
 * Memory: one mapping, 96 bytes a token (25 MB for 262,144: the two
 * orders and their scratch, 16 bytes a token each, the bit sets, two
 * words a token and a word more each 64 bytes of text, and their
 * offsets), huge pages asked for it, and the stacks and ranges (touched
 * as deep as the texts nest and their runs repeat), unmapped by
 * voc_pairs_free: nothing is held after (the allocator would keep
 * blocks of this size in its arenas).
 */
#include "arr.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* A text in a sort: its key at the sort's depth (after the first pass,
 * its depth on the stack), its id and length. */
struct rec {
    uint64_t key;
    uint32_t id, len;
};

/* A text in a pass: its key at depth 0 (k0), its id and length. */
struct top {
    uint64_t k0;
    uint32_t id, len;
};

/* A range of a side's sorted order still to sort (at the next depth). */
struct range {
    size_t lo, hi;
};

/* One way (forward: prefixes, or reversed: suffixes): its sorted order,
 * the scratch of its sort, its stack; what its passes found. */
struct side {
    const struct voc_index *ix;
    struct voc_pairs *p;
    bool rev;
    struct rec *a, *tmp;
    struct range *todo;
    struct top *stack;
    uint64_t *bits;        /* p->pre or p->suf */
    size_t lo, hi;         /* the ids whose UTF-8 this side checks */
    int64_t dup;           /* the forward pass's: the first token with a twin */
    int64_t bad_utf8;      /* the first of lo..hi not UTF-8 */
    struct voc_merge *out; /* the second pass: l (forward) or r */
};

/* Byte i of text s (n bytes) as the side reads it. */
static inline uint8_t at(const uint8_t *s, uint64_t n, uint64_t i, bool rev) {
    return rev ? s[n - 1 - i] : s[i];
}

/* The 8 bytes at p as an integer, p[0] the most significant (big) or
 * the least (little): one load and a swap or none. */
static inline uint64_t load(const uint8_t *p, bool big) {
    uint64_t k;
    memcpy(&k, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return big ? k : __builtin_bswap64(k);
#else
    return big ? __builtin_bswap64(k) : k;
#endif
}

/* Bytes 8d..8d+7 of s as the side reads them, the first the most
 * significant, zero past the end.  Fewer than 8 left: one load and a
 * mask where 8 bytes are readable there (arr.h, struct voc_index: the
 * reversed read's, from before the text, always are), else byte by
 * byte (a forward read at the payload's end, ix->end). */
static uint64_t key_at(const uint8_t *s, uint64_t n, uint64_t d, bool rev,
                       const uint8_t *end) {
    uint64_t i0 = 8 * d, k = 0;
    if (n >= i0 + 8) /* reversed: s[n-1-i0] first, the highest address */
        return rev ? load(s + n - i0 - 8, false) : load(s + i0, true);
    uint64_t r = n - i0; /* 0..7 bytes, in the key's top r bytes */
    if (!r)
        return 0;
    uint64_t top = ~UINT64_C(0) << (64 - 8 * r);
    if (rev) /* s[r-1] the highest address: the rest its length's bytes */
        return load(s + r - 8, false) & top;
    if ((uint64_t)(end - s) >= i0 + 8)
        return load(s + i0, true) & top;
    for (uint64_t j = 0; j < 8; j++)
        k = k << 8 | (i0 + j < n ? at(s, n, i0 + j, rev) : 0);
    return k;
}

/* a[0..n) by key, by insertion (a few). */
static void insertion(struct rec *a, size_t n) {
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && a[j - 1].key > a[j].key; j--) {
            struct rec x = a[j];
            a[j] = a[j - 1];
            a[j - 1] = x;
        }
}

/* a[0..n) by key from its byte at shift down: most significant first,
 * each byte's buckets in turn (a byte every key shares skipped without a
 * move), so that after a pass or two a bucket is sorted in the cache
 * (tmp: n records of scratch).  Depth: 8 calls at most. */
static void radix(struct rec *a, struct rec *tmp, size_t n, int shift) {
    size_t cnt[256], at[256];
    for (;; shift -= 8) {
        if (n <= 32 || shift < 0) {
            if (shift >= 0)
                insertion(a, n);
            return;
        }
        memset(cnt, 0, sizeof cnt);
        for (size_t i = 0; i < n; i++)
            cnt[a[i].key >> shift & 255]++;
        if (cnt[a[0].key >> shift & 255] != n)
            break; /* else one value: on to the next byte */
    }
    for (size_t v = 0, sum = 0; v < 256; sum += cnt[v++])
        at[v] = sum;
    for (size_t i = 0; i < n; i++)
        tmp[at[a[i].key >> shift & 255]++] = a[i];
    memcpy(a, tmp, n * sizeof *a);
    for (size_t v = 0, lo = 0; v < 256; lo += cnt[v++])
        if (cnt[v] > 1)
            radix(a + lo, tmp, cnt[v], shift - 8);
}

/* Where a text of len bytes ends at depth d: within its key's bytes
 * (0..8 of them), or past them (9).  len >= 8d there. */
static unsigned end_class(uint64_t len, uint64_t d) {
    return len - 8 * d > 8 ? 9 : (unsigned)(len - 8 * d);
}

/* A run a[0..m) of one key at depth d: the texts that end inside the
 * key's bytes first, by length, then the longer ones, whose range is
 * returned in *lo..m (to sort at d + 1). */
static void run_order(struct side *sd, struct rec *a, size_t m, uint64_t d,
                      size_t *lo) {
    size_t cnt[10] = {0};
    for (size_t i = 0; i < m; i++)
        cnt[end_class(a[i].len, d)]++;
    size_t sum = 0;
    for (int c = 0; c < 10; c++) {
        size_t x = cnt[c];
        cnt[c] = sum;
        sum += x;
    }
    *lo = cnt[9];
    for (size_t i = 0; i < m; i++)
        sd->tmp[cnt[end_class(a[i].len, d)]++] = a[i];
    memcpy(a, sd->tmp, m * sizeof *a);
}

/* The range [lo, hi) at depth d, its keys made: by key, then each run of
 * one key in the order of run_order, its longer texts' range appended to
 * next (*nn ranges) for depth d + 1. */
static void sort_range(struct side *sd, size_t lo, size_t hi, uint64_t d,
                       struct range *next, size_t *nn) {
    struct rec *a = sd->a;
    radix(a + lo, sd->tmp, hi - lo, 56);
    for (size_t i = lo, j; i < hi; i = j) {
        for (j = i + 1; j < hi && a[j].key == a[i].key;)
            j++;
        size_t more;
        if (j - i < 2)
            continue;
        run_order(sd, a + i, j - i, d, &more);
        if (j - i - more >= 2) /* two or more longer texts */
            next[(*nn)++] = (struct range){i + more, j};
    }
}

/* The keys at depth d of the texts of ranges r[0..m): the texts of the
 * ranges two and one on asked for first (their places, then their
 * bytes), as a range is a few texts anywhere in megabytes. */
static void keys_at(struct side *sd, const struct range *r, size_t m,
                    uint64_t d) {
    const struct voc_index *ix = sd->ix;
    struct rec *a = sd->a;
    for (size_t j = 0; j < m; j++) {
        for (size_t i = j + 2 < m ? r[j + 2].lo : 0;
             j + 2 < m && i < r[j + 2].hi && i < r[j + 2].lo + 16; i++)
            __builtin_prefetch(&ix->text[a[i].id]);
        for (size_t i = j + 1 < m ? r[j + 1].lo : 0;
             j + 1 < m && i < r[j + 1].hi && i < r[j + 1].lo + 16; i++)
            __builtin_prefetch(ix->text[a[i].id] +
                               (sd->rev ? a[i].len - 8 * d - 1 : 8 * d));
        for (size_t i = r[j].lo; i < r[j].hi; i++)
            a[i].key = key_at(ix->text[a[i].id], a[i].len, d, sd->rev, ix->end);
    }
}

/* Every id in the side's order: depth by depth, the ranges of a depth
 * (disjoint: n / 2 at most) in one sweep. */
static void sort_side(struct side *sd) {
    size_t n = sd->ix->n, m = 1, half = n / 2 + 1;
    struct range *cur = sd->todo, *next = sd->todo + half;
    for (size_t i = 0; i < n; i++) /* depth 0's keys at once: in id order */
        sd->a[i].key =
            key_at(sd->ix->text[i], sd->ix->len[i], 0, sd->rev, sd->ix->end),
        sd->a[i].id = (uint32_t)i, sd->a[i].len = (uint32_t)sd->ix->len[i];
    cur[0] = (struct range){0, n};
    for (uint64_t d = 0; m; d++) {
        size_t nn = 0;
        if (d)
            keys_at(sd, cur, m, d);
        for (size_t j = 0; j < m; j++)
            sort_range(sd, cur[j].lo, cur[j].hi, d, next, &nn);
        struct range *t = cur;
        cur = next;
        next = t;
        m = nn;
    }
}

/* Word w of token t's set (voc_pairs_word), for writing. */
static uint64_t *word(const struct voc_pairs *p, uint64_t *set, size_t t,
                      uint64_t w) {
    return w ? &set[p->n + p->xoff[t] + w - 1] : &set[t];
}

/* The merges' bits of token t below k (pre and suf both). */
static uint64_t rank(const struct voc_pairs *p, size_t t, uint64_t k) {
    uint64_t r = 0;
    for (uint64_t w = 0; w < k / 64; w++)
        r += (uint64_t)__builtin_popcountll(voc_pairs_word(p, p->pre, t, w) &
                                            voc_pairs_word(p, p->suf, t, w));
    uint64_t below = (UINT64_C(1) << (k % 64)) - 1;
    return r + (uint64_t)__builtin_popcountll(
                   voc_pairs_word(p, p->pre, t, k / 64) &
                   voc_pairs_word(p, p->suf, t, k / 64) & below);
}

/* Whether text q begins (forward) or ends (reversed) text x, shorter:
 * by their first 8 bytes (k0), the texts read only past them. */
static bool part_of(const struct side *sd, const struct top *q,
                    const struct top *x) {
    if (q->len >= x->len)
        return false;
    if (q->len <= 8) /* the first len bytes of the keys */
        return !q->len || (q->k0 ^ x->k0) >> (64 - 8 * q->len) == 0;
    if (q->k0 != x->k0)
        return false;
    const uint8_t *qs = sd->ix->text[q->id], *xs = sd->ix->text[x->id];
    return sd->rev ? memcmp(qs, xs + x->len - q->len, q->len - 8) == 0
                   : memcmp(qs + 8, xs + 8, q->len - 8) == 0;
}

/* Whether x has the text of y (the one before it in the forward order). */
static bool same(const struct side *sd, const struct top *y,
                 const struct top *x) {
    return y->len == x->len && y->k0 == x->k0 &&
           (x->len <= 8 || memcmp(sd->ix->text[y->id] + 8,
                                  sd->ix->text[x->id] + 8, x->len - 8) == 0);
}

/* Token x after y in the forward order: a text alike, then sd->dup the
 * smaller of the group's second smallest id (*lo, *second: the group's
 * so far). */
static void twin(struct side *sd, const struct top *y, const struct top *x,
                 uint32_t *lo, uint32_t *second) {
    if (!y || !same(sd, y, x)) {
        *lo = x->id;
        *second = UINT32_MAX;
        return;
    }
    if (x->id < *lo)
        *second = *lo, *lo = x->id;
    else if (x->id < *second)
        *second = x->id;
    if (sd->dup < 0 || *second < sd->dup)
        sd->dup = *second;
}

/* Token x's first pass: the places where the tokens on the stack (0..
 * depth) part from it into its bits. */
static void mark(struct side *sd, const struct top *x, size_t depth) {
    struct voc_pairs *p = sd->p;
    uint64_t w0 = 0; /* bits 0..63, stored once */
    for (size_t j = 0; j < depth; j++) {
        uint64_t k = sd->rev ? x->len - sd->stack[j].len : sd->stack[j].len;
        if (k < 64)
            w0 |= UINT64_C(1) << k;
        else
            *word(p, sd->bits, x->id, k / 64) |= UINT64_C(1) << (k % 64);
    }
    sd->bits[x->id] = w0;
}

/* Token x's second pass: the ids of the stack's tokens that are a
 * merge's left (right) token into out. */
static void name(struct side *sd, const struct top *x, size_t depth) {
    struct voc_pairs *p = sd->p;
    uint32_t t = x->id;
    if (x->len < 64 && !(p->pre[t] & p->suf[t])) /* word 0 tells most */
        return;
    for (size_t j = 0; j < depth; j++) {
        uint32_t q = sd->stack[j].id;
        uint64_t k = sd->rev ? x->len - sd->stack[j].len : sd->stack[j].len;
        if (!voc_pairs_bit(p, p->pre, t, k) || !voc_pairs_bit(p, p->suf, t, k))
            continue;
        struct voc_merge *e = &sd->out[p->moff[t] + rank(p, t, k)];
        if (sd->rev)
            e->r = q;
        else /* the whole merge but its right token */
            e->score = 0, e->id = t, e->l = q;
    }
}

/* The side's pass in its order: the stack holds the tokens that begin
 * (end) the current one (each a part of the one above it).  First pass
 * (out NULL): where they part into bits (mark), and (forward) twins,
 * each token's depth kept in its key; second: the ids of each merge's
 * left (right) token (name), the stack made again from those depths. */
static void pass(struct side *sd) {
    struct rec *a = sd->a;
    const struct voc_pairs *p = sd->p;
    const struct voc_index *ix = sd->ix;
    size_t depth = 0, n = ix->n;
    uint32_t lo = UINT32_MAX, second = UINT32_MAX;
    struct top prev = {0, 0, UINT32_MAX};
    for (size_t i = 0; i < n; i++) {
        struct top x = {a[i].key, a[i].id, a[i].len};
        if (sd->out) {       /* the stack's depth as the first pass left it */
            if (i + 8 < n) { /* name's reads, a few tokens on */
                __builtin_prefetch(&p->pre[a[i + 8].id]);
                __builtin_prefetch(&p->suf[a[i + 8].id]);
                __builtin_prefetch(&p->moff[a[i + 8].id]);
            }
            depth = (size_t)a[i].key;
            name(sd, &x, depth);
        } else {
            if (i + 16 < n && a[i + 16].len > 8) /* their texts, asked for */
                __builtin_prefetch(&ix->text[a[i + 16].id]);
            if (i + 8 < n && a[i + 8].len > 8)
                __builtin_prefetch(ix->text[a[i + 8].id] +
                                   (sd->rev ? a[i + 8].len - 8 : 0));
            if (x.len > 8) /* its key may be a deeper one's */
                x.k0 = key_at(ix->text[x.id], x.len, 0, sd->rev, ix->end);
            while (depth && !part_of(sd, &sd->stack[depth - 1], &x))
                depth--;
            mark(sd, &x, depth);
            if (!sd->rev)
                twin(sd, i ? &prev : NULL, &x, &lo, &second);
            prev = x;
            a[i].key = depth; /* the sort's key is spent: the depth kept */
        }
        sd->stack[depth++] = x;
    }
}

/* Whether s (n bytes) is UTF-8: its ASCII eight bytes at a time, the
 * rest from its first other byte (a character's start) by the gguf
 * library's check. */
static bool utf8(const uint8_t *s, uint64_t n) {
    uint64_t i = 0, w;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, s + i, 8);
        if (w & UINT64_C(0x8080808080808080))
            break;
    }
    while (i < n && s[i] < 0x80)
        i++;
    return i == n || gguf_utf8_valid(s + i, (size_t)(n - i));
}

/* A side's first work (voc_halves): its half of the UTF-8 check, the
 * sort, then its bits. */
static void *side_make(void *arg) {
    struct side *sd = arg;
    for (size_t i = sd->lo; sd->bad_utf8 < 0 && i < sd->hi; i++)
        if (!utf8(sd->ix->text[i], sd->ix->len[i]))
            sd->bad_utf8 = (int64_t)i;
    sort_side(sd);
    pass(sd);
    return NULL;
}

/* A side's second work: the merges' ids. */
static void *side_ids(void *arg) {
    pass(arg);
    return NULL;
}

/* The mapping's parts, in order: 8-byte aligned each (words: the
 * sets' words past each token's first); *dense: the bytes of those
 * before the stacks' and ranges' (touched through, where those are
 * touched only as deep as the texts nest or their runs repeat). */
static size_t layout(struct voc_pairs *p, uint64_t words, bool place,
                     size_t *dense) {
    size_t n = p->n, at = 0;
    uint8_t *m = p->map;
    struct {
        void **where;
        size_t bytes;
    } parts[] = {
        {(void **)&p->xoff, (n + 1) * sizeof *p->xoff},
        {(void **)&p->moff, (n + 1) * sizeof *p->moff},
        {(void **)&p->pre, (n + words) * sizeof *p->pre},
        {(void **)&p->suf, (n + words) * sizeof *p->suf},
        {&p->side[0].a, n * sizeof(struct rec)},
        {&p->side[1].a, n * sizeof(struct rec)},
        {&p->side[0].tmp, n * sizeof(struct rec)},
        {&p->side[1].tmp, n * sizeof(struct rec)},
        {&p->side[0].todo, 2 * (n / 2 + 1) * sizeof(struct range)},
        {&p->side[1].todo, 2 * (n / 2 + 1) * sizeof(struct range)},
        {&p->side[0].stack, (n + 1) * sizeof(struct top)},
        {&p->side[1].stack, (n + 1) * sizeof(struct top)},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (place)
            *parts[i].where = m + at;
        at += (parts[i].bytes + 7) & ~(size_t)7;
        if (i == 7)
            *dense = at;
    }
    return at;
}

/* Both sides of p, their work fn (voc_halves); out: the second pass's. */
static void both(const struct voc_index *ix, struct voc_pairs *p,
                 void *(*fn)(void *), struct voc_merge *out,
                 struct side sd[2]) {
    size_t mid = voc_index_mid(ix);
    for (int s = 0; s < 2; s++)
        sd[s] = (struct side){.ix = ix,
                              .p = p,
                              .rev = s == 1,
                              .a = p->side[s].a,
                              .tmp = p->side[s].tmp,
                              .todo = p->side[s].todo,
                              .stack = p->side[s].stack,
                              .bits = s ? p->suf : p->pre,
                              .lo = s ? mid : 0,
                              .hi = s ? ix->n : mid,
                              .dup = -1,
                              .bad_utf8 = -1,
                              .out = out};
    voc_halves(fn, &sd[0], &sd[1], ix->n >= VOC_SPLIT_MIN);
}

bool voc_pairs_make(const struct voc_index *ix, struct voc_pairs *p) {
    memset(p, 0, sizeof *p);
    p->n = ix->n;
    if (ix->n > UINT32_MAX - 1 || ix->n > SIZE_MAX / 256)
        return false;
    uint64_t words = 0; /* bits 0..len: a word a 64 */
    for (size_t i = 0; i < ix->n; i++) {
        if (ix->len[i] >= UINT32_MAX || ix->len[i] / 64 > SIZE_MAX / 64 - words)
            return false;
        words += ix->len[i] / 64;
    }
    size_t dense;
    p->bytes = layout(p, words, false, &dense);
    p->map = mmap(NULL, p->bytes, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p->map == MAP_FAILED) {
        p->map = NULL;
        return false;
    }
    /* huge pages (a hint) for the parts touched through: fewer faults;
     * not for the stacks and ranges, each page of which would be zeroed */
    voc_huge(p->map, dense);
    layout(p, words, true, &dense);
    /* without a text of 64 bytes, every offset is 0: the mapping's own */
    for (size_t i = 0, w = 0; words && i <= ix->n; i++) {
        p->xoff[i] = w;
        w += i < ix->n ? ix->len[i] / 64 : 0;
    }
    struct side sd[2];
    both(ix, p, side_make, NULL, sd);
    p->dup = sd[0].dup;
    p->bad_utf8 = sd[0].bad_utf8 >= 0 ? sd[0].bad_utf8 : sd[1].bad_utf8;
    return true;
}

/* Tokens lo..hi-1's first merges (moff) from lo's at 0, and their
 * merges' count (voc_halves: the two halves' at once). */
struct moffs {
    struct voc_pairs *p;
    const struct voc_index *ix;
    size_t lo, hi;
    uint64_t total;
};

static void *moffs(void *arg) {
    struct moffs *h = arg;
    struct voc_pairs *p = h->p;
    for (size_t t = h->lo; t < h->hi; t++) {
        p->moff[t] = h->total;
        for (uint64_t w = 0; w <= h->ix->len[t] / 64; w++)
            h->total +=
                (uint64_t)__builtin_popcountll(voc_pairs_word(p, p->pre, t, w) &
                                               voc_pairs_word(p, p->suf, t, w));
    }
    return NULL;
}

bool voc_pairs_merges(struct voc_pairs *p, const struct voc_index *ix,
                      struct gguf_buf *merges) {
    size_t mid = voc_index_mid(ix);
    struct moffs h[2] = {{p, ix, 0, mid, 0}, {p, ix, mid, p->n, 0}};
    voc_halves(moffs, &h[0], &h[1], mid < p->n);
    /* the second half's offsets after the first half's merges */
    for (size_t t = mid; t < p->n; t++)
        p->moff[t] += h[0].total;
    uint64_t total = h[0].total + h[1].total;
    p->moff[p->n] = total;
    size_t mark = merges->len;
    if (total > (SIZE_MAX - mark) / sizeof(struct voc_merge) ||
        gguf_buf_reserve(merges, total * sizeof(struct voc_merge)) != GGUF_OK)
        return false;
    struct voc_merge *out = (struct voc_merge *)(merges->p + mark);
    struct side sd[2];
    both(ix, p, side_ids, out, sd);
    merges->len = mark + total * sizeof(struct voc_merge);
    return true;
}

void voc_pairs_free(struct voc_pairs *p) {
    if (p->map)
        munmap(p->map, p->bytes);
    memset(p, 0, sizeof *p);
}
