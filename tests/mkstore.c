/*
 * mkstore - lays out a model store of small real GGUF models (made with
 * the project's own writer) exactly as its tool does, for the catalog's
 * tests and the store mount tests:
 *
 *   mkstore ollama DIR    DIR/manifests/HOST/NS/MODEL/TAG (JSON manifests:
 *                         schemaVersion 2, the docker v2 media type, a
 *                         config blob, layers) and DIR/blobs/sha256-HEX
 *                         named by the SHA-256 of their bytes.  Models:
 *                         tiny-a:latest, tiny-b:q4 (with template, system,
 *                         params, license layers and a projector),
 *                         myns/tiny-a:v1 (the same blob as tiny-a:latest),
 *                         hf.co/tiny/Tiny-GGUF:Q8_0
 *   mkstore hf DIR        huggingface_hub's cache: DIR/models--tiny--Tiny-GGUF/
 *                         {refs/main, snapshots/REV/..., blobs/SHA256} with
 *                         relative symlinks.  Models: tiny/Tiny-GGUF/tiny-a,
 *                         tiny/Tiny-GGUF/split/tiny-split (2 shards) at
 *                         refs/main, tiny/Tiny-GGUF/tiny-b@OLDREV
 *   mkstore lmstudio DIR  PUBLISHER/REPO/FILE.gguf: tiny/Tiny-GGUF/tiny-a,
 *                         tiny/Tiny-GGUF/tiny-b, tiny/Split-GGUF/tiny-split
 *   mkstore dir DIR       tiny-a, sub/tiny-b, tiny-split (2 shards)
 *   mkstore ollama|dir DIR N   N models instead (bench/run's stores
 *                         group): bench-NNNNN, each its own small model
 *                         (general.name differs, so ollama's blobs do),
 *                         ollama's as bench-NNNNN:latest
 *
 * DIR is created if missing; existing files of the same names are
 * replaced.  Prints one line per model: its name, a tab, its first file's
 * path relative to DIR.  REV and OLDREV are MKSTORE_REV and
 * MKSTORE_OLDREV below.  A tool: exits on the first error.
 */
#include "gguf.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MKSTORE_REV "0123456789abcdef0123456789abcdef01234567"
#define MKSTORE_OLDREV "89abcdef0123456789abcdef0123456789abcdef"

__attribute__((noreturn, format(printf, 1, 2))) static void die(const char *fmt,
                                                                ...) {
    va_list ap;
    fprintf(stderr, "mkstore: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* mkdir -p of the directories of path (relative to the cwd, DIR). */
static void mkparents(const char *path) {
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = strchr(p, '/'); s; s = strchr(s + 1, '/')) {
        *s = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            die("mkdir %s: %s", p, strerror(errno));
        *s = '/';
    }
}

static void set_str(gguf_ctx *c, const char *key, const char *val) {
    struct gguf_error err = {0};
    size_t n = strlen(val);
    uint8_t p[256];
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(p + 8, val, n);
    if (gguf_set_payload(c, key, strlen(key), GGUF_TYPE_STRING, p, 8 + n,
                         &err) != GGUF_OK)
        die("%s: %s", key, err.msg);
}

static void set_u(gguf_ctx *c, const char *key, enum gguf_type t, uint32_t v) {
    struct gguf_error err = {0};
    uint8_t p[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
                    (uint8_t)(v >> 24)};
    if (gguf_set_payload(c, key, strlen(key), t, p, gguf_type_size(t), &err) !=
        GGUF_OK)
        die("%s: %s", key, err.msg);
}

/* A small model file at path: architecture arch, shard no of count (0: no
 * set), one f32 tensor of 16 values per shard ("blk.N.w"). */
static void model(const char *path, const char *arch, int no, int count) {
    struct gguf_error err = {0};
    gguf_ctx *c = gguf_new(3);
    char tname[32];
    int64_t ne[1] = {16};
    if (count) {
        set_u(c, "split.no", GGUF_TYPE_UINT16, (uint32_t)no);
        set_u(c, "split.count", GGUF_TYPE_UINT16, (uint32_t)count);
        set_u(c, "split.tensors.count", GGUF_TYPE_INT32, (uint32_t)count);
    }
    if (no == 0) {
        set_str(c, "general.architecture", arch);
        set_str(c, "general.name", path);
        char k[64];
        snprintf(k, sizeof k, "%s.context_length", arch);
        set_u(c, k, GGUF_TYPE_UINT32, 256);
    }
    snprintf(tname, sizeof tname, "blk.%d.w", no);
    if (gguf_add_tensor(c, tname, strlen(tname), 0 /* f32 */, 1, ne, &err) !=
        GGUF_OK)
        die("%s: %s", path, err.msg);
    mkparents(path);
    if (gguf_write_file(c, path, NULL, NULL, &err) != GGUF_OK)
        die("%s: %s", path, err.msg);
    gguf_close(c);
}

static void text(const char *path, const char *s) {
    mkparents(path);
    FILE *f = fopen(path, "w");
    if (!f || fputs(s, f) < 0 || fclose(f) != 0)
        die("%s: %s", path, strerror(errno));
}

/* The SHA-256 of the file at path, in hex (65 bytes); its size. */
static uint64_t sha256_file(const char *path, char hex[65]) {
    unsigned char md[32], buf[65536];
    unsigned mdlen = 0;
    uint64_t size = 0;
    size_t n;
    FILE *f = fopen(path, "rb");
    EVP_MD_CTX *x = EVP_MD_CTX_new();
    if (!f || !x || EVP_DigestInit_ex(x, EVP_sha256(), NULL) != 1)
        die("%s: cannot hash", path);
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        EVP_DigestUpdate(x, buf, n);
        size += n;
    }
    EVP_DigestFinal_ex(x, md, &mdlen);
    EVP_MD_CTX_free(x);
    fclose(f);
    for (int i = 0; i < 32; i++)
        sprintf(hex + 2 * i, "%02x", md[i]);
    return size;
}

/* Moves the file tmp into the store's blobs as blobs/sha256-HEX (ollama)
 * and returns its layer JSON (static buffer, one at a time). */
static char last_blob[128]; /* the blob ollama_blob made last */
static const char *ollama_blob(const char *tmp, const char *mediatype) {
    static char json[512];
    char hex[65], *blob = last_blob;
    uint64_t size = sha256_file(tmp, hex);
    snprintf(blob, sizeof last_blob, "blobs/sha256-%s", hex);
    mkparents(blob);
    if (rename(tmp, blob) != 0)
        die("%s: %s", blob, strerror(errno));
    snprintf(json, sizeof json,
             "{\"mediaType\":\"%s\",\"digest\":\"sha256:%s\",\"size\":%llu}",
             mediatype, hex, (unsigned long long)size);
    return json;
}

#define MT "application/vnd.ollama.image."

/* One manifest at manifests/HOST/NS/MODEL/TAG (name) with the layers. */
static void ollama_manifest(const char *name, const char *layers) {
    char path[512], buf[8192];
    text("cfg.tmp", "{\"model_format\":\"gguf\",\"model_family\":\"llama\","
                    "\"file_type\":\"F32\"}");
    char config[512];
    snprintf(config, sizeof config, "%s",
             ollama_blob("cfg.tmp", "application/"
                                    "vnd.docker.container.image.v1+json"));
    snprintf(buf, sizeof buf,
             "{\"schemaVersion\":2,\"mediaType\":\"application/"
             "vnd.docker.distribution.manifest.v2+json\",\"config\":%s,"
             "\"layers\":[%s]}",
             config, layers);
    snprintf(path, sizeof path, "manifests/%s", name);
    text(path, buf);
}

static void store_ollama(void) {
    char a[600], b[4096];
    model("a.tmp", "llama", 0, 0);
    snprintf(a, sizeof a, "%s", ollama_blob("a.tmp", MT "model"));
    printf("tiny-a:latest\t%s\nmyns/tiny-a:v1\t%s\n", last_blob, last_blob);
    ollama_manifest("registry.ollama.ai/library/tiny-a/latest", a);
    ollama_manifest("registry.ollama.ai/myns/tiny-a/v1", a);
    model("b.tmp", "qwen3", 0, 0);
    size_t n =
        (size_t)snprintf(b, sizeof b, "%s", ollama_blob("b.tmp", MT "model"));
    printf("tiny-b:q4\t%s\n", last_blob);
    static const char *const extra[][2] = {
        {"template", "{{ .Prompt }}"},
        {"system", "You are tiny."},
        {"params", "{\"stop\":[\"<|im_end|>\"]}"},
        {"license", "MIT"},
    };
    for (size_t i = 0; i < sizeof extra / sizeof *extra; i++) {
        char mt[128];
        text("x.tmp", extra[i][1]);
        snprintf(mt, sizeof mt, MT "%s", extra[i][0]);
        n += (size_t)snprintf(b + n, sizeof b - n, ",%s",
                              ollama_blob("x.tmp", mt));
    }
    model("p.tmp", "clip", 0, 0);
    snprintf(b + n, sizeof b - n, ",%s", ollama_blob("p.tmp", MT "projector"));
    ollama_manifest("registry.ollama.ai/library/tiny-b/q4", b);
    model("c.tmp", "llama", 0, 0);
    snprintf(a, sizeof a, "%s", ollama_blob("c.tmp", MT "model"));
    printf("hf.co/tiny/Tiny-GGUF:Q8_0\t%s\n", last_blob);
    ollama_manifest("hf.co/tiny/Tiny-GGUF/Q8_0", a);
}

/* A file of an HF snapshot: the blob named by its hash, the snapshot's
 * relative symlink to it. */
static void hf_file(const char *name, const char *repo, const char *rev,
                    const char *path, const char *arch, int no, int count) {
    char hex[65], blob[512], link[1024], target[1024] = "";
    model("f.tmp", arch, no, count);
    sha256_file("f.tmp", hex);
    snprintf(blob, sizeof blob, "%s/blobs/%s", repo, hex);
    mkparents(blob);
    if (rename("f.tmp", blob) != 0)
        die("%s: %s", blob, strerror(errno));
    if (name)
        printf("%s\t%s\n", name, blob);
    snprintf(link, sizeof link, "%s/snapshots/%s/%s", repo, rev, path);
    mkparents(link);
    for (const char *s = path; (s = strchr(s, '/')); s++)
        strcat(target, "../");
    snprintf(target + strlen(target), sizeof target - strlen(target),
             "../../blobs/%s", hex);
    unlink(link);
    if (symlink(target, link) != 0)
        die("%s: %s", link, strerror(errno));
}

static void store_hf(void) {
    const char *r = "models--tiny--Tiny-GGUF";
    hf_file("tiny/Tiny-GGUF/tiny-a", r, MKSTORE_REV, "tiny-a.gguf", "llama", 0,
            0);
    hf_file("tiny/Tiny-GGUF/split/tiny-split", r, MKSTORE_REV,
            "split/tiny-split-00001-of-00002.gguf", "llama", 0, 2);
    hf_file(NULL, r, MKSTORE_REV, "split/tiny-split-00002-of-00002.gguf",
            "llama", 1, 2);
    hf_file("tiny/Tiny-GGUF/tiny-b@" MKSTORE_OLDREV, r, MKSTORE_OLDREV,
            "tiny-b.gguf", "qwen3", 0, 0);
    text("models--tiny--Tiny-GGUF/refs/main", MKSTORE_REV);
}

/* Plain files: prefix/tiny-a, prefix/B, prefix/SPLIT (2 shards). */
static void store_plain(const char *a, const char *b, const char *split) {
    char p[512];
    snprintf(p, sizeof p, "%s.gguf", a);
    model(p, "llama", 0, 0);
    printf("%s\t%s\n", a, p);
    snprintf(p, sizeof p, "%s.gguf", b);
    model(p, "qwen3", 0, 0);
    printf("%s\t%s\n", b, p);
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s-%05d-of-00002.gguf", split, i + 1);
        model(p, "llama", i, 2);
    }
    printf("%s\t%s-00001-of-00002.gguf\n", split, split);
}

/* N models named bench-NNNNN, as a store of kind ollama or dir.  A
 * model's general.name is its file's path: each model its own bytes. */
static void store_many(int ollama, long n) {
    char name[64], p[128], layer[600], mf[128];
    for (long i = 1; i <= n; i++) {
        snprintf(name, sizeof name, "bench-%05ld", i);
        snprintf(p, sizeof p, "%s.%s", name, ollama ? "tmp" : "gguf");
        model(p, "llama", 0, 0);
        if (!ollama) {
            printf("%s\t%s\n", name, p);
            continue;
        }
        snprintf(layer, sizeof layer, "%s", ollama_blob(p, MT "model"));
        printf("%s:latest\t%s\n", name, last_blob);
        snprintf(mf, sizeof mf, "registry.ollama.ai/library/%s/latest", name);
        ollama_manifest(mf, layer);
    }
}

int main(int argc, char **argv) {
    char *end = NULL;
    long n = argc == 4 ? strtol(argv[3], &end, 10) : 0;
    if (argc < 3 || argc > 4 || (argc == 4 && (*end || n < 1 || n > 99999))) {
        fprintf(stderr, "usage: mkstore ollama|hf|lmstudio|dir DIR [N]\n");
        return 2;
    }
    if (mkdir(argv[2], 0755) != 0 && errno != EEXIST)
        die("%s: %s", argv[2], strerror(errno));
    if (chdir(argv[2]) != 0)
        die("%s: %s", argv[2], strerror(errno));
    if (n && strcmp(argv[1], "ollama") != 0 && strcmp(argv[1], "dir") != 0)
        die("N models: ollama or dir only");
    if (n)
        store_many(strcmp(argv[1], "ollama") == 0, n);
    else if (strcmp(argv[1], "ollama") == 0)
        store_ollama();
    else if (strcmp(argv[1], "hf") == 0)
        store_hf();
    else if (strcmp(argv[1], "lmstudio") == 0)
        store_plain("tiny/Tiny-GGUF/tiny-a", "tiny/Tiny-GGUF/tiny-b",
                    "tiny/Split-GGUF/tiny-split");
    else if (strcmp(argv[1], "dir") == 0)
        store_plain("tiny-a", "sub/tiny-b", "tiny-split");
    else
        die("unknown store kind %s", argv[1]);
    return 0;
}
