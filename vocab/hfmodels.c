/*
 * hfmodels.c - hf/tokenizer.json for llama.cpp's tokenizer models other
 * than BPE (vocab.h; hfcheck.c lets them through, hfjson.c hands them
 * here): WordPiece (tokenizer.ggml.model "bert", llama.cpp's WPM) and
 * Unigram ("t5", llama.cpp's UGM), RWKV ("rwkv", at the end).
 *
 * Unigram: the pieces with their scores (a user-defined piece scores 0,
 * as in llama.cpp), the unknown token's id; the normalizer is
 * tokenizer.ggml.precompiled_charsmap (base64: tokenizers' Precompiled
 * reads the very blob llama.cpp reads), then llama.cpp's spaces with
 * remove_extra_whitespaces: runs of spaces one, none at either end; the
 * pre-tokenizer Metaspace puts U+2581 for spaces and before each text
 * between special tokens (add_space_prefix), unsplit: llama.cpp finds the
 * best segmentation of the whole.  Without remove_extra_whitespaces
 * llama.cpp puts its U+2581 before the first character that is no space,
 * Metaspace at the start of the text: absent then (not checked).
 * Framed as add_bos and add_eos say (llama.cpp's default: EOS only).
 *
 * WordPiece: the GGUF holds BERT's vocabulary as llama.cpp's converter
 * writes it: a piece that begins a word with U+2581 before it, one that
 * continues a word ("##x") as "x", the bracketed ones ("[CLS]",
 * "[unused0]") as they are; tokenizer.json has Hugging Face's texts
 * back.  llama.cpp (llm_tokenizer_wpm_session), and what the file says
 * to do the same:
 *   - with strip_accents (tokenizer.ggml.normalizer.strip_accents, else
 *     lowercase, else true): NFD, then every mark (\p{M}) dropped:
 *     normalizers NFD and Replace; BertNormalizer's own stripping drops
 *     only the non-spacing marks (Mn), llama.cpp Mc and Me too;; and
 *     llama.cpp's NFD keeps only a character's first one: a Hangul
 *     syllable is its leading consonant alone (hangul());
 *   - whitespace splits words, control characters (\p{C}), NUL and
 *     U+FFFD are dropped: BertNormalizer's clean_text, but its cleaning
 *     drops \v, \f and U+0085 (controls that are whitespace) where
 *     llama.cpp splits at them: a Replace writes them as spaces first;
 *   - lowercase (tokenizer.ggml.normalizer.lowercase, else true);
 *   - punctuation, ASCII symbols and CJK ideographs are words of their
 *     own: BertNormalizer's handle_chinese_chars and BertPreTokenizer;
 *   - each word the longest pieces from its start, the word-initial one
 *     first, or the unknown token for the whole word: WordPiece, with no
 *     limit of its length (llama.cpp has none: max_input_chars_per_word
 *     past any text the file can hold);
 *   - framed: the BOS (101 by default: [CLS]) and the SEP (102: [SEP])
 *     always (llama.cpp's WPM adds both whatever add_bos and add_sep say).
 */
#include "arr.h"

#include <jansson.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOK "tokenizer.ggml."
#define SPM_SPACE "\xe2\x96\x81" /* U+2581, the converter's word start */

void voc_hf_model_absent(const char *name, size_t len, char *buf, size_t n) {
    static const struct {
        const char *name, *why;
    } why[] = {
        {"plamo2", "PLaMo 2 (llama.cpp's own Aho-Corasick and dynamic "
                   "program over bytes): tokenizers has no such model"},
        {"none", "no vocabulary (llama.cpp's LLAMA_VOCAB_TYPE_NONE)"},
    };
    for (size_t k = 0; k < sizeof why / sizeof *why; k++)
        if (strlen(why[k].name) == len && !memcmp(why[k].name, name, len)) {
            snprintf(buf, n, "the tokenizer model '%s': %s", why[k].name,
                     why[k].why);
            return;
        }
    snprintf(buf, n,
             "the tokenizer model '%.*s' is not one llama.cpp knows (llama, "
             "gpt2, gemma4, bert, t5, rwkv are made; plamo2 is not)",
             (int)(len > 64 ? 64 : len), name);
}

/* Whether token text s (n bytes) is bracketed: kept as it is. */
static bool bracketed(const uint8_t *s, uint64_t n) {
    return n >= 2 && s[0] == '[' && s[n - 1] == ']';
}

/* Token i's Hugging Face text into o (a JSON string), or NULL when it is
 * not UTF-8. */
static json_t *hf_text(const struct voc_index *ix, size_t i, bool special) {
    const uint8_t *s = ix->text[i];
    uint64_t n = ix->len[i];
    if (special || bracketed(s, n))
        return json_stringn((const char *)s, (size_t)n);
    if (n >= 3 && !memcmp(s, SPM_SPACE, 3))
        return json_stringn((const char *)s + 3, (size_t)n - 3);
    char *t = malloc((size_t)n + 3);
    if (!t)
        return NULL;
    memcpy(t, "##", 2);
    memcpy(t + 2, s, (size_t)n);
    json_t *v = json_stringn(t, (size_t)n + 2);
    free(t);
    return v;
}

/* Whether token i is one llama.cpp matches as a special one (types
 * unknown, control, user_defined): *v its type. */
static bool is_special(const struct voc_arr *types, size_t i, uint32_t *v) {
    return types && voc_arr_u32(types, i, v) && *v >= 2 && *v <= 4;
}

static const char *rwkv_reason(const struct voc_index *ix, char *buf, size_t n);

const char *voc_hf_models_reason(const gguf_ctx *ctx,
                                 const struct voc_index *ix, char *buf,
                                 size_t n) {
    struct voc_arr types;
    bool ugm = voc_hf_kind(ctx) == VOC_HF_UGM;
    int64_t unk;
    if (voc_hf_kind(ctx) == VOC_HF_RWKV)
        return rwkv_reason(ix, buf, n);
    if (!voc_int(ctx, TOK "unknown_token_id", &unk))
        unk = ugm ? 2 : 100; /* llama.cpp's defaults */
    if (unk < 0 || (uint64_t)unk >= ix->n)
        return "the unknown token (tokenizer.ggml.unknown_token_id, else "
               "llama.cpp's default) is no token of the vocabulary: "
               "WordPiece and Unigram need one";
    if (ugm)
        return voc_flag(ctx, TOK "remove_extra_whitespaces", false)
                   ? NULL
                   : "Unigram without remove_extra_whitespaces: llama.cpp "
                     "puts U+2581 before a text's first character that is no "
                     "space, Metaspace at its start, and a rule that does "
                     "what llama.cpp does was not checked";
    bool has = voc_arr_of(ctx, TOK "token_type", GGUF_TYPE_INT32, &types);
    for (size_t i = 0; i < ix->n; i++) {
        uint32_t v;
        const uint8_t *s = ix->text[i];
        uint64_t len = ix->len[i];
        if (has && is_special(&types, i, &v))
            continue;
        /* "▁[x]" and "[x]" would both be "[x]" */
        if (len > 3 && !memcmp(s, SPM_SPACE, 3) && bracketed(s + 3, len - 3) &&
            voc_index_find(ix, s + 3, len - 3) >= 0) {
            snprintf(buf, n,
                     "WordPiece: token %zu and a bracketed token have one "
                     "Hugging Face text",
                     i);
            return buf;
        }
    }
    return NULL;
}

/* Appends c's UTF-8 (a character of the BMP) to p; the bytes. */
static size_t utf8(char *p, unsigned c) {
    if (c < 0x80)
        return p[0] = (char)c, 1;
    if (c < 0x800)
        return p[0] = (char)(0xc0 | c >> 6), p[1] = (char)(0x80 | (c & 63)), 2;
    p[0] = (char)(0xe0 | c >> 12);
    p[1] = (char)(0x80 | (c >> 6 & 63));
    p[2] = (char)(0x80 | (c & 63));
    return 3;
}

/* llama.cpp's NFD keeps a character's first one alone: a Hangul
 * syllable becomes its leading consonant.  The syllables of one leading
 * consonant L are a run of 588 (U+AC00 + 588 L ...): 19 Replace
 * normalizers, before NFD (which would split them into jamo that a text
 * may hold of its own too). */
static void hangul(json_t *seq) {
    for (unsigned l = 0; l < 19; l++) {
        char re[16], to[4];
        size_t k = 0;
        re[k++] = '[';
        k += utf8(re + k, 0xac00 + 588 * l);
        re[k++] = '-';
        k += utf8(re + k, 0xac00 + 588 * l + 587);
        re[k++] = ']';
        re[k] = 0;
        to[utf8(to, 0x1100 + l)] = 0;
        json_array_append_new(seq,
                              json_pack("{s:s,s:{s:s},s:s}", "type", "Replace",
                                        "pattern", "Regex", re, "content", to));
    }
}

/* The normalizer: llama.cpp's WPM preprocessing (see the top). */
static json_t *normalizer(bool strip, bool lower) {
    json_t *seq = json_array();
    if (strip) {
        hangul(seq);
        json_array_append_new(seq, json_pack("{s:s}", "type", "NFD"));
        json_array_append_new(seq, json_pack("{s:s,s:{s:s},s:s}", "type",
                                             "Replace", "pattern", "Regex",
                                             "\\p{M}", "content", ""));
    }
    /* llama.cpp lowercases a character at a time by its simple mapping:
     * a final sigma is σ, İ is i (JavaScript's toLowerCase makes ς and
     * i with a dot above) */
    for (int k = 0; lower && k < 2; k++)
        json_array_append_new(seq, json_pack("{s:s,s:{s:s},s:s}", "type",
                                             "Replace", "pattern", "String",
                                             k ? "\xc4\xb0" : "\xce\xa3",
                                             "content", k ? "i" : "\xcf\x83"));
    json_array_append_new(seq, json_pack("{s:s,s:{s:s},s:s}", "type", "Replace",
                                         "pattern", "Regex",
                                         "[\x0b\x0c\xc2\x85]", "content", " "));
    json_array_append_new(
        seq, json_pack("{s:s,s:b,s:b,s:b,s:b}", "type", "BertNormalizer",
                       "clean_text", 1, "handle_chinese_chars", 1,
                       "strip_accents", 0, "lowercase", lower));
    return json_pack("{s:s,s:o}", "type", "Sequence", "normalizers", seq);
}

/* One end's token of the framing: {"SpecialToken":{...}} for type_id k,
 * NULL when id < 0 (none). */
static json_t *end_tok(const struct voc_index *ix, int64_t id, int k) {
    if (id < 0)
        return NULL;
    return json_pack("{s{s:s%,s:i}}", "SpecialToken", "id",
                     (const char *)ix->text[id], (size_t)ix->len[id], "type_id",
                     k);
}

/* TemplateProcessing: first $A last (first $A last $B:1 last:1); a
 * negative id is no token there; null when neither is. */
static json_t *framing(const struct voc_index *ix, int64_t first,
                       int64_t last) {
    if (first < 0 && last < 0)
        return json_null();
    json_t *single = json_array(), *pair = json_array(), *sp = json_object();
    for (int half = 0; half < 2; half++) {
        json_t *arr = half ? pair : single;
        for (int k = 0; k <= half; k++) {
            if (k == 0 && first >= 0)
                json_array_append_new(arr, end_tok(ix, first, 0));
            json_array_append_new(arr,
                                  json_pack("{s{s:s,s:i}}", "Sequence", "id",
                                            k ? "B" : "A", "type_id", k));
            if (last >= 0)
                json_array_append_new(arr, end_tok(ix, last, k));
        }
    }
    int64_t ends[2] = {first, last};
    for (int e = 0; e < 2; e++)
        if (ends[e] >= 0)
            json_object_setn_new(
                sp, (const char *)ix->text[ends[e]], ix->len[ends[e]],
                json_pack("{s:s%,s:[I],s:[s%]}", "id",
                          (const char *)ix->text[ends[e]],
                          (size_t)ix->len[ends[e]], "ids", (json_int_t)ends[e],
                          "tokens", (const char *)ix->text[ends[e]],
                          (size_t)ix->len[ends[e]]));
    return json_pack("{s:s,s:o,s:o,s:o}", "type", "TemplateProcessing",
                     "single", single, "pair", pair, "special_tokens", sp);
}

/* Token i (text t, type v) as an added token of the file: llama.cpp's
 * attributes for WordPiece and Unigram vocabularies (no strip, not
 * normalized; special unless user-defined, type 4). */
static void add_token(json_t *added, size_t i, json_t *t, uint32_t v) {
    json_array_append_new(
        added, json_pack("{s:I,s:O,s:b,s:b,s:b,s:b,s:b}", "id", (json_int_t)i,
                         "content", t, "single_word", 0, "lstrip", 0, "rstrip",
                         0, "normalized", 0, "special", v != 4));
}

/* Key key's id, else llama.cpp's default; -1 past the vocabulary. */
static int64_t id_or(const gguf_ctx *ctx, const char *key, int64_t dflt,
                     size_t n) {
    int64_t id;
    if (!voc_int(ctx, key, &id))
        id = dflt;
    return id >= 0 && (uint64_t)id < n ? id : -1;
}

/* The vocabulary and added tokens into vocab and added; false on a text
 * that is not UTF-8 or out of memory. */
static bool wpm_vocab(const gguf_ctx *ctx, const struct voc_index *ix,
                      json_t *vocab, json_t *added) {
    struct voc_arr types;
    bool has = voc_arr_of(ctx, TOK "token_type", GGUF_TYPE_INT32, &types);
    for (size_t i = 0; i < ix->n; i++) {
        uint32_t v = 1;
        bool sp = has && is_special(&types, i, &v);
        json_t *t = hf_text(ix, i, sp);
        if (!t || json_object_set_new(vocab, json_string_value(t),
                                      json_integer((json_int_t)i))) {
            json_decref(t);
            return false;
        }
        if (sp)
            add_token(added, i, t, v);
        json_decref(t);
    }
    return true;
}

/* BertPreTokenizer, then each CJK ideograph past the BMP a word of its
 * own, as llama.cpp's is_chinese_char makes it (its ranges, 0x2B920 where
 * BERT has 0x2B820, as Hugging Face's Rust code): BertNormalizer does so
 * too, but transformers.js's looks at UTF-16 code units and misses them. */
static json_t *wpm_pre(void) {
    static const char astral[] =
        "[\xf0\xa0\x80\x80-\xf0\xaa\x9b\x9f"  /* 20000-2A6DF */
        "\xf0\xaa\x9c\x80-\xf0\xab\x9c\xbf"   /* 2A700-2B73F */
        "\xf0\xab\x9d\x80-\xf0\xab\xa0\x9f"   /* 2B740-2B81F */
        "\xf0\xab\xa4\xa0-\xf0\xac\xba\xaf"   /* 2B920-2CEAF */
        "\xf0\xaf\xa0\x80-\xf0\xaf\xa8\x9f]"; /* 2F800-2FA1F */
    return json_pack("{s:s,s:[{s:s},{s:s,s:{s:s},s:s,s:b}]}", "type",
                     "Sequence", "pretokenizers", "type", "BertPreTokenizer",
                     "type", "Split", "pattern", "Regex", astral, "behavior",
                     "Isolated", "invert", 0);
}

/* The document: its parts (each reference taken) in Hugging Face's
 * order, dumped into b (GGUF_E_RANGE past max bytes). */
static enum gguf_status emit(json_t *added, json_t *norm, json_t *pre,
                             json_t *post, json_t *dec, json_t *model,
                             uint64_t max, struct gguf_buf *b) {
    json_t *doc =
        json_pack("{s:s,s:n,s:n,s:o,s:o,s:o,s:o,s:o,s:o}", "version", "1.0",
                  "truncation", "padding", "added_tokens", added, "normalizer",
                  norm, "pre_tokenizer", pre, "post_processor",
                  post ? post : json_null(), "decoder", dec, "model", model);
    if (!doc)
        return GGUF_E_NOMEM;
    return voc_json_put(b, doc, JSON_INDENT(1) | JSON_PRESERVE_ORDER, max,
                        "\n");
}

/* Fills *vocab (a fresh object or array, NULL when out of memory; taken
 * over) and a fresh *added by fill: false, both freed, when out of memory. */
typedef bool vocab_fill(const gguf_ctx *ctx, const struct voc_index *ix,
                        json_t *vocab, json_t *added);
static bool new_vocab(const gguf_ctx *ctx, const struct voc_index *ix,
                      vocab_fill *fill, json_t **vocab, json_t **added) {
    *added = json_array();
    if (*vocab && *added && fill(ctx, ix, *vocab, *added))
        return true;
    json_decref(*vocab);
    json_decref(*added);
    return false;
}

enum gguf_status voc_hf_wpm_json(const gguf_ctx *ctx,
                                 const struct voc_index *ix, uint64_t max,
                                 struct gguf_buf *b) {
    bool lower = voc_flag(ctx, TOK "normalizer.lowercase", true);
    bool strip = voc_flag(ctx, TOK "normalizer.strip_accents", lower);
    int64_t unk = id_or(ctx, TOK "unknown_token_id", 100, ix->n);
    json_t *vocab = json_object(), *added;
    if (!new_vocab(ctx, ix, wpm_vocab, &vocab, &added))
        return GGUF_E_NOMEM;
    json_t *unk_text =
        unk < 0 ? json_null()
                : json_stringn((const char *)ix->text[unk], ix->len[unk]);
    json_t *model = json_pack(
        "{s:s,s:o,s:s,s:I,s:o}", "type", "WordPiece", "unk_token",
        unk_text ? unk_text : json_null(), "continuing_subword_prefix", "##",
        "max_input_chars_per_word", (json_int_t)1 << 40, "vocab", vocab);
    return emit(added, normalizer(strip, lower), wpm_pre(),
                framing(ix, voc_bos_id(ctx),
                        id_or(ctx, TOK "seperator_token_id", 102, ix->n)),
                json_pack("{s:s,s:s,s:b}", "type", "WordPiece", "prefix", "##",
                          "cleanup", 1),
                model, max, b);
}

/* Unigram's vocabulary ([text, score] by id) and added tokens. */
static bool ugm_vocab(const gguf_ctx *ctx, const struct voc_index *ix,
                      json_t *vocab, json_t *added) {
    struct voc_arr types, scores;
    bool has = voc_arr_of(ctx, TOK "token_type", GGUF_TYPE_INT32, &types);
    bool sc = voc_arr_of(ctx, TOK "scores", GGUF_TYPE_FLOAT32, &scores);
    for (size_t i = 0; i < ix->n; i++) {
        uint32_t v = 1, bits = 0;
        float f = 0;
        bool spc = has && is_special(&types, i, &v);
        if (sc && voc_arr_u32(&scores, i, &bits))
            memcpy(&f, &bits, 4);
        /* llama.cpp scores a user-defined piece 0 */
        json_t *t = json_stringn((const char *)ix->text[i], ix->len[i]);
        if (!t || json_array_append_new(
                      vocab, json_pack("[O,f]", t, v == 4 ? 0.0 : (double)f))) {
            json_decref(t);
            return false;
        }
        if (spc)
            add_token(added, i, t, v);
        json_decref(t);
    }
    return true;
}

/* tokenizer.ggml.precompiled_charsmap as base64 (libcrypto's
 * EVP_EncodeBlock), or NULL when the model has none (u8 or i8 array). */
static json_t *charsmap(const gguf_ctx *ctx) {
    struct voc_arr a;
    if (!voc_arr_of(ctx, TOK "precompiled_charsmap", GGUF_TYPE_UINT8, &a) &&
        !voc_arr_of(ctx, TOK "precompiled_charsmap", GGUF_TYPE_INT8, &a))
        return NULL;
    if (!a.n || a.n > (uint64_t)(a.end - a.p) || a.n > INT_MAX / 2)
        return NULL;
    unsigned char *out = malloc(4 * ((size_t)a.n + 2) / 3 + 1);
    if (!out)
        return NULL;
    int len = EVP_EncodeBlock(out, a.p, (int)a.n);
    json_t *v = json_stringn((const char *)out, (size_t)len);
    free(out);
    return v;
}

/* The normalizer of llama.cpp's UGM: the charsmap, then its spaces:
 * runs of spaces one, none at the ends (remove_extra_whitespaces). */
static json_t *ugm_normalizer(const gguf_ctx *ctx) {
    json_t *seq = json_array(), *cm = charsmap(ctx);
    if (cm)
        json_array_append_new(seq, json_pack("{s:s,s:o}", "type", "Precompiled",
                                             "precompiled_charsmap", cm));
    if (voc_flag(ctx, TOK "remove_extra_whitespaces", false)) {
        json_array_append_new(seq, json_pack("{s:s,s:{s:s},s:s}", "type",
                                             "Replace", "pattern", "Regex",
                                             " {2,}", "content", " "));
        json_array_append_new(seq, json_pack("{s:s,s:{s:s},s:s}", "type",
                                             "Replace", "pattern", "Regex",
                                             "^ | $", "content", ""));
    }
    return json_pack("{s:s,s:o}", "type", "Sequence", "normalizers", seq);
}

enum gguf_status voc_hf_ugm_json(const gguf_ctx *ctx,
                                 const struct voc_index *ix, uint64_t max,
                                 struct gguf_buf *b) {
    bool prefix = voc_flag(ctx, TOK "add_space_prefix", true);
    int64_t unk = id_or(ctx, TOK "unknown_token_id", 2, ix->n);
    json_t *vocab = json_array(), *added;
    if (!new_vocab(ctx, ix, ugm_vocab, &vocab, &added))
        return GGUF_E_NOMEM;
    json_t *model =
        json_pack("{s:s,s:I,s:o,s:b}", "type", "Unigram", "unk_id",
                  (json_int_t)unk, "vocab", vocab, "byte_fallback", 0);
    json_t *meta = json_pack("{s:s,s:s,s:s,s:b}", "type", "Metaspace",
                             "replacement", SPM_SPACE, "prepend_scheme",
                             prefix ? "always" : "never", "split", 0);
    return emit(added, ugm_normalizer(ctx), meta,
                framing(ix, voc_add_bos(ctx) ? voc_bos_id(ctx) : -1,
                        voc_add_eos(ctx) ? voc_eos_id(ctx) : -1),
                json_pack("{s:s,s:s,s:s,s:b}", "type", "Metaspace",
                          "replacement", SPM_SPACE, "prepend_scheme",
                          prefix ? "always" : "never", "split", 0),
                model, max, b);
}

/* RWKV (tokenizer.ggml.model "rwkv", llama.cpp's llm_tokenizer_rwkv): a
 * trie of every token's unescaped bytes, each text the longest token at
 * its position, from the left, over the raw bytes.  tokenizers: ByteLevel
 * without its expression (the whole text one word, each byte a
 * character, no space added), WordPiece over the tokens' ByteLevel texts
 * with no prefix and no length limit (the longest vocabulary entry from
 * the word's start, then from its end, ...: the trie's walk), the
 * ByteLevel decoder.  The same only while every single byte is a token
 * (llama.cpp then always finds one; else it emits its unknown token for
 * a byte or, where a longer token starts there, does not advance, and
 * WordPiece makes the whole text unknown): absent otherwise.  A text
 * two tokens share after unescaping names the later id in both (the
 * trie's insert and the JSON object's).  Framed as add_bos and add_eos
 * say (llama.cpp's default: neither).  WordPiece's search costs what the
 * trie's does not: every end from the word's end back at each position,
 * a substring each (cubic in a text's length: transformers.js takes 7 s
 * on 2000 characters); ggufs(1) says so. */

/* llama.cpp's llama_unescape_rwkv_token: \t \n \r, \xHH, \c as c (a
 * trailing \ dropped), into out (NULL: only counted); the length, or -1
 * on a \x not followed by two of 0-9a-f (llama.cpp's digit rule then
 * depends on the platform's char). */
static int64_t rwkv_unescape(const uint8_t *s, uint64_t n, uint8_t *out) {
    int64_t k = 0;
    unsigned hex = 0, esc = 0, acc = 0;
    for (uint64_t i = 0; i < n; i++) {
        unsigned c = s[i];
        if (hex) {
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
                return -1;
            acc = acc << 4 | (c >= 'a' ? c - 'a' + 10 : c - '0');
            if (--hex)
                continue;
            c = acc & 0xff, acc = 0;
        } else if (esc) {
            esc = 0;
            if (c == 'x') {
                hex = 2;
                continue;
            }
            c = c == 't' ? '\t' : c == 'n' ? '\n' : c == 'r' ? '\r' : c;
        } else if (c == '\\') {
            esc = 1;
            continue;
        }
        if (out) /* NULL: only the length */
            out[k] = (uint8_t)c;
        k++;
    }
    return k;
}

/* Why an RWKV vocabulary has no tokenizer.json (into buf), or NULL. */
static const char *rwkv_reason(const struct voc_index *ix, char *buf,
                               size_t n) {
    bool byte[256] = {false};
    uint8_t one[1];
    for (size_t i = 0; i < ix->n; i++) {
        int64_t k = rwkv_unescape(ix->text[i], ix->len[i], NULL);
        if (k < 0) {
            snprintf(buf, n,
                     "RWKV: token %zu has a \\x escape without two hex "
                     "digits 0-9a-f",
                     i);
            return buf;
        }
        if (k == 1 && rwkv_unescape(ix->text[i], ix->len[i], one) == 1)
            byte[one[0]] = true;
    }
    for (unsigned b = 0; b < 256; b++)
        if (!byte[b]) {
            snprintf(buf, n,
                     "RWKV: byte 0x%02x is no token of its own: llama.cpp "
                     "emits its unknown token there (or stops advancing), "
                     "WordPiece would make the whole text unknown",
                     b);
            return buf;
        }
    return NULL;
}

/* ByteLevel's character of byte b (GPT-2's bytes_to_unicode). */
static unsigned byte_char(unsigned b) {
    unsigned shift = 0;
    for (unsigned c = 0; c < b; c++)
        shift += !((c >= '!' && c <= '~') || (c >= 0xa1 && c <= 0xac) ||
                   (c >= 0xae));
    bool kept =
        (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
    return kept ? b : 256 + shift;
}

/* The vocabulary (ByteLevel texts of the unescaped bytes) and the added
 * tokens (their texts as they are: llama.cpp matches those). */
static bool rwkv_vocab(const gguf_ctx *ctx, const struct voc_index *ix,
                       json_t *vocab, json_t *added) {
    struct voc_arr types;
    bool has = voc_arr_of(ctx, TOK "token_type", GGUF_TYPE_INT32, &types);
    unsigned map[256];
    for (unsigned b = 0; b < 256; b++)
        map[b] = byte_char(b);
    for (size_t i = 0; i < ix->n; i++) {
        uint32_t v = 1;
        uint8_t *raw = malloc((size_t)ix->len[i] + 1);
        char *t = malloc(2 * (size_t)ix->len[i] + 1);
        int64_t k = raw ? rwkv_unescape(ix->text[i], ix->len[i], raw) : -1;
        size_t m = 0;
        for (int64_t j = 0; t && j < k; j++)
            m += utf8(t + m, map[raw[j]]);
        bool ok =
            t && k >= 0 &&
            !json_object_setn_new(vocab, t, m, json_integer((json_int_t)i));
        free(raw);
        free(t);
        if (ok && has && is_special(&types, i, &v)) {
            json_t *s = json_stringn((const char *)ix->text[i], ix->len[i]);
            ok = s != NULL;
            if (ok)
                add_token(added, i, s, v);
            json_decref(s);
        }
        if (!ok)
            return false;
    }
    return true;
}

enum gguf_status voc_hf_rwkv_json(const gguf_ctx *ctx,
                                  const struct voc_index *ix, uint64_t max,
                                  struct gguf_buf *b) {
    json_t *vocab = json_object(), *added;
    if (!new_vocab(ctx, ix, rwkv_vocab, &vocab, &added))
        return GGUF_E_NOMEM;
    json_t *model = json_pack("{s:s,s:s,s:s,s:I,s:o}", "type", "WordPiece",
                              "unk_token", "[UNK]", "continuing_subword_prefix",
                              "", "max_input_chars_per_word",
                              (json_int_t)1 << 40, "vocab", vocab);
    return emit(
        added, json_null(),
        json_pack("{s:s,s:b,s:b,s:b}", "type", "ByteLevel", "add_prefix_space",
                  0, "trim_offsets", 0, "use_regex", 0),
        framing(ix, voc_add_bos(ctx) ? voc_bos_id(ctx) : -1,
                voc_add_eos(ctx) ? voc_eos_id(ctx) : -1),
        json_pack("{s:s,s:b,s:b,s:b}", "type", "ByteLevel", "add_prefix_space",
                  0, "trim_offsets", 0, "use_regex", 0),
        model, max, b);
}
