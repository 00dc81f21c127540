/*
 * index.c - the vocabulary's texts found by value (arr.h, struct
 * voc_index): each token's element found once, then ids sorted by a
 * 64-bit FNV-1a hash of their text, so that a lookup is a binary search
 * and a text held by two ids is found in one pass.  Memory: 32 bytes a
 * token in one mapping of its own, handed back to the system by
 * voc_index_free (the allocator would keep a freed block of this size in
 * its arena: a daemon that checked a 150k vocabulary held 7 MB more).
 */
#include "arr.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static uint64_t fnv(const uint8_t *s, uint64_t n) {
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (uint64_t i = 0; i < n; i++)
        h = (h ^ s[i]) * UINT64_C(0x100000001b3);
    return h;
}

static int by_hash(const void *a, const void *b) {
    const struct voc_slot *x = a, *y = b;
    if (x->h != y->h)
        return x->h < y->h ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

bool voc_index_make(const struct voc_arr *toks, struct voc_index *ix) {
    memset(ix, 0, sizeof *ix);
    size_t per = sizeof *ix->text + sizeof *ix->len + sizeof *ix->slot;
    if (toks->n > SIZE_MAX / per - 1)
        return false;
    ix->n = (size_t)toks->n;
    ix->bytes = (ix->n + 1) * per;
    void *m = mmap(NULL, ix->bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        ix->bytes = 0;
        return false;
    }
    ix->slot = m; /* the 8-byte aligned parts first */
    ix->len = (uint64_t *)(ix->slot + ix->n + 1);
    ix->text = (const uint8_t **)(ix->len + ix->n + 1);
    const uint8_t *pos = toks->p;
    for (size_t i = 0; i < ix->n; i++) {
        if (!voc_arr_next_str(toks, &pos, &ix->text[i], &ix->len[i])) {
            voc_index_free(ix);
            return false;
        }
        ix->slot[i].h = fnv(ix->text[i], ix->len[i]);
        ix->slot[i].id = (uint32_t)i;
    }
    qsort(ix->slot, ix->n, sizeof *ix->slot, by_hash);
    return true;
}

void voc_index_free(struct voc_index *ix) {
    if (ix->bytes)
        munmap(ix->slot, ix->bytes);
    memset(ix, 0, sizeof *ix);
}

static bool same(const struct voc_index *ix, uint32_t id, const uint8_t *s,
                 uint64_t n) {
    return ix->len[id] == n && memcmp(ix->text[id], s, n) == 0;
}

int64_t voc_index_find(const struct voc_index *ix, const uint8_t *s,
                       uint64_t n) {
    uint64_t h = fnv(s, n);
    size_t lo = 0, hi = ix->n;
    while (lo < hi) { /* the first slot of hash >= h */
        size_t mid = lo + (hi - lo) / 2;
        if (ix->slot[mid].h < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < ix->n && ix->slot[lo].h == h; lo++)
        if (same(ix, ix->slot[lo].id, s, n))
            return ix->slot[lo].id;
    return -1;
}

int64_t voc_index_duplicate(const struct voc_index *ix) {
    for (size_t i = 0; i + 1 < ix->n; i++)
        for (size_t j = i + 1; j < ix->n && ix->slot[j].h == ix->slot[i].h;
             j++) {
            uint32_t a = ix->slot[i].id;
            if (same(ix, ix->slot[j].id, ix->text[a], ix->len[a]))
                return ix->slot[j].id;
        }
    return -1;
}
