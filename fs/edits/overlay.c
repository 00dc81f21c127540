/*
 * overlay.c - the edit store of a mount with -o overlay[=PATH] (edits.h):
 * the edits go to an overlay (gguf/overlay.c), never into the GGUF, which
 * is opened read-only and may be 0444, immutable, on a read-only
 * filesystem or remote (fs/source/remote.c: its overlay is known by URL
 * and the server's version, ETag).  At mount, an overlay that belongs to
 * the GGUF (or shard set) is applied: meta/, the live view and the xattrs
 * show the edited model; one that does not is refused, saying how it
 * differs and where it is.  The overlay is the durable store of the
 * mount's edits: it is rewritten whole, crash-safely, after every edit
 * (the keep), as the pending record is for the file store, so a daemon
 * killed at any instant loses nothing and leaves no record to settle;
 * unmount, `ggufs -u` and fsync (the commit) make sure it holds the last
 * edit.
 *
 * Also the overlay's place, lock and mount record, which the overlay
 * commands share (fs/cmd/overlaycmds.c, through overlay.h).  Locks.  Every writer
 * of an overlay (a read-write mount, the commands) holds its lock
 * (gguf_overlay_lock), taken after the source's own flock where there is
 * one (lock order: source, then overlay): two mounts given the same -o
 * overlay=PATH, or two mounts of one URL, would otherwise each rewrite
 * it.  A read-only overlay mount reads it once and takes none.  A
 * read-write mount also keeps a record in the state directory
 * (GGUF_STATE_OVERLAY_MOUNT: mountpoint, overlay) while it runs, for
 * `ggufs -u` after its daemon died (gfs_overlay_dead_note).  Prefix
 * gfs_overlay_.
 */
#include "../base/base.h"
#include "overlay.h"
#include "edits.h"

#include "../ggufs.h"
#include "../kinds.h"
#include "../source/source.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct gfs_overlay {
    char *path;                /* -o overlay=PATH made absolute; NULL for
                                  the default one */
    char shown[PATH_MAX + 64]; /* where it is, for messages */
    struct gguf_overlay_id id; /* of the source, as mounted */
    int lock_fd;       /* the overlay's lock (read-write mounts), or -1 */
    char *lock_source; /* the source it was taken for (its default name) */
    char *source;      /* the record's key and mountpoint (record_mount): */
    char *mnt;         /* read-write mounts; else NULL */
    char *name_key;    /* a store model's name (carry.c), read-write mounts */
    int recorded;      /* the record was written (at the first overlay write) */
};

char *gfs_overlay_absolute(const char *arg) {
    char cwd[PATH_MAX], *out = NULL;
    if (arg[0] == '/')
        return strdup(arg);
    if (!getcwd(cwd, sizeof cwd) || asprintf(&out, "%s/%s", cwd, arg) < 0)
        return NULL;
    return out;
}

int gfs_overlay_locate(const char *file, const char *source, const char *opt,
                       char **path, char *shown, size_t n) {
    struct gguf_error err = {0};
    *path = NULL;
    if (opt) {
        if (!*opt || !(*path = gfs_overlay_absolute(opt))) {
            gfs_say("ggufs: %s: -o overlay=%s: %s\n", file, opt,
                    *opt ? strerror(errno) : "the PATH is empty");
            return -1;
        }
        snprintf(shown, n, "%s", *path);
        return 0;
    }
    if (gguf_overlay_default_path(source, shown, n, &err) != GGUF_OK) {
        gfs_say("ggufs: %s: no place for an overlay: %s\n", file, err.msg);
        return -1;
    }
    return 0;
}

bool gfs_overlay_same_source(const struct gguf_overlay_id *made,
                             const struct gguf_overlay_id *id) {
    return made->remote == id->remote &&
           (!id->remote || strcmp(made->source, id->source) == 0);
}

int gfs_overlay_load_apply(const char *file, const char *opath,
                           const char *shown, const struct gguf_overlay_id *id,
                           gguf_ctx *ctx, int64_t *set, int64_t *removed,
                           struct gguf_overlay_tensor **t, size_t *nt) {
    struct gguf_error err = {0};
    struct gguf_overlay_id made;
    gguf_ctx *ov = NULL;
    bool found = false;
    char why[1024];
    int r = -1;
    if (gguf_overlay_load(opath, id->source, &ov, &made, &found, &err) !=
        GGUF_OK) {
        gfs_say("ggufs: %s: %s\n", file, err.msg);
        goto out;
    }
    if (!found) {
        r = 0;
        goto out;
    }
    if (!gguf_overlay_matches(&made, id, why, sizeof why)) {
        const char *sp = opath ? " " : "", *op = opath ? opath : "";
        char rebase[PATH_MAX * 2 + 256] = "";
        if (gfs_overlay_same_source(&made, id))
            snprintf(rebase, sizeof rebase,
                     "'ggufs --overlay-rebase %s%s%s' carries its edits onto "
                     "the new version, ",
                     file, sp, op);
        gfs_say("ggufs: %s: the overlay %s does not belong to this file (%s): "
                "not applied; %s'ggufs --overlay-drop %s%s%s' forgets it\n",
                file, shown, why, rebase, file, sp, op);
        goto out;
    }
    if (gguf_overlay_apply(ctx, ov, set, removed, &err) != GGUF_OK ||
        (t && gguf_overlay_tensors(ov, t, nt, &err) != GGUF_OK)) {
        gfs_say("ggufs: %s: the overlay %s cannot be applied: %s\n", file,
                shown, err.msg);
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

int gfs_overlay_take_lock(const char *file, const char *source,
                          const char *opath, const char *shown, const char *mnt,
                          int wait) {
    char *holder = NULL, held[2048], where[4096];
    int fd = -1, said = 0;
    if (asprintf(&holder, "%s\n%s\n", source, mnt ? mnt : "") < 0) {
        gfs_say("ggufs: %s: out of memory\n", file);
        return -1;
    }
    for (int ms = 0;; ms += 50) {
        struct gguf_error err = {0};
        const char *hsrc, *hmnt;
        enum gguf_status st = gguf_overlay_lock(opath, source, holder, &fd,
                                                held, sizeof held, &err);
        if (st != GGUF_E_BUSY) {
            if (st != GGUF_OK)
                gfs_say("ggufs: %s: %s\n", file, err.msg);
            break;
        }
        holder_fields(held, &hsrc, &hmnt);
        int mounted = hmnt[0] && gfs_find_mount(hmnt, 0, where, sizeof where);
        if (mounted || !wait || ms >= WAIT_MS) {
            gfs_say("ggufs: %s: the overlay %s is in use by %s%s%s%s%s\n", file,
                    shown, mounted ? "the mount of " : "another ggufs",
                    mounted || !hsrc[0] ? "" : " on ", hsrc,
                    mounted ? " at " : (wait ? " (still after 60 s)" : ""),
                    mounted ? hmnt : "");
            break;
        }
        if (!said++)
            gfs_say("ggufs: %s: waiting for an earlier mount to finish "
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
    gfs_carry_record(o->name_key, o->source);
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
    free(o->name_key);
    o->source = o->mnt = o->name_key = NULL;
}

int gfs_overlay_dead_note(const char *source, const char *mnt) {
    char rmnt[4096], where[4096], def[4096];
    if (!read_record(source, rmnt, sizeof rmnt, where, sizeof where) ||
        strcmp(rmnt, mnt) != 0)
        return 0;
    int is_default =
        gguf_overlay_default_path(source, def, sizeof def, NULL) == GGUF_OK &&
        strcmp(def, where) == 0;
    gfs_say("ggufs: %s: the edits of this mount are in the overlay %s "
            "(written after every edit; the file was never written): "
            "'ggufs -o overlay%s%s %s MOUNTPOINT' shows them again\n",
            source, where, is_default ? "" : "=", is_default ? "" : where,
            source);
    (void)gguf_state_remove(source, GGUF_STATE_OVERLAY_MOUNT, NULL);
    return 1;
}

/* ---- mounts with -o overlay ----------------------------------------- */

/* ---- mounts with -o overlay ----------------------------------------- */

int gfs_overlay_setup(struct gfs *fs, const struct gfs_overlay_args *a) {
    struct gguf_error err = {0};
    struct gfs_overlay *o = calloc(1, sizeof *o);
    int64_t set = 0, removed = 0;
    if (!o) {
        gfs_say("ggufs: %s: out of memory\n", a->file);
        return -1;
    }
    o->lock_fd = -1;
    fs->edits.overlay = o;
    fs->edits.ops = &gfs_edits_overlay;
    /* Recovery writes the file, which an overlay mount never does; until
     * it has run the header may be half old, half new. */
    if (!a->remote_id && gguf_commit_interrupted(a->path)) {
        gfs_say("ggufs: %s: a commit of this file was interrupted: 'ggufs "
                "--recover %s' completes it (an overlay mount never writes "
                "the file)\n",
                a->file, a->file);
        return -1;
    }
    if (gfs_overlay_locate(a->file, a->path, a->opt, &o->path, o->shown,
                           sizeof o->shown) != 0)
        return -1;
    /* One writer per overlay (a remote source has no file to lock); a
     * read-only mount reads it once, whole (it is replaced by rename). */
    if (!a->readonly &&
        (o->lock_fd = gfs_overlay_take_lock(a->file, a->path, o->path, o->shown,
                                            a->mnt, 1)) < 0)
        return -1;
    if (o->lock_fd >= 0 && !(o->lock_source = strdup(a->path))) {
        gfs_say("ggufs: %s: out of memory\n", a->file);
        return -1;
    }
    if (gguf_overlay_identify(fs->shards, fs->n_shards, a->path,
                              a->remote_id != NULL, a->remote_id, &o->id,
                              &err) != GGUF_OK) {
        gfs_say("ggufs: %s: %s\n", a->file, err.msg);
        return -1;
    }
    struct gguf_overlay_tensor *t = NULL;
    size_t nt = 0;
    char msg[PATH_MAX + 512];
    int r = gfs_overlay_load_apply(a->file, o->path, o->shown, &o->id,
                                   fs->shards[0], &set, &removed, &t, &nt);
    /* A store model's blob without one: the overlay its name had. */
    int carried = r == 0 && !a->opt
                      ? gfs_carry_find(fs, a->name_key, a->file, &o->id,
                                       a->readonly, &set, &removed)
                      : 0;
    if (r < 0 || carried < 0)
        return -1;
    if (r > 0 && !a->readonly)
        gfs_carry_record(a->name_key, a->path);
    /* Its tensors (source/patch.c): read on every overlay mount that has
     * some, written on a read-write one. */
    if ((nt || !a->readonly) &&
        gfs_patch_init(fs, o->path, o->id.source, t, nt, msg, sizeof msg)) {
        gfs_say("ggufs: %s: overlay %s: %s\n", a->file, o->shown, msg);
        gguf_overlay_tensors_free(t, nt);
        return -1;
    }
    gguf_overlay_tensors_free(t, nt);
    if (r > 0)
        gfs_say("ggufs: %s: overlay %s applied (%lld key%s set, %lld "
                "removed)\n",
                a->file, o->shown, (long long)set, set == 1 ? "" : "s",
                (long long)removed);
    if (!a->readonly && a->mnt &&
        (!(o->source = strdup(a->path)) || !(o->mnt = strdup(a->mnt)) ||
         (a->name_key && !(o->name_key = strdup(a->name_key))))) {
        gfs_say("ggufs: %s: out of memory\n", a->file);
        return -1;
    }
    return 0;
}

const char *gfs_overlay_where(const struct gfs *fs) {
    return fs->edits.overlay ? fs->edits.overlay->shown : NULL;
}

static void overlay_free(struct gfs *fs) {
    struct gfs_overlay *o = fs->edits.overlay;
    if (!o)
        return;
    unrecord_mount(o);
    gfs_patch_free(fs);
    if (o->lock_fd >= 0) /* after the last write */
        gguf_overlay_unlock(o->path, o->lock_source, o->lock_fd);
    free(o->lock_source);
    free(o->path);
    free(o);
    fs->edits.overlay = NULL;
}

/* Writes the overlay: the edits against the source as opened (its
 * header parsed again from the bytes the context keeps, once: no I/O, so
 * a remote source is served alike). */
static enum gguf_status write_overlay(struct gfs *fs, struct gguf_error *err) {
    struct gfs_overlay *o = fs->edits.overlay;
    if (!fs->edits.disk) {
        enum gguf_status st = gguf_open_original(&fs->edits.disk, fs->ctx,
                                                 GGUF_OPEN_ALLOW_NESTED, err);
        if (st != GGUF_OK)
            return st;
    }
    struct gguf_overlay_tensor *t = NULL;
    size_t nt = 0;
    if (gfs_patch_records(fs, &t, &nt)) {
        gguf_overlay_tensors_free(t, nt);
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    }
    enum gguf_status st = gguf_overlay_write(o->path, fs->ctx, fs->edits.disk,
                                             &o->id, t, nt, err);
    gguf_overlay_tensors_free(t, nt);
    if (st == GGUF_OK)
        record_mount(o);
    return st;
}

static int overlay_keep(struct gfs *fs) {
    struct gfs_edits *s = &fs->edits;
    struct gguf_error err = {0};
    if (fs->readonly || s->kept_gen == fs->generation)
        return s->kept_failed ? EIO : 0;
    s->kept_gen = fs->generation;
    s->kept_failed = write_overlay(fs, &err) != GGUF_OK;
    if (s->kept_failed)
        gfs_log(fs, "%s: cannot write the overlay: %s", fs->path, err.msg);
    return s->kept_failed ? EIO : 0;
}

/* True if edits were made since the overlay was last written whole. */
static int overlay_uncommitted(struct gfs *fs) {
    return fs->edits.kept_gen != fs->generation || fs->edits.kept_failed;
}

/* Writes the overlay if the last keep did not write this generation. */
static int overlay_commit(struct gfs *fs, char *what, size_t n,
                          struct gguf_error *err) {
    struct gfs_edits *s = &fs->edits;
    const char *shown = s->overlay->shown;
    char tw[sizeof s->commit_msg / 2] = "";
    if (gfs_kinds_commit_sync(fs, tw, sizeof tw, err))
        return GFS_EDITS_FAILED;
    if (tw[0] && !overlay_uncommitted(fs)) {
        snprintf(what, n,
                 "%s kept in the overlay %s (the file is never "
                 "written)",
                 tw, shown);
        return GFS_EDITS_WROTE;
    }
    struct stat sb; /* no edit and no overlay (a mix, a fresh model) */
    if (!fs->generation && lstat(shown, &sb) != 0 && errno == ENOENT) {
        snprintf(what, n, "nothing to commit (no edit, no overlay)");
        return GFS_EDITS_HELD;
    }
    if (fs->readonly || !overlay_uncommitted(fs)) {
        snprintf(what, n,
                 "the overlay %s holds every edit (written as they were "
                 "made; the file is never written)",
                 shown);
        return GFS_EDITS_HELD;
    }
    if (write_overlay(fs, err) != GGUF_OK) {
        s->kept_failed = 1;
        return GFS_EDITS_FAILED;
    }
    s->kept_gen = fs->generation;
    s->kept_failed = 0;
    snprintf(what, n,
             "committed to the overlay %s (the file is never written)%s%s",
             shown, tw[0] ? "; " : "", tw);
    return GFS_EDITS_WROTE;
}

/* The save-aside failed: the overlay may hold an older generation. */
static void overlay_stranded(struct gfs *fs, const char *why, char *where,
                             size_t n) {
    (void)fs;
    (void)why;
    snprintf(where, n, "the edits are still only in the mount");
}

const struct gfs_edits_ops gfs_edits_overlay = {
    .name = "the overlay",
    .commit_what = "commit to the overlay",
    .keep = overlay_keep,
    .uncommitted = overlay_uncommitted,
    .commit = overlay_commit,
    .stranded = overlay_stranded,
    .free = overlay_free,
};

void gfs_overlay_note(const char *path, const char *file) {
    char where[PATH_MAX + 64];
    struct stat sb;
    if (gguf_overlay_default_path(path, where, sizeof where, NULL) == GGUF_OK &&
        lstat(where, &sb) == 0)
        gfs_say("ggufs: %s: note: the overlay %s holds edits of this file; "
                "this mount shows the file without them (-o overlay "
                "applies them%s)\n",
                file, where,
                gfs_remote_is(path) ? ""
                                    : ", and a commit here makes the "
                                      "overlay stale");
}
