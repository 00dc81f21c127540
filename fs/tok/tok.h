/*
 * tok.h - tokenizer/ and hf/ (tokdir.c: rows of kinds.h): the state a
 * model keeps for them, behind fs->tok.  Made at the model's open
 * (gfs_tok_init), freed by the file row's fini at its close.
 */
#ifndef GGUFS_FS_TOK_H
#define GGUFS_FS_TOK_H

#include "../ggufs.h"
#include "vocab.h" /* VOC_N_FILES */

/* Guarded by fs->text_lock (taken with fs->lock held, for reading at
 * least): the files' texts, by enum voc_file, each for its generation
 * (gfs_text_of_gen); whether tokenizer.json is there (its bit: made, or
 * voc_present's check when it could not be made), for mask_gen + 1 (0:
 * not asked yet; tokdir.c present()). */
struct gfs_tok {
    struct gfs_text *file[VOC_N_FILES];
    uint64_t gen[VOC_N_FILES];
    uint32_t mask;
    uint64_t mask_gen;
};

/* At the model's open: fs->tok made empty; 0, or ENOMEM. */
int gfs_tok_init(struct gfs *fs);

#endif
