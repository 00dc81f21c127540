/*
 * overlay.c - mounts with -o overlay[=PATH]: the edits go to an overlay
 * (gguf/overlay.c), never into the GGUF, which is opened read-only and may
 * be 0444, immutable or on a read-only filesystem; and the commands
 * `ggufs --overlay-apply FILE [OVERLAY]`, `ggufs --overlay-drop FILE
 * [OVERLAY]` and `ggufs --overlay-rebase FILE|URL [OVERLAY]
 * [--take-overlay]` (their arguments checked by cli/commands.c).  The
 * source may be remote (fs/remote.c): its overlay is
 * known by URL and the server's version (ETag), and --overlay-apply
 * refuses it (a remote file is never written).
 *
 * Policy.  At mount, an overlay that belongs to the GGUF (or shard set) is
 * applied: meta/, the live view and the xattrs show the edited model; one
 * that does not is refused, saying how it differs and where it is.  The
 * overlay is the durable store of the mount's edits: it is rewritten
 * (crash-safely) after every edit, as the pending record is for other
 * mounts, so a daemon killed at any instant loses nothing and leaves no
 * record to settle; unmount, `ggufs -u` and fsync make sure it holds the
 * last edit.  --overlay-apply commits an overlay into its GGUF with
 * gguf_commit, exactly as a mount with those edits would, then removes
 * it; --overlay-drop removes it.  --overlay-rebase carries an overlay
 * refused because its source changed (a new ETag, a file edited) onto the
 * new version: it reads the source (never writes it), refuses, naming
 * them, the keys upstream also changed (gguf_overlay_conflicts) unless
 * --take-overlay, and rewrites the overlay for the new version with
 * gguf_overlay_write (crash-safe: the old overlay or the new one).
 *
 * Locks.  Every writer of an overlay (a read-write mount, the two
 * commands) holds its lock (gguf_overlay_lock), taken after the source's
 * own flock where there is one (lock order: source, then overlay): two
 * mounts given the same -o overlay=PATH, or two mounts of one URL, would
 * otherwise each rewrite it.  A read-only overlay mount reads it once and
 * takes none.  A read-write mount also keeps a record in the state
 * directory (GGUF_STATE_OVERLAY_MOUNT: mountpoint, overlay) while it
 * runs, for `ggufs -u` after its daemon died.  Prefix gfs_overlay_.
 */
#include "ggufs.h"
#include "source/source.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../status.h"

struct gfs_overlay {
    char *path;                /* -o overlay=PATH made absolute; NULL for
                                  the default one */
    char shown[PATH_MAX + 64]; /* where it is, for messages */
    struct gguf_overlay_id id; /* of the source, as mounted */
    gguf_ctx *disk;            /* the source without edits, what the overlay is
                       written against: parsed at the first write (a
                       mount pays for one parse only) */
    int lock_fd;       /* the overlay's lock (read-write mounts), or -1 */
    char *lock_source; /* the source it was taken for (its default name) */
    char *source;      /* the record's key and mountpoint (record_mount): */
    char *mnt;         /* read-write mounts; else NULL */
    int recorded;      /* the record was written (at the first overlay write) */
    /* Guarded by fs->lock (written under it for writing). */
    uint64_t written_gen; /* fs->generation last written to the overlay */
    int failed;           /* that write failed */
};

/* arg made absolute without resolving it (the daemon runs in /). */
static char *absolute(const char *arg) {
    char cwd[PATH_MAX], *out = NULL;
    if (arg[0] == '/')
        return strdup(arg);
    if (!getcwd(cwd, sizeof cwd) || asprintf(&out, "%s/%s", cwd, arg) < 0)
        return NULL;
    return out;
}

/* Where the overlay is: opt (made absolute into *path) or the default for
 * source.  0, or -1 after one line. */
static int locate(const char *file, const char *source, const char *opt,
                  char **path, char *shown, size_t n) {
    struct gguf_error err = {0};
    *path = NULL;
    if (opt) {
        if (!*opt || !(*path = absolute(opt))) {
            fprintf(stderr, "ggufs: %s: -o overlay=%s: %s\n", file, opt,
                    *opt ? strerror(errno) : "the PATH is empty");
            return -1;
        }
        snprintf(shown, n, "%s", *path);
        return 0;
    }
    if (gguf_overlay_default_path(source, shown, n, &err) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: no place for an overlay: %s\n", file,
                err.msg);
        return -1;
    }
    return 0;
}

/* Whether an overlay made for made was made for the source id names (an
 * earlier version of it): --overlay-rebase may carry it over.  A local
 * source's path is not compared (a model moved with its overlay named
 * still is that model). */
static bool same_source(const struct gguf_overlay_id *made,
                        const struct gguf_overlay_id *id) {
    return made->remote == id->remote &&
           (!id->remote || strcmp(made->source, id->source) == 0);
}

/* Loads the overlay at opath (NULL: the default; shown in messages) for
 * the source identified by id and applies it to ctx when it belongs
 * there.  1 applied, 0 none, -1 refused (one line said why). */
static int load_apply(const char *file, const char *opath, const char *shown,
                      const struct gguf_overlay_id *id, gguf_ctx *ctx,
                      int64_t *set, int64_t *removed) {
    struct gguf_error err = {0};
    struct gguf_overlay_id made;
    gguf_ctx *ov = NULL;
    bool found = false;
    char why[1024];
    int r = -1;
    if (gguf_overlay_load(opath, id->source, &ov, &made, &found, &err) !=
        GGUF_OK) {
        fprintf(stderr, "ggufs: %s: %s\n", file, err.msg);
        goto out;
    }
    if (!found) {
        r = 0;
        goto out;
    }
    if (!gguf_overlay_matches(&made, id, why, sizeof why)) {
        const char *sp = opath ? " " : "", *op = opath ? opath : "";
        char rebase[PATH_MAX * 2 + 256] = "";
        if (same_source(&made, id))
            snprintf(rebase, sizeof rebase,
                     "'ggufs --overlay-rebase %s%s%s' carries its edits onto "
                     "the new version, ",
                     file, sp, op);
        fprintf(stderr,
                "ggufs: %s: the overlay %s does not belong to this file (%s): "
                "not applied; %s'ggufs --overlay-drop %s%s%s' forgets it\n",
                file, shown, why, rebase, file, sp, op);
        goto out;
    }
    if (gguf_overlay_apply(ctx, ov, set, removed, &err) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: the overlay %s cannot be applied: %s\n",
                file, shown, err.msg);
        goto out;
    }
    r = 1;
out:
    gguf_close(ov);
    return r;
}

/* ---- the overlay's lock and the mount's record ---------------------- */

#define WAIT_MS 60000 /* for a daemon finishing its last write */

/* Splits what a lock's holder wrote ("SOURCE\nMOUNTPOINT\n", take_lock)
 * in place; either may be "". */
static void holder_fields(char *held, const char **src, const char **mnt) {
    char *nl = strchr(held, '\n');
    *src = held;
    *mnt = "";
    if (!nl)
        return;
    *nl = '\0';
    *mnt = nl + 1;
    if ((nl = strchr(nl + 1, '\n')))
        *nl = '\0';
}

/* The overlay's lock for a writer (a read-write mount, --overlay-apply,
 * --overlay-drop): the lock's descriptor, or -1 after one line.  A holder
 * whose mount is still there is refused at once; with wait, a holder
 * whose mount is gone (a daemon finishing its last write after an
 * unmount) is waited for, at most WAIT_MS, saying so once. */
static int take_lock(const char *file, const char *source, const char *opath,
                     const char *shown, const char *mnt, int wait) {
    char *holder = NULL, held[2048], where[4096];
    int fd = -1, said = 0;
    if (asprintf(&holder, "%s\n%s\n", source, mnt ? mnt : "") < 0) {
        fprintf(stderr, "ggufs: %s: out of memory\n", file);
        return -1;
    }
    for (int ms = 0;; ms += 50) {
        struct gguf_error err = {0};
        const char *hsrc, *hmnt;
        enum gguf_status st = gguf_overlay_lock(opath, source, holder, &fd,
                                                held, sizeof held, &err);
        if (st != GGUF_E_BUSY) {
            if (st != GGUF_OK)
                fprintf(stderr, "ggufs: %s: %s\n", file, err.msg);
            break;
        }
        holder_fields(held, &hsrc, &hmnt);
        int mounted = hmnt[0] && gfs_find_mount(hmnt, 0, where, sizeof where);
        if (mounted || !wait || ms >= WAIT_MS) {
            fprintf(stderr,
                    "ggufs: %s: the overlay %s is in use by %s%s%s%s%s\n", file,
                    shown, mounted ? "the mount of " : "another ggufs",
                    mounted || !hsrc[0] ? "" : " on ", hsrc,
                    mounted ? " at " : (wait ? " (still after 60 s)" : ""),
                    mounted ? hmnt : "");
            break;
        }
        if (!said++)
            fprintf(stderr,
                    "ggufs: %s: waiting for an earlier mount to finish "
                    "writing the overlay %s\n",
                    file, shown);
        usleep(50000);
    }
    free(holder);
    return fd;
}

/* The record of a read-write overlay mount (GGUF_STATE_OVERLAY_MOUNT,
 * keyed by the source): "MOUNTPOINT\nOVERLAY\n", kept while it runs, so
 * that `ggufs -u` of the mount after its daemon died can say where the
 * edits are (gfs_overlay_dead_note).  Its first line into mnt, the rest
 * into where; 1 if there is one. */
static int read_record(const char *source, char *mnt, size_t mn, char *where,
                       size_t wn) {
    struct gguf_buf b = {0};
    bool found = false;
    const char *hm, *hw;
    if (gguf_state_read(source, GGUF_STATE_OVERLAY_MOUNT, &b, &found, NULL) !=
            GGUF_OK ||
        !found || gguf_buf_add(&b, "", 1) != GGUF_OK) {
        gguf_buf_free(&b);
        return 0;
    }
    for (size_t i = 0; i + 1 < b.len; i++)
        if ((b.p[i] < 0x20 && b.p[i] != '\n') || b.p[i] == 0x7f)
            b.p[i] = '?';
    holder_fields((char *)b.p, &hm, &hw);
    snprintf(mnt, mn, "%s", hm);
    snprintf(where, wn, "%s", hw);
    gguf_buf_free(&b);
    return 1;
}

/* Written once the mount has written the overlay (its edits are there),
 * not at mount: a mount without edits costs no state write. */
static void record_mount(struct gfs_overlay *o) {
    char *body = NULL;
    if (o->recorded || !o->source || !o->mnt)
        return;
    int n = asprintf(&body, "%s\n%s\n", o->mnt, o->shown);
    o->recorded = n > 0 && gguf_state_write(o->source, GGUF_STATE_OVERLAY_MOUNT,
                                            body, (size_t)n, NULL) == GGUF_OK;
    free(body);
}

/* At the daemon's end: its record goes, unless a later mount of the same
 * source made it its own. */
static void unrecord_mount(struct gfs_overlay *o) {
    char mnt[4096], where[4096];
    if (o->recorded &&
        read_record(o->source, mnt, sizeof mnt, where, sizeof where) &&
        strcmp(mnt, o->mnt) == 0)
        (void)gguf_state_remove(o->source, GGUF_STATE_OVERLAY_MOUNT, NULL);
    free(o->source);
    free(o->mnt);
    o->source = o->mnt = NULL;
}

int gfs_overlay_dead_note(const char *source, const char *mnt) {
    char rmnt[4096], where[4096], def[4096];
    if (!read_record(source, rmnt, sizeof rmnt, where, sizeof where) ||
        strcmp(rmnt, mnt) != 0)
        return 0;
    int is_default =
        gguf_overlay_default_path(source, def, sizeof def, NULL) == GGUF_OK &&
        strcmp(def, where) == 0;
    fprintf(stderr,
            "ggufs: %s: the edits of this mount are in the overlay %s "
            "(written after every edit; the file was never written): "
            "'ggufs -o overlay%s%s %s MOUNTPOINT' shows them again\n",
            source, where, is_default ? "" : "=", is_default ? "" : where,
            source);
    (void)gguf_state_remove(source, GGUF_STATE_OVERLAY_MOUNT, NULL);
    return 1;
}

/* ---- mounts with -o overlay ----------------------------------------- */

int gfs_overlay_setup(struct gfs *fs, const struct gfs_overlay_args *a) {
    struct gguf_error err = {0};
    struct gfs_overlay *o = calloc(1, sizeof *o);
    int64_t set = 0, removed = 0;
    if (!o) {
        fprintf(stderr, "ggufs: %s: out of memory\n", a->file);
        return -1;
    }
    o->lock_fd = -1;
    fs->overlay = o;
    /* Recovery writes the file, which an overlay mount never does; until
     * it has run the header may be half old, half new. */
    if (!a->remote_id && gguf_commit_interrupted(a->path)) {
        fprintf(stderr,
                "ggufs: %s: a commit of this file was interrupted: 'ggufs "
                "--recover %s' completes it (an overlay mount never writes "
                "the file)\n",
                a->file, a->file);
        return -1;
    }
    if (locate(a->file, a->path, a->opt, &o->path, o->shown, sizeof o->shown) !=
        0)
        return -1;
    /* One writer per overlay (a remote source has no file to lock); a
     * read-only mount reads it once, whole (it is replaced by rename). */
    if (!a->readonly && (o->lock_fd = take_lock(a->file, a->path, o->path,
                                                o->shown, a->mnt, 1)) < 0)
        return -1;
    if (o->lock_fd >= 0 && !(o->lock_source = strdup(a->path))) {
        fprintf(stderr, "ggufs: %s: out of memory\n", a->file);
        return -1;
    }
    if (gguf_overlay_identify(fs->shards, fs->n_shards, a->path,
                              a->remote_id != NULL, a->remote_id, &o->id,
                              &err) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: %s\n", a->file, err.msg);
        return -1;
    }
    int r = load_apply(a->file, o->path, o->shown, &o->id, fs->shards[0], &set,
                       &removed);
    if (r < 0)
        return -1;
    if (r > 0)
        fprintf(stderr,
                "ggufs: %s: overlay %s applied (%lld key%s set, %lld "
                "removed)\n",
                a->file, o->shown, (long long)set, set == 1 ? "" : "s",
                (long long)removed);
    if (!a->readonly && a->mnt &&
        (!(o->source = strdup(a->path)) || !(o->mnt = strdup(a->mnt)))) {
        fprintf(stderr, "ggufs: %s: out of memory\n", a->file);
        return -1;
    }
    return 0;
}

const char *gfs_overlay_where(const struct gfs *fs) {
    return fs->overlay ? fs->overlay->shown : NULL;
}

void gfs_overlay_free(struct gfs *fs) {
    if (!fs->overlay)
        return;
    unrecord_mount(fs->overlay);
    if (fs->overlay->lock_fd >= 0) /* after the last write */
        gguf_overlay_unlock(fs->overlay->path, fs->overlay->lock_source,
                            fs->overlay->lock_fd);
    free(fs->overlay->lock_source);
    gguf_close(fs->overlay->disk);
    free(fs->overlay->path);
    free(fs->overlay);
    fs->overlay = NULL;
}

/* Writes the overlay: the edits against the source as opened (its
 * header parsed again from the bytes the context keeps, once: no I/O, so
 * a remote source is served alike). */
static enum gguf_status write_overlay(struct gfs *fs, struct gguf_error *err) {
    struct gfs_overlay *o = fs->overlay;
    if (!o->disk) {
        enum gguf_status st =
            gguf_open_original(&o->disk, fs->ctx, GGUF_OPEN_ALLOW_NESTED, err);
        if (st != GGUF_OK)
            return st;
    }
    enum gguf_status st =
        gguf_overlay_write(o->path, fs->ctx, o->disk, &o->id, err);
    if (st == GGUF_OK)
        record_mount(o);
    return st;
}

int gfs_overlay_keep(struct gfs *fs) {
    struct gfs_overlay *o = fs->overlay;
    struct gguf_error err = {0};
    if (fs->readonly || o->written_gen == fs->generation)
        return o->failed ? EIO : 0;
    o->written_gen = fs->generation;
    o->failed = write_overlay(fs, &err) != GGUF_OK;
    if (o->failed)
        gfs_log(fs, "%s: cannot write the overlay: %s", fs->path, err.msg);
    return o->failed ? EIO : 0;
}

int gfs_overlay_uncommitted(struct gfs *fs) {
    struct gfs_overlay *o = fs->overlay;
    return o->written_gen != fs->generation || o->failed;
}

int gfs_overlay_commit(struct gfs *fs) {
    struct gfs_overlay *o = fs->overlay;
    struct gguf_error err = {0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int wrote =
        !fs->readonly && (o->written_gen != fs->generation || o->failed);
    enum gguf_status st = wrote ? write_overlay(fs, &err) : GGUF_OK;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (st != GGUF_OK) {
        const char *saved = gfs_meta_save_aside(fs, NULL);
        o->failed = 1;
        fs->commit_failed = 1;
        if (snprintf(fs->commit_msg, sizeof fs->commit_msg,
                     "%s: commit to the overlay failed: %s; %s%s", fs->path,
                     err.msg,
                     saved[0] ? "edits saved in "
                              : "the edits are still "
                                "only in the mount",
                     saved) < 0)
            fs->commit_msg[0] = '\0';
        gfs_log(fs, "%s", fs->commit_msg);
        gfs_meta_files_note(fs, fs->commit_msg, sizeof fs->commit_msg, 1);
        return gfs_errno(&err);
    }
    o->written_gen = fs->generation;
    o->failed = 0;
    fs->commit_failed = 0;
    int w;
    if (wrote)
        w = snprintf(fs->commit_msg, sizeof fs->commit_msg,
                     "%s: committed to the overlay %s (the file is never "
                     "written), %.1f ms",
                     fs->path, o->shown,
                     (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
                         (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    else
        w = snprintf(fs->commit_msg, sizeof fs->commit_msg,
                     "%s: the overlay %s holds every edit (written as they "
                     "were made; the file is never written)",
                     fs->path, o->shown);
    if (w < 0)
        fs->commit_msg[0] = '\0';
    if (wrote)
        gfs_log(fs, "%s", fs->commit_msg);
    gfs_meta_files_note(fs, fs->commit_msg, sizeof fs->commit_msg, 1);
    return 0;
}

void gfs_overlay_note(const char *path, const char *file) {
    char where[PATH_MAX + 64];
    struct stat sb;
    if (gguf_overlay_default_path(path, where, sizeof where, NULL) == GGUF_OK &&
        lstat(where, &sb) == 0)
        fprintf(stderr,
                "ggufs: %s: note: the overlay %s holds edits of this file; "
                "this mount shows the file without them (-o overlay "
                "applies them%s)\n",
                file, where,
                gfs_remote_is(path) ? ""
                                    : ", and a commit here makes the "
                                      "overlay stale");
}

/* ---- ggufs --overlay-apply / --overlay-drop ------------------------- */

/* The GGUF (set) of file: *v, *n.  For writing (--overlay-apply): opened
 * read-write after recovery, locked exclusively against mounts.  For
 * reading only (--overlay-rebase, which never writes the source): refused
 * while a commit is interrupted (recovering would write), locked shared (a
 * read-write mount, whose lock is exclusive, may be committing).  0, or -1
 * after one line. */
static int open_source(const char *file, const char *path, int write,
                       gguf_ctx ***v, int *n) {
    struct gguf_error err = {0};
    struct gguf_file f;
    bool did = false;
    char bad[PATH_MAX + 64] = "";
    int r = -1;
    if (!write && gguf_commit_interrupted(path)) {
        fprintf(stderr,
                "ggufs: %s: a commit of this file was interrupted: "
                "'ggufs --recover %s' completes it first\n",
                file, file);
        return -1;
    }
    if (gguf_file_open(&f, path, write, &err) != GGUF_OK ||
        (write && gguf_recover_file(&f, &did, &err) != GGUF_OK)) {
        fprintf(stderr, "ggufs: %s: %s\n", file, err.msg);
        goto out;
    }
    if (gguf_open_set(path, &f, write ? GGUF_OPEN_RDWR : 0, v, n, bad,
                      sizeof bad, &err) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: %s\n", bad[0] ? bad : file, err.msg);
        goto out;
    }
    if (flock(gguf_fd((*v)[0]), (write ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
        fprintf(stderr, "ggufs: %s: mounted%s or locked by another program\n",
                file, write ? "" : " read-write");
        gguf_close_set(*v, *n);
        *v = NULL;
        goto out;
    }
    r = 0;
out:
    gguf_file_close(&f); /* the contexts hold their own descriptors */
    return r;
}

/* --overlay-apply of a URL: a remote file is never written.  One line
 * that says where its overlay stays; EXIT_BADFILE. */
static int apply_remote_refused(const char *file, const char *opt) {
    char msg[512], shown[PATH_MAX + 64], *opath = NULL;
    char *url = gfs_remote_resolve(file, msg, sizeof msg);
    if (!url)
        fprintf(stderr, "ggufs: %s: %s\n", file, msg);
    else if (locate(file, url, opt, &opath, shown, sizeof shown) == 0)
        fprintf(stderr,
                "ggufs: %s: --overlay-apply cannot commit into a remote file "
                "(it is never written); its overlay stays at %s: 'ggufs -o "
                "overlay' mounts the model with it, --overlay-drop forgets "
                "it\n",
                file, shown);
    free(opath);
    free(url);
    return EXIT_BADFILE;
}

int gfs_overlay_apply(const char *file, const char *opt) {
    struct gguf_error err = {0};
    struct gguf_commit_info info = {0};
    struct gguf_overlay_id id;
    char shown[PATH_MAX + 64], *opath = NULL, *path = NULL;
    gguf_ctx **v = NULL;
    int n = 0, status = EXIT_BADFILE, lock = -1;
    int64_t set = 0, removed = 0;
    if (gfs_remote_is(file))
        return apply_remote_refused(file, opt);
    if (!(path = realpath(file, NULL))) {
        fprintf(stderr, "ggufs: %s: %s\n", file, strerror(errno));
        goto out;
    }
    if (locate(file, path, opt, &opath, shown, sizeof shown) != 0 ||
        open_source(file, path, 1, &v, &n) != 0 ||
        (lock = take_lock(file, path, opath, shown, NULL, 0)) < 0)
        goto out;
    if (gguf_overlay_identify(v, n, path, false, NULL, &id, &err) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: %s\n", file, err.msg);
        goto out;
    }
    int r = load_apply(file, opath, shown, &id, v[0], &set, &removed);
    if (r == 0)
        fprintf(stderr, "ggufs: %s: no overlay (none at %s)\n", file, shown);
    if (r <= 0)
        goto out;
    status = EXIT_COMMIT;
    if (gfs_commit_metered(v[0], 0, &info, &err) != GGUF_OK) {
        fprintf(stderr,
                "ggufs: %s: committing the overlay %s failed: %s; the overlay "
                "is kept\n",
                file, shown, err.msg);
        goto out;
    }
    bool found = false;
    enum gguf_status rs = gguf_overlay_remove(opath, path, &found, &err);
    printf("ggufs: %s: overlay %s committed into the file (%lld key%s set, "
           "%lld removed; %s, data at %llu)%s\n",
           file, shown, (long long)set, set == 1 ? "" : "s", (long long)removed,
           gfs_commit_how(&info), (unsigned long long)info.new_data_offset,
           rs == GGUF_OK ? "; the overlay was removed" : "");
    if (rs != GGUF_OK) {
        fprintf(stderr,
                "ggufs: %s: the overlay could not be removed (%s); it no "
                "longer matches the file\n",
                file, err.msg);
        goto out;
    }
    status = 0;
out:
    gguf_overlay_unlock(opath, path, lock);
    gguf_close_set(v, n);
    free(opath);
    free(path);
    return status;
}

/* The source --overlay-drop names, absolute: a URL resolved, else the
 * path (the model may be gone: its overlay can still be dropped).  NULL
 * after one line. */
static char *drop_source(const char *file) {
    char msg[512], *path;
    if (gfs_remote_is(file)) {
        if (!(path = gfs_remote_resolve(file, msg, sizeof msg)))
            fprintf(stderr, "ggufs: %s: %s\n", file, msg);
        return path;
    }
    if (!(path = realpath(file, NULL)))
        path = absolute(file);
    if (!path)
        fprintf(stderr, "ggufs: %s: %s\n", file, strerror(errno));
    return path;
}

int gfs_overlay_drop(const char *file, const char *opt) {
    struct gguf_error err = {0};
    char shown[PATH_MAX + 64], *opath = NULL;
    char *path = drop_source(file);
    int status = EXIT_BADFILE, fd = -1, lock = -1;
    bool found = false;
    if (!path || locate(file, path, opt, &opath, shown, sizeof shown) != 0)
        goto out;
    /* A local file's mounts lock it (read-only ones too); every writer of
     * the overlay holds the overlay's lock. */
    fd = gfs_remote_is(path)
             ? -1
             : open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
        fprintf(stderr,
                "ggufs: %s: mounted or locked by another program: the "
                "overlay %s is in use\n",
                file, shown);
        goto out;
    }
    if ((lock = take_lock(file, path, opath, shown, NULL, 0)) < 0)
        goto out;
    if (gguf_overlay_remove(opath, path, &found, &err) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: %s\n", file, err.msg);
        goto out;
    }
    if (!found) {
        fprintf(stderr, "ggufs: %s: no overlay (none at %s)\n", file, shown);
        goto out;
    }
    printf("ggufs: %s: overlay %s dropped (its edits are gone; the %s was "
           "never changed)\n",
           file, shown, gfs_remote_is(path) ? "remote file" : "file");
    status = 0;
out:
    gguf_overlay_unlock(opath, path, lock);
    if (fd >= 0)
        close(fd);
    free(opath);
    free(path);
    return status;
}

/* ---- ggufs --overlay-rebase ---------------------------------------- */

/* The source of a rebase, read-only (it is never written): *v, *n its
 * contexts, *rfs the remote mount state of a URL (NULL for a file), its
 * identity made into id.  0, or -1 after one line. */
static int rebase_open(const char *file, const char *path, struct gfs **rfs,
                       gguf_ctx ***v, int *n, struct gguf_overlay_id *id) {
    struct gguf_error err = {0};
    char bad[PATH_MAX + 64] = "", ident[512];
    if (gfs_remote_is(path)) {
        struct gfs_remote_opts ro = {.retries = -1,
                                     .hf = strncmp(file, "hf://", 5) == 0};
        if (!(*rfs = calloc(1, sizeof **rfs)))
            return fprintf(stderr, "ggufs: %s: out of memory\n", file), -1;
        if (gfs_remote_open(*rfs, path, &ro, 0, bad, sizeof bad, &err) != 0) {
            fprintf(stderr, "ggufs: %s: %s\n", bad[0] ? bad : file, err.msg);
            return -1;
        }
        *v = (*rfs)->shards;
        *n = (*rfs)->n_shards;
        if (gfs_remote_identity(*rfs, ident, sizeof ident) != 0)
            return fprintf(stderr, "ggufs: %s: out of memory\n", file), -1;
    } else if (open_source(file, path, 0, v, n) != 0) {
        return -1;
    }
    if (gguf_overlay_identify(*v, *n, path, *rfs != NULL, *rfs ? ident : NULL,
                              id, &err) != GGUF_OK)
        return fprintf(stderr, "ggufs: %s: %s\n", file, err.msg), -1;
    return 0;
}

/* Carries ov (made for made) onto v[0], the source's new version, and
 * writes it as the overlay of id.  EXIT_BADFILE (refused: upstream also
 * changed keys and !take), EXIT_COMMIT (the write failed: the old overlay
 * kept) or 0, after one line. */
static int rebase_write(const char *file, const char *opath, const char *shown,
                        const gguf_ctx *ov, gguf_ctx *src,
                        const struct gguf_overlay_id *id, int take) {
    struct gguf_error err = {0};
    struct gguf_buf names = {0};
    gguf_ctx *disk = NULL;
    int64_t nc = 0, set = 0, removed = 0;
    bool based = false;
    int status = EXIT_BADFILE;
    if (gguf_overlay_conflicts(ov, src, &names, &nc, &based, &err) != GGUF_OK ||
        gguf_open_original(&disk, src, GGUF_OPEN_ALLOW_NESTED, &err) !=
            GGUF_OK) {
        fprintf(stderr, "ggufs: %s: %s\n", file, err.msg);
        goto out;
    }
    const char *list = names.p ? (const char *)names.p : "";
    if (nc && !take) {
        fprintf(stderr,
                "ggufs: %s: not rebased: %lld key%s the overlay %s edits "
                "changed upstream too%s: %.*s; nothing written "
                "(--take-overlay keeps the overlay's values, "
                "--overlay-drop takes the new version's)\n",
                file, (long long)nc, nc == 1 ? "" : "s", shown,
                based ? ""
                      : " (or may have: the overlay predates base records)",
                (int)names.len, list);
        goto out;
    }
    status = EXIT_COMMIT;
    if (gguf_overlay_apply(src, ov, &set, &removed, &err) != GGUF_OK ||
        gguf_overlay_write(opath, src, disk, id, &err) != GGUF_OK) {
        fprintf(stderr,
                "ggufs: %s: rebasing the overlay %s failed: %s; the overlay "
                "is as it was\n",
                file, shown, err.msg);
        goto out;
    }
    printf("ggufs: %s: overlay %s rebased onto the source's new version "
           "(%lld key%s set, %lld removed%s%.*s)\n",
           file, shown, (long long)set, set == 1 ? "" : "s", (long long)removed,
           nc ? "; the overlay's values taken over upstream's for " : "",
           (int)names.len, list);
    status = 0;
out:
    gguf_close(disk);
    gguf_buf_free(&names);
    return status;
}

int gfs_overlay_rebase(const char *file, const char *opt, int take) {
    struct gguf_error err = {0};
    struct gguf_overlay_id id, made;
    char shown[PATH_MAX + 64], why[1024], *opath = NULL;
    char *path = drop_source(file);
    struct gfs *rfs = NULL;
    gguf_ctx **v = NULL, *ov = NULL;
    int n = 0, status = EXIT_BADFILE, lock = -1;
    bool found = false;
    if (!path || locate(file, path, opt, &opath, shown, sizeof shown) != 0 ||
        rebase_open(file, path, &rfs, &v, &n, &id) != 0 ||
        (lock = take_lock(file, path, opath, shown, NULL, 0)) < 0)
        goto out;
    if (gguf_overlay_load(opath, path, &ov, &made, &found, &err) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: %s\n", file, err.msg);
        goto out;
    }
    if (!found)
        fprintf(stderr, "ggufs: %s: no overlay (none at %s)\n", file, shown);
    else if (!same_source(&made, &id))
        fprintf(stderr,
                "ggufs: %s: the overlay %s was made for %s %s, not this "
                "source: not rebased\n",
                file, shown, made.remote ? "the remote file" : "the file",
                made.source);
    else if (gguf_overlay_matches(&made, &id, why, sizeof why)) {
        printf("ggufs: %s: the overlay %s already belongs to this version "
               "(nothing to do)\n",
               file, shown);
        status = 0;
    } else
        status = rebase_write(file, opath, shown, ov, v[0], &id, take);
out:
    gguf_close(ov);
    gguf_overlay_unlock(opath, path, lock);
    gguf_close_set(v, n);
    if (rfs) {
        gfs_remote_close(rfs);
        free(rfs);
    }
    free(opath);
    free(path);
    return status;
}
