/*
 * vocab.h - the files tools look for beside a model, made from a GGUF's
 * tokenizer metadata (issue 26): tokenizer/tokens.tsv, tokenizer/special,
 * tokenizer/merges.txt.  No FUSE here: fs/tokdir.c asks for a file's
 * bytes and serves them; this library reads the metadata through the
 * gguf library's getters (gguf.h) and never the file.
 *
 * Each file is made whole into a buffer, at most max bytes (GGUF_E_RANGE
 * past it, the message naming the file), from the context as it is now
 * (pending edits included: the caller renders again after an edit).  The
 * formats are ggufs(1), TOKENIZER FILES; vocab/tsv.c states them.
 */
#ifndef GGUFS_VOCAB_H
#define GGUFS_VOCAB_H

#include "gguf.h"

enum voc_file {
    VOC_TOKENS_TSV, /* tokenizer/tokens.tsv */
    VOC_SPECIAL,    /* tokenizer/special */
    VOC_MERGES,     /* tokenizer/merges.txt */
    VOC_N_FILES
};

/* The file's name in its directory ("tokens.tsv"), or NULL. */
const char *voc_file_name(enum voc_file f);
/* Whether ctx's metadata makes file f (tokens.tsv and special: a
 * tokenizer.ggml.tokens array of strings; merges.txt: a
 * tokenizer.ggml.merges array of strings too). */
bool voc_has(const gguf_ctx *ctx, enum voc_file f);
/* Appends file f's bytes to out: GGUF_OK; GGUF_E_NOTFOUND when ctx does
 * not make f; GGUF_E_RANGE past max bytes; GGUF_E_NOMEM.  out is left as
 * it was on failure. */
enum gguf_status voc_render(const gguf_ctx *ctx, enum voc_file f, uint64_t max,
                            struct gguf_buf *out, struct gguf_error *err);

#endif
