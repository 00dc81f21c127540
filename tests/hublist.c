/*
 * hublist.c - catalog/'s Hub listing as a command, for tests/hub_list.py:
 *   hublist [--open] [--header FILE] hf://OWNER/REPO[@REV]
 * prints one line per file of each model, "MODEL\tNAME\tSIZE\tPATH", in
 * the list's order; the log's lines go to stderr prefixed "log: ".  With
 * --open each file is opened as today's hf:// files are (rmt_open, the
 * cache in $HUBLIST_CACHE) and its first 4 bytes and its size checked
 * against "GGUF" and the listed size: "open\tPATH\tSIZE\tMAGIC".  Exit 0,
 * or 1 with the error's one line on stderr.
 */
#include "catalog.h"
#include "remote.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void to_stderr(void *u, const char *line) {
    (void)u;
    fprintf(stderr, "log: %s\n", line);
}

/* Opens f as an hf:// file and reads its magic.  0 or 1. */
static int open_one(const struct cat_file *f, const struct rmt_opts *o) {
    struct rmt_src *s = NULL;
    char msg[1024], magic[5] = "";
    if (rmt_open(f->path, o, &s, msg, sizeof msg) != 0) {
        fprintf(stderr, "hublist: %s\n", msg);
        return 1;
    }
    int err = rmt_read(s, 0, magic, 4, 0);
    printf("open\t%s\t%llu\t%s\n", f->path, (unsigned long long)rmt_size(s),
           err ? rmt_error() : magic);
    rmt_close(s);
    return err != 0;
}

int main(int argc, char **argv) {
    struct rmt_opts o = {.timeout = 5, .retries = -1, .log = to_stderr};
    int do_open = 0, i = 1, bad = 0;
    for (; i + 1 < argc; i++)
        if (strcmp(argv[i], "--open") == 0)
            do_open = 1;
        else if (strcmp(argv[i], "--header") == 0 && i + 2 < argc)
            o.header_file = argv[++i];
        else
            break;
    if (i + 1 != argc) {
        fprintf(stderr, "usage: hublist [--open] [--header FILE] "
                        "hf://OWNER/REPO[@REV]\n");
        return 2;
    }
    o.cache_dir = getenv("HUBLIST_CACHE");
    o.hf = 1;
    struct cat_list l;
    char msg[1024];
    if (!cat_hub_is_repo(argv[i]))
        fprintf(stderr, "log: not a repo URL by cat_hub_is_repo\n");
    if (cat_hub_list(argv[i], &o, &l, msg, sizeof msg) != 0) {
        fprintf(stderr, "hublist: %s\n", msg);
        return 1;
    }
    for (size_t m = 0; m < l.n; m++)
        for (size_t k = 0; k < l.models[m].n_files; k++) {
            const struct cat_file *f = &l.models[m].files[k];
            printf("%s\t%s\t%llu\t%s\n", l.models[m].name, f->name,
                   (unsigned long long)f->size, f->path);
        }
    for (size_t m = 0; do_open && m < l.n; m++)
        for (size_t k = 0; k < l.models[m].n_files; k++)
            bad |= open_one(&l.models[m].files[k], &o);
    cat_list_free(&l);
    return bad;
}
