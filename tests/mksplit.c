/*
 * mksplit - splits a GGUF into shards the way llama.cpp's gguf-split does:
 * `mksplit IN.gguf PREFIX N` writes PREFIX-00001-of-0000N.gguf, ...  Every
 * shard starts with split.no, split.count, split.tensors.count; the first
 * also carries all of IN's keys; tensors are dealt out in order, about
 * evenly.  Made with the project's own writer, for tests of shard sets.
 */
#include "gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct src {
    gguf_ctx *in;
    int64_t first; /* global index of the shard's first tensor */
    char *buf;
};

static const void *tensor_data(void *u, int64_t i)
{
    struct src *s = u;
    int64_t g = s->first + i;
    uint64_t n = gguf_tensor_size(s->in, g);
    free(s->buf);
    s->buf = malloc(n ? n : 1);
    if (!s->buf)
        return NULL;
    if (pread(gguf_fd(s->in), s->buf, n, (off_t)gguf_tensor_offset(s->in, g)) !=
        (ssize_t)n)
        return NULL;
    return s->buf;
}

int main(int argc, char **argv)
{
    struct gguf_error err = {0};
    struct src s = {0};
    int rc = 1;
    if (argc != 4) {
        fprintf(stderr, "usage: mksplit IN.gguf PREFIX N\n");
        return 2;
    }
    int n = atoi(argv[3]);
    if (n < 1 || n > 99 || gguf_open(&s.in, argv[1], 0, &err) != GGUF_OK) {
        fprintf(stderr, "mksplit: %s: %s\n", argv[1], err.msg);
        return 1;
    }
    int64_t nt = gguf_n_tensors(s.in);
    for (int k = 0; k < n; k++) {
        gguf_ctx *o = gguf_new(gguf_version(s.in));
        uint8_t v[4];
        char path[4096];
        v[0] = (uint8_t)k; v[1] = 0;
        gguf_set_payload(o, "split.no", 8, GGUF_TYPE_UINT16, v, 2, &err);
        v[0] = (uint8_t)n;
        gguf_set_payload(o, "split.count", 11, GGUF_TYPE_UINT16, v, 2, &err);
        v[0] = (uint8_t)nt; v[1] = (uint8_t)(nt >> 8); v[2] = 0; v[3] = 0;
        gguf_set_payload(o, "split.tensors.count", 19, GGUF_TYPE_INT32, v, 4,
                         &err);
        for (int64_t i = 0; k == 0 && i < gguf_n_kv(s.in); i++) {
            size_t kl, pl;
            const char *key = gguf_kv_key(s.in, i, &kl);
            const uint8_t *p = gguf_kv_payload(s.in, i, &pl);
            if (gguf_set_payload(o, key, kl, gguf_kv_type(s.in, i), p, pl,
                                 &err) != GGUF_OK)
                goto fail;
        }
        int64_t lo = nt * k / n, hi = nt * (k + 1) / n;
        for (int64_t g = lo; g < hi; g++) {
            size_t tl;
            const char *tn = gguf_tensor_name(s.in, g, &tl);
            if (gguf_add_tensor(o, tn, tl, gguf_tensor_type(s.in, g),
                                gguf_tensor_n_dims(s.in, g),
                                gguf_tensor_ne(s.in, g), &err) != GGUF_OK)
                goto fail;
        }
        s.first = lo;
        snprintf(path, sizeof path, "%s-%05d-of-%05d.gguf", argv[2], k + 1, n);
        if (gguf_write_file(o, path, tensor_data, &s, &err) != GGUF_OK)
            goto fail;
        gguf_close(o);
        continue;
fail:
        fprintf(stderr, "mksplit: shard %d: %s\n", k + 1, err.msg);
        gguf_close(o);
        goto out;
    }
    rc = 0;
out:
    free(s.buf);
    gguf_close(s.in);
    return rc;
}
