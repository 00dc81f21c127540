/*
 * jsonput.c - the one way vocab/ writes a json_t (arr.h: voc_json_put):
 * jansson's dump straight into the buffer, bounded.  Below the makers of
 * hf/'s JSON files (hfjson.c, hfmodels.c, hffiles.c, hfconfig.c), which
 * all call it (no file circle: dev/layers).
 */
#include "arr.h"

#include <jansson.h>
#include <string.h>

/* voc_json_put's dump: appends while room lasts. */
struct put {
    struct gguf_buf *b;
    uint64_t room;
    enum gguf_status st;
};

static int put_chunk(const char *s, size_t n, void *u) {
    struct put *p = u;
    if (n > p->room)
        p->st = GGUF_E_RANGE;
    else if ((p->st = gguf_buf_add(p->b, s, n)) == GGUF_OK)
        p->room -= n;
    return p->st == GGUF_OK ? 0 : -1;
}

enum gguf_status voc_json_put(struct gguf_buf *b, json_t *v, size_t flags,
                              uint64_t max, const char *end) {
    if (!v)
        return GGUF_E_INVAL;
    size_t mark = b->len;
    struct put p = {b, max, GGUF_OK};
    /* One pass, straight into b (the same text as json_dumps). */
    if (json_dump_callback(v, put_chunk, &p, flags) != 0 && p.st == GGUF_OK)
        p.st = GGUF_E_NOMEM; /* jansson's own failure */
    json_decref(v);
    if (p.st == GGUF_OK && end)
        (void)put_chunk(end, strlen(end), &p);
    if (p.st != GGUF_OK)
        b->len = mark;
    return p.st;
}
