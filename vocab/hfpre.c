/*
 * hfpre.c - llama.cpp's byte-level BPE pre-tokenizers (its llama-vocab.cpp:
 * the tokenizer.ggml.pre names of each LLAMA_VOCAB_PRE_TYPE_*, the regular
 * expressions llm_tokenizer_bpe splits text by, in the order it applies
 * them, and the settings each sets: ignore_merges, the default add_bos,
 * no default BOS id (chatglm's)) as hf/tokenizer.json writes them (vocab.h, voc_hf_pre):
 * one Split pre-tokenizer (behavior Isolated: matches and the text between
 * them both kept, as unicode_regex_split keeps them) a regular expression,
 * then ByteLevel without its own expression.  The expressions are
 * llama.cpp's own, where it adapted the model's (its "(?:'[sS]|...)" for
 * "(?i:'s|...)"), since they are what it applies.
 *
 * The pre-tokenizers that are no list of regular expressions are not
 * here, and voc_hf_pre says why: kimi-k2 and afmoe (hand-written
 * splitters in llama.cpp's unicode.cpp behind a placeholder expression),
 * superbpe (a split at an empty match, which tokenizers' Split drops),
 * gemma4, granite-embed-multi-311m and sarvam-moe (BPE over the raw
 * UTF-8 with spaces as U+2581, not byte-level).
 */
#include "arr.h"

#include <string.h>

#define CONTRACTIONS                                                           \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define GPT2                                                                   \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!" \
    "\\S)"
#define TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define LLAMA3                                                                 \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}" TAIL
#define QWEN2 CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" TAIL
#define DS3_MAIN                                                               \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}" \
    "\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|"  \
    "\\s+"
#define CJK_KANA "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+"
#define CJK_HANGUL "[\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80\xea\xb0\x80-\xed\x9f\xbf]+"
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
#define BLOOM " ?[^(\\s|.,!?\xe2\x80\xa6\xe3\x80\x82\xef\xbc\x8c\xe3\x80\x81\xe0\xa5\xa4\xdb\x94\xd8\x8c)]+"

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
    "\x85\xe1\xbd\x88-\xe1\xbd\x8d\xe1\xbd\x90-\xe1\xbd\x97\xe1\xbd\x99\xe1"  \
    "\xbd\x9b\xe1\xbd\x9d\xe1\xbd\x9f-\xe1\xbd\xbd\xe1\xbe\x80-\xe1\xbe\xb4"  \
    "\xe1\xbe\xb6-\xe1\xbe\xbc\xe1\xbe\xbe\xe1\xbf\x82-\xe1\xbf\x84\xe1\xbf"  \
    "\x86-\xe1\xbf\x8c\xe1\xbf\x90-\xe1\xbf\x93\xe1\xbf\x96-\xe1\xbf\x9b\xe1"  \
    "\xbf\xa0-\xe1\xbf\xac\xe1\xbf\xb2-\xe1\xbf\xb4\xe1\xbf\xb6-\xe1\xbf\xbc"  \
    "\xe2\x84\x82\xe2\x84\x87\xe2\x84\x8a-\xe2\x84\x93\xe2\x84\x95\xe2\x84"    \
    "\x99-\xe2\x84\x9d\xe2\x84\xa4\xe2\x84\xa6\xe2\x84\xa8\xe2\x84\xaa-\xe2"   \
    "\x84\xad\xe2\x84\xaf-\xe2\x84\xb4\xe2\x84\xb9\xe2\x84\xbc-\xe2\x84\xbf"   \
    "\xe2\x85\x85-\xe2\x85\x89\xe2\x85\x8e\xe2\x86\x83\xe2\x86\x84\xe2\xb0"   \
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
    {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2, "\\p{N}+",
                 "[0-9][0-9][0-9]"}, 0, 0, 0},
    {"llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2 "
     "jina-v5-nano",
     {LLAMA3}, 1, 1, 0},
    {"minicpm5",
     {"\\p{N}{1,3}", CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+" TAIL},
     1, 0, 0},
    {"dbrx smaug-bpe", {LLAMA3}, 0, 0, 0},
    {"glm4 chatglm-bpe", {LLAMA3}, 0, 0, 1},
    {"jais-2",
     {CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}"
                   "\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}"
                   "(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|"
                   "\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!"
                   "\\S)|\\s{1}"},
     0, 0, 0},
    {"deepseek-llm",
     {"[\r\n]", DS_LETTERS,
      "\\s?[!-/:-~\xef\xbc\x81-\xef\xbc\x8f\xef\xbc\x9a-\xef\xbd\x9e\xe2\x80"
      "\x98-\xe2\x80\x9f\xe3\x80\x80-\xe3\x80\x82]+",
      "\\s+$", CJK_HANGUL, "\\p{N}+"},
     0, 0, 0},
    {"deepseek-v3 hunyuan-dense joyai-llm hy_v4",
     {"\\p{N}{1,3}", CJK_KANA, DS3_MAIN}, 0, 0, 0},
    {"spark2_5",
     {"\\p{N}{1,3}", CJK_KANA,
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{"
      "P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
      "\\p{N}"},
     0, 0, 0},
    {"deepseek-coder",
     {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", CJK_HANGUL, "\\p{N}"}, 0, 0, 0},
    {"falcon",
     {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2, "[0-9][0-9][0-9]"}, 0, 0, 0},
    {"starcoder refact command-r smollm codeshell exaone minerva-7b mellum2",
     {"\\p{N}", GPT2}, 0, 0, 0},
    {"gpt-2 phi-2 jina-es jina-de gigachat jina-v2-es jina-v2-de a.x-4.0 "
     "mellum modern-bert jina-v1-en jina-v2-code roberta-bpe mpt olmo jais "
     "trillion granite-docling exaone4",
     {GPT2}, 0, 0, 0},
    {"qwen2 deepseek-r1-qwen kormo f2llmv2 megrez stablelm2 hunyuan "
     "solar-open grok-2",
     {QWEN2}, 0, 0, 0},
    {"qwen35",
     {CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{"
                   "L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     0, 0, 0},
    {"poro-chat bloom gpt3-finnish", {BLOOM}, 0, 0, 0},
    {"viking", {BLOOM, "\\p{N}"}, 0, 0, 0},
    {"tekken",
     {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|"
      "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|"
      "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     1, 1, 0},
    {"chameleon",
     {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
      "([\\t\\n]|    |  )", "\\p{N}", "[\\p{P}!-/:-@\\[-`{-~]", GPT2},
     0, 1, 0},
    {"gpt-4o llama4 kanana2 talkie minimax-m2", {UPPER_LOWER_O200K("")}, 0, 0,
     0},
    {"granite-embed-multi-97m", {UPPER_LOWER_O200K("\\p{M}")}, 1, 0, 0},
    {"tiny_aya cohere2moe",
     {"\\d{1,3}(?=(?:\\d{3})*\\b)",
      CASED "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+"
            "(?!\\S)|\\s+"},
     0, 0, 0},
    {"youtu",
     {"[\xea\xb0\x80-\xed\x9e\xa3\xe3\x84\xb1-\xe3\x86\x8e]+|[\xef\xbc\x81"
      "\xe2\x80\xa6\xe2\x80\x9c\xe2\x80\x9d\xe2\x80\x98\xe2\x80\x99\xe2\x80"
      "\x94\xef\xbc\x9a\xef\xbc\x9b\xef\xbc\x8c\xe3\x80\x81-\xe3\x80\xbf\xef"
      "\xb8\xb0-\xef\xb9\x8f]+|[\xe3\x84\x85-\xe3\x84\xaf]+|" CJK_KANA,
      CASED "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)"
            "|\\s+"},
     1, 0, 0},
    {"bailingmoe bailingmoe2 llada-moe",
     {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{"
      "L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|"
      "\\s+"},
     0, 0, 0},
    {"seed-coder",
     {CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{"
                   "N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     0, 0, 0},
    {"ufakzeka", {"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" TAIL}, 0, 0, 0},
    {"laguna", {"[^\\n]+|[\\n]+", QWEN2}, 0, 0, 0},
    {"exaone-moe",
     {CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*"
                   ")+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|"
                   "\\s+(?!\\S)|\\s+"},
     0, 0, 0},
};

/* The pre-tokenizers llama.cpp knows that are no list of expressions. */
static const struct {
    const char *names, *why;
} unmapped[] = {
    {"kimi-k2", "llama.cpp splits kimi-k2 text with hand-written code "
                "(unicode.cpp, behind the placeholder \\p{Han}+), not a "
                "regular expression a Split can hold"},
    {"afmoe", "llama.cpp groups afmoe's digits with hand-written code "
              "(\\p{AFMoE_digits}: by the run's length modulo 3), not a "
              "regular expression a Split can hold"},
    {"superbpe", "superbpe splits digit runs at an empty match "
                 "((?=(\\d{3})+(?!\\d))), which tokenizers' Split drops"},
    {"gemma4 granite-embed-multi-311m sarvam-moe",
     "BPE over the raw UTF-8 with spaces written as U+2581 (not byte-level): "
     "not mapped to tokenizers' form here"},
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

/* tokenizer.ggml.pre, or "" when absent (llama.cpp: "default"). */
static void pre_name(const gguf_ctx *ctx, const char **p, size_t *n) {
    int64_t k = gguf_find_key(ctx, "tokenizer.ggml.pre", 18);
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
    *why = NULL;
    for (size_t i = 0; i < sizeof unmapped / sizeof *unmapped; i++)
        if (has_name(unmapped[i].names, p, n))
            *why = unmapped[i].why;
    return NULL;
}
