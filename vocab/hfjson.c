/*
 * hfjson.c - hf/tokenizer.json (vocab.h), Hugging Face's tokenizers
 * format, for the tokenizers hfcheck.c lets through.  The texts of the
 * vocabulary, the merges and the added tokens are written by
 * voc_json_str (jsonstr.c: jansson's bytes, no json_t a text), the other
 * values by libjansson; the document's frame is written here piece by
 * piece, one vocabulary entry a line and the merges 64 a line (byte-level
 * BPE; SentencePiece's one a line, each text copied from its vocabulary
 * line), so that the memory it costs is the text itself and an index of
 * the vocabulary (24 bytes a token; SentencePiece's: 34, and where each
 * text's JSON is, 16) and of the merges (16 bytes each), not a tree of
 * every token.
 *
 *   llama (SentencePiece): a BPE model with byte_fallback and the unknown
 *     token, its merges made from the scores as transformers' converter
 *     (SentencePieceExtractor) makes them: every split of a piece into two
 *     pieces of the vocabulary (at character boundaries), ordered by the
 *     piece's score (highest first), then its id, then the two parts'
 *     ids; llama.cpp merges the adjacent pair whose piece scores highest.
 *     The normalizer prepends U+2581 (when add_space_prefix, llama.cpp's
 *     default, is not false) and writes spaces as U+2581, as llama.cpp
 *     does to each text between special tokens.
 *   gpt2 (byte-level BPE): llama.cpp's regular expressions for the
 *     pre-tokenizer (hfpre.c) as Split (Isolated) in its order, then
 *     ByteLevel without its own expression; the ByteLevel decoder; the
 *     vocabulary and tokenizer.ggml.merges as they are; ignore_merges
 *     where llama.cpp takes a word that is a token whole.
 *   gemma4 (and gpt2 with the pre-tokenizers sarvam-moe and
 *     granite-embed-multi-311m): BPE over the raw UTF-8, spaces written
 *     as U+2581 by the normalizer (no space prepended: llama.cpp's BPE
 *     never does), its Split, byte fallback, the merges as they are.
 * Added tokens: the tokens llama.cpp matches in text as special ones
 * (types control, user_defined, unknown, and the texts it makes control:
 * voc_text_control), special but user_defined, with the spaces llama.cpp
 * strips beside them (strip_rule).  post_processor: the BOS and EOS that
 * llama.cpp adds (vocab.h: voc_add_bos, voc_bos_id, ...).
 */
#include "arr.h"

#include <assert.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOK "tokenizer.ggml."
#define SPM_SPACE "\xe2\x96\x81" /* U+2581, SentencePiece's space */

/* Appends v's JSON (compact), as voc_json_put. */
static enum gguf_status voc_json(struct gguf_buf *b, json_t *v) {
    return voc_json_put(b, v, JSON_ENCODE_ANY | JSON_COMPACT, UINT64_MAX, NULL);
}

static enum gguf_status lit(struct gguf_buf *b, const char *s) {
    return gguf_buf_add(b, s, strlen(s));
}

/* The k strings s[i] (len[i] bytes each) as JSON strings separated by
 * commas (voc_json_str: jansson's bytes). */
static enum gguf_status jstrs(struct gguf_buf *b, const uint8_t *const *s,
                              const uint64_t *len, size_t k) {
    enum gguf_status st = GGUF_OK;
    for (size_t i = 0; st == GGUF_OK && i < k; i++)
        if (!i || (st = gguf_buf_add(b, ",", 1)) == GGUF_OK)
            st = voc_json_str(b, s[i], len[i]);
    return st;
}

/* The line break before an element of a long array: ",\n", or "\n"
 * before the first (no strlen a token). */
static enum gguf_status next_line(struct gguf_buf *b, bool first) {
    return first ? gguf_buf_add(b, "\n", 1) : gguf_buf_add(b, ",\n", 2);
}

static int by_rank(const void *a, const void *b) {
    const struct voc_merge *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    if (x->l != y->l)
        return x->l < y->l ? -1 : 1;
    return x->r < y->r ? -1 : x->r > y->r;
}

static float score_of(const struct voc_arr *scores, uint32_t id) {
    uint32_t v = 0;
    float f;
    (void)voc_arr_u32(scores, id, &v);
    memcpy(&f, &v, 4);
    return f;
}

/* Sorts e[0..n) by by_rank in place, when its tokens' runs are
 * already in by_rank's order (the sorts' merges come token by token in
 * id order, and a SentencePiece vocabulary's scores mostly fall as its
 * ids rise): each token's run sorted by its parts alone, in time linear
 * but for the runs (a few merges each; a long one by qsort), where a
 * whole qsort was a twentieth of a large vocabulary's file.  false, e
 * untouched, when they are not (or a score is NaN): the caller sorts it
 * all.  The order is by_rank's either way (a total order). */
static bool ranked_in_place(struct voc_merge *e, size_t n) {
    for (size_t i = 1; i < n; i++)
        if (e[i].id != e[i - 1].id &&
            !(e[i].score < e[i - 1].score ||
              (e[i].score == e[i - 1].score && e[i].id > e[i - 1].id)))
            return false;
        else if (e[i].id == e[i - 1].id && e[i].score != e[i].score)
            return false; /* NaN */
    for (size_t lo = 0, hi; lo < n; lo = hi) {
        for (hi = lo + 1; hi < n && e[hi].id == e[lo].id;)
            hi++;
        if (hi - lo > 16) {
            qsort(e + lo, hi - lo, sizeof *e, by_rank);
            continue;
        }
        for (size_t i = lo + 1; i < hi; i++) /* insertion: a few */
            for (size_t j = i; j > lo && by_rank(&e[j - 1], &e[j]) > 0; j--) {
                struct voc_merge x = e[j];
                e[j] = e[j - 1];
                e[j - 1] = x;
            }
    }
    return true;
}

/* The SentencePiece merges, ranked (*out, *n; free *out): those the
 * check kept (taken over from *kept, voc_hf_check), else those of its
 * sorts made again (voc_spm_merges).  At most one a byte of the
 * vocabulary's texts: bounded by the header. */
static enum gguf_status make_merges(const struct voc_index *ix,
                                    const struct voc_arr *scores,
                                    struct gguf_buf *kept,
                                    struct voc_merge **out, size_t *n) {
    struct gguf_buf m = {0};
    if (kept) { /* none made again: the check's, scored here */
        m = *kept;
        *kept = (struct gguf_buf){0};
    } else if (!voc_spm_merges(ix, &m)) { /* the check's sorts */
        gguf_buf_free(&m);
        return GGUF_E_NOMEM;
    }
    *n = m.len / sizeof(struct voc_merge);
    struct voc_merge *e = (struct voc_merge *)m.p;
    for (size_t i = 0; i < *n; i++)
        e[i].score = score_of(scores, e[i].id);
    if (*n && !ranked_in_place(e, *n))
        qsort(e, *n, sizeof *e, by_rank);
    *out = e;
    return GGUF_OK;
}

/* The text of token id (*len), or NULL for -1. */
static const uint8_t *text_of(const struct voc_index *ix, int64_t id,
                              uint64_t *len) {
    if (id < 0 || (uint64_t)id >= ix->n)
        return NULL;
    *len = ix->len[id];
    return ix->text[id];
}

static json_t *token_ref(const uint8_t *s, uint64_t n, int64_t id) {
    json_t *o = json_object();
    json_object_set_new(o, "id", json_stringn((const char *)s, (size_t)n));
    json_object_set_new(o, "ids", json_pack("[I]", (json_int_t)id));
    json_object_set_new(o, "tokens",
                        json_pack("[s%]", (const char *)s, (size_t)n));
    return o;
}

/* TemplateProcessing adding BOS and EOS as llama.cpp does, or null. */
static json_t *post_processor(const gguf_ctx *ctx, const struct voc_index *ix) {
    uint64_t bl = 0, el = 0;
    int64_t bid = voc_bos_id(ctx), eid = voc_eos_id(ctx);
    const uint8_t *bos = text_of(ix, bid, &bl);
    const uint8_t *eos = text_of(ix, eid, &el);
    bool add_bos = voc_add_bos(ctx);
    bool add_eos = voc_add_eos(ctx);
    if (!(add_bos && bos) && !(add_eos && eos))
        return json_null();
    json_t *single = json_array(), *pair = json_array(), *sp = json_object();
    for (int half = 0; half < 2; half++) {
        json_t *seq[2] = {
            json_pack("{s{s:s,s:i}}", "Sequence", "id", "A", "type_id", 0),
            json_pack("{s{s:s,s:i}}", "Sequence", "id", "B", "type_id", 1)};
        for (int s = 0; s <= half; s++) {
            json_t *arr = half ? pair : single;
            if (add_bos && bos)
                json_array_append_new(arr, json_pack("{s{s:s%,s:i}}",
                                                     "SpecialToken", "id", bos,
                                                     (size_t)bl, "type_id", s));
            json_array_append(arr, seq[s]);
            if (add_eos && eos)
                json_array_append_new(arr, json_pack("{s{s:s%,s:i}}",
                                                     "SpecialToken", "id", eos,
                                                     (size_t)el, "type_id", s));
        }
        json_decref(seq[0]);
        json_decref(seq[1]);
    }
    if (add_bos && bos)
        json_object_setn_new(sp, (const char *)bos, (size_t)bl,
                             token_ref(bos, bl, bid));
    if (add_eos && eos)
        json_object_setn_new(sp, (const char *)eos, (size_t)el,
                             token_ref(eos, el, eid));
    return json_pack("{s:s,s:o,s:o,s:o}", "type", "TemplateProcessing",
                     "single", single, "pair", pair, "special_tokens", sp);
}

/* Whether key's string value holds one of the texts (lowercased first
 * when lower: llama.cpp lowercases general.name). */
static bool key_has(const gguf_ctx *ctx, const char *key, bool lower,
                    const char *const *any) {
    int64_t k = gguf_find_key(ctx, key, strlen(key));
    const char *v;
    size_t n;
    char low[256];
    if (k < 0 || !gguf_kv_get_str(ctx, k, &v, &n))
        return false;
    n = n < sizeof low - 1 ? n : sizeof low - 1;
    for (size_t i = 0; i < n; i++)
        low[i] = lower && v[i] >= 'A' && v[i] <= 'Z' ? (char)(v[i] + 32) : v[i];
    low[n] = 0;
    for (; *any; any++)
        if (strstr(low, *any))
            return true;
    return false;
}

/* Which tokens llama.cpp strips the spaces beside (its per-model token
 * attributes, llama-vocab.cpp): the <mask> of jina v2 and nomic-bert-moe
 * (lstrip), [MASK] of modern-bert (lstrip), and phi-3's special and
 * user-defined tokens and </s> but <unk>, <s>, <|endoftext|> (rstrip). */
enum strip { STRIP_NONE, STRIP_MASK, STRIP_MASK_UPPER, STRIP_PHI3 };

static enum strip strip_rule(const gguf_ctx *ctx) {
    static const char *const jina[] = {"jina-v2-de", "jina-v2-es",
                                       "jina-v2-code", NULL};
    static const char *const arch[] = {"nomic-bert-moe", "jina-bert-v3", NULL};
    static const char *const phi3[] = {"phi-3", "phi3", NULL};
    static const char *const mbert[] = {"modern-bert", NULL};
    if (key_has(ctx, TOK "pre", false, jina) ||
        key_has(ctx, "general.architecture", false, arch))
        return STRIP_MASK;
    if (key_has(ctx, "general.name", true, phi3))
        return STRIP_PHI3;
    if (key_has(ctx, "general.name", true, mbert))
        return STRIP_MASK_UPPER;
    return STRIP_NONE;
}

static bool text_is(const struct voc_index *ix, size_t i, const char *t) {
    return ix->len[i] == strlen(t) && memcmp(ix->text[i], t, ix->len[i]) == 0;
}

/* Token i as an added token: {"id":..,"content":..,..} as jansson would
 * write the object (compact, in this order). */
static enum gguf_status added_token(struct gguf_buf *b,
                                    const struct voc_index *ix, size_t i,
                                    bool lstrip, bool rstrip, bool special) {
    char head[48], tail[128];
    snprintf(head, sizeof head, "{\"id\":%zu,\"content\":", i);
    snprintf(tail, sizeof tail,
             ",\"single_word\":false,\"lstrip\":%s,\"rstrip\":%s,"
             "\"normalized\":false,\"special\":%s}",
             lstrip ? "true" : "false", rstrip ? "true" : "false",
             special ? "true" : "false");
    enum gguf_status st = lit(b, head);
    if (st == GGUF_OK)
        st = voc_json_str(b, ix->text[i], ix->len[i]);
    return st == GGUF_OK ? lit(b, tail) : st;
}

/* "added_tokens":[...]: the tokens llama.cpp matches as special ones
 * (types unknown 2, control 3, user_defined 4, and the texts it makes
 * control whatever their type: voc_text_control), with the spaces it strips
 * beside them (strip_rule); not normalized (llama.cpp matches them in the
 * raw text). */
static enum gguf_status added_tokens(const gguf_ctx *ctx,
                                     const struct voc_index *ix,
                                     struct gguf_buf *b) {
    struct voc_arr types;
    bool has = voc_arr_of(ctx, TOK "token_type", GGUF_TYPE_INT32, &types);
    enum strip rule = strip_rule(ctx);
    bool tool = false;
    for (size_t i = 0; i < ix->n && !tool; i++)
        tool = text_is(ix, i, "<|tool_response>");
    enum gguf_status st = lit(b, "\"added_tokens\":[");
    const char *sep = "\n";
    const uint64_t *lens = voc_text_lens();
    for (size_t i = 0; st == GGUF_OK && i < ix->n; i++) {
        uint32_t v = 1;
        if (has && !voc_arr_u32(&types, i, &v))
            continue;
        if ((v < 2 || v > 4) && /* the usual token: one test */
            (!voc_text_listed(lens, ix->text[i], ix->len[i]) ||
             !voc_text_control(ctx, ix->text[i], ix->len[i], tool)))
            continue;
        bool l = (rule == STRIP_MASK && text_is(ix, i, "<mask>")) ||
                 (rule == STRIP_MASK_UPPER && text_is(ix, i, "[MASK]"));
        bool r = rule == STRIP_PHI3 && !text_is(ix, i, "<unk>") &&
                 !text_is(ix, i, "<s>") && !text_is(ix, i, "<|endoftext|>");
        if ((st = lit(b, sep)) != GGUF_OK)
            break;
        sep = ",\n";
        st = added_token(b, ix, i, l, r, v != 4);
    }
    return st == GGUF_OK ? lit(b, "],\n") : st;
}

/* The BPE pre-tokenizer: llama.cpp's expressions as Split (Isolated) in
 * its order, then (byte_level) ByteLevel without its own expression. */
static json_t *split_pre(const gguf_ctx *ctx, bool byte_level) {
    const char *why;
    const struct voc_pre *p = voc_hf_pre(ctx, &why);
    json_t *seq = json_array();
    for (int k = 0; p && k < 7 && p->re[k]; k++)
        json_array_append_new(seq,
                              json_pack("{s:s,s:{s:s},s:s,s:b}", "type",
                                        "Split", "pattern", "Regex", p->re[k],
                                        "behavior", "Isolated", "invert", 0));
    if (byte_level)
        json_array_append_new(seq,
                              json_pack("{s:s,s:b,s:b,s:b}", "type",
                                        "ByteLevel", "add_prefix_space", 0,
                                        "trim_offsets", 1, "use_regex", 0));
    return json_pack("{s:s,s:o}", "type", "Sequence", "pretokenizers", seq);
}

/* normalizer, pre_tokenizer, post_processor and decoder. */
static enum gguf_status pipeline(const gguf_ctx *ctx,
                                 const struct voc_index *ix, enum voc_hf kind,
                                 struct gguf_buf *b) {
    json_t *norm, *pre, *dec;
    if (kind == VOC_HF_SPM || kind == VOC_HF_UTF8_BPE) {
        /* llama.cpp's BPE never prepends a space */
        bool prefix =
            kind == VOC_HF_SPM && voc_flag(ctx, TOK "add_space_prefix", true);
        json_t *rep = json_pack("{s:s,s:{s:s},s:s}", "type", "Replace",
                                "pattern", "String", " ", "content", SPM_SPACE);
        norm = prefix ? json_pack("{s:s,s:[{s:s,s:s},o]}", "type", "Sequence",
                                  "normalizers", "type", "Prepend", "prepend",
                                  SPM_SPACE, rep)
                      : rep;
        pre = kind == VOC_HF_SPM ? json_null() : split_pre(ctx, false);
        dec = json_pack("{s:s,s:[{s:s,s:{s:s},s:s},{s:s},{s:s}]}", "type",
                        "Sequence", "decoders", "type", "Replace", "pattern",
                        "String", SPM_SPACE, "content", " ", "type",
                        "ByteFallback", "type", "Fuse");
        if (prefix)
            json_array_append_new(json_object_get(dec, "decoders"),
                                  json_pack("{s:s,s:s,s:i,s:i}", "type",
                                            "Strip", "content", " ", "start", 1,
                                            "stop", 0));
    } else {
        norm = json_null();
        pre = split_pre(ctx, true);
        dec =
            json_pack("{s:s,s:b,s:b,s:b}", "type", "ByteLevel",
                      "add_prefix_space", 1, "trim_offsets", 1, "use_regex", 1);
    }
    const char *label[4] = {"\"normalizer\":", ",\n\"pre_tokenizer\":",
                            ",\n\"post_processor\":", ",\n\"decoder\":"};
    json_t *part[4] = {norm, pre, post_processor(ctx, ix), dec};
    enum gguf_status st = GGUF_OK;
    for (int k = 0; k < 4; k++)
        if (st != GGUF_OK || (st = lit(b, label[k])) != GGUF_OK)
            json_decref(part[k]);
        else
            st = voc_json(b, part[k]);
    return st == GGUF_OK ? lit(b, ",\n") : st;
}

/* ":ID" then ",\n" unless last, in p (32 bytes); its length.  By hand:
 * snprintf was a tenth of a large vocabulary's time. */
static size_t id_tail(char *p, size_t id, bool last) {
    char d[24];
    size_t n = 0, k = 0;
    do
        d[n++] = (char)('0' + id % 10);
    while ((id /= 10) != 0);
    p[k++] = ':';
    while (n)
        p[k++] = d[--n];
    if (!last)
        p[k++] = ',', p[k++] = '\n';
    return k;
}

/* id_tail's length for an id of digits digits. */
static uint64_t id_tail_len(uint64_t digits, bool last) {
    return 1 + digits + (last ? 0 : 2);
}

/* Where token i's JSON string is in the document (its vocabulary line):
 * the SentencePiece merges copy it from there, escaped once. */
struct jpos {
    uint64_t off, len;
};

/* ---- the vocabulary's lines and the merges', two parts at once ------
 * Most of a large vocabulary's document.  Each is written in two parts
 * at once (voc_halves), the second on one more thread: first each part's
 * exact bytes (the same facts as its writing: voc_json_str_len, id_tail,
 * the texts' places), then the document grown once to hold both, then
 * each part written in place, the second after the first's bytes; so
 * that the bytes are those one writer makes, with no copy, no mapping of
 * a part's own and no malloc on that thread (an arena it made would keep
 * memory after the file: hfcheck.c's mbuf). */
struct part {
    const struct voc_index *ix;
    const struct voc_merge *m; /* the merges' lines: m[lo..hi) */
    struct jpos *pos;
    const uint8_t *doc; /* the merges': the document, its texts copied */
    size_t lo, hi;
    bool utf8;
    uint64_t bytes; /* the first step's: the part's */
    uint8_t *at;    /* the second's: where they go in the document, */
    uint64_t off;   /* at that offset of it */
    enum gguf_status st;
};

/* The bytes of token i's JSON string, voc_json_str_len's; a text under
 * 8 bytes (most of a SentencePiece vocabulary's) in one word read back
 * from its end (the payload has its length before it, arr.h): its bytes
 * and quotes when none needs an escape. */
static uint64_t json_bytes(const struct voc_index *ix, size_t i) {
    const uint8_t *s = ix->text[i];
    uint64_t n = ix->len[i], w;
    if (n >= 8)
        return voc_json_str_len(s, n);
    memcpy(&w, s + n - 8, 8); /* its n bytes the word's top ones */
    w = n ? w >> (64 - 8 * n) << (64 - 8 * n) : 0;
    w |= UINT64_C(0x7878787878787878) >> 8 * n; /* the rest 'x' */
    return voc_json_escapes8(w) ? voc_json_str_len(s, n) : n + 2;
}

/* Tokens lo..hi-1's lines' bytes (vocab_part's: each text's JSON string
 * and its id_tail, the ids' digits counted as they rise); GGUF_E_INVAL
 * for a text not UTF-8 when not known to be. */
static void *vocab_bytes(void *arg) {
    struct part *h = arg;
    const struct voc_index *ix = h->ix;
    uint64_t digits = 1, next = 10; /* of the ids from lo */
    while (next <= h->lo && digits < 20)
        digits++, next = next > UINT64_MAX / 10 ? UINT64_MAX : next * 10;
    for (size_t i = h->lo; h->st == GGUF_OK && i < h->hi; i++) {
        if (i >= next)
            digits++, next = next > UINT64_MAX / 10 ? UINT64_MAX : next * 10;
        if (!h->utf8 && !gguf_utf8_valid(ix->text[i], ix->len[i]))
            h->st = GGUF_E_INVAL;
        h->bytes += json_bytes(ix, i) + id_tail_len(digits, i + 1 == ix->n);
    }
    return NULL;
}

/* Tokens lo..hi-1's lines "text":id at h->at (h->bytes of room), each
 * text's place into pos[] (NULL: not kept). */
static void *vocab_part(void *arg) {
    struct part *h = arg;
    const struct voc_index *ix = h->ix;
    uint8_t *o = h->at;
    for (size_t i = h->lo; i < h->hi; i++) {
        size_t k = voc_json_str_at(o, ix->text[i], ix->len[i]);
        if (h->pos)
            h->pos[i] = (struct jpos){h->off + (uint64_t)(o - h->at), k};
        o += k;
        o += id_tail((char *)o, i, i + 1 == ix->n);
    }
    assert((uint64_t)(o - h->at) == h->bytes);
    return NULL;
}

/* The two parts h[0..1] (their first step done, h->bytes) after b's
 * bytes: b grown once, their places set, then fn writes them at once;
 * GGUF_E_RANGE past max (mark: the document's start). */
static enum gguf_status parts_write(struct part h[2], void *(*fn)(void *),
                                    uint64_t max, size_t mark,
                                    struct gguf_buf *b) {
    enum gguf_status st = h[0].st != GGUF_OK ? h[0].st : h[1].st;
    uint64_t all = h[0].bytes + h[1].bytes;
    if (st != GGUF_OK)
        return st;
    if (all > max || b->len - mark > max - all)
        return GGUF_E_RANGE;
    if ((st = gguf_buf_reserve(b, (size_t)all)) != GGUF_OK)
        return st;
    voc_huge(b->p + b->len, (size_t)all); /* megabytes written through */
    for (int k = 0; k < 2; k++) {
        h[k].off = b->len + (k ? h[0].bytes : 0);
        h[k].at = b->p + h[k].off;
        h[k].doc = b->p;
    }
    voc_halves(fn, &h[0], &h[1], h[1].lo < h[1].hi);
    b->len += (size_t)all;
    return GGUF_OK;
}

/* "vocab":{...}: one "text":id a line; each text's place into pos[]
 * (NULL: not kept), in two parts at once from VOC_SPLIT_MIN tokens. */
static enum gguf_status vocab(const struct voc_index *ix, uint64_t max,
                              size_t mark, struct jpos *pos,
                              struct gguf_buf *b) {
    enum gguf_status st = lit(b, "\"vocab\":{\n");
    /* the table or the sorts checked every text (bad_utf8) */
    bool utf8 = ix->checked && ix->bad_utf8 < 0;
    size_t mid = voc_index_mid(ix);
    struct part h[2] = {
        {.ix = ix, .pos = pos, .lo = 0, .hi = mid, .utf8 = utf8},
        {.ix = ix, .pos = pos, .lo = mid, .hi = ix->n, .utf8 = utf8}};
    if (st != GGUF_OK)
        return st;
    voc_halves(vocab_bytes, &h[0], &h[1], mid < ix->n);
    if ((st = parts_write(h, vocab_part, max, mark, b)) != GGUF_OK)
        return st;
    return lit(b, "},\n\"merges\":[");
}

/* Merges lo..hi-1's lines' bytes: ",\n[" (the first "\n["), "l", ',',
 * "r", ']' (the texts' JSON from their vocabulary lines, pos). */
static void *lines_bytes(void *arg) {
    struct part *h = arg;
    for (size_t i = h->lo; i < h->hi; i++)
        h->bytes += h->pos[h->m[i].l].len + h->pos[h->m[i].r].len + 5 - !i;
    return NULL;
}

/* Merges lo..hi-1 as ["left","right"], a line each, at h->at, the texts
 * copied from their vocabulary lines (pos), those of the lines ahead
 * asked for first (prefetched: a merge's tokens are anywhere in
 * megabytes, and waiting on each in turn was most of the writing). */
static void *lines_part(void *arg) {
    enum { AHEAD = 16 };
    struct part *h = arg;
    const struct voc_merge *m = h->m;
    const struct jpos *pos = h->pos;
    uint8_t *o = h->at;
    for (size_t i = h->lo; i < h->hi; i++) {
        if (i + 2 * AHEAD < h->hi) {
            __builtin_prefetch(&pos[m[i + 2 * AHEAD].l]);
            __builtin_prefetch(&pos[m[i + 2 * AHEAD].r]);
        }
        if (i + AHEAD < h->hi) {
            __builtin_prefetch(h->doc + pos[m[i + AHEAD].l].off);
            __builtin_prefetch(h->doc + pos[m[i + AHEAD].r].off);
        }
        const struct jpos *l = &pos[m[i].l], *r = &pos[m[i].r];
        memcpy(o, &",\n["[!i], 3 - !i);
        o += 3 - !i;
        memcpy(o, h->doc + l->off, l->len);
        o += l->len;
        *o++ = ',';
        memcpy(o, h->doc + r->off, r->len);
        o += r->len;
        *o++ = ']';
    }
    assert((uint64_t)(o - h->at) == h->bytes);
    return NULL;
}

/* The SentencePiece merges m[0..n) (spm_lines), in two parts at once
 * from VOC_SPLIT_MIN merges. */
static enum gguf_status spm_lines(const struct voc_merge *m, size_t n,
                                  struct jpos *pos, uint64_t max, size_t mark,
                                  struct gguf_buf *b) {
    size_t mid = n >= VOC_SPLIT_MIN ? n / 2 : n;
    struct part h[2] = {{.m = m, .pos = pos, .lo = 0, .hi = mid},
                        {.m = m, .pos = pos, .lo = mid, .hi = n}};
    voc_halves(lines_bytes, &h[0], &h[1], mid < n);
    return parts_write(h, lines_part, max, mark, b);
}

/* The merges: tokenizer.ggml.merges as they are (byte-level BPE), or the
 * SentencePiece ones made from the scores, as ["left","right"]. */
static enum gguf_status merges(const gguf_ctx *ctx, const struct voc_index *ix,
                               enum voc_hf kind, uint64_t max, size_t mark,
                               struct jpos *pos, struct gguf_buf *kept,
                               struct gguf_buf *b) {
    struct voc_arr a;
    enum gguf_status st = GGUF_OK;
    if (kind != VOC_HF_SPM) {
        if (!voc_arr_of(ctx, TOK "merges", GGUF_TYPE_STRING, &a))
            return GGUF_E_NOTFOUND;
        const uint8_t *pos = a.p, *s[64];
        uint64_t len[64];
        /* 64 a line */
        for (uint64_t i = 0; st == GGUF_OK && i < a.n; i += 64) {
            size_t k = 0;
            for (; k < 64 && i + k < a.n; k++)
                if (!voc_arr_next_str(&a, &pos, &s[k], &len[k]))
                    return GGUF_E_FORMAT;
            if ((st = next_line(b, i == 0)) == GGUF_OK)
                st = jstrs(b, s, len, k);
            if (b->len - mark > max)
                return GGUF_E_RANGE;
        }
        return st;
    }
    struct voc_merge *m = NULL;
    size_t n = 0;
    if (!voc_arr_of(ctx, TOK "scores", GGUF_TYPE_FLOAT32, &a))
        return GGUF_E_NOTFOUND;
    if ((st = make_merges(ix, &a, kept, &m, &n)) != GGUF_OK)
        return st;
    st = spm_lines(m, n, pos, max, mark, b);
    free(m);
    return st;
}

/* The BPE model's settings before its vocabulary. */
static enum gguf_status model_head(const gguf_ctx *ctx,
                                   const struct voc_index *ix, enum voc_hf kind,
                                   struct gguf_buf *b) {
    uint64_t ul = 0;
    int64_t uid = -1;
    if (kind == VOC_HF_SPM && !voc_int(ctx, TOK "unknown_token_id", &uid))
        uid = -1;
    const uint8_t *unk = kind == VOC_HF_SPM ? text_of(ix, uid, &ul) : NULL;
    bool spm = kind == VOC_HF_SPM;
    json_t *unk_j =
        unk ? json_stringn((const char *)unk, (size_t)ul) : json_null();
    enum gguf_status st = lit(b, "\"model\":{\"type\":\"BPE\",\"dropout\":null,"
                                 "\"unk_token\":");
    if (st != GGUF_OK) {
        json_decref(unk_j);
        return st;
    }
    if ((st = voc_json(b, unk_j)) != GGUF_OK)
        return st;
    const char *why;
    const struct voc_pre *pre = spm ? NULL : voc_hf_pre(ctx, &why);
    if (spm)
        return lit(b, ",\"continuing_subword_prefix\":null,"
                      "\"end_of_word_suffix\":null,\"fuse_unk\":true,"
                      "\"byte_fallback\":true,\"ignore_merges\":false,\n");
    /* BPE over raw UTF-8: a symbol that is no token is its bytes' <0xNN>
     * tokens (llama.cpp drops a byte without one; so does this, no unk) */
    if (kind == VOC_HF_UTF8_BPE)
        return lit(b, ",\"continuing_subword_prefix\":null,"
                      "\"end_of_word_suffix\":null,\"fuse_unk\":false,"
                      "\"byte_fallback\":true,\"ignore_merges\":false,\n");
    /* ignore_merges: llama.cpp takes a word that is a token whole. */
    return lit(b, pre && pre->ignore_merges
                      ? ",\"continuing_subword_prefix\":\"\","
                        "\"end_of_word_suffix\":\"\",\"fuse_unk\":false,"
                        "\"byte_fallback\":false,\"ignore_merges\":true,\n"
                      : ",\"continuing_subword_prefix\":\"\","
                        "\"end_of_word_suffix\":\"\",\"fuse_unk\":false,"
                        "\"byte_fallback\":false,\"ignore_merges\":false,\n");
}

/* Room for the whole file at once (one growth of b, not a doubling each
 * time it fills): the texts of the vocabulary and of the byte-level
 * merges (their payloads: each text with 8 bytes, more than the quotes,
 * id and separators most take), twice the vocabulary's for SentencePiece's
 * merges.  An estimate: b grows past it as ever. */
static enum gguf_status reserve(const gguf_ctx *ctx, const struct voc_arr *toks,
                                enum voc_hf kind, uint64_t max,
                                struct gguf_buf *b) {
    struct voc_arr m;
    uint64_t est = 4096 + 2 * (uint64_t)(toks->end - toks->p);
    if (kind != VOC_HF_SPM &&
        voc_arr_of(ctx, TOK "merges", GGUF_TYPE_STRING, &m))
        est = 4096 + (uint64_t)(toks->end - toks->p) + (uint64_t)(m.end - m.p);
    enum gguf_status st = gguf_buf_reserve(b, (size_t)(est < max ? est : max));
    if (st == GGUF_OK) /* the allocator's mapping: ours alone */
        voc_huge(b->p + b->len, b->cap - b->len);
    return st;
}

/* The document after the checks, from the vocabulary's index ix (and
 * the merges its check kept, or NULL). */
static enum gguf_status document(const gguf_ctx *ctx,
                                 const struct voc_index *ix, enum voc_hf kind,
                                 struct gguf_buf *kept, uint64_t max,
                                 struct gguf_buf *b) {
    size_t mark = b->len;
    /* SentencePiece's merges: each text's place in the vocabulary */
    struct jpos *pos =
        kind == VOC_HF_SPM ? malloc(ix->n * sizeof *pos + 1) : NULL;
    if (kind == VOC_HF_SPM && !pos)
        return GGUF_E_NOMEM;
    enum gguf_status st =
        lit(b, "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\n");
    if (st == GGUF_OK)
        st = added_tokens(ctx, ix, b);
    if (st == GGUF_OK)
        st = pipeline(ctx, ix, kind, b);
    if (st == GGUF_OK)
        st = model_head(ctx, ix, kind, b);
    if (st == GGUF_OK)
        st = vocab(ix, max, mark, pos, b);
    if (st == GGUF_OK)
        st = merges(ctx, ix, kind, max, mark, pos, kept, b);
    free(pos);
    if (st == GGUF_OK)
        st = lit(b, "\n]}}\n");
    if (st == GGUF_OK && b->len - mark > max)
        st = GGUF_E_RANGE;
    return st;
}

enum gguf_status voc_hf_tokenizer(const gguf_ctx *ctx, uint64_t max,
                                  bool checked, struct gguf_buf *b,
                                  struct gguf_error *err) {
    char why[256];
    enum voc_hf kind = voc_hf_kind(ctx);
    struct voc_arr toks;
    struct voc_index ix;
    struct gguf_buf kept = {0}; /* the check's merges (SentencePiece) */
    /* Not checked: the check's index and merges made the file's too. */
    const char *no =
        checked ? NULL
                : voc_hf_check(ctx, &ix, kind == VOC_HF_SPM ? &kept : NULL, why,
                               sizeof why);
    if (no)
        return gguf_fail(err, GGUF_E_NOTFOUND, "hf/tokenizer.json: %s", no);
    /* The table by text only for SentencePiece's merges (make_merges). */
    if (!voc_arr_of(ctx, TOK "tokens", GGUF_TYPE_STRING, &toks) ||
        (checked && !voc_index_make(&toks, false, &ix))) {
        if (!checked)
            voc_index_free(&ix);
        gguf_buf_free(&kept);
        return gguf_fail(err, GGUF_E_NOMEM, "hf/tokenizer.json: out of memory");
    }
    enum gguf_status st;
    if (kind == VOC_HF_WPM) /* hfmodels.c */
        st = voc_hf_wpm_json(ctx, &ix, max, b);
    else if (kind == VOC_HF_UGM)
        st = voc_hf_ugm_json(ctx, &ix, max, b);
    else if (kind == VOC_HF_RWKV)
        st = voc_hf_rwkv_json(ctx, &ix, max, b);
    else if ((st = reserve(ctx, &toks, kind, max, b)) == GGUF_OK)
        st = document(ctx, &ix, kind,
                      checked || kind != VOC_HF_SPM ? NULL : &kept, max, b);
    voc_index_free(&ix);
    gguf_buf_free(&kept);
    if (st == GGUF_E_RANGE)
        return gguf_fail(err, st, "hf/tokenizer.json would pass %llu bytes",
                         (unsigned long long)max);
    if (st != GGUF_OK)
        return gguf_fail(err, st, "hf/tokenizer.json: %s",
                         st == GGUF_E_NOMEM ? "out of memory"
                                            : "a value could not be written");
    return GGUF_OK;
}
