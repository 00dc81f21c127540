/*
 * nomount.c - the commands that read or edit a model without mounting it
 * (issue 37): `ggufs get|set|ls|tensors FILE ...` (cli/edit.c parses their
 * arguments).  No FUSE session, no /dev/fuse: they run in containers and
 * CI runners that have none.
 *
 * One code path with the mount, not a second implementation:
 *   - the model is opened as a mount opens it (model.c: the one lookup of
 *     the path, recovery of an interrupted commit, the lock that keeps one
 *     writer per file, shard sets, -o overlay, pending edits of a dead
 *     mount refused as a read-write mount refuses them);
 *   - what get, ls and tensors print is the text a read-only open of
 *     meta/KEY, meta.tsv and index.tsv gives (gfs_open_text: the node
 *     kind's own open), byte for byte what `cat` of the mount's file shows;
 *   - each edit is what meta/'s handlers do for the same shell command:
 *     KEY=TEXT is `echo TEXT > meta/KEY` (create if new, the text parsed
 *     against the key's type, protected keys refused), KEY:TYPE=... is
 *     `touch` then `setfattr -n user.gguf.type -v TYPE` first, `--remove
 *     KEY` is `rm meta/KEY`; refusals are logged as the mount logs them
 *     (one line naming the file and the key);
 *   - then one commit by the model's edit store, as at unmount (the file,
 *     crash-safely, in place when the header fits; or the overlay), whose
 *     report the store logs: on stderr, as a mount in the foreground.
 * Edits are all or nothing: the first refused edit stops the command
 * before anything is written (status 1).
 */
#include "../daemon.h"
#include "../ggufs.h"
#include "../kinds.h"
#include "../meta/meta.h"
#include "../model.h"
#include "../base/mount.h"
#include "../views/views.h"

#include "../../status.h"
#include "../ops.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The model as a read-write (set) or read-only (the others) mount would
 * open it, its messages on stderr.  NULL after one line; *status then. */
static struct gfs *nm_open(struct gfs_mount *mount, const struct gfs_opts *o,
                           int rdwr, int *status) {
    memset(mount, 0, sizeof *mount);
    mount->log.foreground = 1;
    pthread_mutex_init(&mount->log.lock, NULL);
    snprintf(mount->log.where, sizeof mount->log.where, "stderr");
    struct gfs_model_args a = {
        .file = o->file, .o = *o, .mount = mount, .parent = GFS_INO_ROOT};
    if (!rdwr && !a.o.overlay && !a.o.overlay_path)
        a.o.readonly = 1;
    struct gfs *fs = gfs_model_open(&a, status);
    if (fs && rdwr && fs->readonly) {
        fprintf(stderr,
                "ggufs: %s: not writable (-o overlay takes the edits "
                "without writing the file)\n",
                o->file);
        gfs_model_close(fs);
        *status = EXIT_BADFILE;
        return NULL;
    }
    if (fs)
        *status = 0; /* gfs_model_open's is for a failure */
    return fs;
}

static void nm_close(struct gfs_mount *mount, struct gfs *fs) {
    gfs_model_close(fs);
    pthread_mutex_destroy(&mount->log.lock);
}

/* Writes the text of the file name in directory dir to stdout, as a read
 * of the mounted file gives it.  0, or 1 after one line. */
static int nm_cat(struct gfs *fs, fuse_ino_t dir, const char *shown,
                  const char *name) {
    fuse_ino_t ino = 0;
    int err;
    pthread_rwlock_rdlock(&fs->lock);
    err = gfs_lookup_name(fs, dir, name, &ino);
    pthread_rwlock_unlock(&fs->lock);
    struct gfs_text *t = err ? NULL : gfs_open_text(fs, ino, &err);
    struct gguf_buf b = {0};
    for (uint64_t off = 0; t && !err;) {
        b.len = 0;
        if ((err = gfs_text_read(fs, t, off, (size_t)1 << 20, &b)) || !b.len)
            break;
        if (fwrite(b.p, 1, b.len, stdout) != b.len)
            err = errno ? errno : EIO;
        off += b.len;
    }
    gguf_buf_free(&b);
    gfs_text_put(t);
    if (!err && fflush(stdout) != 0)
        err = errno ? errno : EIO;
    if (err)
        fprintf(stderr, "ggufs: %s: %s: %s\n", fs->path, shown,
                err == ENOENT ? "no such key" : strerror(err));
    return err ? EXIT_BADFILE : 0;
}

int gfs_nomount_show(const struct gfs_opts *o, enum gfs_nm_show what,
                     char *const *names, int n) {
    struct gfs_mount mount;
    int status = 0;
    struct gfs *fs = nm_open(&mount, o, 0, &status);
    if (!fs)
        return status;
    if (what == GFS_NM_TENSORS &&
        gfs_views_init(fs, o->ggml, o->file) != 0) /* index.tsv is a view */
        status = EXIT_BADFILE;
    else if (what == GFS_NM_LS)
        status = nm_cat(fs, GFS_INO_ROOT, "meta.tsv", "meta.tsv");
    else if (what == GFS_NM_TENSORS)
        status = nm_cat(fs, GFS_INO_ROOT, "index.tsv", "index.tsv");
    for (int k = 0; what == GFS_NM_GET && k < n && !status; k++) {
        char shown[300];
        snprintf(shown, sizeof shown, "meta/%s", names[k]);
        status = nm_cat(fs, GFS_INO_META, shown, names[k]);
    }
    nm_close(&mount, fs);
    return status;
}

/* One edit, as meta/'s handlers make it (the file comment): 0 or errno,
 * the refusal logged by the edit code (or here, naming the key). */
static int nm_edit(struct gfs *fs, const struct gfs_nm_edit *e) {
    fuse_ino_t ino = 0;
    if (e->remove)
        return gfs_meta_unlink(fs, e->name);
    int err = gfs_lookup_name(fs, GFS_INO_META, e->name, &ino);
    int created = 0;
    if (err == ENOENT) {
        if ((err = gfs_meta_create(fs, e->name, &ino)) != 0)
            return err;
        created = 1;
    }
    if (!err && gfs_kind(fs, ino) != GFS_KV)
        err = EINVAL; /* a FILE of meta/ (an editor's scratch name) */
    if (!err && e->type)
        err = gfs_meta_set_type(fs, ino, e->type, strlen(e->type));
    int64_t i = err ? -1 : gfs_kv_index(fs, ino);
    const char *why = i >= 0 ? gfs_meta_unwritable(fs, i) : NULL;
    if (!err && why)
        err = gfs_meta_refuse_protected(fs, i, "a change");
    if (!err && e->text)
        err = gfs_meta_apply_text(fs, i, e->text, e->len, 0);
    if (err && created)
        gfs_meta_drop_new(fs, ino);
    return err;
}

int gfs_nomount_set(const struct gfs_opts *o, const struct gfs_nm_edit *edits,
                    int n) {
    struct gfs_mount mount;
    int status = 0, err = 0;
    struct gfs *fs = nm_open(&mount, o, 1, &status);
    if (!fs)
        return status;
    gfs_edit_begin(fs);
    for (int k = 0; k < n && !err; k++)
        if ((err = nm_edit(fs, &edits[k])) != 0)
            fprintf(stderr, "ggufs: %s: meta/%s: %s; nothing written\n",
                    o->file, edits[k].name, strerror(err));
    if (err) {
        status = EXIT_BADFILE;
    } else if (!gfs_edits_uncommitted(fs)) {
        fprintf(stderr,
                "ggufs: %s: nothing to commit (the values are already "
                "these)\n",
                o->file);
    } else if (gfs_edits_commit(fs, gfs_meta_files_note) != 0 ||
               fs->edits.commit_failed) {
        status = EXIT_COMMIT; /* the store's report (logged, as at unmount)
                                 says where the edits were saved */
    }
    gfs_edit_drop(fs); /* committed, or refused: nothing written */
    nm_close(&mount, fs);
    return status;
}
