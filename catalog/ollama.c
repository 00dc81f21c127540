/*
 * ollama.c - an ollama store (internal.h, cat_scan_ollama).  ollama's
 * layout (its server/ and manifest/ sources): manifests/HOST/NAMESPACE/
 * MODEL/TAG, each a JSON manifest {"schemaVersion": 2, "mediaType":
 * "application/vnd.docker.distribution.manifest.v2+json", "config":
 * {...}, "layers": [{"mediaType", "digest": "sha256:HEX", "size"}, ...]},
 * and each layer's bytes in blobs/sha256-HEX.  The model is the layer of
 * media type application/vnd.ollama.image.model; the projector, adapters,
 * template, system prompt, parameters, license and messages layers are
 * the model's layers (cat_layer); other media types (the config, future
 * ones) are not shown.
 *
 * Names: MODEL:TAG for registry.ollama.ai/library, NAMESPACE/MODEL:TAG
 * for the rest of registry.ollama.ai, HOST/NAMESPACE/MODEL:TAG otherwise
 * (as ollama list shows them).
 *
 * A manifest is skipped with one log line naming it when it is not a
 * regular file, larger than CAT_MAX_MANIFEST, not JSON (libjansson), not
 * schemaVersion 2, has no model layer, or a used layer whose digest is not
 * "sha256:" + 64 lowercase hex digits, whose blob is missing, not a
 * regular file beneath the store or of another size than the layer says.
 * The blob's content is not hashed (that reads gigabytes): its name and
 * size are checked, and its identity (dev/ino) is kept for the opener.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MT_PREFIX "application/vnd.ollama.image."

/* The layers shown, by media type (after MT_PREFIX): the file name under
 * ollama/ and whether it is a GGUF file (named NAME.gguf, NAME-2.gguf). */
static const struct {
    const char *type, *name;
    int gguf;
} layer_kinds[] = {
    {"model", "model", 1},     {"projector", "projector", 1},
    {"adapter", "adapter", 1}, {"template", "template", 0},
    {"system", "system", 0},   {"params", "params", 0},
    {"license", "license", 0}, {"messages", "messages", 0},
};
#define N_KINDS (sizeof layer_kinds / sizeof *layer_kinds)

/* The kind of a layer's media type (parameters after ';' ignored), or
 * -1 for one not shown. */
static int layer_kind(const char *mt) {
    size_t pl = strlen(MT_PREFIX);
    if (strncmp(mt, MT_PREFIX, pl) != 0)
        return -1;
    size_t len = strcspn(mt + pl, "; ");
    for (size_t k = 0; k < N_KINDS; k++)
        if (strlen(layer_kinds[k].type) == len &&
            strncmp(mt + pl, layer_kinds[k].type, len) == 0)
            return (int)k;
    return -1;
}

static bool digest_ok(const char *d) {
    if (strncmp(d, "sha256:", 7) != 0 || strlen(d) != 7 + 64)
        return false;
    for (const char *p = d + 7; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

/* The blob of one layer as a file (checked); NULL why on success. */
static const char *layer_file(int dirfd, json_t *layer, struct cat_file *f) {
    json_t *dg = json_object_get(layer, "digest");
    json_t *sz = json_object_get(layer, "size");
    const char *why = NULL;
    char rel[100];
    struct stat st;
    if (!json_is_string(dg) || !digest_ok(json_string_value(dg)))
        return "digest is not sha256: and 64 lowercase hex digits";
    if (!json_is_integer(sz) || json_integer_value(sz) < 0)
        return "size is not a number of bytes";
    snprintf(rel, sizeof rel, "blobs/sha256-%s", json_string_value(dg) + 7);
    if (cat_resolve(dirfd, rel, &f->path, &st, &why) != 0)
        return why;
    if (!S_ISREG(st.st_mode) ||
        (uint64_t)st.st_size != (uint64_t)json_integer_value(sz)) {
        free(f->path);
        f->path = NULL;
        return S_ISREG(st.st_mode) ? "blob's size differs from the layer's"
                                   : "blob is not a regular file";
    }
    f->name = strdup(rel + 6);
    f->size = (uint64_t)st.st_size;
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    return f->name ? NULL : "out of memory";
}

/* Adds layer f of kind k to m (the first model layer as its file). */
static int add_layer(struct cat_scan *s, struct cat_model *m, int k, int *seen,
                     struct cat_file *f) {
    if (k == 0 && !m->n_files)
        return cat_model_file(s, m, f);
    char *name = NULL;
    int n = ++seen[k];
    const char *ext = layer_kinds[k].gguf ? ".gguf" : "";
    int r = n == 1 ? asprintf(&name, "%s%s", layer_kinds[k].name, ext)
                   : asprintf(&name, "%s-%d%s", layer_kinds[k].name, n, ext);
    struct cat_layer *v =
        r < 0 ? NULL
              : realloc(m->layers, (m->n_layers + 1) * sizeof *m->layers);
    if (!v) {
        free(r < 0 ? NULL : name);
        s->oom = 1;
        return -1;
    }
    m->layers = v;
    m->layers[m->n_layers].name = name;
    m->layers[m->n_layers++].file = *f;
    return 0;
}

/* The layers of manifest root into m; NULL, or why it is refused (with
 * the layer's index in *at). */
static const char *manifest_layers(struct cat_scan *s, json_t *root,
                                   struct cat_model *m, size_t *at) {
    json_t *ver = json_object_get(root, "schemaVersion");
    json_t *layers = json_object_get(root, "layers");
    int seen[N_KINDS] = {0};
    json_t *l;
    size_t i;
    if (!json_is_integer(ver) || json_integer_value(ver) != 2)
        return "schemaVersion is not 2";
    if (!json_is_array(layers) || json_array_size(layers) > CAT_MAX_FILES)
        return json_is_array(layers) ? "too many layers" : "no layers array";
    json_array_foreach(layers, i, l) {
        *at = i;
        json_t *mt = json_object_get(l, "mediaType");
        int k = json_is_string(mt) ? layer_kind(json_string_value(mt)) : -1;
        struct cat_file f = {0};
        if (!json_is_object(l) || !json_is_string(mt))
            return "a layer without a mediaType";
        if (k < 0)
            continue;
        const char *why = layer_file(s->dirfd, l, &f);
        if (why || add_layer(s, m, k, seen, &f) != 0) {
            cat_file_free(&f);
            return why ? why : "out of memory";
        }
    }
    *at = SIZE_MAX;
    return m->n_files ? NULL : "no model layer (" MT_PREFIX "model)";
}

/* Reads the manifest at rel (bounded) and parses it; NULL with *why. */
static json_t *manifest_load(int dirfd, const char *rel, const char **why,
                             char *jmsg, size_t jn) {
    struct stat st;
    int fd = cat_open_regular(dirfd, rel, O_RDONLY, &st);
    json_t *root = NULL;
    char *buf = NULL;
    if (fd < 0) {
        *why = errno == ELOOP ? "a symlink, not a manifest"
                              : "not a readable regular file";
        goto out;
    }
    if ((uint64_t)st.st_size > CAT_MAX_MANIFEST) {
        *why = "larger than the bound on a manifest (4 MiB)";
        goto out;
    }
    buf = malloc((size_t)st.st_size + 1);
    ssize_t got = buf ? pread(fd, buf, (size_t)st.st_size, 0) : -1;
    if (got != st.st_size) {
        *why = buf ? "short read" : "out of memory";
        goto out;
    }
    json_error_t je;
    root = json_loadb(buf, (size_t)got, JSON_REJECT_DUPLICATES, &je);
    if (!root || !json_is_object(root)) {
        snprintf(jmsg, jn, "not a JSON object (line %d: %s)", je.line,
                 root ? "not an object" : je.text);
        json_decref(root);
        root = NULL;
        *why = jmsg;
    }
out:
    free(buf);
    if (fd >= 0)
        close(fd);
    return root;
}

/* The model name of manifests/HOST/NS/MODEL/TAG. */
static char *model_name(const char *const c[4]) {
    char *n = NULL;
    int r;
    if (strcmp(c[0], "registry.ollama.ai") != 0)
        r = asprintf(&n, "%s/%s/%s:%s", c[0], c[1], c[2], c[3]);
    else if (strcmp(c[1], "library") != 0)
        r = asprintf(&n, "%s/%s:%s", c[1], c[2], c[3]);
    else
        r = asprintf(&n, "%s:%s", c[2], c[3]);
    char *fixed = r < 0 ? NULL : cat_name_fix(n);
    free(r < 0 ? NULL : n);
    return fixed;
}

static void one_manifest(struct cat_scan *s, const char *const c[4]) {
    char rel[CAT_MAX_PATH], jmsg[300];
    const char *why = NULL;
    size_t at = SIZE_MAX;
    snprintf(rel, sizeof rel, "manifests/%s/%s/%s/%s", c[0], c[1], c[2], c[3]);
    json_t *root = manifest_load(s->dirfd, rel, &why, jmsg, sizeof jmsg);
    struct cat_model *m = root ? cat_model_add(s, model_name(c)) : NULL;
    if (m) {
        m->content_addressed = 1;
        why = manifest_layers(s, root, m, &at);
        if (why)
            cat_model_drop(s);
    }
    json_decref(root);
    if (why && at != SIZE_MAX)
        cat_logf(s, "%s: layer %zu: %s, model left out", rel, at, why);
    else if (why)
        cat_logf(s, "%s: %s, model left out", rel, why);
}

/* manifests/ at depth 0 (hosts) to 3 (tags, the manifest files). */
static void walk_manifests(struct cat_scan *s, int fd, const char *c[4],
                           int depth) {
    DIR *d = cat_opendir(fd, "");
    struct dirent *e;
    struct stat st;
    for (size_t n = 0; d && !s->oom && !s->full && (e = readdir(d)); n++) {
        if (e->d_name[0] == '.')
            continue;
        if (n >= CAT_MAX_DIRENTS) {
            cat_logf(s,
                     "manifests: more than %d entries in a directory, "
                     "the rest left out",
                     CAT_MAX_DIRENTS);
            break;
        }
        c[depth] = e->d_name;
        if (depth == 3) {
            one_manifest(s, c);
            continue;
        }
        int sub = cat_open_plain(dirfd(d), e->d_name, O_PATH | O_DIRECTORY);
        if (sub < 0 || fstat(sub, &st) != 0) {
            char at[CAT_MAX_PATH] = "manifests";
            for (int i = 0; i <= depth; i++)
                snprintf(at + strlen(at), sizeof at - strlen(at), "/%s", c[i]);
            cat_logf(s, "%s: not a directory (%s), left out", at,
                     strerror(errno));
        } else
            walk_manifests(s, sub, c, depth + 1);
        if (sub >= 0)
            close(sub);
    }
    if (d)
        closedir(d);
}

void cat_scan_ollama(struct cat_scan *s) {
    const char *c[4] = {0};
    int fd = cat_open_plain(s->dirfd, "manifests", O_PATH | O_DIRECTORY);
    if (fd < 0) {
        cat_logf(s, "manifests: cannot open: %s", strerror(errno));
        return;
    }
    walk_manifests(s, fd, c, 0);
    close(fd);
}
