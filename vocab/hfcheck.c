/*
 * hfcheck.c - whether hf/'s files can be made exactly from a model's
 * tokenizer, and why not (vocab.h: voc_hf_reason; the lines of
 * hf/README; the tokenizer's kind, voc_hf_kind, is hfkind.c's).  The
 * rule: a tokenizer.json is written only for the tokenizer models and
 * pre-tokenizers whose Hugging Face form has been checked against
 * llama.cpp's tokenization (tests/mount_tokenizer.py):
 *   llama  SentencePiece: BPE over the pieces with byte fallback, the
 *          merges made from the scores as transformers' own converter
 *          makes them (hfjson.c);
 *   gpt2   byte-level BPE with each pre-tokenizer of llama.cpp's that is a
 *          list of regular expressions (hfpre.c), as Split pre-tokenizers
 *          (tests/mount_hfvocab.py judges them on real vocabularies);
 *   gemma4 BPE over the raw UTF-8 (and gpt2 with the pre-tokenizers that
 *          are so: sarvam-moe, granite-embed-multi-311m).
 * Every other model or pre-tokenizer is absent with its reason; so is a
 * vocabulary a JSON file cannot hold: a token that is not valid UTF-8 (a
 * JSON string is UTF-8; Hugging Face's byte-level BPE never has one, its
 * bytes are mapped to characters; SentencePiece's byte tokens are the
 * text <0xNN>), or two tokens with one text (a JSON vocabulary maps a
 * text to one id).  A SentencePiece vocabulary is written as BPE only
 * where the two merge alike (spm_reason): llama.cpp merges any two
 * adjacent symbols whose text is a token, a BPE merge list only two
 * tokens, so no token may split into a character that is no token and
 * a token (or another such character); and llama.cpp takes the leftmost
 * of the pairs with the best score, BPE the pair of the best rank, so no
 * two tokens that merges make may share a score, but runs of one
 * character (SentencePiece's runs of spaces share one score; the judge,
 * tests/mount_tokenizer.py, checks runs of 1 to 40).
 */
#include "arr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define TOK "tokenizer.ggml."

/* Why the model's tokenizer has no Hugging Face form here, or NULL. */
static const char *model_reason(const gguf_ctx *ctx, char *buf, size_t n) {
    int64_t k = gguf_find_key(ctx, TOK "model", strlen(TOK "model"));
    const char *s = "", *p = "";
    size_t sl = 0, pl = 0;
    struct voc_arr a;
    if (k < 0 || !gguf_kv_get_str(ctx, k, &s, &sl))
        return "no " TOK "model string names the tokenizer";
    int64_t kp = gguf_find_key(ctx, TOK "pre", strlen(TOK "pre"));
    if (kp < 0 || !gguf_kv_get_str(ctx, kp, &p, &pl))
        p = "", pl = 0;
    if (voc_hf_kind(ctx) == VOC_HF_NONE) {
        const char *pre_why = NULL;
        if (((sl == 4 && !memcmp(s, "gpt2", 4)) ||
             (sl == 6 && !memcmp(s, "gemma4", 6))) &&
            !voc_hf_pre(ctx, &pre_why))
            snprintf(buf, n, "the byte-level BPE pre-tokenizer '%.*s': %s",
                     (int)(pl > 64 ? 64 : pl), p,
                     pre_why ? pre_why
                             : "llama.cpp knows no such pre-tokenizer (it "
                               "refuses to load the model)");
        else
            voc_hf_model_absent(s, sl, buf, n); /* hfmodels.c */
        return buf;
    }
    if ((voc_hf_kind(ctx) == VOC_HF_BYTE_BPE ||
         voc_hf_kind(ctx) == VOC_HF_UTF8_BPE) &&
        !voc_arr_of(ctx, TOK "merges", GGUF_TYPE_STRING, &a))
        return "a BPE vocabulary without " TOK "merges";
    if (voc_hf_kind(ctx) == VOC_HF_SPM &&
        !voc_arr_of(ctx, TOK "scores", GGUF_TYPE_FLOAT32, &a))
        return "a SentencePiece vocabulary without " TOK
               "scores (float32): its merges are made from them";
    return NULL;
}

static int by_value(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Bytes of the UTF-8 character at s (1 for a stray byte). */
static uint64_t char_len(const uint8_t *s, uint64_t n) {
    uint64_t c = 1;
    while (c < n && (s[c] & 0xc0) == 0x80)
        c++;
    return c;
}

/* Whether token t splits where llama.cpp merges and a BPE merge list
 * cannot (*at: the byte), its splits into two tokens in p: a character
 * that is no token beside a token, or two such characters.  Only its
 * first and last characters can be such a character: at the first
 * split, the first character no token and the rest a token or one
 * character, or the first a token and the rest one character that is
 * none; at the last, the rest a token and the last character none. */
static bool token_bad(const struct voc_index *ix, const struct voc_pairs *p,
                      size_t t, uint64_t *at) {
    const uint8_t *s = ix->text[t];
    uint64_t n = ix->len[t], c1 = char_len(s, n), kl = n - 1;
    if (c1 >= n) /* one character (or none): no split */
        return false;
    while (kl > c1 && (s[kl] & 0xc0) == 0x80) /* the last character's */
        kl--;
    bool l1 = voc_pairs_bit(p, p->pre, t, c1),
         r1 = voc_pairs_bit(p, p->suf, t, c1);
    *at = c1;
    if (l1 ? !r1 && c1 == kl : r1 || c1 == kl)
        return true;
    *at = kl;
    return kl > c1 && voc_pairs_bit(p, p->pre, t, kl) &&
           !voc_pairs_bit(p, p->suf, t, kl);
}

/* Whether some split of token t is into two tokens (a merge makes it). */
static bool made(const struct voc_pairs *p, const struct voc_index *ix,
                 size_t t) {
    for (uint64_t w = 0; w <= ix->len[t] / 64; w++)
        if (voc_pairs_word(p, p->pre, t, w) & voc_pairs_word(p, p->suf, t, w))
            return true;
    return false;
}

/* Whether token t is one character repeated (SentencePiece's runs of
 * spaces, which share one score). */
static bool one_char_run(const struct voc_index *ix, size_t t) {
    const uint8_t *s = ix->text[t];
    uint64_t len = ix->len[t], c = char_len(s, len);
    for (uint64_t k = c; k < len; k += c)
        if (len - k < c || memcmp(s, s + k, c) != 0)
            return false;
    return true;
}

/* A buffer of the check's own, mapped (mmap, mremap) and not malloc'd:
 * freeing its megabytes leaves malloc's thresholds as they were (a freed
 * mapped block of malloc's raises the size below which it takes blocks
 * from the arena's heap, whose free top malloc_trim does not hand back:
 * 14 MB more held after the file). */
struct mbuf {
    uint8_t *p;
    size_t len, cap;
};

static bool mb_add(struct mbuf *b, const void *p, size_t n) {
    if (!n)
        return true; /* p may be NULL then: memcpy's arguments never are */
    if (n > SIZE_MAX / 2 - b->len)
        return false;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < b->len + n)
            cap *= 2;
        void *q = b->cap ? mremap(b->p, b->cap, cap, MREMAP_MAYMOVE)
                         : mmap(NULL, cap, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (q == MAP_FAILED)
            return false;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    return true;
}

static void mb_free(struct mbuf *b) {
    if (b->cap)
        munmap(b->p, b->cap);
    *b = (struct mbuf){0};
}

/* A part of spm_cuts (tokens lo..hi-1): its first token that splits
 * where llama.cpp and BPE merge differently (bad, at byte k; or -1), the
 * scores of its tokens merges make, but runs of one character, in id
 * order (sc: mapped, no malloc on voc_halves' thread); oom. */
struct cut_part {
    const struct voc_index *ix;
    const struct voc_pairs *p;
    const struct voc_arr *scores;
    size_t lo, hi;
    int64_t bad;
    uint64_t k;
    struct mbuf sc;
    bool oom;
};

static void *cut_part(void *arg) {
    struct cut_part *h = arg;
    for (size_t t = h->lo; t < h->hi && h->bad < 0 && !h->oom; t++) {
        uint32_t v = 0;
        if (token_bad(h->ix, h->p, t, &h->k))
            h->bad = (int64_t)t;
        else if (made(h->p, h->ix, t) && !one_char_run(h->ix, t)) {
            (void)voc_arr_u32(h->scores, t, &v); /* past a short array: 0 */
            h->oom = !mb_add(&h->sc, &v, 4);
        }
    }
    return NULL;
}

/* The first token in id order that splits where llama.cpp and BPE
 * merge differently (its line in buf), and the scores of the tokens
 * merges make into *sc (id order), but runs of one character; NULL, or
 * "out of memory".  In two parts at once (voc_halves). */
static const char *spm_cuts(const struct voc_index *ix,
                            const struct voc_pairs *p,
                            const struct voc_arr *scores, struct mbuf *sc,
                            char *buf, size_t n) {
    size_t mid = voc_index_mid(ix);
    struct cut_part h[2] = {{ix, p, scores, 0, mid, -1, 0, {0}, false},
                            {ix, p, scores, mid, ix->n, -1, 0, {0}, false}};
    voc_halves(cut_part, &h[0], &h[1], mid < ix->n);
    const struct cut_part *bad = h[0].bad >= 0 ? &h[0] : &h[1];
    const char *why = NULL;
    if (bad->bad >= 0) {
        snprintf(buf, n,
                 "token %lld splits at byte %llu into a character that is no "
                 "token and a token: llama.cpp merges them, a BPE merge list "
                 "cannot",
                 (long long)bad->bad, (unsigned long long)bad->k);
        why = buf;
    } else if (h[0].oom || h[1].oom ||
               !mb_add(&h[0].sc, h[1].sc.p, h[1].sc.len))
        why = "out of memory";
    *sc = h[0].sc;
    mb_free(&h[1].sc);
    return why;
}

/* Whether the m floats at p fall strictly (then no two are equal: no
 * sort to find out; a SentencePiece vocabulary's scores mostly fall as
 * its ids rise).  A NaN or a tie is not. */
static bool strictly_falling(const uint8_t *p, size_t m) {
    const float *f = (const float *)p;
    for (size_t i = 1; i < m; i++)
        if (!(f[i] < f[i - 1]))
            return false;
    return true;
}

bool voc_spm_merges(const struct voc_index *ix, struct gguf_buf *merges) {
    struct voc_pairs p;
    if (!voc_pairs_make(ix, &p))
        return false;
    bool ok = voc_pairs_merges(&p, ix, merges);
    voc_pairs_free(&p);
    return ok;
}

/* Why llama.cpp's SentencePiece and a BPE of the same pieces could merge
 * differently here (p: the splits), or NULL, the merges then appended
 * to merges (NULL: not kept). */
static const char *spm_reason(const gguf_ctx *ctx, const struct voc_index *ix,
                              struct voc_pairs *p, struct gguf_buf *merges,
                              char *buf, size_t n) {
    struct voc_arr sc;
    struct mbuf scores = {0};
    if (!voc_arr_of(ctx, TOK "scores", GGUF_TYPE_FLOAT32, &sc))
        return "no scores";
    const char *why = spm_cuts(ix, p, &sc, &scores, buf, n);
    size_t m = scores.len / 4;
    if (!why && m > 1 && !strictly_falling(scores.p, m)) {
        qsort(scores.p, m, 4, by_value);
        const float *f = (const float *)scores.p;
        for (size_t i = 1; i < m && !why; i++)
            if (f[i] == f[i - 1]) {
                snprintf(buf, n,
                         "two tokens that merges make have the score %g: "
                         "llama.cpp takes the leftmost pair, BPE the pair "
                         "of the better rank",
                         (double)f[i]);
                why = buf;
            }
    }
    mb_free(&scores);
    if (!why && merges && !voc_pairs_merges(p, ix, merges))
        why = "out of memory";
    return why;
}

const char *voc_hf_reason(const gguf_ctx *ctx, char *buf, size_t n) {
    struct voc_index ix;
    const char *why = voc_hf_check(ctx, &ix, NULL, buf, n);
    if (!why)
        voc_index_free(&ix);
    return why;
}

/* Why the tokens of index ix have no tokenizer.json, or NULL (the kept
 * merges into merges, voc_hf_check). */
static const char *tokens_reason(const gguf_ctx *ctx,
                                 const struct voc_index *ix,
                                 struct voc_pairs *p, struct gguf_buf *merges,
                                 char *buf, size_t n) {
    const char *why = NULL;
    if (ix->bad_utf8 >= 0) {
        snprintf(buf, n,
                 "token %lld is not valid UTF-8: a JSON string cannot hold it",
                 (long long)ix->bad_utf8);
        why = buf;
    }
    int64_t d = why ? -1 : voc_index_duplicate(ix);
    if (d < 0 && !why && voc_hf_kind(ctx) == VOC_HF_SPM)
        why = spm_reason(ctx, ix, p, merges, buf, n);
    if (d < 0 && !why &&
        (voc_hf_kind(ctx) == VOC_HF_WPM || voc_hf_kind(ctx) == VOC_HF_UGM ||
         voc_hf_kind(ctx) == VOC_HF_RWKV))
        why = voc_hf_models_reason(ctx, ix, buf, n); /* hfmodels.c */
    if (d >= 0) {
        snprintf(buf, n,
                 "token %lld has the text of an earlier token: a JSON "
                 "vocabulary maps a text to one id",
                 (long long)d);
        why = buf;
    }
    return why;
}

const char *voc_hf_check(const gguf_ctx *ctx, struct voc_index *ix,
                         struct gguf_buf *merges, char *buf, size_t n) {
    struct voc_arr toks;
    size_t mark = merges ? merges->len : 0;
    if (!voc_arr_of(ctx, TOK "tokens", GGUF_TYPE_STRING, &toks))
        return "the model has no " TOK "tokens (an array of strings)";
    const char *why = model_reason(ctx, buf, n);
    if (why)
        return why;
    if (toks.n > UINT32_MAX)
        return "more tokens than ids of 32 bits";
    /* SentencePiece's splits by sorting (cuts.c), the others' lookups
     * by the table */
    bool spm = voc_hf_kind(ctx) == VOC_HF_SPM;
    struct voc_pairs p = {0};
    if (!voc_index_make(&toks, !spm, ix))
        return "out of memory, or a token past the value's end";
    if (spm && !voc_pairs_make(ix, &p)) {
        voc_index_free(ix);
        return "out of memory";
    }
    if (spm) { /* the table's facts, found by the sorts */
        ix->dup = p.dup;
        ix->bad_utf8 = p.bad_utf8;
        ix->checked = true;
    }
    why = tokens_reason(ctx, ix, spm ? &p : NULL, merges, buf, n);
    voc_pairs_free(&p);
    if (why) {
        voc_index_free(ix);
        if (merges)
            merges->len = mark;
    }
    return why;
}
