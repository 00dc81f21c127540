/*
 * ggml_open - the baseline for ggufs' start-up time: loads ggml's own GGUF
 * reader (libggml-base.so, dlopened) and opens FILE the way llama.cpp does
 * before it maps tensors: gguf_init_from_file(no_alloc = true), gguf_free.
 *
 *   ggml_open FILE...              exit 0 if ggml accepts every FILE, 1 if
 *                                  not (opened one after the other: the
 *                                  stores group's baseline for models.tsv)
 *   ggml_open FILE --data-offset   also print where the tensor data starts
 *                                  (the size of the header), in bytes
 *
 * The library is $GGUFS_GGML_LIB, else GGML_LIB_DEFAULT (set by bench/run).
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef GGML_LIB_DEFAULT
#define GGML_LIB_DEFAULT "libggml-base.so"
#endif

struct ggml_context;
struct gguf_context;

/* Passed by value, exactly as ggml declares it (ggml/include/gguf.h). */
struct gguf_init_params {
    bool no_alloc;
    struct ggml_context **ctx;
};

int main(int argc, char **argv)
{
    int offset = argc == 3 && strcmp(argv[2], "--data-offset") == 0;
    if (argc < 2) {
        fprintf(stderr, "usage: ggml_open FILE [--data-offset] | FILE...\n");
        return 2;
    }
    const char *lib = getenv("GGUFS_GGML_LIB");
    if (!lib || !*lib)
        lib = GGML_LIB_DEFAULT;
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "ggml_open: %s\n", dlerror());
        return 2;
    }
    struct gguf_context *(*init)(const char *, struct gguf_init_params);
    void (*gfree)(struct gguf_context *);
    size_t (*data_offset)(const struct gguf_context *);
    *(void **)&init = dlsym(h, "gguf_init_from_file");
    *(void **)&gfree = dlsym(h, "gguf_free");
    *(void **)&data_offset = dlsym(h, "gguf_get_data_offset");
    if (!init || !gfree || !data_offset) {
        fprintf(stderr, "ggml_open: %s lacks the gguf API\n", lib);
        return 2;
    }
    struct gguf_init_params p = { .no_alloc = true, .ctx = NULL };
    for (int i = 1; i < (offset ? 2 : argc); i++) {
        struct gguf_context *ctx = init(argv[i], p);
        if (!ctx) {
            fprintf(stderr, "ggml_open: ggml rejects %s\n", argv[i]);
            return 1;
        }
        if (offset)
            printf("%zu\n", data_offset(ctx));
        gfree(ctx);
    }
    return 0;
}
