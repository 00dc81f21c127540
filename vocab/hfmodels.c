/*
 * hfmodels.c - hf/tokenizer.json for llama.cpp's tokenizer models other
 * than BPE (vocab.h; hfcheck.c lets them through, hfjson.c hands them
 * here): WordPiece (tokenizer.ggml.model "bert", llama.cpp's WPM).
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOK "tokenizer.ggml."
#define SPM_SPACE "\xe2\x96\x81" /* U+2581, the converter's word start */

void voc_hf_model_absent(const char *name, size_t len, char *buf, size_t n) {
    static const struct {
        const char *name, *why;
    } why[] = {
        {"t5", "Unigram (llama.cpp's UGM): not made here; its normalization "
               "(tokenizer.ggml.precompiled_charsmap, llama.cpp's own "
               "reading of it) and llama.cpp's best segmentation were not "
               "checked against a tokenizers Unigram model"},
        {"rwkv", "RWKV (llama.cpp's greedy longest match over the raw bytes "
                 "of escaped token texts): not made here; tokenizers has no "
                 "byte-level longest match but WordPiece over ByteLevel "
                 "characters, not checked against llama.cpp"},
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
             "gpt2, bert are made; t5, rwkv, plamo2 are not)",
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

const char *voc_hf_wpm_reason(const gguf_ctx *ctx, const struct voc_index *ix,
                              char *buf, size_t n) {
    struct voc_arr types;
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

/* TemplateProcessing: [BOS] $A [SEP] ([BOS] $A [SEP] $B:1 [SEP]:1). */
static json_t *framing(const struct voc_index *ix, int64_t bos, int64_t sep) {
    if (bos < 0 || sep < 0)
        return json_null();
    json_t *b = json_stringn((const char *)ix->text[bos], ix->len[bos]);
    json_t *s = json_stringn((const char *)ix->text[sep], ix->len[sep]);
    if (!b || !s) {
        json_decref(b);
        json_decref(s);
        return NULL;
    }
    json_t *single =
        json_pack("[{s{s:O,s:i}},{s{s:s,s:i}},{s{s:O,s:i}}]", "SpecialToken",
                  "id", b, "type_id", 0, "Sequence", "id", "A", "type_id", 0,
                  "SpecialToken", "id", s, "type_id", 0);
    json_t *pair = json_pack(
        "[{s{s:O,s:i}},{s{s:s,s:i}},{s{s:O,s:i}},{s{s:s,s:i}},{s{s:O,s:i}}]",
        "SpecialToken", "id", b, "type_id", 0, "Sequence", "id", "A", "type_id",
        0, "SpecialToken", "id", s, "type_id", 0, "Sequence", "id", "B",
        "type_id", 1, "SpecialToken", "id", s, "type_id", 1);
    json_t *sp = json_object();
    json_object_set_new(sp, json_string_value(b),
                        json_pack("{s:O,s:[I],s:[O]}", "id", b, "ids",
                                  (json_int_t)bos, "tokens", b));
    json_object_set_new(sp, json_string_value(s),
                        json_pack("{s:O,s:[I],s:[O]}", "id", s, "ids",
                                  (json_int_t)sep, "tokens", s));
    json_decref(b);
    json_decref(s);
    return json_pack("{s:s,s:o,s:o,s:o}", "type", "TemplateProcessing",
                     "single", single, "pair", pair, "special_tokens", sp);
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
            json_array_append_new(
                added,
                json_pack("{s:I,s:O,s:b,s:b,s:b,s:b,s:b}", "id", (json_int_t)i,
                          "content", t, "single_word", 0, "lstrip", 0, "rstrip",
                          0, "normalized", 0, "special", v != 4));
        json_decref(t);
    }
    return true;
}

enum gguf_status voc_hf_wpm_json(const gguf_ctx *ctx,
                                 const struct voc_index *ix, uint64_t max,
                                 struct gguf_buf *b) {
    bool lower = voc_flag(ctx, TOK "normalizer.lowercase", true);
    bool strip = voc_flag(ctx, TOK "normalizer.strip_accents", lower);
    int64_t unk = id_or(ctx, TOK "unknown_token_id", 100, ix->n);
    json_t *vocab = json_object(), *added = json_array();
    if (!vocab || !added || !wpm_vocab(ctx, ix, vocab, added)) {
        json_decref(vocab);
        json_decref(added);
        return GGUF_E_NOMEM;
    }
    json_t *unk_text =
        unk < 0 ? json_null()
                : json_stringn((const char *)ix->text[unk], ix->len[unk]);
    json_t *model = json_pack(
        "{s:s,s:o,s:s,s:I,s:o}", "type", "WordPiece", "unk_token",
        unk_text ? unk_text : json_null(), "continuing_subword_prefix", "##",
        "max_input_chars_per_word", (json_int_t)1 << 40, "vocab", vocab);
    json_t *post = framing(ix, id_or(ctx, TOK "bos_token_id", 101, ix->n),
                           id_or(ctx, TOK "seperator_token_id", 102, ix->n));
    json_t *doc = json_pack(
        "{s:s,s:n,s:n,s:o,s:o,s:{s:s},s:o,s:{s:s,s:s,s:b},s:o}", "version",
        "1.0", "truncation", "padding", "added_tokens", added, "normalizer",
        normalizer(strip, lower), "pre_tokenizer", "type", "BertPreTokenizer",
        "post_processor", post ? post : json_null(), "decoder", "type",
        "WordPiece", "prefix", "##", "cleanup", 1, "model", model);
    if (!doc)
        return GGUF_E_NOMEM;
    char *s = json_dumps(doc, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(doc);
    if (!s)
        return GGUF_E_NOMEM;
    size_t len = strlen(s);
    enum gguf_status st =
        len + 1 > max ? GGUF_E_RANGE : gguf_buf_add(b, s, len);
    free(s);
    return st == GGUF_OK ? gguf_buf_add(b, "\n", 1) : st;
}
