/*
 * folder.c - plain folders of GGUF files and LM Studio's tree
 * (PUBLISHER/REPO/FILE.gguf, the same walk): every *.gguf file below the
 * store, at most CAT_MAX_DEPTH levels deep, names starting with '.' left
 * out (partial downloads, .git), is a model named by its path relative to
 * the store without .gguf; a shard set (gguf_split_name) is one model,
 * named by its first shard's path without -00001-of-0000N.gguf, listed
 * only when every shard is there (else one log line).  A symlink is
 * followed only when it resolves beneath the store (cat_resolve), and
 * only to a file: directories reached through symlinks are not walked
 * (no loops, no model listed twice).  Files that are not regular (fifos,
 * devices) are left out with one log line.  Such files are edited in
 * place: content_addressed 0.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cat_found_file(void *u, const char *rel, unsigned char d_type) {
    struct cat_found *fd = u;
    struct cat_file f = {0};
    struct stat st;
    const char *why = NULL;
    char name[CAT_MAX_PATH];
    (void)d_type;
    if (!cat_ends_gguf(rel))
        return;
    if (cat_resolve(fd->s->dirfd, rel, &f.path, &st, &why) != 0) {
        cat_logf(fd->s, "%s: %s, left out", rel, why);
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        cat_logf(fd->s, "%s: not a regular file, left out", rel);
        free(f.path);
        return;
    }
    f.size = (uint64_t)st.st_size;
    f.dev = st.st_dev;
    f.ino = st.st_ino;
    if ((size_t)snprintf(name, sizeof name, "%s%s", fd->prefix,
                         rel + fd->skip) >= sizeof name) {
        cat_logf(fd->s, "%s: name too long, left out", rel);
        free(f.path);
        return;
    }
    cat_cand_add(fd->s, &fd->c, name, fd->suffix, &f);
}

void cat_scan_folder(struct cat_scan *s) {
    struct cat_found found = {.s = s, .prefix = ""};
    struct cat_walk w = {.s = s, .u = &found, .file = cat_found_file};
    cat_walk_tree(&w, "");
    cat_cands_group(s, &found.c, 0);
}
