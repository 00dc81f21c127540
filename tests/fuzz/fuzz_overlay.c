/*
 * fuzz_overlay.c - libFuzzer target: any bytes as an overlay file (layout
 * in gguf/overlay.c, read "as hostile input"), through the parser
 * gguf_overlay_load uses (gguf_overlay_parse) and gguf_overlay_apply:
 *
 *   a refusal says why on one line; an accepted overlay has a bounded,
 *   NUL-terminated identity (source, hash, etag) of 1 to 99999 files;
 *   applied to a small model, it succeeds or refuses on one line, and the
 *   edited model's header serializes to a GGUF that reads back with every
 *   key (fuzz_edits.h).
 */
#include "fuzz_edits.h"
#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char T[] = "fuzz_overlay";
    struct gguf_error err = {0};
    struct gguf_overlay_id id;
    gguf_ctx *ov = NULL;
    enum gguf_status st =
        gguf_overlay_parse(data, size, "fuzz", &ov, &id, &err);
    fuzz_check_err(T, st, &err, "gguf_overlay_parse");
    if (st != GGUF_OK) {
        if (ov)
            fuzz_bug(T, "a refused overlay left a context");
        return 0;
    }
    if (!memchr(id.source, '\0', sizeof id.source) ||
        !memchr(id.hash, '\0', sizeof id.hash) ||
        !memchr(id.etag, '\0', sizeof id.etag) || id.shards < 1 ||
        id.shards > 99999)
        fuzz_bug(T, "an accepted overlay with an unbounded identity");
    gguf_ctx *base = fuzz_base(T);
    int64_t set = 0, removed = 0;
    st = gguf_overlay_apply(base, ov, &set, &removed, &err);
    fuzz_check_err(T, st, &err, "gguf_overlay_apply");
    if (st == GGUF_OK) {
        if (set < 0 || removed < 0)
            fuzz_bug(T, "negative counts %lld, %lld", (long long)set,
                     (long long)removed);
        fuzz_check_applied(T, base);
    }
    gguf_close(base);
    gguf_close(ov);
    return 0;
}
