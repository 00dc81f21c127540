/*
 * detect.c - which kind of store a directory is (cat_detect), the kinds'
 * names, and the store's stamp (cat_stamp): a hash of the identity and
 * times of the directories whose change means the models may have
 * changed.  Watched: ollama: manifests/ and its host, namespace and model
 * directories (a tag added or removed), blobs/ (a blob arriving, as when a
 * tag is pulled again); the HF cache: the store, each models--* directory,
 * its refs/ and refs/main (a new revision), blobs/, snapshots/ and every
 * directory below it (a file of a snapshot arriving); folders: every
 * directory the scan walks.  A file rewritten in place changes no
 * directory: its model keeps its name, and the opener's dev/ino check
 * (cat_open_file) still holds.
 */
#include "internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *const kind_names[] = {
    [CAT_OLLAMA] = "ollama", [CAT_HF] = "hf",   [CAT_LMSTUDIO] = "lmstudio",
    [CAT_DIR] = "dir",       [CAT_HUB] = "hub", [CAT_S3] = "s3",
};

enum cat_kind cat_kind_named(const char *s) {
    for (size_t k = CAT_OLLAMA; s && k <= CAT_S3; k++)
        if (strcmp(s, kind_names[k]) == 0)
            return (enum cat_kind)k;
    return CAT_NONE;
}

const char *cat_kind_name(enum cat_kind k) {
    return k > CAT_NONE && k <= CAT_S3 ? kind_names[k] : "none";
}

static bool is_dir_at(int dirfd, const char *rel) {
    struct stat st;
    return fstatat(dirfd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
           S_ISDIR(st.st_mode);
}

/* A Hugging Face cache's repo directory name: models--OWNER--REPO (or
 * models--REPO for the old repos without an owner). */
bool cat_hf_repo_dir(const char *name) {
    return strncmp(name, "models--", 8) == 0 && name[8] && name[8] != '-';
}

enum cat_kind cat_detect(int dirfd) {
    if (is_dir_at(dirfd, "manifests") && is_dir_at(dirfd, "blobs"))
        return CAT_OLLAMA;
    DIR *d = cat_opendir(dirfd, "");
    enum cat_kind k = CAT_DIR;
    struct dirent *e;
    char rel[300];
    for (size_t n = 0;
         d && k == CAT_DIR && n < CAT_MAX_DIRENTS && (e = readdir(d)); n++) {
        if (!cat_hf_repo_dir(e->d_name) || strlen(e->d_name) > 255)
            continue;
        snprintf(rel, sizeof rel, "%s/snapshots", e->d_name);
        if (is_dir_at(dirfd, e->d_name) && is_dir_at(dirfd, rel))
            k = CAT_HF;
    }
    if (d)
        closedir(d);
    return k;
}

enum cat_kind cat_detect_below(int dirfd, const char **sub) {
    static const struct {
        const char *name;
        enum cat_kind kind;
    } homes[] = {{"models", CAT_OLLAMA}, {"hub", CAT_HF}};
    if (cat_detect(dirfd) != CAT_DIR)
        return CAT_NONE;
    for (size_t i = 0; i < sizeof homes / sizeof *homes; i++) {
        int fd = cat_open_plain(dirfd, homes[i].name, O_RDONLY | O_DIRECTORY);
        enum cat_kind k = fd >= 0 ? cat_detect(fd) : CAT_NONE;
        if (fd >= 0)
            close(fd);
        if (k == homes[i].kind) {
            *sub = homes[i].name;
            return k;
        }
    }
    return CAT_NONE;
}

/* ---- the stamp -------------------------------------------------------- */

static void mix(uint64_t *h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        *h = (*h ^ b[i]) * UINT64_C(0x100000001b3); /* FNV-1a */
}

static void mix_stat(uint64_t *h, const struct stat *st) {
    uint64_t v[6] = {st->st_dev,          st->st_ino,
                     st->st_mtim.tv_sec,  st->st_mtim.tv_nsec,
                     st->st_ctim.tv_nsec, st->st_size};
    mix(h, v, sizeof v);
}

static void mix_at(uint64_t *h, int dirfd, const char *rel) {
    struct stat st;
    if (fstatat(dirfd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0)
        mix_stat(h, &st);
    else
        mix(h, "-", 1); /* absent: differs from present */
}

static void stamp_dir(void *u, const char *rel, const struct stat *st) {
    (void)rel;
    mix_stat(u, st);
}

static void stamp_file(void *u, const char *rel, unsigned char t) {
    (void)u, (void)rel, (void)t;
}

/* The directories of manifests/ down to the model level (host,
 * namespace, model: depth 0 to 2), the models' by a stat each. */
static void stamp_manifests(uint64_t *h, int fd, int depth) {
    DIR *d = cat_opendir(fd, "");
    struct dirent *e;
    struct stat st;
    if (!d)
        return;
    if (fstat(dirfd(d), &st) == 0)
        mix_stat(h, &st);
    for (size_t n = 0; n < CAT_MAX_DIRENTS && (e = readdir(d)); n++) {
        if (e->d_name[0] == '.' || !is_dir_at(dirfd(d), e->d_name))
            continue;
        if (depth == 2) { /* a model's directory: its tags are its entries */
            mix_at(h, dirfd(d), e->d_name);
            continue;
        }
        int sub = cat_open_plain(dirfd(d), e->d_name, O_PATH | O_DIRECTORY);
        if (sub >= 0) {
            stamp_manifests(h, sub, depth + 1);
            close(sub);
        }
    }
    closedir(d);
}

static void stamp_hf(uint64_t *h, struct cat_scan *s) {
    DIR *d = cat_opendir(s->dirfd, "");
    struct dirent *e;
    char rel[300];
    struct cat_walk w = {.s = s, .u = h, .file = stamp_file, .dir = stamp_dir};
    for (size_t n = 0; d && n < CAT_MAX_DIRENTS && (e = readdir(d)); n++) {
        if (!cat_hf_repo_dir(e->d_name) || strlen(e->d_name) > 255)
            continue;
        mix_at(h, s->dirfd, e->d_name);
        static const char *const subs[] = {"refs", "refs/main", "blobs"};
        for (size_t i = 0; i < sizeof subs / sizeof *subs; i++) {
            snprintf(rel, sizeof rel, "%s/%s", e->d_name, subs[i]);
            mix_at(h, s->dirfd, rel);
        }
        snprintf(rel, sizeof rel, "%s/snapshots", e->d_name);
        cat_walk_tree(&w, rel);
    }
    if (d)
        closedir(d);
}

uint64_t cat_stamp(int dirfd, enum cat_kind kind) {
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    struct cat_scan s = {.dirfd = dirfd};
    struct cat_walk w = {
        .s = &s, .u = &h, .file = stamp_file, .dir = stamp_dir};
    mix_at(&h, dirfd, ".");
    if (kind == CAT_OLLAMA) {
        int fd = cat_open_plain(dirfd, "manifests", O_PATH | O_DIRECTORY);
        if (fd >= 0) {
            stamp_manifests(&h, fd, 0);
            close(fd);
        }
        mix_at(&h, dirfd, "blobs");
    } else if (kind == CAT_HF)
        stamp_hf(&h, &s);
    else if (kind == CAT_LMSTUDIO || kind == CAT_DIR)
        cat_walk_tree(&w, "");
    else
        return 0;
    return h ? h : 1;
}
