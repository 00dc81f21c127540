/*
 * live.c - the live view: MNT/NAME.gguf, a complete GGUF whose header is
 * what a commit would write now and whose data section is the backing
 * file's, served without copying.  Before any edit it is byte-identical to
 * the source; after `echo ... > meta/X` it is the file the commit would
 * produce, so llama.cpp can load edited metadata without waiting.
 */
#include "ggufs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct gfs_text *gfs_live_header(struct gfs *fs, int *err)
{
    struct gfs_text *t = NULL;
    struct gguf_buf b = {0};
    struct gguf_error gerr = {0};
    uint64_t d2;

    pthread_mutex_lock(&fs->text_lock);
    if (fs->live && fs->live_gen == fs->generation) {
        t = fs->live;
        atomic_fetch_add(&t->refs, 1);
        goto out;
    }
    if (gguf_plan_header(fs->ctx, &b, &d2, &gerr) != GGUF_OK) {
        *err = gfs_errno(&gerr);
        goto out;
    }
    t = malloc(sizeof *t + b.len);
    if (!t) {
        *err = ENOMEM;
        goto out;
    }
    atomic_init(&t->refs, 2); /* the cache's and the caller's */
    t->len = b.len;
    memcpy(t->data, b.p, b.len);
    gfs_text_put(fs->live);
    fs->live = t;
    fs->live_gen = fs->generation;
out:
    pthread_mutex_unlock(&fs->text_lock);
    gguf_buf_free(&b);
    return t;
}

int gfs_live_size(struct gfs *fs, uint64_t *size)
{
    int err = 0;
    struct gfs_text *t = gfs_live_header(fs, &err);
    if (!t)
        return err;
    uint64_t d = gguf_data_offset(fs->ctx), fsz = gguf_file_size(fs->ctx);
    *size = t->len + (fsz > d ? fsz - d : 0);
    gfs_text_put(t);
    return 0;
}
