/*
 * vocab.h - the files tools look for beside a model, made from a GGUF's
 * tokenizer metadata (issue 26): tokenizer/tokens.tsv, tokenizer/special,
 * tokenizer/merges.txt, and hf/: tokenizer.json, tokenizer_config.json,
 * special_tokens_map.json, config.json, chat_template.jinja,
 * generation_config.json and README (why a file is absent).  No FUSE
 * here: fs/tok/tokdir.c asks for a file's bytes and serves them; this
 * library reads the metadata through the gguf library's getters
 * (gguf.h) and never the file.
 *
 * Each file is made whole into a buffer, at most max bytes (GGUF_E_RANGE
 * past it, the message naming the file), from the context as it is now
 * (pending edits included: the caller renders again after an edit).  The
 * formats are ggufs(1), THE TREE; tsv.c, hfjson.c and hffiles.c state
 * them, hfcheck.c which tokenizers have a tokenizer.json and why not.
 *
 * Threads: a vocabulary's index by text (its texts' hashes and UTF-8
 * check, index.c), SentencePiece's two sorts of its texts (cuts.c), the
 * check's read of them (hfcheck.c) and tokenizer.json's vocabulary and
 * merge lines (hfjson.c) are made in two parts at once when it has
 * VOC_SPLIT_MIN (4096) tokens or more: ONE more thread at a time (a
 * 2-core machine gains most of it; more would take cores from the
 * daemon's FUSE threads), created and joined within the call on every
 * path (none outlives it; arr.h's voc_halves, the one place: its stack
 * mapped and unmapped there, and it calls no malloc, so that no arena of
 * its own is left holding memory), each part writing only its own part
 * of the index, its own bit sets, or its own bytes of the document (the
 * lines' parts sized first, then written in place, the second after the
 * first's bytes), so that the bytes are those of one pass.
 * Where a thread cannot be started the calling thread does both parts.
 * Calls on several threads at once start one more each (as many as
 * the daemon's FUSE threads render files at once).
 * Callable from any thread; ctx is only read.
 */
#ifndef GGUFS_VOCAB_H
#define GGUFS_VOCAB_H

#include "gguf.h"

enum voc_file {
    VOC_TOKENS_TSV,   /* tokenizer/tokens.tsv */
    VOC_SPECIAL,      /* tokenizer/special */
    VOC_MERGES,       /* tokenizer/merges.txt */
    VOC_HF_TOKENIZER, /* hf/tokenizer.json */
    VOC_HF_CONFIG,    /* hf/tokenizer_config.json */
    VOC_HF_MAP,       /* hf/special_tokens_map.json */
    VOC_HF_README,    /* hf/README */
    VOC_HF_MODEL,     /* hf/config.json */
    VOC_HF_TEMPLATE,  /* hf/chat_template.jinja */
    VOC_HF_GENCONFIG, /* hf/generation_config.json */
    VOC_N_FILES
};
/* The directory of a file: tokenizer/ or hf/. */
enum voc_dir { VOC_DIR_TOKENIZER, VOC_DIR_HF };

/* The file's name in its directory ("tokens.tsv"), or NULL. */
const char *voc_file_name(enum voc_file f);
enum voc_dir voc_file_dir(enum voc_file f);
/* Which files ctx's metadata makes now: bit f for file f (tokens.tsv and
 * special: a tokenizer.ggml.tokens array of strings; merges.txt: merges
 * too; tokenizer.json: hfcheck.c's rule, a pass over the vocabulary;
 * README always).  Ask once per state of the metadata. */
uint32_t voc_present(const gguf_ctx *ctx);
/* Whether file f is there without the pass over the vocabulary: exact
 * but for tokenizer.json (then: whether the tokenizer's kind has one). */
bool voc_has(const gguf_ctx *ctx, enum voc_file f);

/* How hf/tokenizer.json maps the model's tokenizer (hfcheck.c). */
/* VOC_HF_UTF8_BPE: BPE over the raw UTF-8 with spaces as U+2581 and byte
 * fallback (llama.cpp's gemma4 and sarvam-moe pre-tokenizers); VOC_HF_WPM,
 * VOC_HF_UGM: WordPiece and Unigram; VOC_HF_RWKV: RWKV's longest match as
 * WordPiece over ByteLevel characters (hfmodels.c). */
enum voc_hf {
    VOC_HF_NONE,
    VOC_HF_SPM,
    VOC_HF_BYTE_BPE,
    VOC_HF_UTF8_BPE,
    VOC_HF_WPM,
    VOC_HF_UGM,
    VOC_HF_RWKV
};
enum voc_hf voc_hf_kind(const gguf_ctx *ctx);
/* Why ctx has no hf/tokenizer.json (a sentence in buf or a constant), or
 * NULL when it has one. */
const char *voc_hf_reason(const gguf_ctx *ctx, char *buf, size_t n);
/* What llama.cpp adds when it tokenizes with its special tokens
 * (hfcheck.c, the one place of these facts): add_bos_token, else its
 * default for the tokenizer (SentencePiece: true; byte-level BPE: its
 * pre-tokenizer's); add_eos_token, else false; and the ids it adds: the
 * GGUF's bos/eos_token_id, else its defaults (SentencePiece 1 and 2,
 * byte-level BPE 11 and 11, chatglm's no BOS), -1 for none or one past
 * the vocabulary. */
bool voc_add_bos(const gguf_ctx *ctx);
bool voc_add_eos(const gguf_ctx *ctx);
int64_t voc_bos_id(const gguf_ctx *ctx);
int64_t voc_eos_id(const gguf_ctx *ctx);
/* Appends file f's bytes to out: GGUF_OK; GGUF_E_NOTFOUND when ctx does
 * not make f; GGUF_E_RANGE past max bytes; GGUF_E_NOMEM.  out is left as
 * it was on failure.  present: voc_present(ctx) of this very state of the
 * metadata, or 0: a file whose bit is set is made without its pass over
 * the vocabulary again (tokenizer.json's check, which voc_present made). */
enum gguf_status voc_render_known(const gguf_ctx *ctx, enum voc_file f,
                                  uint32_t present, uint64_t max,
                                  struct gguf_buf *out, struct gguf_error *err);

#endif
