/*
 * arr.h - the tokenizer's arrays as vocab/ reads them: a metadata array
 * of one element type, its elements reached through the payload the gguf
 * library validated (gguf_kv_payload: element type, count, elements),
 * bounds checked again here all the same.  Internal to vocab/.
 */
#ifndef GGUFS_VOCAB_ARR_H
#define GGUFS_VOCAB_ARR_H

#include "vocab.h"

struct voc_arr {
    enum gguf_type et;
    uint64_t n;
    const uint8_t *p, *end; /* the elements */
    size_t esz; /* an element's bytes (gguf_type_size; 0: strings) */
};

/* The little-endian uint64 at p (one load, compiled). */
static inline uint64_t voc_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--)
        v = v << 8 | p[k];
    return v;
}

/* Key key of ctx as an array of element type et: true and *a, else false
 * (no such key, not an array, another element type, a short payload). */
bool voc_arr_of(const gguf_ctx *ctx, const char *key, enum gguf_type et,
                struct voc_arr *a);
/* The next string element at *pos (a position in a->p..end): true with
 * *s, *len and *pos moved past it; false at the end or on a bad length.
 * Inline: a walk of a 262k vocabulary is 262k of these. */
static inline bool voc_arr_next_str(const struct voc_arr *a,
                                    const uint8_t **pos, const uint8_t **s,
                                    uint64_t *len) {
    const uint8_t *p = *pos;
    if ((size_t)(a->end - p) < 8)
        return false;
    uint64_t n = voc_le64(p);
    if (n > (uint64_t)(a->end - p - 8))
        return false;
    *s = p + 8;
    *len = n;
    *pos = p + 8 + n;
    return true;
}
/* String element i (a walk from the first: O(i)). */
bool voc_arr_str(const struct voc_arr *a, uint64_t i, const uint8_t **s,
                 uint64_t *len);
/* Element i of a 4-byte array (float32, int32, uint32), its raw bits.
 * Inline: read a token at a time. */
static inline bool voc_arr_u32(const struct voc_arr *a, uint64_t i,
                               uint32_t *v) {
    if (a->esz != 4 || i >= a->n)
        return false;
    const uint8_t *p = a->p + 4 * i;
    *v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
    return true;
}
/* An integer key as int64 (any integer type that fits): true, else false
 * (absent or not an integer). */
bool voc_int(const gguf_ctx *ctx, const char *key, int64_t *v);

/* The special token ids llama.cpp reads (its llama-arch.cpp): the name
 * tokenizer/special gives each, Hugging Face's (NULL: none), the key;
 * in the order tokenizer/special lists them (tsv.c). */
struct voc_special_key {
    const char *name, *hf, *key;
};
extern const struct voc_special_key voc_special_keys[];
extern const size_t voc_n_special_keys;

/* The one way vocab/ writes a json_t (jsonput.c): appends v's JSON as
 * jansson's flags lay it out, then end (NULL: nothing), and drops the
 * reference to v.  GGUF_E_INVAL when v is NULL (jansson refused a string
 * that is not UTF-8), GGUF_E_RANGE when the bytes appended would pass
 * max, GGUF_E_NOMEM when out of memory (or jansson cannot dump v); b as
 * it was on any failure. */
struct json_t;
enum gguf_status voc_json_put(struct gguf_buf *b, struct json_t *v,
                              size_t flags, uint64_t max, const char *end);

/* Appends s (n bytes) as a JSON string, the bytes jansson writes
 * (jsonstr.c: json_dumpb of the string, JSON_COMPACT): GGUF_E_INVAL
 * when s is not UTF-8 (jansson refuses it), GGUF_E_NOMEM; b as it was
 * on failure. */
enum gguf_status voc_json_str(struct gguf_buf *b, const uint8_t *s, uint64_t n);
/* voc_json_str of a text known to be UTF-8 (gguf_utf8_valid: a
 * voc_index's texts with its table and no bad_utf8): not checked
 * again, a byte from 0x80 copied as it is. */
enum gguf_status voc_json_str_utf8(struct gguf_buf *b, const uint8_t *s,
                                   uint64_t n);
/* The bytes voc_json_str writes for s (UTF-8), and those bytes written
 * at o, which has that room (no check: a text known to be UTF-8); its
 * length.  Both read s 8 bytes at a time while none needs an escape. */
uint64_t voc_json_str_len(const uint8_t *s, uint64_t n);
/* Whether one of the 8 bytes of w needs an escape in a JSON string
 * (jsonstr.c's rule): below 0x20, '"' or '\\' (a byte from 0x80
 * never: its top bit is set). */
static inline bool voc_json_escapes8(uint64_t w) {
    const uint64_t one = UINT64_C(0x0101010101010101), top = one * 0x80;
    uint64_t q = w ^ (one * '"'), b = w ^ (one * '\\');
    return (((w - one * 0x20) & ~w) | ((q - one) & ~q) | ((b - one) & ~b)) &
           top;
}
size_t voc_json_str_at(uint8_t *o, const uint8_t *s, uint64_t n);

/* A bool key's value, or dflt when absent or not a bool. */
bool voc_flag(const gguf_ctx *ctx, const char *key, bool dflt);

/* The files' makers (tsv.c, hfjson.c, hffiles.c): each appends, bounded
 * by max where a file grows with the vocabulary. */
enum gguf_status voc_tokens_tsv(const gguf_ctx *ctx, uint64_t max,
                                struct gguf_buf *b, struct gguf_error *err);
enum gguf_status voc_special(const gguf_ctx *ctx, struct gguf_buf *b,
                             struct gguf_error *err);
enum gguf_status voc_merges_txt(const gguf_ctx *ctx, uint64_t max,
                                struct gguf_buf *b, struct gguf_error *err);
/* checked: the caller has seen voc_present include tokenizer.json for
 * this very state of ctx (its pass over the vocabulary is not made
 * again). */
enum gguf_status voc_hf_tokenizer(const gguf_ctx *ctx, uint64_t max,
                                  bool checked, struct gguf_buf *b,
                                  struct gguf_error *err);
/* tokenizer_config.json, or special_tokens_map.json (map). */
enum gguf_status voc_hf_config(const gguf_ctx *ctx, bool map,
                               struct gguf_buf *b);
/* chat_template.jinja or generation_config.json (hffiles.c), and whether
 * ctx makes it. */
bool voc_hf_extra_has(const gguf_ctx *ctx, enum voc_file f);
enum gguf_status voc_hf_extra(const gguf_ctx *ctx, enum voc_file f,
                              struct gguf_buf *b);
/* README; has_tok: voc_present of this state of ctx said tokenizer.json
 * is there (its pass over the vocabulary is not made again). */
enum gguf_status voc_hf_readme(const gguf_ctx *ctx, bool has_tok,
                               struct gguf_buf *b);
/* config.json (hfconfig.c), and why it is absent (NULL: it is there). */
enum gguf_status voc_hf_model_config(const gguf_ctx *ctx, struct gguf_buf *b);
const char *voc_hf_config_reason(const gguf_ctx *ctx, char *buf, size_t n);

/* A merge of a SentencePiece vocabulary: token id, made of tokens l and
 * r, and its score (hfjson.c ranks the merges by it). */
struct voc_merge {
    float score;
    uint32_t id, l, r;
};
struct voc_index;
/* voc_hf_reason, keeping what it made when the file is there (NULL
 * returned): *ix, the index of the tokens by text (the caller frees it),
 * and for SentencePiece the merges of its check's own sorts appended to
 * merges (score 0; NULL: not kept), so that a file made right after its
 * check reads the vocabulary once.  Nothing kept when a reason is
 * returned. */
const char *voc_hf_check(const gguf_ctx *ctx, struct voc_index *ix,
                         struct gguf_buf *merges, char *buf, size_t n);
/* The merges of SentencePiece vocabulary ix (score 0) appended to
 * merges, by the check's sorts (cuts.c), for a file
 * made after its check: false when out of memory (or the check would
 * now refuse it). */
bool voc_spm_merges(const struct voc_index *ix, struct gguf_buf *merges);

/* A byte-level BPE pre-tokenizer of llama.cpp's (hfpre.c): the
 * tokenizer.ggml.pre names it has (space-separated), its regular
 * expressions in the order llama.cpp applies them (NULL-ended), whether a
 * word that is a token is taken whole (ignore_merges), llama.cpp's
 * add_bos when the GGUF has no add_bos_token, and whether it has no
 * default BOS id (no_bos: chatglm's; the others' is 11, vocab.h
 * voc_bos_id); utf8: BPE over the raw UTF-8 with spaces as U+2581 (not
 * byte-level), force_bos: a BOS even where add_bos_token is false (Gemma
 * 4's, as llama.cpp overrides it). */
struct voc_pre {
    const char *names;
    const char *re[7];
    bool ignore_merges, add_bos, no_bos;
    bool utf8, force_bos; /* BPE over raw UTF-8; add_bos whatever the key */
};
/* The model's pre-tokenizer (tokenizer.ggml.pre; "default" when absent;
 * "gemma4" for the tokenizer model gemma4, as llama.cpp sets it), or NULL
 * with *why: why it has no tokenizers form (NULL: llama.cpp does not know
 * the name). */
const struct voc_pre *voc_hf_pre(const gguf_ctx *ctx, const char **why);

/* WordPiece and Unigram (hfmodels.c): why their tokenizer.json cannot
 * be made (NULL: it can), and the file, made whole (GGUF_E_RANGE past
 * max). */
struct voc_index;
/* Why tokenizer model NAME (n bytes, not one of those mapped) has no
 * tokenizer.json, into buf. */
void voc_hf_model_absent(const char *name, size_t len, char *buf, size_t n);
const char *voc_hf_models_reason(const gguf_ctx *ctx,
                                 const struct voc_index *ix, char *buf,
                                 size_t n);
enum gguf_status voc_hf_wpm_json(const gguf_ctx *ctx,
                                 const struct voc_index *ix, uint64_t max,
                                 struct gguf_buf *b);
/* RWKV (llama.cpp's greedy longest match over bytes), likewise. */
enum gguf_status voc_hf_rwkv_json(const gguf_ctx *ctx,
                                  const struct voc_index *ix, uint64_t max,
                                  struct gguf_buf *b);
/* Unigram (t5, llama.cpp's UGM), likewise. */
enum gguf_status voc_hf_ugm_json(const gguf_ctx *ctx,
                                 const struct voc_index *ix, uint64_t max,
                                 struct gguf_buf *b);
/* Whether llama.cpp makes the token of text s a control token whatever
 * its type (hfpre.c: its control-looking texts); tool_response: the
 * vocabulary has "<|tool_response>". */
bool voc_text_control(const gguf_ctx *ctx, const uint8_t *s, uint64_t n,
                      bool tool_response);
/* hfpre.c's lists of texts (voc_text_control, _eog, _fim) by first
 * byte and length, made once: bit n of [c] when one of n bytes (below
 * 64) starts with c, [256] 1 when one has 64 bytes or more. */
const uint64_t *voc_text_lens(void);
/* Whether s may be one of those texts (lens: voc_text_lens()): false
 * for the usual token, in one test. */
static inline bool voc_text_listed(const uint64_t *lens, const uint8_t *s,
                                   uint64_t n) {
    return n >= 3 && (n < 64 ? lens[s[0]] >> n & 1 : lens[256] != 0);
}
/* Whether s is one of the texts llama.cpp ends a generation on whatever
 * the metadata says (hfpre.c; its special_eog_ids). */
bool voc_text_eog(const uint8_t *s, uint64_t n);
/* The fill-in-the-middle kind llama.cpp finds by the text s when the GGUF
 * names none (0 pre, 1 suf, 2 mid, 3 pad, 4 rep, 5 sep) with *key its
 * key, or -1. */
int voc_text_fim(const uint8_t *s, uint64_t n, const char **key);

/* The vocabulary by text (index.c): text[i], len[i] of token i, and a
 * table of ids + 1 by the hash of their text (cap slots; print[k] 0:
 * slot k is empty, else 8 bits of its text's hash, so that a probe reads
 * no id and no token to pass another text by). */
#define VOC_POWS 5 /* poly's steps of four bytes */
struct voc_index {
    size_t n, cap, bytes; /* bytes: its mapping's */
    uint64_t *len;
    /* Each text lies in the array's payload after its 8-byte length
     * (readable before it: cuts.c reads a short text's key in one load);
     * end: the payload's end. */
    const uint8_t **text, *end;
    uint64_t *poly; /* each text's hash before its mix (index.c) */
    uint32_t *slot;
    uint8_t *print;
    uint64_t base; /* the hash's key (index.c), and its powers */
    uint64_t pows[VOC_POWS];
    int64_t dup;      /* the first token whose text an earlier one has, or -1 */
    int64_t bad_utf8; /* the first token not UTF-8 (gguf_utf8_valid), or -1 */
    bool checked;     /* dup and bad_utf8 found: by the table, or cuts.c */
};
/* Made from the tokens array (false: out of memory or a bad element);
 * by_text: with the table (voc_index_find, voc_index_duplicate) and
 * bad_utf8, else
 * the texts by id alone (cap 0: nothing is found by text). */
bool voc_index_make(const struct voc_arr *toks, bool by_text,
                    struct voc_index *ix);
void voc_index_free(struct voc_index *ix);
/* The id of the token whose text is s (the first of those), or -1. */
int64_t voc_index_find(const struct voc_index *ix, const uint8_t *s,
                       uint64_t n);
/* A token whose text an earlier id has too, or -1. */
int64_t voc_index_duplicate(const struct voc_index *ix);

/* Every split of every token into two tokens (cuts.c: by sorting the
 * texts forward and from their ends, no lookups): bit k of token t's
 * set pre is set when t's bytes 0..k-1 are a token, of suf when its
 * bytes k.. are (bits 0..len: words 0..len/64, voc_pairs_word).  The
 * texts of a valid UTF-8 vocabulary begin and end at character
 * boundaries, so these are splits at characters.  Calling sequence:
 *     struct voc_index ix;            voc_index_make(toks, false, &ix)
 *     struct voc_pairs p;
 *     voc_pairs_make(&ix, &p)         also p.dup, p.bad_utf8 (as the table's)
 *     ... voc_pairs_bit(&p, p.pre, t, k), voc_pairs_bit(&p, p.suf, t, k)
 *     voc_pairs_merges(&p, &ix, &buf)  when every text is UTF-8, no twins
 *     voc_pairs_free(&p)               before voc_index_free(&ix) */
struct voc_pairs {
    size_t n;
    uint64_t *pre, *suf; /* word 0 of token t at [t], the rest at [n+xoff[t]] */
    uint64_t *xoff;
    uint64_t *moff;        /* voc_pairs_merges': token t's first merge */
    int64_t dup, bad_utf8; /* as struct voc_index's, found by the sort */
    struct {
        void *a, *tmp, *todo, *stack; /* cuts.c's sorts */
    } side[2];
    void *map;
    size_t bytes;
};
/* False when out of memory (nothing to free then). */
bool voc_pairs_make(const struct voc_index *ix, struct voc_pairs *p);
static inline uint64_t voc_pairs_word(const struct voc_pairs *p,
                                      const uint64_t *set, size_t t,
                                      uint64_t w) {
    return w ? set[p->n + p->xoff[t] + w - 1] : set[t];
}
static inline bool voc_pairs_bit(const struct voc_pairs *p, const uint64_t *set,
                                 size_t t, uint64_t k) {
    return voc_pairs_word(p, set, t, k / 64) >> (k % 64) & 1;
}
/* Every split into two tokens as a merge {0, t, left, right}, appended
 * to merges in id order, k rising (false: out of memory, merges as it
 * was). */
bool voc_pairs_merges(struct voc_pairs *p, const struct voc_index *ix,
                      struct gguf_buf *merges);
void voc_pairs_free(struct voc_pairs *p);

/* The token that splits the vocabulary's texts into halves of about
 * the same bytes: O(log n), the texts lie in id order in one payload;
 * ix->n (the second half empty) below VOC_SPLIT_MIN tokens. */
size_t voc_index_mid(const struct voc_index *ix);
/* Huge pages asked for the 2 MB blocks within p..p+n (a hint, madvise:
 * a vocabulary's index, sorts and document are megabytes written
 * through, each 4 KB page a fault otherwise). */
void voc_huge(void *p, size_t n);
/* fn(a) and fn(b), the two parts of a pass, before return: when two, at
 * once, fn(b) on a thread of its own (vocab.h: the one place vocab/
 * starts a thread; its stack mapped here and unmapped after the join);
 * else, or when the thread cannot start, one after the other on this
 * thread. */
void voc_halves(void *(*fn)(void *), void *a, void *b, bool two);
/* The tokens below which a vocabulary is indexed, sorted and written in
 * one thread (a thread's start costs more than a small pass). */
#define VOC_SPLIT_MIN 4096

#endif
