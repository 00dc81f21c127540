/*
 * files.c - the table of the files vocab/ makes (vocab.h): name,
 * directory, whether the metadata makes it, and its maker.
 */
#include "arr.h"

#include <string.h>

#define TOK "tokenizer.ggml."

static const struct {
    const char *name;
    enum voc_dir dir;
} files[VOC_N_FILES] = {
    [VOC_TOKENS_TSV] = {"tokens.tsv", VOC_DIR_TOKENIZER},
    [VOC_SPECIAL] = {"special", VOC_DIR_TOKENIZER},
    [VOC_MERGES] = {"merges.txt", VOC_DIR_TOKENIZER},
    [VOC_HF_TOKENIZER] = {"tokenizer.json", VOC_DIR_HF},
    [VOC_HF_CONFIG] = {"tokenizer_config.json", VOC_DIR_HF},
    [VOC_HF_MAP] = {"special_tokens_map.json", VOC_DIR_HF},
    [VOC_HF_README] = {"README", VOC_DIR_HF},
    [VOC_HF_MODEL] = {"config.json", VOC_DIR_HF},
    [VOC_HF_TEMPLATE] = {"chat_template.jinja", VOC_DIR_HF},
    [VOC_HF_GENCONFIG] = {"generation_config.json", VOC_DIR_HF},
};

const char *voc_file_name(enum voc_file f) {
    return (unsigned)f < VOC_N_FILES ? files[f].name : NULL;
}

enum voc_dir voc_file_dir(enum voc_file f) {
    return (unsigned)f < VOC_N_FILES ? files[f].dir : VOC_DIR_TOKENIZER;
}

bool voc_has(const gguf_ctx *ctx, enum voc_file f) {
    struct voc_arr a;
    char why[256];
    if (f == VOC_HF_README)
        return true;
    if (f == VOC_HF_MODEL)
        return !voc_hf_config_reason(ctx, why, sizeof why);
    if (f == VOC_HF_TEMPLATE || f == VOC_HF_GENCONFIG)
        return voc_hf_extra_has(ctx, f); /* the template needs no tokens */
    if (!voc_arr_of(ctx, TOK "tokens", GGUF_TYPE_STRING, &a))
        return false;
    if (f == VOC_MERGES)
        return voc_arr_of(ctx, TOK "merges", GGUF_TYPE_STRING, &a);
    if (f == VOC_HF_TOKENIZER)
        return voc_hf_kind(ctx) != VOC_HF_NONE;
    return (unsigned)f < VOC_N_FILES;
}

uint32_t voc_present(const gguf_ctx *ctx) {
    uint32_t m = 0;
    char why[256];
    for (int f = 0; f < VOC_N_FILES; f++)
        if (voc_has(ctx, f) &&
            (f != VOC_HF_TOKENIZER || !voc_hf_reason(ctx, why, sizeof why)))
            m |= UINT32_C(1) << f;
    return m;
}

enum gguf_status voc_render_known(const gguf_ctx *ctx, enum voc_file f,
                                  uint32_t present, uint64_t max,
                                  struct gguf_buf *out,
                                  struct gguf_error *err) {
    size_t mark = out->len;
    enum gguf_status st;
    if (!voc_has(ctx, f))
        return gguf_fail(err, GGUF_E_NOTFOUND, "no %s",
                         f < VOC_N_FILES ? voc_file_name(f) : "such file");
    switch (f) {
    case VOC_TOKENS_TSV:
        st = voc_tokens_tsv(ctx, max, out, err);
        break;
    case VOC_SPECIAL:
        st = voc_special(ctx, out, err);
        break;
    case VOC_MERGES:
        st = voc_merges_txt(ctx, max, out, err);
        break;
    case VOC_HF_TOKENIZER:
        st = voc_hf_tokenizer(ctx, max, present >> f & 1, out, err);
        break;
    case VOC_HF_MODEL:
        st = voc_hf_model_config(ctx, out);
        break;
    case VOC_HF_TEMPLATE:
    case VOC_HF_GENCONFIG:
        st = voc_hf_extra(ctx, f, out);
        break;
    case VOC_HF_CONFIG:
    case VOC_HF_MAP:
        st = voc_hf_config(ctx, f == VOC_HF_MAP, out);
        break;
    default:
        st = voc_hf_readme(ctx, present >> VOC_HF_TOKENIZER & 1, out);
    }
    if (st == GGUF_OK && out->len - mark > max)
        st = gguf_fail(err, GGUF_E_RANGE, "%s would pass %llu bytes",
                       voc_file_name(f), (unsigned long long)max);
    else if (st == GGUF_E_NOMEM)
        gguf_fail(err, st, "%s: out of memory", voc_file_name(f));
    else if (st != GGUF_OK && err && err->code != st)
        gguf_fail(err, st, "%s: a value could not be written",
                  voc_file_name(f));
    if (st != GGUF_OK)
        out->len = mark;
    return st;
}
