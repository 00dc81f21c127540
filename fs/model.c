/*
 * model.c - opening and closing a model (struct gfs, ggufs.h): its source
 * (a GGUF, a shard set, a remote file) opened, validated, recovered,
 * locked, laid out, its overlay set up, its live view named and its
 * state made from the options.  mount.c opens a single-file mount's model
 * here before mounting; storefs.c opens a store's models here when first
 * looked into.  What is wrong is said in one line: on stderr before the
 * mount, in the mount's log inside a running store (gfs_model_args.store).
 */
#include "base/base.h"
#include "edits/edits.h"
#include "ggufs.h"
#include "kinds.h" /* gfs_kinds_set */
#include "live/live.h"
#include "meta/meta.h"
#include "model.h"
#include "base/mount.h"
#include "source/source.h"
#include "tok/tok.h"
#include "views/views.h"

#include "../status.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* A model and what its opening owns.  fs first: gfs_model_close finds
 * the rest from it. */
struct gfs_model {
    struct gfs fs;
    struct gfs_model_args a;
    char *path;  /* absolute path of the GGUF (fs.path) */
    char *shown; /* the source as every user may see it (/proc/mounts) and
                    the key of its state (overlay, outcome): path, or a
                    URL without user info and query string (own copy) */
    struct gguf_file file; /* the GGUF, opened once (gguf_file_open) */
    char *live_name;       /* fs.live_name when made here */
    char *mnt_abs;         /* fs.mnt resolved, when it could be */
    int locks;             /* fs's locks are initialised */
    int hash_named;        /* named by its hash: edits to an overlay */
};

static void say(struct gfs_model *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void say(struct gfs_model *m, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (m->a.store)
        gfs_log(&m->fs, "%s", line);
    else
        fprintf(stderr, "ggufs: %s\n", line);
}

/* A read-write mount first finishes a commit interrupted by a crash,
 * before anything reads the file.  0 or -1. */
static int recover_first(struct gfs_model *m) {
    struct gguf_error gerr = {0};
    bool did = false;
    if (gguf_recover_file(&m->file, &did, &gerr) != GGUF_OK) {
        say(m, "%s: %s", m->a.file, gerr.msg);
        return -1;
    }
    if (did)
        say(m, "%s: completed an interrupted commit", m->a.file);
    return 0;
}

/* One writer per file: read-write mounts lock it exclusively, read-only
 * mounts shared.  The lock is held until the last commit is done.  0 or
 * -1. */
static int lock_gguf(struct gfs_model *m) {
    if (flock(gguf_fd(m->fs.ctx),
              (m->a.o.readonly ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0)
        return 0;
    char where[4096];
    if (gfs_find_mount(m->path, 1, where, sizeof where))
        say(m, "%s: already mounted at %s", m->a.file, where);
    else
        say(m, "%s: locked by another program (%s)", m->a.file,
            strerror(errno));
    return -1;
}

/* -o overlay or -o overlay=PATH was given, or -o mix: a mix's edits go
 * to its overlay (the base and the sources are only read). */
static int overlay_wanted(const struct gfs_model *m) {
    return m->a.o.overlay || m->a.o.overlay_path || m->a.o.mix;
}

/* How the GGUF is opened: never for writing with -o overlay (the file may
 * be 0444, immutable, on a read-only filesystem: it is never written),
 * read-only with -o ro, else read-write if permitted (-1). */
static int overlay_rdwr(const struct gfs_model *m) {
    return m->a.o.readonly || overlay_wanted(m) ? 0 : -1;
}

/* A file named by its hash (gguf_file_hash_named: an ollama blob, an HF
 * cache blob through its snapshot's link, any file in a blobs/) is never
 * written by any mount: its edits go to its overlay as with -o overlay
 * (a read-only mount shows the overlay's edits, as -o ro,overlay does).
 * Decided on the descriptor opened, which is made read-only.  0 or -1. */
static int hash_named(struct gfs_model *m) {
    struct gguf_error gerr = {0};
    char real[PATH_MAX];
    if (overlay_wanted(m) || gfs_remote_is(m->a.file) ||
        !gguf_file_hash_named(&m->file, real, sizeof real))
        return 0;
    if (gguf_file_drop_write(&m->file, &gerr) != GGUF_OK) {
        say(m, "%s: %s", m->a.file, gerr.msg);
        return -1;
    }
    m->a.o.overlay = 1;
    m->hash_named = !m->a.o.readonly && !m->a.store;
    return 0;
}

/* -o overlay: the overlay found and applied once the GGUF is open
 * (edits/overlay.c, gfs_overlay_setup); a remote source's is known by URL and the server's
 * version.  0 or -1 after one line. */
static int setup_overlay(struct gfs_model *m) {
    char ident[512];
    int remote = gfs_remote_is(m->a.file);
    if (!overlay_wanted(m)) {
        gfs_edits_use_file(&m->fs);
        gfs_overlay_note(m->shown, m->a.file);
        return 0;
    }
    if (remote && gfs_remote_identity(&m->fs, ident, sizeof ident) != 0) {
        say(m, "%s: out of memory", m->a.file);
        return -1;
    }
    /* As mountinfo will show it (a bad one is reported by the mount). */
    char *mnt = realpath(m->a.o.mnt, NULL);
    /* A mix's overlay is its own, keyed by base and recipe: the base's
     * (mounted alone) never shows the mix's edits. */
    char key[2 * PATH_MAX + 8];
    char *recipe = m->a.o.mix ? realpath(m->a.o.mix, NULL) : NULL;
    snprintf(key, sizeof key, "%s%s%s", m->shown, recipe ? "+mix=" : "",
             recipe ? recipe : "");
    free(recipe);
    struct gfs_overlay_args a = {.path = key,
                                 .remote_id = remote ? ident : NULL,
                                 .opt = m->a.o.overlay_path,
                                 .file = m->a.file,
                                 .mnt = mnt,
                                 .readonly = m->a.o.readonly,
                                 .name_key = m->a.name_key};
    int r = gfs_overlay_setup(&m->fs, &a);
    free(mnt);
    if (r == 0 && m->hash_named)
        say(m,
            "%s: note: named by its hash%s%s%s, so never written by any "
            "mount: its edits go to the overlay %s, as with -o overlay",
            m->a.file, strcmp(m->path, m->a.file) ? " (" : "",
            strcmp(m->path, m->a.file) ? m->path : "",
            strcmp(m->path, m->a.file) ? ")" : "", gfs_overlay_where(&m->fs));
    return r;
}

/* Source selection (issue 13): an http(s):// or hf:// source is opened
 * through source/remote.c, read-only unless an overlay takes the edits (the
 * overlay has its own lock and is the durable store of the edits); there
 * is no file to recover, lock or keep pending edits of.  0, or -1 after
 * one line on stderr naming the source (or the shard at fault). */
/* An s3:// object that is not there, named without the trailing '/' of
 * a prefix: the store form (catalog/s3.c), as a hint; else "". */
static const char *s3_prefix_hint(const char *url, const char *msg) {
    size_t n = strlen(url);
    if (strncmp(url, "s3://", 5) ||
        (!strstr(msg, "NoSuchKey") && !strstr(msg, "HTTP 404")) ||
        (n > 5 && !strcmp(url + n - 5, ".gguf")))
        return "";
    return " (for every GGUF under a prefix, name it with its trailing '/': "
           "s3://BUCKET/PREFIX/)";
}

static int open_remote(struct gfs_model *m) {
    if (m->a.o.mix) { /* mix.c plans a local base's header only */
        say(m,
            "%s: -o mix needs a local base model (a file or a set's first "
            "shard); the recipe's sources may be URLs",
            m->a.file);
        return -1;
    }
    struct gguf_error gerr = {0};
    char bad[PATH_MAX + 64], msg[512];
    m->a.o.remote.hf = strncmp(m->a.file, "hf://", 5) == 0;
    if (!(m->path = gfs_remote_resolve(m->a.file, msg, sizeof msg)) ||
        !(m->shown = gfs_remote_shown(m->path, msg, sizeof msg))) {
        say(m, "%s: %s", m->a.file, msg);
        return -1;
    }
    if (msg[0]) /* a credential in the URL */
        say(m, "%s: warning: %s", m->shown, msg);
    if (!m->a.o.readonly && !overlay_wanted(m)) {
        m->a.o.readonly = 1;
    }
    /* What an overlay mount's commit at unmount said, if nobody heard. */
    (void)gfs_print_outcome(m->shown);
    unsigned flags = m->a.o.allow_nested ? GGUF_OPEN_ALLOW_NESTED : 0;
    if (gfs_remote_open(&m->fs, m->path, &m->a.o.remote, flags, bad, sizeof bad,
                        &gerr) != 0) {
        /* An hf:// source names the URL it was resolved to: a 404 there
         * is a wrong owner, repository, revision or path. */
        int first = strcmp(bad, m->path) == 0;
        int hf = first && strcmp(m->a.file, m->path) != 0;
        say(m, "%s: %s%s%s%s%s", first ? m->a.file : bad, gerr.msg,
            hf ? " (at " : "", hf ? m->shown : "", hf ? ")" : "",
            first ? s3_prefix_hint(m->a.file, gerr.msg) : "");
        return -1;
    }
    m->fs.ctx = m->fs.shards[0];
    m->fs.n_files = m->fs.n_shards;
    if (gfs_view_layout(&m->fs, &gerr) != 0) {
        say(m, "%s: %s", m->a.file, gerr.msg);
        return -1;
    }
    for (int sh = 0; sh < m->fs.n_shards; sh++)
        for (int w = 0; w < gguf_n_warnings(m->fs.shards[sh]); w++)
            say(m, "%s: warning: %s",
                sh ? gguf_path(m->fs.shards[sh]) : m->a.file,
                gguf_warning(m->fs.shards[sh], w));
    gfs_remote_stat(&m->fs, &m->fs.st);
    return 0;
}

static void mix_warn(void *u, const char *line) {
    say(u, "%s", line);
}

/* -o mix=RECIPE: the sources opened and each tensor picked (mix.c), before
 * the view is laid out.  0, or -1 after one line. */
static int open_mix(struct gfs_model *m) {
    char msg[2 * PATH_MAX + 512];
    if (!m->a.o.mix)
        return 0;
    if (m->a.store) {
        say(m, "%s: -o mix needs one base model, not a store", m->a.file);
        return -1;
    }
    if (gfs_mix_open(&m->fs, m->a.o.mix,
                     m->a.o.allow_nested ? GGUF_OPEN_ALLOW_NESTED : 0,
                     &m->a.o.remote, mix_warn, m, msg, sizeof msg) != 0) {
        say(m, "%s: %s", m->a.file, msg);
        return -1;
    }
    return 0;
}

/* A store's file must be the one its scan checked (beneath the store):
 * one swapped since is refused.  1 if so (said). */
static int store_file_swapped(struct gfs_model *m) {
    struct stat sb;
    const struct gfs_model_file *f = m->a.files;
    if (!f || (!f->dev && !f->ino))
        return 0;
    if (fstat(m->file.fd, &sb) == 0 && sb.st_dev == f->dev &&
        sb.st_ino == f->ino)
        return 0;
    say(m, "%s: not the file the store listed (replaced since)", m->a.file);
    return 1;
}

/* A store's shard set: its files are where the store keeps them (the HF
 * cache: blobs named by hash), named as the set: the sibling the library
 * asks for by name is found among the model's files by its last
 * component, opened by path and checked like the first. */
static enum gguf_status open_store_file(void *u, const char *name,
                                        unsigned flags, gguf_ctx **out,
                                        struct gguf_error *err) {
    struct gfs_model *m = u;
    const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
    for (int k = 0; k < m->a.n_files; k++) {
        const struct gfs_model_file *f = &m->a.files[k];
        if (strcmp(f->name, base) != 0)
            continue;
        if (k == 0)
            return gguf_open_file(out, &m->file, flags, err);
        enum gguf_status st;
        if (f->dfd >= 0) { /* in its directory, opened beneath the store */
            struct gguf_file gf;
            st = gguf_file_open_at(&gf, f->dfd, f->path, 0, err);
            if (st == GGUF_OK)
                st = gguf_open_file(out, &gf, flags, err);
            gguf_file_close(&gf);
        } else
            st = gguf_open(out, f->path, flags, err);
        struct stat sb;
        if (st == GGUF_OK && (f->dev || f->ino) &&
            (fstat(gguf_fd(*out), &sb) != 0 || sb.st_dev != f->dev ||
             sb.st_ino != f->ino)) {
            gguf_close(*out);
            *out = NULL;
            return gguf_fail(err, GGUF_E_IO,
                             "%s: not the file the store listed", f->path);
        }
        return st;
    }
    return gguf_fail(err, GGUF_E_IO, "%s: not in the store", base);
}

/* Whether descriptors a and b are one directory. */
static bool same_dir(int a, int b) {
    struct stat x, y;
    return fstat(a, &x) == 0 && fstat(b, &y) == 0 && x.st_dev == y.st_dev &&
           x.st_ino == y.st_ino;
}

/* Where shard path p of a store's set is opened again (gfs_fds_add): in
 * the model's directory by its name when it is there (its directory was
 * opened beneath the store), else by its path (the identity check makes
 * that safe from a swap; a shard in another directory: no layout has
 * one). */
static int store_shard_dir(const struct gfs_model *m, const char *p,
                           const char **name) {
    const char *base = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;
    for (int k = 1; k < m->a.n_files; k++)
        if (m->a.files[k].dfd >= 0 && strcmp(m->a.files[k].name, base) == 0 &&
            strcmp(m->a.files[k].path, p) == 0 &&
            same_dir(m->a.files[k].dfd, m->file.dfd)) {
            *name = base;
            return m->file.dfd;
        }
    *name = p;
    return AT_FDCWD;
}

/* The set: beside the first file by name, or a store's files. */
static enum gguf_status open_set(struct gfs_model *m, unsigned flags, char *bad,
                                 size_t bad_len, struct gguf_error *err) {
    if (!m->a.files || m->a.n_files < 2)
        return gguf_open_set(m->path, &m->file, flags, &m->fs.shards,
                             &m->fs.n_shards, bad, bad_len, err);
    char name[PATH_MAX];
    snprintf(name, sizeof name, "/%s", m->a.files[0].name);
    return gguf_open_set_by(name, open_store_file, m, flags, &m->fs.shards,
                            &m->fs.n_shards, bad, bad_len, err);
}

/* The set's shards released their descriptors (gguf_open_set): they are
 * opened again on demand (source/fds.c), a set's beside its first file in
 * the directory that was opened (m->file.dfd), a store's by the path its
 * scan found (each reopen is checked to be the file validated here).  A
 * store's model keeps fewer: the store bounds its models by FD_PER_MODEL.
 * 0 or -1 after one line. */
static int track_files(struct gfs_model *m) {
    int store = m->a.files && m->a.n_files >= 2;
    if (gfs_fds_init(&m->fs, m->a.store ? GFS_FDS_STORE_CAP : gfs_fds_cap()))
        goto nomem;
    for (int s = 1; s < m->fs.n_shards; s++) {
        const char *p = gguf_path(m->fs.shards[s]), *name;
        const char *base = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;
        int dfd = store ? store_shard_dir(m, p, &name) : m->file.dfd;
        if (gfs_fds_add(&m->fs, s, dfd, store ? name : base) != 0)
            goto nomem;
    }
    return 0;
nomem:
    say(m, "%s: out of memory", m->a.file);
    return -1;
}

/* Open and check: the GGUF (or shard set) opened, validated, laid out and
 * locked.  0, or -1 after one line on stderr. */
static int open_gguf(struct gfs_model *m) {
    struct gguf_error gerr = {0};
    if (gfs_remote_is(m->a.file))
        return open_remote(m);
    /* Absolute: the daemon changes its directory to / when it detaches.
     * A local store's model: the store's path (resolved at its mount) and
     * the scan's, its directory opened beneath the store: no path looked
     * up again (a link planted since could lead into a stopped FUSE mount:
     * realpath or open would hang on it). */
    const struct gfs_model_file *sf =
        m->a.store && m->a.files && m->a.files[0].dfd >= 0 ? m->a.files : NULL;
    m->path = sf ? strdup(m->a.file) : realpath(m->a.file, NULL);
    if (m->path && !(m->shown = strdup(m->path))) {
        free(m->path);
        m->path = NULL;
    }
    if (!m->path) {
        say(m, "%s: %s", m->a.file, strerror(errno));
        return -1;
    }
    char where[4096];
    /* Inside a store a request waits for this: no waiting for another
     * daemon's last commit there (the lock below says it is busy). */
    if (!m->a.store &&
        gfs_wait_previous(m->path, m->a.file,
                          gfs_find_mount(m->path, 1, where, sizeof where)) != 0)
        return -1;
    unsigned flags = m->a.o.allow_nested ? GGUF_OPEN_ALLOW_NESTED : 0;
    int fallback_ro = 0;
    /* The one lookup of the path: everything below uses this descriptor
     * (gguf/file.c). */
    if ((sf ? gguf_file_open_at(&m->file, sf->dfd, m->path, overlay_rdwr(m),
                                &gerr)
            : gguf_file_open(&m->file, m->path, overlay_rdwr(m), &gerr)) !=
        GGUF_OK) {
        say(m, "%s: %s", m->a.file, gerr.msg);
        return -1;
    }
    if (store_file_swapped(m) || hash_named(m) != 0)
        return -1;
    if (!m->a.o.readonly && !overlay_wanted(m) && !m->file.writable) {
        fallback_ro = 1;
        m->a.o.readonly = 1;
    }
    if (!m->a.o.readonly && !overlay_wanted(m)) {
        if (recover_first(m) != 0)
            return -1;
        flags |= GGUF_OPEN_RDWR;
    }
    char bad[PATH_MAX + 64];
    if (open_set(m, flags, bad, sizeof bad, &gerr) != GGUF_OK) {
        /* A read-only mount does not recover: a half-written header is
         * what an interrupted commit leaves, and the way out is named. */
        int interrupted = gguf_commit_interrupted(m->path);
        say(m, "%s: %s%s%s%s", strcmp(bad, m->path) == 0 ? m->a.file : bad,
            gerr.msg,
            interrupted ? "; a commit of this file was interrupted: "
                          "'ggufs --recover "
                        : "",
            interrupted ? m->a.file : "", interrupted ? "' completes it" : "");
        return -1;
    }
    m->fs.ctx = m->fs.shards[0];
    m->fs.n_files = m->fs.n_shards;
    if (track_files(m) != 0 || open_mix(m) != 0)
        return -1;
    if (gfs_view_layout(&m->fs, &gerr) != 0) {
        say(m, "%s: %s", m->a.file, gerr.msg);
        return -1;
    }
    if (lock_gguf(m) != 0)
        return -1;
    /* Locked: no live daemon of this file is left, so any pending record
     * is a dead mount's.  A read-write mount would replace it. */
    (void)gfs_print_outcome(m->path);
    if (gfs_pending_note(m->path, m->a.file) && !m->a.o.readonly &&
        !overlay_wanted(m)) {
        say(m,
            "%s: not mounted read-write over pending edits (-o ro "
            "mounts it to look)",
            m->a.file);
        return -1;
    }
    if (fallback_ro)
        say(m,
            "%s: warning: not writable, mounting "
            "read-only (-o overlay takes edits without writing the "
            "file)",
            m->a.file);
    for (int sh = 0; sh < m->fs.n_shards; sh++)
        for (int w = 0; w < gguf_n_warnings(m->fs.shards[sh]); w++)
            say(m, "%s: warning: %s",
                sh ? gguf_path(m->fs.shards[sh]) : m->a.file,
                gguf_warning(m->fs.shards[sh], w));
    if (fstat(gguf_fd(m->fs.ctx), &m->fs.st) != 0) {
        say(m, "%s: %s", m->a.file, strerror(errno));
        return -1;
    }
    return 0;
}

/* Naming: the live view is named like the source (model.gguf); for a
 * shard set like the merged file (NAME.gguf for NAME-00001-of-00003.gguf,
 * as the library's gguf_split_name parses it): clients such as
 * node-llama-cpp see the -00001-of- pattern and go looking for the other
 * shards beside it.  Never meta, tensors, f32, npy or index.tsv (the
 * views, views.c); none if no name fits. */
static void name_live_view(struct gfs_model *m) {
    if (m->a.live_name) { /* a store's model: named by the store */
        if ((m->live_name = strdup(m->a.live_name)) &&
            strlen(m->live_name) <= 255)
            m->fs.live_name = m->live_name;
        return;
    }
    /* A URL's path ends at its query string ("?download=true"). */
    size_t plen = m->fs.remote ? strcspn(m->path, "?#") : strlen(m->path);
    const char *base = m->path + plen;
    while (base > m->path && base[-1] != '/')
        base--;
    char *name = strndup(base, (size_t)(m->path + plen - base));
    int sno, scount;
    size_t cut;
    if (!name)
        return;
    if (m->fs.n_shards > 1 && gguf_split_name(name, &sno, &scount, &cut) &&
        cut > 0)
        strcpy(name + cut, ".gguf"); /* shorter: the suffix is 20 bytes */
    m->live_name = name;
    if (name[0] && strcmp(name, "meta") != 0 && strcmp(name, "tensors") != 0 &&
        strcmp(name, "f32") != 0 && strcmp(name, "npy") != 0 &&
        strcmp(name, "index.tsv") != 0 && strcmp(name, "meta.tsv") != 0 &&
        strlen(name) <= 255)
        m->fs.live_name = name;
}

/* The rest of struct gfs, from the options, and its locks. */
static void init_state(struct gfs_model *m) {
    m->fs.path = m->shown; /* logs, state: the source as shown to all */
    m->fs.mnt = m->a.mnt;
    if ((m->mnt_abs = realpath(m->fs.mnt, NULL))) /* before the mount */
        m->fs.mnt = m->mnt_abs;
    m->fs.uid = getuid();
    m->fs.gid = getgid();
    m->fs.readonly = m->a.o.readonly;
    m->fs.commit_flags = m->a.o.no_insert ? GGUF_COMMIT_NO_INSERT : 0;
    m->fs.timeout = m->a.o.timeout;
    m->fs.max_value = m->a.o.max_value;
    m->fs.tensor_dio = m->a.o.tensor_dio;
    m->fs.max_drafts = m->a.o.max_drafts;
    pthread_rwlock_init(&m->fs.lock, NULL);
    pthread_mutex_init(&m->fs.text_lock, NULL);
    pthread_mutex_init(&m->fs.fh_lock, NULL);
    pthread_mutex_init(&m->fs.alias_mu, NULL);
    gguf_set_progress(m->fs.ctx, gfs_progress_cb, &m->fs);
    m->locks = 1;
}

/* The parts' own state (struct gfs's part pointers), each made by its
 * part's init and freed by its part at the model's close. */
static int init_parts(struct gfs_model *m) {
    if (gfs_meta_init(&m->fs) == 0 && gfs_metatsv_init(&m->fs) == 0 &&
        gfs_tok_init(&m->fs) == 0 && gfs_live_init(&m->fs) == 0)
        return 0;
    say(m, "%s: out of memory", m->a.file);
    return -1;
}

struct gfs *gfs_model_open(const struct gfs_model_args *a, int *status) {
    struct gfs_model *m = calloc(1, sizeof *m);
    *status = EXIT_BADFILE;
    if (!m) {
        fprintf(stderr, "ggufs: %s: out of memory\n", a->file);
        gfs_extras_free(a->extras);
        return NULL;
    }
    m->a = *a;
    m->fs.extras = a->extras;
    m->file.dfd = m->file.fd = -1;
    m->fs.mount = a->mount;
    m->fs.log = &a->mount->log;
    m->fs.ino_base = a->ino_base;
    m->fs.parent = a->parent;
    gfs_kinds_set(&m->fs);
    /* A store's model is opened after the daemon detached: what the
     * overlay's code says goes to the mount's log. */
    gfs_say_to(a->store ? m->fs.log : NULL);
    int bad = open_gguf(m) != 0 || setup_overlay(m) != 0;
    gfs_say_to(NULL);
    if (bad)
        goto fail;
    name_live_view(m);
    init_state(m);
    if (init_parts(m) != 0)
        goto fail;
    /* A store's model, opened while its session runs: its live view
     * passed through as a single-file mount's (mount.c starts that one
     * once its session is up). */
    if (a->store && gfs_pt_start(&m->fs, a->o.passthrough))
        goto fail;
    return &m->fs;
fail:
    gfs_model_close(&m->fs);
    return NULL;
}

void gfs_model_set_aliases(struct gfs *fs, char *names, size_t n) {
    pthread_mutex_lock(&fs->alias_mu);
    char *old = fs->alias_names;
    fs->alias_names = names;
    fs->n_alias_names = names ? n : 0;
    pthread_mutex_unlock(&fs->alias_mu);
    free(old);
}

const struct gfs_opts *gfs_model_opts(const struct gfs *fs) {
    return &((const struct gfs_model *)fs)->a.o;
}

void gfs_model_close(struct gfs *fs) {
    struct gfs_model *m = (struct gfs_model *)fs;
    if (!m)
        return;
    gfs_pt_stop(&m->fs);
    if (m->locks) {
        pthread_mutex_destroy(&m->fs.fh_lock);
        gfs_meta_free(&m->fs);
        gfs_texts_free(&m->fs);
        gfs_kinds_free(&m->fs); /* each row's fini (kinds.h) */
        gfs_lnames_free(&m->fs);
        pthread_mutex_destroy(&m->fs.text_lock);
        pthread_mutex_destroy(&m->fs.alias_mu);
        pthread_rwlock_destroy(&m->fs.lock);
    }
    free(m->fs.alias_names);
    gfs_views_free(&m->fs);
    gfs_view_layout_free(&m->fs);
    gfs_edits_free(&m->fs); /* the edit store: the overlay's lock, its record */
    gfs_fds_free(&m->fs);
    gfs_mix_free(&m->fs);
    gguf_close_set(m->fs.shards,
                   m->fs.n_files ? m->fs.n_files : m->fs.n_shards);
    gfs_remote_close(&m->fs);
    gguf_file_close(&m->file);
    free(m->path);
    free(m->shown);
    free(m->live_name);
    free(m->mnt_abs);
    gfs_extras_free(m->a.extras);
    free(m);
}

void gfs_extras_free(struct gfs_extras *x) {
    for (size_t i = 0; x && i < x->n; i++) {
        free(x->v[i].name);
        free(x->v[i].file.path);
        free(x->v[i].file.name);
    }
    if (x)
        free(x->v);
    free(x);
}
