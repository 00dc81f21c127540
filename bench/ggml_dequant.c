/*
 * ggml_dequant - the baseline of the f32/ views: ggml's own conversion of
 * a tensor to float32, in memory, on one thread.
 *
 *   ggml_dequant FILE OFFSET BYTES TYPE ELEMENTS
 *
 * Reads the tensor's BYTES at OFFSET of FILE into memory and touches an
 * output buffer of ELEMENTS floats (neither is timed), then times one call
 * of ggml_get_type_traits(TYPE)->to_float over the whole tensor and
 * prints the seconds.  The library is $GGUFS_GGML_LIB, else
 * GGML_LIB_DEFAULT (set by bench/run).
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef GGML_LIB_DEFAULT
#define GGML_LIB_DEFAULT "libggml-base.so"
#endif

/* ggml.h, struct ggml_type_traits (ggml 0.5). */
struct traits {
    const char *type_name;
    int64_t blck_size, blck_size_interleave;
    size_t type_size;
    bool is_quantized;
    void (*to_float)(const void *, float *, int64_t);
    void *from_float_ref;
};

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: ggml_dequant FILE OFFSET BYTES TYPE ELEMENTS\n");
        return 2;
    }
    long long off = atoll(argv[2]), bytes = atoll(argv[3]);
    int type = atoi(argv[4]);
    long long n = atoll(argv[5]);
    const char *lib = getenv("GGUFS_GGML_LIB");
    void *h = dlopen(lib && *lib ? lib : GGML_LIB_DEFAULT, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "ggml_dequant: %s\n", dlerror());
        return 2;
    }
    const struct traits *(*get)(int);
    *(void **)&get = dlsym(h, "ggml_get_type_traits");
    if (!get || (type != 0 && !get(type)->to_float)) {
        fprintf(stderr, "ggml_dequant: no to_float for type %d\n", type);
        return 2;
    }
    char *in = malloc((size_t)bytes);
    float *out = malloc((size_t)n * sizeof *out);
    FILE *f = fopen(argv[1], "rb");
    if (!in || !out || !f || fseeko(f, off, SEEK_SET) != 0 ||
        fread(in, 1, (size_t)bytes, f) != (size_t)bytes) {
        fprintf(stderr, "ggml_dequant: cannot read %s\n", argv[1]);
        return 2;
    }
    fclose(f);
    memset(out, 0, (size_t)n * sizeof *out);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (type == 0)
        memcpy(out, in, (size_t)bytes);
    else
        get(type)->to_float(in, out, n);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%.6f\n", (double)(t1.tv_sec - t0.tv_sec) +
                         (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    free(in);
    free(out);
    return 0;
}
