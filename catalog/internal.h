/*
 * internal.h - what catalog/'s files share: the scan's state (the list
 * being built, the log), the safe walk (walk.c) and the model list's
 * building blocks (list.c).  Not part of the interface (catalog.h).
 */
#ifndef GGUFS_CATALOG_INTERNAL_H
#define GGUFS_CATALOG_INTERNAL_H

#include "catalog.h"

#include <dirent.h>
#include <stdbool.h>
#include <sys/stat.h>

/* The longest relative path the scan builds (a longer one is skipped with
 * a log line), and the most symlinks one resolution follows. */
#define CAT_MAX_PATH 4096
#define CAT_MAX_LINKS 40

/* One scan: the list being built and where its log lines go.  oom: an
 * allocation failed (the scan then fails as a whole: a list missing
 * models for want of memory would look like a store that lost them). */
struct cat_scan {
    int dirfd;
    struct cat_list *out;
    size_t cap;
    cat_log_fn log;
    void *log_u;
    int oom;
    int full;     /* CAT_MAX_MODELS reached (logged once) */
    size_t bytes; /* of the candidates' paths (CAT_MAX_LIST_BYTES) */
};

/* One log line, printf-style; the file at fault is named by the caller. */
void cat_logf(struct cat_scan *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- walk.c: the safe walk ------------------------------------------ */

/* Resolves rel (relative to dirfd, the store) into the file it names,
 * every symlink followed only while it stays beneath dirfd: an absolute
 * target, a ".." above the store, more than CAT_MAX_LINKS links or a path
 * longer than CAT_MAX_PATH is refused.  A canonical path holding no
 * symlink is opened as it is (cat_open_plain); any other is walked by
 * descriptors (O_PATH|O_NOFOLLOW one component at a time), so a
 * directory swapped for a symlink during the walk cannot lead out; where
 * the kernel has openat2 the same path is also opened with
 * RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS and must reach the same file.  On success *canon (malloc'ed) is the
 * file's path relative to the store without symlinks, *st its lstat; 0.
 * Else -1 and *why says what is wrong (a static string), errno set. */
int cat_resolve(int dirfd, const char *rel, char **canon, struct stat *st,
                const char **why);

/* Opens rel beneath dirfd with flags when no component of rel is a
 * symlink (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or one O_NOFOLLOW
 * component at a time); -1 with errno otherwise. */
int cat_open_plain(int dirfd, const char *rel, int flags);

/* Opens directory name beneath parent for reading, not through a
 * symlink ("": parent itself); NULL (errno) if it cannot. */
DIR *cat_opendir(int parent, const char *name);

/* The folder walk: calls file(u, rel, d_type) for each entry of the tree
 * below rel (a directory relative to s->dirfd; "" for the store itself)
 * that is not a directory, and dir(u, rel, st) for each directory walked
 * (rel itself included).  Names starting with '.' are left out, symlinks
 * to directories are not walked, at most CAT_MAX_DEPTH levels and
 * CAT_MAX_DIRENTS entries per directory are read (beyond: one log line).
 * Returns -1 only when s->oom was set. */
struct cat_walk {
    struct cat_scan *s;
    void *u;
    void (*file)(void *u, const char *rel, unsigned char d_type);
    void (*dir)(void *u, const char *rel, const struct stat *st);
};
int cat_walk_tree(struct cat_walk *w, const char *rel);

/* ---- list.c: building the list -------------------------------------- */

/* A model's name from its components' text: each component that is not a
 * valid file name is escaped as meta/ names are (gguf_name_escape); name
 * is '/'-separated.  NULL on out of memory. */
char *cat_name_fix(const char *name);
/* A new model, empty, appended to s->out (NULL: full or out of memory,
 * both recorded in s).  Its name is taken (freed on failure). */
struct cat_model *cat_model_add(struct cat_scan *s, char *name);
/* Appends a file to m; -1 on out of memory (s->oom) or > CAT_MAX_FILES. */
int cat_model_file(struct cat_scan *s, struct cat_model *m,
                   const struct cat_file *f);
/* Drops the last model of s->out (one found wrong while being built). */
void cat_model_drop(struct cat_scan *s);
void cat_file_free(struct cat_file *f);

/* A GGUF file found by a walk, before shard sets are grouped: base is the
 * model's name if the file is alone (the path without .gguf), no/count
 * its place in a shard set (0 if none) and cut the length of the set's
 * name in base. */
struct cat_cand {
    char *base;
    size_t cut;
    int no, count;
    struct cat_file file;
};
struct cat_cands {
    struct cat_cand *v;
    size_t n, cap;
};
/* Adds a file at relative name rel (ending in .gguf) whose resolved file
 * is f (taken: freed on failure); suffix (may be NULL) is appended to the
 * model's name ("@REV").  Past CAT_MAX_LIST_BYTES of paths (rel's and
 * f's) the file is left out (the first one logged).  -1 on out of
 * memory. */
int cat_cand_add(struct cat_scan *s, struct cat_cands *c, const char *rel,
                 const char *suffix, struct cat_file *f);
/* Turns the candidates into models: single files as they are, a shard set
 * once (all of 1..N present, none twice, all of the same N; else the set
 * is skipped with one log line naming its first file).  Frees c. */
void cat_cands_group(struct cat_scan *s, struct cat_cands *c,
                     int content_addressed);
/* What is wrong with a path a remote listing gave (a Hub repo's path, an
 * S3 key below its prefix), len bytes: NUL inside, empty, longer than
 * CAT_MAX_PATH, absolute, a control character (below 0x20, 0x7f: a name
 * shown in a listing or a log line must not forge lines or send escape
 * sequences), an empty, "." or ".." component; NULL if nothing. */
const char *cat_path_fault(const char *p, size_t len);
/* Sorts s->out, applies the NAME@model rule, drops duplicate names (one
 * log line each). */
void cat_list_finish(struct cat_scan *s);
/* The end of a remote listing (hub.c, s3.c), r its pages' result (0 or
 * -1 with msg): c grouped (its log lines only if r is 0), one line
 * counting the skipped entries past the logged first ones ("N more WHAT
 * skipped"), the list finished; on failure, or out of memory (msg names
 * shown), s->out freed.  0 or -1. */
int cat_remote_done(struct cat_scan *s, struct cat_cands *c, int r,
                    const char *shown, size_t skipped, size_t logged,
                    const char *what, char *msg, size_t n);

/* A file the folder walk found (cat_walk's file function, folder.c):
 * a *.gguf file is resolved beneath the store (a symlink leaving it, a
 * file not regular: one log line) and added to c as the model file named
 * prefix + (rel + skip) + suffix. */
struct cat_found {
    struct cat_scan *s;
    struct cat_cands c;
    const char *prefix, *suffix;
    size_t skip;
};
void cat_found_file(void *u, const char *rel, unsigned char d_type);

/* ---- the kinds' scans ------------------------------------------------ */
void cat_scan_ollama(struct cat_scan *s);
void cat_scan_hf(struct cat_scan *s);
void cat_scan_folder(struct cat_scan *s);
bool cat_ends_gguf(const char *name);
/* models--OWNER--REPO (detect.c) */
bool cat_hf_repo_dir(const char *name);

#endif
