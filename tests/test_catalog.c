/*
 * test_catalog.c - catalog/: the models of stores laid out as their tools
 * lay them out (tests/mkstore: ollama, the HF cache, LM Studio, a folder),
 * their names, files and layers; hostile stores (each bad entry skipped
 * with one log line naming it, good models beside it still listed); the
 * NAME@model rule; the stamp; the opener's identity check.  The expected
 * names are written here from the tools' rules, not taken from the code.
 */
#include "catalog.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REV "0123456789abcdef0123456789abcdef01234567"
#define OLDREV "89abcdef0123456789abcdef0123456789abcdef"
#define HEX0 "0000000000000000000000000000000000000000000000000000000000000000"

static char tmp[256];   /* this test's directory */
static char store[300]; /* tmp/store: the store; tmp/outside.gguf beside */

struct logs {
    char lines[64][1024];
    int n;
};

static void logf_cb(void *u, const char *line) {
    struct logs *l = u;
    ck_assert_ptr_null(strchr(line, '\n'));
    if (l->n < 64)
        snprintf(l->lines[l->n], sizeof l->lines[0], "%s", line);
    l->n++;
}

/* How many log lines contain s. */
static int logged(const struct logs *l, const char *s) {
    int c = 0;
    for (int i = 0; i < l->n && i < 64; i++)
        c += strstr(l->lines[i], s) != NULL;
    return c;
}

static void sh(const char *fmt, ...) {
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    ck_assert_msg(system(cmd) == 0, "failed: %s", cmd);
}

/* A fresh store made by mkstore kind. */
static void make(const char *kind) {
    snprintf(tmp, sizeof tmp, "/tmp/test_catalog.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmp));
    snprintf(store, sizeof store, "%s/store", tmp);
    const char *mk = getenv("MKSTORE");
    ck_assert_ptr_nonnull(mk);
    sh("'%s' %s '%s' >/dev/null", mk, kind, store);
    sh("echo outside > '%s/outside.gguf'", tmp);
}

static void cleanup(void) {
    sh("rm -rf '%s'", tmp);
}

/* Writes s at store/rel (parents made). */
static void put(const char *rel, const char *s) {
    sh("mkdir -p \"$(dirname '%s/%s')\" && printf '%%s' '%s' > '%s/%s'", store,
       rel, s, store, rel);
}

static int scan(enum cat_kind k, struct cat_list *l, struct logs *lg) {
    char msg[300];
    int fd = open(store, O_RDONLY | O_DIRECTORY);
    ck_assert_int_ge(fd, 0);
    memset(lg, 0, sizeof *lg);
    int rc = cat_scan(fd, k, l, logf_cb, lg, msg, sizeof msg);
    close(fd);
    return rc;
}

static const struct cat_model *find(const struct cat_list *l,
                                    const char *name) {
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->models[i].name, name) == 0)
            return &l->models[i];
    return NULL;
}

/* The names, in order, are exactly names (NULL-terminated). */
static void names_are(const struct cat_list *l, const char *const *names) {
    size_t i = 0;
    for (; names[i]; i++) {
        ck_assert_msg(i < l->n, "missing %s", names[i]);
        ck_assert_str_eq(l->models[i].name, names[i]);
    }
    ck_assert_msg(i == l->n, "extra model %s", l->models[i].name);
}

/* f is the file at store/f->path as stat sees it. */
static void file_is_real(const struct cat_file *f) {
    char p[4096];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", store, f->path);
    ck_assert_int_eq(lstat(p, &st), 0);
    ck_assert(S_ISREG(st.st_mode));
    ck_assert_uint_eq(f->size, (uint64_t)st.st_size);
    ck_assert(f->dev == st.st_dev && f->ino == st.st_ino);
}

/* A store made by mkstore kind, recognised as detect, scanned as scan_as
 * without a log line. */
static void made_and_listed(const char *kind, enum cat_kind detect,
                            enum cat_kind scan_as, struct cat_list *l) {
    struct logs lg;
    make(kind);
    int fd = open(store, O_RDONLY | O_DIRECTORY);
    ck_assert_int_eq(cat_detect(fd), detect);
    close(fd);
    ck_assert_int_eq(scan(scan_as, l, &lg), 0);
    ck_assert_int_eq(lg.n, 0);
}

START_TEST(kinds) {
    static const char *const n[] = {"ollama", "hf", "lmstudio", "dir", "hub"};
    for (size_t i = 0; i < 5; i++)
        ck_assert_str_eq(cat_kind_name(cat_kind_named(n[i])), n[i]);
    ck_assert_int_eq(cat_kind_named("nope"), CAT_NONE);
}
END_TEST

START_TEST(ollama_store) {
    struct cat_list l;
    made_and_listed("ollama", CAT_OLLAMA, CAT_OLLAMA, &l);
    static const char *const names[] = {"hf.co/tiny/Tiny-GGUF:Q8_0",
                                        "myns/tiny-a:v1", "tiny-a:latest",
                                        "tiny-b:q4", NULL};
    names_are(&l, names);
    const struct cat_model *b = find(&l, "tiny-b:q4");
    ck_assert(b->content_addressed && b->n_files == 1);
    ck_assert_int_eq(strncmp(b->files[0].path, "blobs/sha256-", 13), 0);
    file_is_real(&b->files[0]);
    ck_assert_uint_eq(b->size, b->files[0].size);
    static const char *const layers[] = {"template", "system", "params",
                                         "license", "projector.gguf"};
    ck_assert_uint_eq(b->n_layers, 5);
    for (size_t i = 0; i < 5; i++) {
        ck_assert_str_eq(b->layers[i].name, layers[i]);
        file_is_real(&b->layers[i].file);
    }
    ck_assert_str_eq(find(&l, "tiny-a:latest")->files[0].path,
                     find(&l, "myns/tiny-a:v1")->files[0].path);
    cat_list_free(&l);
    cleanup();
}
END_TEST

/* A manifest of one model layer (digest, size) at manifests/NAME. */
static void manifest(const char *name, const char *digest, const char *size) {
    char rel[512], json[1024];
    snprintf(rel, sizeof rel, "manifests/registry.ollama.ai/library/%s", name);
    snprintf(json, sizeof json,
             "{\"schemaVersion\":2,\"mediaType\":\"application/"
             "vnd.docker.distribution.manifest.v2+json\",\"layers\":[{"
             "\"mediaType\":\"application/vnd.ollama.image.model\","
             "\"digest\":\"%s\",\"size\":%s}]}",
             digest, size);
    put(rel, json);
}

START_TEST(ollama_hostile) {
    struct cat_list l;
    struct logs lg;
    make("ollama");
    put("manifests/registry.ollama.ai/library/notjson/latest", "{\"layers\":[");
    manifest("hex63/latest", "sha256:" HEX0 + 1, "3");
    manifest("upper/latest", "sha256:ABCDEF" HEX0 + 6, "3");
    manifest("sha512/latest", "sha512:" HEX0, "3");
    manifest("missing/latest", "sha256:" HEX0, "3");
    /* a blob of 3 bytes whose manifest says 4 */
    put("blobs/sha256-1111111111111111111111111111111111111111111111111111111111111111",
        "abc");
    manifest(
        "wrongsize/latest",
        "sha256:1111111111111111111111111111111111111111111111111111111111111111",
        "4");
    /* a blob that is a symlink out of the store */
    sh("ln -s '%s/outside.gguf' '%s/blobs/sha256-2222222222222222222222222222222222222222222222222222222222222222'",
       tmp, store);
    manifest(
        "outlink/latest",
        "sha256:2222222222222222222222222222222222222222222222222222222222222222",
        "8");
    sh("head -c 5000000 /dev/zero | tr '\\0' ' ' > "
       "'%s/manifests/registry.ollama.ai/library/tiny-a/huge'",
       store);
    sh("ln -s ../tiny-a/latest "
       "'%s/manifests/registry.ollama.ai/library/tiny-b/linked'",
       store);
    /* MODEL:TAG longer than a file name: escaped, with a hash */
    char longname[320];
    memset(longname, 'm', 200);
    snprintf(longname + 200, sizeof longname - 200, "/%0100d", 7);
    sh("cd '%s/manifests/registry.ollama.ai/library' && mkdir %.200s && "
       "cp tiny-a/latest %s",
       store, longname, longname);
    ck_assert_int_eq(scan(CAT_OLLAMA, &l, &lg), 0);
    static const char *const bad[] = {
        "library/notjson/latest: not a JSON object",
        "library/hex63/latest: layer 0: digest is not",
        "library/upper/latest: layer 0: digest is not",
        "library/sha512/latest: layer 0: digest is not",
        "library/missing/latest: layer 0: missing",
        "library/wrongsize/latest: layer 0: blob's size differs",
        "library/outlink/latest: layer 0: absolute symlink",
        "library/tiny-a/huge: larger than",
        "library/tiny-b/linked: a symlink"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(logged(&lg, bad[i]) == 1, "no line: %s", bad[i]);
    ck_assert_int_eq(lg.n, sizeof bad / sizeof *bad);
    ck_assert_uint_eq(l.n, 5);
    const struct cat_model *m = &l.models[1]; /* 'm' after 'h' */
    /* gguf_name_escape's rule for a long name: its first 237 bytes, "%~"
     * and the 64-bit FNV-1a hash of the whole name in hex */
    char whole[400], want[300];
    snprintf(whole, sizeof whole, "%.200s:%s", longname, longname + 201);
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (const char *p = whole; *p; p++)
        h = (h ^ (unsigned char)*p) * UINT64_C(0x100000001b3);
    snprintf(want, sizeof want, "%.237s%%~%016llx", whole,
             (unsigned long long)h);
    ck_assert_str_eq(m->name, want);
    cat_list_free(&l);
    cleanup();
}
END_TEST

START_TEST(hf_store) {
    struct cat_list l;
    made_and_listed("hf", CAT_HF, CAT_HF, &l);
    static const char *const names[] = {"tiny/Tiny-GGUF/split/tiny-split",
                                        "tiny/Tiny-GGUF/tiny-a",
                                        "tiny/Tiny-GGUF/tiny-b@" OLDREV, NULL};
    names_are(&l, names);
    const struct cat_model *s = &l.models[0];
    ck_assert(s->content_addressed && s->n_files == 2);
    ck_assert_str_eq(s->files[0].name, "tiny-split-00001-of-00002.gguf");
    ck_assert_str_eq(s->files[1].name, "tiny-split-00002-of-00002.gguf");
    for (size_t i = 0; i < 2; i++) {
        ck_assert_int_eq(
            strncmp(s->files[i].path, "models--tiny--Tiny-GGUF/blobs/", 30), 0);
        file_is_real(&s->files[i]);
    }
    ck_assert_uint_eq(s->size, s->files[0].size + s->files[1].size);
    cat_list_free(&l);
    cleanup();
}
END_TEST

#define SNAP "models--tiny--Tiny-GGUF/snapshots/" REV

START_TEST(hf_hostile) {
    struct cat_list l;
    struct logs lg;
    make("hf");
    sh("cd '%s/" SNAP "' && ln -s '%s/outside.gguf' abs.gguf && "
       "ln -s ../../../../outside.gguf up.gguf && "
       "ln -s ../../blobs/../../../../outside.gguf up2.gguf && "
       "ln -s tiny-a.gguf x.gguf && mkdir x && ln -s ../tiny-a.gguf x/y.gguf "
       "&& ln -s tiny-a.gguf lone-00001-of-00003.gguf && "
       "ln -s tiny-a.gguf lone-00003-of-00003.gguf && "
       "ln -s tiny-a.gguf README.md",
       store, tmp);
    /* a second repo whose refs/main is not a commit */
    sh("cp -a '%s/models--tiny--Tiny-GGUF' '%s/models--evil--Repo' && "
       "printf ../../x > '%s/models--evil--Repo/refs/main'",
       store, store, store);
    ck_assert_int_eq(scan(CAT_HF, &l, &lg), 0);
    static const char *const bad[] = {
        SNAP "/abs.gguf: absolute symlink", SNAP "/up.gguf: leaves the store",
        SNAP "/up2.gguf: leaves the store",
        "tiny/Tiny-GGUF/lone: shard set incomplete",
        "models--evil--Repo/refs/main: not a commit hash"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(logged(&lg, bad[i]) == 1, "no line: %s", bad[i]);
    ck_assert_ptr_nonnull(find(&l, "tiny/Tiny-GGUF/x@model"));
    ck_assert_ptr_nonnull(find(&l, "tiny/Tiny-GGUF/x/y"));
    ck_assert_ptr_nonnull(find(&l, "tiny/Tiny-GGUF/split/tiny-split"));
    ck_assert_ptr_nonnull(find(&l, "evil/Repo/tiny-a@" REV));
    ck_assert_ptr_null(find(&l, "tiny/Tiny-GGUF/README"));
    ck_assert_str_eq(find(&l, "tiny/Tiny-GGUF/x/y")->files[0].path,
                     find(&l, "tiny/Tiny-GGUF/tiny-a")->files[0].path);
    cat_list_free(&l);
    cleanup();
}
END_TEST

START_TEST(folder_store) {
    struct cat_list l;
    made_and_listed(_i ? "lmstudio" : "dir", CAT_DIR,
                    _i ? CAT_LMSTUDIO : CAT_DIR, &l);
    static const char *const dir[] = {"sub/tiny-b", "tiny-a", "tiny-split",
                                      NULL};
    static const char *const lms[] = {"tiny/Split-GGUF/tiny-split",
                                      "tiny/Tiny-GGUF/tiny-a",
                                      "tiny/Tiny-GGUF/tiny-b", NULL};
    names_are(&l, _i ? lms : dir);
    const struct cat_model *s = find(&l, _i ? lms[0] : dir[2]);
    ck_assert(!s->content_addressed && s->n_files == 2);
    ck_assert_str_eq(s->files[1].name, "tiny-split-00002-of-00002.gguf");
    file_is_real(&s->files[1]);
    cat_list_free(&l);
    cleanup();
}
END_TEST

START_TEST(folder_hostile) {
    struct cat_list l;
    struct logs lg;
    char deep[600] = "";
    make("dir");
    for (int i = 0; i < 20; i++)
        strcat(deep, "d/");
    sh("cd '%s' && mkfifo fifo.gguf && cp tiny-a.gguf .hidden.gguf && "
       "ln -s tiny-a.gguf inside.gguf && ln -s ../outside.gguf out.gguf && "
       "mkdir -p %s && cp tiny-a.gguf %sdeep.gguf && "
       "cp tiny-a.gguf part-00002-of-00002.gguf && mkdir tiny-a && "
       "cp tiny-a.gguf tiny-a/q8.gguf && mkdir .git && cp tiny-a.gguf .git/x.gguf "
       "&& cp tiny-a.gguf dup.gguf && for i in 1 2; do "
       "cp tiny-split-0000$i-of-00002.gguf dup-0000$i-of-00002.gguf; done",
       store, deep, deep);
    ck_assert_int_eq(scan(CAT_DIR, &l, &lg), 0);
    static const char *const bad[] = {
        "fifo.gguf: not a regular file", "out.gguf: leaves the store",
        "part: shard set incomplete",
        "d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d: deeper than 16",
        /* the set's first file sorts before dup.gguf: the set is kept */
        "dup.gguf: a second model named dup, left out"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(logged(&lg, bad[i]) == 1, "no line: %s", bad[i]);
    ck_assert_int_eq(lg.n, sizeof bad / sizeof *bad);
    static const char *const names[] = {
        "dup",          "inside",     "sub/tiny-b", "tiny-a/q8",
        "tiny-a@model", "tiny-split", NULL};
    names_are(&l, names);
    ck_assert_str_eq(find(&l, "inside")->files[0].path, "tiny-a.gguf");
    ck_assert_uint_eq(find(&l, "dup")->n_files, 2);
    cat_list_free(&l);
    cleanup();
}
END_TEST

static uint64_t stamp(enum cat_kind k) {
    int fd = open(store, O_RDONLY | O_DIRECTORY);
    uint64_t s = cat_stamp(fd, k);
    close(fd);
    ck_assert_uint_ne(s, 0);
    return s;
}

START_TEST(stamps) {
    static const char *const kinds[] = {"ollama", "hf", "dir"};
    static const enum cat_kind k[] = {CAT_OLLAMA, CAT_HF, CAT_DIR};
    static const char *const add[] = {
        "mkdir -p manifests/registry.ollama.ai/library/new && cp "
        "manifests/registry.ollama.ai/library/tiny-a/latest "
        "manifests/registry.ollama.ai/library/new/latest",
        "ln -s ../../blobs/x models--tiny--Tiny-GGUF/snapshots/" REV
        "/split/new.gguf",
        "cp tiny-a.gguf sub/new.gguf"};
    make(kinds[_i]);
    uint64_t a = stamp(k[_i]);
    ck_assert_uint_eq(stamp(k[_i]), a);
    sh("cd '%s' && %s", store, add[_i]);
    ck_assert_uint_ne(stamp(k[_i]), a);
    cleanup();
}
END_TEST

/* The "dir" store made and scanned into *l: an fd of its root, *f the
 * first file of its model tiny-a. */
static int dir_store(struct cat_list *l, const struct cat_file **f) {
    struct logs lg;
    make("dir");
    ck_assert_int_eq(scan(CAT_DIR, l, &lg), 0);
    *f = &find(l, "tiny-a")->files[0];
    return open(store, O_RDONLY | O_DIRECTORY);
}

START_TEST(open_checks) {
    struct cat_list l;
    const struct cat_file *f;
    int dfd = dir_store(&l, &f);
    int fd = cat_open_file(dfd, f, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    close(fd);
    /* replaced by another file: refused */
    sh("cd '%s' && cp tiny-a.gguf t && mv t tiny-a.gguf", store);
    ck_assert_int_eq(cat_open_file(dfd, f, O_RDONLY), -1);
    ck_assert_int_eq(errno, ESTALE);
    /* the directory of a file: beneath the store, the top's a duplicate */
    f = &find(&l, "sub/tiny-b")->files[0];
    struct stat a, b;
    int sub = cat_open_dir_of(dfd, f->path), top = cat_open_dir_of(dfd, "x");
    ck_assert_int_ge(sub, 0);
    ck_assert_int_ge(top, 0);
    ck_assert(fstat(sub, &a) == 0 && fstatat(dfd, "sub", &b, 0) == 0 &&
              a.st_ino == b.st_ino && S_ISDIR(a.st_mode));
    ck_assert(fstat(top, &a) == 0 && fstat(dfd, &b) == 0 &&
              a.st_ino == b.st_ino && top != dfd);
    close(sub);
    close(top);
    /* a directory on the path swapped for a symlink: refused */
    sh("cd '%s' && mv sub sub2 && ln -s sub2 sub", store);
    ck_assert_int_eq(cat_open_file(dfd, f, O_RDONLY), -1);
    ck_assert_int_ne(errno, ESTALE);
    ck_assert_int_eq(cat_open_dir_of(dfd, f->path), -1);
    ck_assert(errno == ELOOP || errno == EXDEV || errno == ENOTDIR);
    close(dfd);
    cat_list_free(&l);
    cleanup();
}
END_TEST

/* FIFOs planted in a store (issue 33, item 1): an open of a store's file
 * never waits on one (the test's timeout, check's default, fails a hang). */
START_TEST(fifo_files) {
    struct cat_list l;
    struct logs lg;
    const struct cat_file *f;
    int dfd = dir_store(&l, &f);
    sh("cd '%s' && mkfifo p && mv p tiny-a.gguf", store);
    ck_assert_int_eq(cat_open_file(dfd, f, O_RDONLY), -1);
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_str_eq(cat_strerror(errno), "not a regular file");
    close(dfd);
    cat_list_free(&l);
    cleanup();
    /* refs/main a FIFO: every snapshot as @REV, one line */
    make("hf");
    sh("cd '%s'/models--tiny--Tiny-GGUF/refs && rm main && mkfifo main", store);
    ck_assert_int_eq(scan(CAT_HF, &l, &lg), 0);
    ck_assert(find(&l, "tiny/Tiny-GGUF/"
                       "tiny-a@0123456789abcdef0123456789abcdef01234567"));
    ck_assert(logged(&lg, "refs/main: not a regular file"));
    cat_list_free(&l);
    cleanup();
    /* an ollama manifest a FIFO: left out, one line */
    make("ollama");
    sh("cd '%s'/manifests/registry.ollama.ai/library && mkdir f && "
       "mkfifo f/latest",
       store);
    ck_assert_int_eq(scan(CAT_OLLAMA, &l, &lg), 0);
    ck_assert(find(&l, "tiny-a:latest"));
    ck_assert(!find(&l, "f:latest"));
    ck_assert(logged(&lg, "f/latest: not a readable regular file"));
    cat_list_free(&l);
    cleanup();
}
END_TEST

int main(void) {
    Suite *s = suite_create("catalog");
    TCase *tc = tcase_create("stores");
    tcase_add_test(tc, kinds);
    tcase_add_test(tc, ollama_store);
    tcase_add_test(tc, ollama_hostile);
    tcase_add_test(tc, hf_store);
    tcase_add_test(tc, hf_hostile);
    tcase_add_loop_test(tc, folder_store, 0, 2);
    tcase_add_test(tc, folder_hostile);
    tcase_add_loop_test(tc, stamps, 0, 3);
    tcase_add_test(tc, open_checks);
    tcase_add_test(tc, fifo_files);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
