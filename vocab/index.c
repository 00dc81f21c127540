/*
 * index.c - the vocabulary's texts found by value (arr.h, struct
 * voc_index): each token's element found once, then an open-addressing
 * table of ids by a 64-bit FNV-1a hash of their text (twice as many slots
 * as tokens, linear probing), so that a lookup is a probe or two and a
 * text held by two ids is found while the table is made.  Memory: 24
 * bytes a token in one mapping of its own, handed back to the system by
 * voc_index_free (the allocator would keep a freed block of this size in
 * its arena: a daemon that checked a 150k vocabulary held 7 MB more).
 * Without by_text, the texts by id alone (no table: 16 bytes a token).
 */
#include "arr.h"

#include <string.h>
#include <sys/mman.h>

static uint64_t fnv(const uint8_t *s, uint64_t n) {
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (uint64_t i = 0; i < n; i++)
        h = (h ^ s[i]) * UINT64_C(0x100000001b3);
    return h;
}

static bool same(const struct voc_index *ix, uint32_t id, const uint8_t *s,
                 uint64_t n) {
    return ix->len[id] == n && memcmp(ix->text[id], s, n) == 0;
}

/* The slot of text s: the one holding its id, or the empty one where it
 * goes. */
static size_t probe(const struct voc_index *ix, const uint8_t *s, uint64_t n) {
    size_t mask = ix->cap - 1, k = (size_t)fnv(s, n) & mask;
    while (ix->slot[k] && !same(ix, ix->slot[k] - 1, s, n))
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
    while (by_text && ix->cap < 2 * ix->n)
        ix->cap *= 2;
    ix->bytes = ix->n * (sizeof *ix->text + sizeof *ix->len) +
                ix->cap * sizeof *ix->slot;
    if (!ix->bytes) /* no tokens, no table */
        return true;
    void *m = mmap(NULL, ix->bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        ix->bytes = 0;
        return false;
    }
    ix->len = m; /* the 8-byte aligned parts first; zero-filled */
    ix->text = (const uint8_t **)(ix->len + ix->n);
    ix->slot = (uint32_t *)(ix->text + ix->n);
    const uint8_t *pos = toks->p;
    for (size_t i = 0; i < ix->n; i++) {
        if (!voc_arr_next_str(toks, &pos, &ix->text[i], &ix->len[i])) {
            voc_index_free(ix);
            return false;
        }
        if (!by_text)
            continue;
        size_t k = probe(ix, ix->text[i], ix->len[i]);
        if (!ix->slot[k])
            ix->slot[k] = (uint32_t)i + 1;
        else if (ix->dup < 0)
            ix->dup = (int64_t)i;
    }
    return true;
}

void voc_index_free(struct voc_index *ix) {
    if (ix->bytes)
        munmap(ix->len, ix->bytes);
    memset(ix, 0, sizeof *ix);
}

int64_t voc_index_find(const struct voc_index *ix, const uint8_t *s,
                       uint64_t n) {
    if (!ix->cap)
        return -1;
    size_t k = probe(ix, s, n);
    return ix->slot[k] ? (int64_t)ix->slot[k] - 1 : -1;
}

int64_t voc_index_duplicate(const struct voc_index *ix) {
    return ix->dup;
}
