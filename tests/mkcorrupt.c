/*
 * mkcorrupt DIR - writes every case of the corrupt-file table
 * (corrupt_cases.c) as DIR/NAME.gguf, with DIR/NAME.expect:
 *
 *   line 1: "reject", "loose" (opens with a warning) or "accept"
 *   line 2: the expected substring of the error (reject) or of a warning
 *           (loose); empty for accept
 *   line 3: "ggml-rejects" or "ggml-accepts" (ggml's metadata-only reader,
 *           as tests/refdump.c runs it)
 *
 * Exit status 0 on success, 1 on any failure (message on stderr).
 */
#include "craft.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static bool write_expect(const char *path, const struct corrupt_case *k) {
    static const char *const verdict[] = {
        [CORRUPT_REJECT] = "reject", [CORRUPT_LOOSE] = "loose",
        [CORRUPT_ACCEPT] = "accept",
    };
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    fprintf(f, "%s\n%s\n%s\n", verdict[corrupt_verdict(k)], k->msg,
            k->ggml_rejects ? "ggml-rejects" : "ggml-accepts");
    return fclose(f) == 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: mkcorrupt DIR\n");
        return 1;
    }
    const char *dir = argv[1];
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "mkcorrupt: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    int rc = 0;
    for (size_t i = 0; i < n_corrupt_cases; i++) {
        const struct corrupt_case *k = &corrupt_cases[i];
        struct craft c = {0};
        char path[4096];
        k->build(&c);
        snprintf(path, sizeof path, "%s/%s.gguf", dir, k->name);
        bool ok = craft_write(&c, path);
        craft_free(&c);
        if (ok) {
            snprintf(path, sizeof path, "%s/%s.expect", dir, k->name);
            ok = write_expect(path, k);
        }
        if (!ok) {
            fprintf(stderr, "mkcorrupt: cannot write %s: %s\n", path, strerror(errno));
            rc = 1;
        }
    }
    return rc;
}
