/*
 * index.c - 64-bit FNV-1a and an open-addressing (linear probing) hash index
 * over names.  The index stores positions into the caller's array; names are
 * fetched back through a callback, so it never owns or copies a name.
 *
 * Slots are a power of two, at least twice the number of entries, so a
 * probe always meets an empty slot.  Edits keep the index instead of
 * rebuilding it: an append adds one entry, a removal empties one slot
 * (moving back the rest of its cluster) and renumbers the positions after
 * it, a rename re-slots one entry, a move renumbers; none hashes every
 * name again.  Entries are inserted in increasing
 * position order; with duplicate names (gguf_index_build does not refuse
 * them) gguf_index_find returns the lowest position.
 */
#include "internal.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef const char *(*name_fn)(const void *base, int64_t i, size_t *len);

uint64_t gguf_hash(const void *p, size_t len) {
    const uint8_t *s = p;
    uint64_t h = UINT64_C(14695981039346656037);
    for (size_t i = 0; i < len; i++) {
        h ^= s[i];
        h *= UINT64_C(1099511628211);
    }
    return h;
}

void gguf_index_free(struct gguf_index *ix) {
    if (!ix)
        return;
    free(ix->slot);
    ix->slot = NULL;
    ix->n_slots = 0;
}

/* Smallest power of two >= 2n (and >= 8), or 0 if it cannot be allocated. */
static size_t slots_for(int64_t n) {
    if (n < 0 || (uint64_t)n > (SIZE_MAX / sizeof(int64_t)) / 4)
        return 0;
    size_t want = (size_t)n * 2, s = 8;
    while (s < want)
        s *= 2;
    return s;
}

static void put(int64_t *slot, size_t n_slots, uint64_t h, int64_t i) {
    size_t mask = n_slots - 1, k = (size_t)h & mask;
    while (slot[k] >= 0)
        k = (k + 1) & mask;
    slot[k] = i;
}

/* Fills a fresh table of n_slots with entries 0..n-1. */
static enum gguf_status fill(int64_t **out, size_t n_slots, int64_t n,
                             name_fn name, const void *base) {
    int64_t *slot = malloc(n_slots * sizeof *slot);
    if (!slot)
        return GGUF_E_NOMEM;
    for (size_t k = 0; k < n_slots; k++)
        slot[k] = -1;
    for (int64_t i = 0; i < n; i++) {
        size_t len;
        const char *s = name(base, i, &len);
        put(slot, n_slots, gguf_hash(s, len), i);
    }
    *out = slot;
    return GGUF_OK;
}

enum gguf_status gguf_index_build(struct gguf_index *ix, int64_t n,
                                  name_fn name, const void *base) {
    if (n <= 0) {
        gguf_index_free(ix);
        return GGUF_OK;
    }
    size_t n_slots = slots_for(n);
    int64_t *slot = NULL;
    if (!n_slots || fill(&slot, n_slots, n, name, base) != GGUF_OK)
        return GGUF_E_NOMEM;
    free(ix->slot);
    ix->slot = slot;
    ix->n_slots = n_slots;
    return GGUF_OK;
}

int64_t gguf_index_find(const struct gguf_index *ix, const char *s, size_t len,
                        name_fn name, const void *base) {
    if (!ix || !ix->n_slots || (!s && len))
        return -1;
    size_t mask = ix->n_slots - 1, k = (size_t)gguf_hash(s, len) & mask;
    for (; ix->slot[k] >= 0; k = (k + 1) & mask) {
        size_t l;
        const char *t = name(base, ix->slot[k], &l);
        if (l == len && (len == 0 || memcmp(t, s, len) == 0))
            return ix->slot[k];
    }
    return -1;
}

enum gguf_status gguf_index_add(struct gguf_index *ix, int64_t i, name_fn name,
                                const void *base, int64_t *dup) {
    size_t len;
    const char *s = name(base, i, &len);
    *dup = gguf_index_find(ix, s, len, name, base);
    if (*dup >= 0)
        return GGUF_OK;
    /* Keep at least twice as many slots as entries (0..i after adding). */
    if ((uint64_t)i + 1 > ix->n_slots / 2) {
        size_t n_slots = slots_for(i + 1 < 64 ? 64 : (i + 1) * 2);
        int64_t *slot = NULL;
        if (!n_slots || fill(&slot, n_slots, i, name, base) != GGUF_OK)
            return GGUF_E_NOMEM;
        free(ix->slot);
        ix->slot = slot;
        ix->n_slots = n_slots;
    }
    put(ix->slot, ix->n_slots, gguf_hash(s, len), i);
    return GGUF_OK;
}

/* Empties slot k of a linear-probing table and moves later entries of its
 * cluster back so every entry stays reachable from its home slot (no
 * tombstones).  The names of the moved entries are fetched and hashed: a
 * cluster, not the table. */
static void unslot(struct gguf_index *ix, size_t k, name_fn name,
                   const void *base) {
    size_t mask = ix->n_slots - 1, hole = k;
    ix->slot[hole] = -1;
    for (size_t j = (hole + 1) & mask; ix->slot[j] >= 0; j = (j + 1) & mask) {
        size_t len;
        const char *s = name(base, ix->slot[j], &len);
        size_t home = (size_t)gguf_hash(s, len) & mask;
        /* j's entry may fill the hole unless its home lies in (hole, j] */
        bool stays =
            hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!stays) {
            ix->slot[hole] = ix->slot[j];
            ix->slot[j] = -1;
            hole = j;
        }
    }
}

/* The slot holding position pos, found from its name s; n_slots if none. */
static size_t slot_of(const struct gguf_index *ix, int64_t pos, const char *s,
                      size_t len) {
    size_t mask = ix->n_slots - 1, k = (size_t)gguf_hash(s, len) & mask;
    for (; ix->slot[k] >= 0; k = (k + 1) & mask)
        if (ix->slot[k] == pos)
            return k;
    return ix->n_slots;
}

void gguf_index_remove(struct gguf_index *ix, int64_t pos, const char *s,
                       size_t len, name_fn name, const void *base) {
    if (!ix->n_slots)
        return;
    size_t k = slot_of(ix, pos, s, len);
    for (size_t m = 0; m < ix->n_slots; m++)
        if (ix->slot[m] > pos)
            ix->slot[m]--;
    if (k < ix->n_slots)
        unslot(ix, k, name, base);
}

void gguf_index_rename(struct gguf_index *ix, int64_t pos, const char *old,
                       size_t old_len, name_fn name, const void *base) {
    size_t len;
    const char *s = name(base, pos, &len);
    if (!ix->n_slots)
        return;
    size_t k = slot_of(ix, pos, old, old_len);
    if (k < ix->n_slots)
        unslot(ix, k, name, base);
    put(ix->slot, ix->n_slots, gguf_hash(s, len), pos);
}

void gguf_index_move(struct gguf_index *ix, int64_t from, int64_t to) {
    for (size_t m = 0; m < ix->n_slots; m++) {
        int64_t v = ix->slot[m];
        if (v < 0)
            continue;
        if (v == from)
            ix->slot[m] = to;
        else if (from < to && v > from && v <= to)
            ix->slot[m] = v - 1;
        else if (to < from && v >= to && v < from)
            ix->slot[m] = v + 1;
    }
}
