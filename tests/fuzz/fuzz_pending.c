/*
 * fuzz_pending.c - libFuzzer target: any bytes as a pending-edits record
 * (gguf/pending.c: an identity line, then a GGUF of the edits and the
 * list of removed keys), through the parser gguf_pending_apply uses
 * (gguf_pending_parse) and the application of each key
 * (gguf_edits_apply_kv):
 *
 *   a refusal says why on one line; the edits applied to a small model
 *   succeed or refuse on one line, and the edited model's header
 *   serializes to a GGUF that reads back with every key (fuzz_edits.h).
 */
#include "fuzz_edits.h"
#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char T[] = "fuzz_pending";
    struct gguf_error err = {0};
    gguf_ctx *e = NULL;
    enum gguf_status st = gguf_pending_parse(data, size, &e, &err);
    fuzz_check_err(T, st, &err, "gguf_pending_parse");
    if (st != GGUF_OK) {
        if (e)
            fuzz_bug(T, "a refused record left a context");
        return 0;
    }
    gguf_ctx *base = fuzz_base(T);
    for (int64_t i = 0; st == GGUF_OK && i < gguf_n_kv(e); i++) {
        st = gguf_edits_apply_kv(base, e, i, &err);
        fuzz_check_err(T, st, &err, "gguf_edits_apply_kv");
    }
    if (st == GGUF_OK)
        fuzz_check_applied(T, base);
    gguf_close(base);
    gguf_close(e);
    return 0;
}
