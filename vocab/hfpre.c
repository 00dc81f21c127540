/*
 * hfpre.c - llama.cpp's byte-level BPE pre-tokenizers (its llama-vocab.cpp:
 * the tokenizer.ggml.pre names of each LLAMA_VOCAB_PRE_TYPE_*, the regular
 * expressions llm_tokenizer_bpe splits text by, in the order it applies
 * them, and the settings each sets: ignore_merges, the default add_bos,
 * no default BOS id (chatglm's)) as hf/tokenizer.json writes them
 * (vocab.h, voc_hf_pre): one Split pre-tokenizer (behavior Isolated: matches and the text between
 * them both kept, as unicode_regex_split keeps them) a regular expression,
 * then ByteLevel without its own expression.  The expressions are
 * llama.cpp's own, where it adapted the model's (its "(?:'[sS]|...)" for
 * "(?i:'s|...)"), since they are what it applies; but where llama.cpp
 * runs code for a placeholder expression (DIGITS, KIMI), that code, and
 * superbpe's split at empty matches as the pieces it makes (SUPERBPE).
 * gemma4, granite-embed-multi-311m and sarvam-moe are BPE over the raw
 * UTF-8 with spaces as U+2581 (utf8): a Replace normalizer, their Split,
 * byte fallback; llama.cpp takes gemma4's word of newlines whole where it
 * is a token, which its merges make too (mount_hfvocab judges it).
 */
#include "arr.h"

#include <pthread.h>
#include <string.h>

#define CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define GPT2                                                                    \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!" \
    "\\S)"
#define TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define LLAMA3 CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}" TAIL
#define QWEN2 CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" TAIL
#define DS3_MAIN                                                                \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}"  \
    "\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|" \
    "\\s+"
#define CJK_KANA                                                               \
    "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+"
#define CJK_HANGUL                                                             \
    "[\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80\xea\xb0\x80-\xed\x9f\xbf]+"
#define UPPER_LOWER_O200K(ext)                                                 \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}" ext "])([^a-z]))*((?=[\\p{L}" ext      \
    "])([^A-Z]))+" CONTRACTIONS "?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}" ext      \
    "])([^a-z]))+((?=[\\p{L}" ext "])([^A-Z]))*" CONTRACTIONS                  \
    "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|" \
    "\\s+"
#define CASED                                                                  \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{"  \
    "Lm}\\p{Lo}\\p{M}]+" CONTRACTIONS "?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{"   \
    "Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" CONTRACTIONS "?"
#define BLOOM                                                                  \
    " ?[^(\\s|.,!?\xe2\x80\xa6\xe3\x80\x82\xef\xbc\x8c\xe3\x80\x81\xe0\xa5\xa4\xdb\x94\xd8\x8c)]+"

/* llama.cpp's hand-written digit splitter (unicode.cpp, run for afmoe's
 * "\\p{AFMoE_digits}" and for tiny_aya's "\\d{1,3}(?=(?:\\d{3})*\\b)"):
 * a run of \\p{N} cut into len % 3 digits then threes, the text before a
 * run kept in one piece with its first group, the text after the last
 * run a piece of its own.  As one expression: each match is the text
 * before a group and the group; the last alternative takes the text
 * after the last run at once (so that no search rescans it: linear),
 * (?![\\s\\S]) being the end in JavaScript's and Oniguruma's syntax
 * alike. */
#define DIGITS                                                                 \
    "[^\\p{N}]*\\p{N}{1,3}(?=(?:\\p{N}{3})*(?!\\p{N}))|[^\\p{N}]+(?![\\s\\S])"

/* llama.cpp's kimi-k2 splitter (unicode.cpp, run for its placeholder
 * "\\p{Han}+"), as one expression: a run of its Han ranges
 * (unicode_cpt_is_han), a word of letters that are not Han (\\p{L}: the
 * code counts no mark as a letter, nor case) after at most one character
 * that is no letter, digit, \\r or \\n, with a contraction of any case;
 * then llama 3's digits, punctuation and spaces. */
#define HAN                                                                    \
    "[\xe4\xb8\x80-\xe9\xbf\xbf\xe3\x90\x80-\xe4\xb6\xbf\xf0\xa0\x80\x80-"     \
    "\xf0\xaa\x9b\x9f\xf0\xaa\x9c\x80-\xf0\xab\x9c\xbf\xf0\xab\x9d\x80-"       \
    "\xf0\xab\xa0\x9f\xf0\xab\xa0\xa0-\xf0\xac\xba\xaf\xf0\xac\xba\xb0-"       \
    "\xf0\xae\xaf\xaf\xef\xa4\x80-\xef\xab\xbf\xf0\xaf\xa0\x80-"               \
    "\xf0\xaf\xa8\x9f]"
#define KIMI                                                                   \
    HAN "+|[^\\r\\n\\p{L}\\p{N}]?(?:(?!" HAN ")\\p{L})+" CONTRACTIONS          \
        "?|\\p{N}{1,3}" TAIL

/* superbpe's second expression, "(?=(\\d{3})+(?!\\d))", matches only
 * empty strings: llama.cpp splits the text at each (std::wregex in the C
 * locale: \\d is ASCII's), tokenizers' Split would not.  So: a piece is a
 * character and those after it before which no such split is. */
#define SUPERBPE "[\\s\\S](?:(?!(?:[0-9]{3})+(?![0-9]))[\\s\\S])*"

/* DeepSeek LLM's letters: llama.cpp's class of the cased letters. */
#define DS_LETTERS                                                             \
    "\\s?[A-Za-z\xc2\xb5\xc3\x80-\xc3\x96\xc3\x98-\xc3\xb6\xc3\xb8-\xc6\xba"   \
    "\xc6\xbc-\xc6\xbf\xc7\x84-\xca\x93\xca\x95-\xca\xaf\xcd\xb0-\xcd\xb3\xcd" \
    "\xb6\xcd\xb7\xcd\xbb-\xcd\xbd\xcd\xbf\xce\x86\xce\x88-\xce\x8a\xce\x8c"   \
    "\xce\x8e-\xce\xa1\xce\xa3-\xcf\xb5\xcf\xb7-\xd2\x81\xd2\x8a-\xd4\xaf\xd4" \
    "\xb1-\xd5\x96\xe1\x82\xa0-\xe1\x83\x85\xe1\x8e\xa0-\xe1\x8f\xb5\xe1\x8f"  \
    "\xb8-\xe1\x8f\xbd\xe1\xb2\x90-\xe1\xb2\xba\xe1\xb2\xbd-\xe1\xb2\xbf\xe1"  \
    "\xb4\x80-\xe1\xb4\xab\xe1\xb5\xab-\xe1\xb5\xb7\xe1\xb5\xb9-\xe1\xb6\x9a"  \
    "\xe1\xb8\x80-\xe1\xbc\x95\xe1\xbc\x98-\xe1\xbc\x9d\xe1\xbc\xa0-\xe1\xbd"  \
    "\x85\xe1\xbd\x88-\xe1\xbd\x8d\xe1\xbd\x90-\xe1\xbd\x97\xe1\xbd\x99\xe1"   \
    "\xbd\x9b\xe1\xbd\x9d\xe1\xbd\x9f-\xe1\xbd\xbd\xe1\xbe\x80-\xe1\xbe\xb4"   \
    "\xe1\xbe\xb6-\xe1\xbe\xbc\xe1\xbe\xbe\xe1\xbf\x82-\xe1\xbf\x84\xe1\xbf"   \
    "\x86-\xe1\xbf\x8c\xe1\xbf\x90-\xe1\xbf\x93\xe1\xbf\x96-\xe1\xbf\x9b\xe1"  \
    "\xbf\xa0-\xe1\xbf\xac\xe1\xbf\xb2-\xe1\xbf\xb4\xe1\xbf\xb6-\xe1\xbf\xbc"  \
    "\xe2\x84\x82\xe2\x84\x87\xe2\x84\x8a-\xe2\x84\x93\xe2\x84\x95\xe2\x84"    \
    "\x99-\xe2\x84\x9d\xe2\x84\xa4\xe2\x84\xa6\xe2\x84\xa8\xe2\x84\xaa-\xe2"   \
    "\x84\xad\xe2\x84\xaf-\xe2\x84\xb4\xe2\x84\xb9\xe2\x84\xbc-\xe2\x84\xbf"   \
    "\xe2\x85\x85-\xe2\x85\x89\xe2\x85\x8e\xe2\x86\x83\xe2\x86\x84\xe2\xb0"    \
    "\x80-\xe2\xb1\xbb\xe2\xb1\xbe-\xe2\xb3\xa4\xe2\xb3\xab-\xe2\xb3\xae\xe2"  \
    "\xb3\xb2\xe2\xb3\xb3\xea\x99\x80-\xea\x99\xad\xea\x9a\x80-\xea\x9a\x9b"   \
    "\xea\x9c\xa2-\xea\x9d\xaf\xea\x9d\xb1-\xea\x9e\x87\xea\x9e\x8b-\xea\x9e"  \
    "\x8e\xea\xad\xb0-\xea\xae\xbf\xef\xac\x80-\xef\xac\x86\xef\xac\x93-\xef"  \
    "\xac\x97\xef\xbc\xa1-\xef\xbc\xba\xef\xbd\x81-\xef\xbd\x9a\xf0\x90\x90"   \
    "\x80-\xf0\x90\x91\x8f\xf0\x90\x92\xb0-\xf0\x90\x93\x93\xf0\x90\x93\x98-"  \
    "\xf0\x90\x93\xbb\xf0\x90\xb2\x80-\xf0\x90\xb2\xb2\xf0\x90\xb3\x80-\xf0"   \
    "\x90\xb3\xb2\xf0\x91\xa2\xa0-\xf0\x91\xa3\x9f\xf0\x9e\xa4\x80-\xf0\x9e"   \
    "\xa5\x83]+"

/* names, expressions, ignore_merges, add_bos, no_bos (arr.h). */
static const struct voc_pre pres[] = {
    {"default",
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2, "\\p{N}+", "[0-9][0-9][0-9]"},
     0,
     0,
     0},
    {"llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2 "
     "jina-v5-nano",
     {LLAMA3},
     1,
     1,
     0},
    {"minicpm5",
     {"\\p{N}{1,3}",
      CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+" TAIL},
     1,
     0,
     0},
    {"dbrx smaug-bpe", {LLAMA3}, 0, 0, 0},
    {"glm4 chatglm-bpe", {LLAMA3}, 0, 0, 1},
    {"jais-2",
     {CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}"
                   "\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}"
                   "(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|"
                   "\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!"
                   "\\S)|\\s{1}"},
     0,
     0,
     0},
    {"deepseek-llm",
     {"[\r\n]", DS_LETTERS,
      "\\s?[!-/:-~\xef\xbc\x81-\xef\xbc\x8f\xef\xbc\x9a-\xef\xbd\x9e\xe2\x80"
      "\x98-\xe2\x80\x9f\xe3\x80\x80-\xe3\x80\x82]+",
      "\\s+$", CJK_HANGUL, "\\p{N}+"},
     0,
     0,
     0},
    {"deepseek-v3 hunyuan-dense joyai-llm hy_v4",
     {"\\p{N}{1,3}", CJK_KANA, DS3_MAIN},
     0,
     0,
     0},
    {"spark2_5",
     {"\\p{N}{1,3}", CJK_KANA,
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{"
      "P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
      "\\p{N}"},
     0,
     0,
     0},
    {"deepseek-coder",
     {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", CJK_HANGUL, "\\p{N}"},
     0,
     0,
     0},
    {"falcon",
     {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2, "[0-9][0-9][0-9]"},
     0,
     0,
     0},
    {"starcoder refact command-r smollm codeshell exaone minerva-7b mellum2",
     {"\\p{N}", GPT2},
     0,
     0,
     0},
    {"gpt-2 phi-2 jina-es jina-de gigachat jina-v2-es jina-v2-de a.x-4.0 "
     "mellum modern-bert jina-v1-en jina-v2-code roberta-bpe mpt olmo jais "
     "trillion granite-docling exaone4",
     {GPT2},
     0,
     0,
     0},
    {"qwen2 deepseek-r1-qwen kormo f2llmv2 megrez stablelm2 hunyuan "
     "solar-open grok-2",
     {QWEN2},
     0,
     0,
     0},
    {"qwen35",
     {CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{"
                   "L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     0,
     0,
     0},
    {"poro-chat bloom gpt3-finnish", {BLOOM}, 0, 0, 0},
    {"viking", {BLOOM, "\\p{N}"}, 0, 0, 0},
    {"tekken",
     {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|"
      "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|"
      "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     1,
     1,
     0},
    {"chameleon",
     {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
      "([\\t\\n]|    |  )", "\\p{N}", "[\\p{P}!-/:-@\\[-`{-~]", GPT2},
     0,
     1,
     0},
    {"gpt-4o llama4 kanana2 talkie minimax-m2",
     {UPPER_LOWER_O200K("")},
     0,
     0,
     0},
    {"granite-embed-multi-97m", {UPPER_LOWER_O200K("\\p{M}")}, 1, 0, 0},
    {"tiny_aya cohere2moe",
     {DIGITS,
      CASED "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+"
            "(?!\\S)|\\s+"},
     0,
     0,
     0},
    {"afmoe",
     {DIGITS,
      "[\xe4\xb8\x80-\xe9\xbf\xbf\xe3\x90\x80-\xe4\xb6\xbf\xe8\xb1\x88-"
      "\xef\xab\xbf\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf"
      "\xef\xbd\xa5-\xef\xbe\x9f\xe2\xbc\x80-\xe2\xbf\x9f\xe0\xb9\x80-"
      "\xe0\xb9\xbf\xe0\xba\x80-\xe0\xbb\xbf\xe1\x9e\x80-\xe1\x9f\xbf"
      "\xe1\x80\x80-\xe1\x82\x9f\xea\xa9\xa0-\xea\xa9\xbf\xea\xa7\xa0-"
      "\xea\xa7\xbf\xea\xb0\x80-\xed\x9e\xaf\xe1\x84\x80-\xe1\x87\xbf]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}"
      "\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|"
      "\\s+(?!\\S)|\\s+"},
     0,
     0,
     0},
    {"kimi-k2", {KIMI}, 0, 0, 0},
    {"superbpe", {"\\p{N}+", SUPERBPE}, 0, 0, 0},
    {"youtu",
     {"[\xea\xb0\x80-\xed\x9e\xa3\xe3\x84\xb1-\xe3\x86\x8e]+|[\xef\xbc\x81"
      "\xe2\x80\xa6\xe2\x80\x9c\xe2\x80\x9d\xe2\x80\x98\xe2\x80\x99\xe2\x80"
      "\x94\xef\xbc\x9a\xef\xbc\x9b\xef\xbc\x8c\xe3\x80\x81-\xe3\x80\xbf\xef"
      "\xb8\xb0-\xef\xb9\x8f]+|[\xe3\x84\x85-\xe3\x84\xaf]+|" CJK_KANA,
      CASED "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)"
            "|\\s+"},
     1,
     0,
     0},
    {"bailingmoe bailingmoe2 llada-moe",
     {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{"
      "L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|"
      "\\s+"},
     0,
     0,
     0},
    {"seed-coder",
     {CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{"
                   "N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     0,
     0,
     0},
    {"ufakzeka", {"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" TAIL}, 0, 0, 0},
    {"laguna", {"[^\\n]+|[\\n]+", QWEN2}, 0, 0, 0},
    {"gemma4 granite-embed-multi-311m", {"[^\\n]+|[\\n]+"}, 0, 1, 0, 1, 1},
    {"sarvam-moe", {"[^\\n]+|[\\n]+"}, 0, 0, 0, 1, 0},
    {"exaone-moe",
     {CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*"
                   ")+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|"
                   "\\s+(?!\\S)|\\s+"},
     0,
     0,
     0},
};

static bool has_name(const char *names, const char *p, size_t n) {
    for (const char *s = names; *s;) {
        size_t k = strcspn(s, " ");
        if (k == n && memcmp(s, p, n) == 0)
            return true;
        s += k;
        s += *s == ' ';
    }
    return false;
}

/* tokenizer.ggml.pre ("default" when absent), "gemma4" for the model
 * gemma4 (llama.cpp sets it so whatever the key says). */
static void pre_name(const gguf_ctx *ctx, const char **p, size_t *n) {
    int64_t m = gguf_find_key(ctx, "tokenizer.ggml.model", 20);
    int64_t k = gguf_find_key(ctx, "tokenizer.ggml.pre", 18);
    if (m >= 0 && gguf_kv_get_str(ctx, m, p, n) && *n == 6 &&
        memcmp(*p, "gemma4", 6) == 0)
        return;
    if (k < 0 || !gguf_kv_get_str(ctx, k, p, n))
        *p = "default", *n = 7;
}

const struct voc_pre *voc_hf_pre(const gguf_ctx *ctx, const char **why) {
    const char *p;
    size_t n;
    pre_name(ctx, &p, &n);
    for (size_t i = 0; i < sizeof pres / sizeof *pres; i++)
        if (has_name(pres[i].names, p, n))
            return &pres[i];
    *why = NULL; /* every name llama.cpp knows is mapped */
    return NULL;
}

/* The texts llama.cpp makes control tokens whatever their type (its
 * "control-looking" tokens, llama-vocab.cpp): the end-of-generation ones
 * always; the fill-in-the-middle ones while the GGUF names no token of
 * that kind (key).  They are matched in text as the special tokens are. */
static const char *const eog[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<\xef\xbd\x9c"
    "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "[e~[",
    NULL};
static const struct {
    const char *key, *key2;
    const char *texts[9];
} fim[] = {
    {"tokenizer.ggml.fim_pre_token_id",
     "tokenizer.ggml.prefix_token_id",
     {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
      "<\xef\xbd\x9c"
      "fim\xe2\x96\x81"
      "begin\xef\xbd\x9c>",
      "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL}},
    {"tokenizer.ggml.fim_suf_token_id",
     "tokenizer.ggml.suffix_token_id",
     {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
      "<\xef\xbd\x9c"
      "fim\xe2\x96\x81hole\xef\xbd\x9c>",
      "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL}},
    {"tokenizer.ggml.fim_mid_token_id",
     "tokenizer.ggml.middle_token_id",
     {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
      "<\xef\xbd\x9c"
      "fim\xe2\x96\x81"
      "end\xef\xbd\x9c>",
      "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL}},
    {"tokenizer.ggml.fim_pad_token_id",
     NULL,
     {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL}},
    {"tokenizer.ggml.fim_rep_token_id",
     NULL,
     {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>",
      NULL}},
    {"tokenizer.ggml.fim_sep_token_id", NULL, {"<|file_sep|>", NULL}},
};

/* Whether s is one of list's texts (s[0] first: a SentencePiece
 * vocabulary's many texts that start with U+2581's byte 0xe2 as some of
 * the list's do are passed by in one test each, not a strlen). */
static bool in(const char *const *list, const uint8_t *s, uint64_t n) {
    for (; *list; list++)
        if ((uint8_t) * *list == s[0] && strlen(*list) == n &&
            memcmp(*list, s, n) == 0)
            return true;
    return false;
}

/* The lengths (bit n: n bytes, below 64) of the lists' texts by their
 * first byte, [256] 1 when one has 64 bytes or more (arr.h,
 * voc_text_listed): a text passes the lists by in one test unless one of
 * them has its first byte and its length (a SentencePiece vocabulary's
 * many texts that start with U+2581, as three of the lists' do, were a
 * walk of the lists each: 4 ms of Gemma 3's tokenizer.json). */
static uint64_t lens[257];
static pthread_once_t lens_once = PTHREAD_ONCE_INIT;

static void lens_add(const char *const *list) {
    for (; *list; list++)
        if (strlen(*list) < 64)
            lens[(uint8_t) * *list] |= UINT64_C(1) << strlen(*list);
        else
            lens[256] = 1;
}

static void lens_make(void) {
    lens_add(eog);
    for (size_t k = 0; k < sizeof fim / sizeof *fim; k++)
        lens_add(fim[k].texts);
}

const uint64_t *voc_text_lens(void) {
    (void)pthread_once(&lens_once, lens_make);
    return lens;
}

static bool listed(const uint8_t *s, uint64_t n) {
    return voc_text_listed(voc_text_lens(), s, n);
}

bool voc_text_eog(const uint8_t *s, uint64_t n) {
    return listed(s, n) && in(eog, s, n);
}

int voc_text_fim(const uint8_t *s, uint64_t n, const char **key) {
    if (!listed(s, n))
        return -1;
    for (size_t k = 0; k < sizeof fim / sizeof *fim; k++)
        if (in(fim[k].texts, s, n)) {
            *key = fim[k].key;
            return (int)k;
        }
    return -1;
}

bool voc_text_control(const gguf_ctx *ctx, const uint8_t *s, uint64_t n,
                      bool tool_response) {
    int64_t v;
    if (!listed(s, n)) /* the usual token: one test */
        return false;
    if (in(eog, s, n))
        /* llama.cpp's Gemma 4 rule: </s> is normal beside
         * <|tool_response> */
        return !(tool_response && n == 4 && memcmp(s, "</s>", 4) == 0);
    for (size_t k = 0; k < sizeof fim / sizeof *fim; k++)
        if (in(fim[k].texts, s, n))
            return !voc_int(ctx, fim[k].key, &v) &&
                   !(fim[k].key2 && voc_int(ctx, fim[k].key2, &v));
    return false;
}
