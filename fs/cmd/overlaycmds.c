/*
 * overlay.c - the overlay commands: `ggufs --overlay-apply FILE
 * [OVERLAY]`, `ggufs --overlay-drop FILE [OVERLAY]` and `ggufs
 * --overlay-rebase FILE|URL [OVERLAY] [--take-overlay]` (their arguments
 * checked by cli/commands.c).  Mounts with -o overlay are an edit store
 * (edits/overlay.c), whose place, lock and loading of an overlay these
 * commands share (edits/overlay.h).
 *
 * --overlay-apply commits an overlay into its GGUF with gguf_commit,
 * exactly as a mount with those edits would, then removes it; it refuses
 * a remote source (a remote file is never written).  --overlay-drop
 * removes it.  --overlay-rebase carries an overlay refused because its
 * source changed (a new ETag, a file edited) onto the new version: it
 * reads the source (never writes it), refuses, naming them, the keys
 * upstream also changed (gguf_overlay_conflicts) unless --take-overlay,
 * and rewrites the overlay for the new version with gguf_overlay_write
 * (crash-safe: the old overlay or the new one).  Each holds the overlay's
 * lock, taken after the source's own flock where there is one (lock
 * order: source, then overlay).  Prefix gfs_overlay_.
 */
#include "../ggufs.h"
#include "../source/source.h"
#include "../edits/overlay.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "../../status.h"

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
    if (gguf_file_open(&f, path, write, &err) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: %s\n", file, err.msg);
        goto out;
    }
    if (write && gfs_hash_named_refused(&f, file, "--overlay-apply"))
        goto out;
    if (write && gguf_recover_file(&f, &did, &err) != GGUF_OK) {
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
    else if (gfs_overlay_locate(file, url, opt, &opath, shown, sizeof shown) ==
             0)
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

/* The file of the set v[0, n) that holds tensor t at its size: its index,
 * *j the tensor's there; -1 with err set when none does. */
static int tensor_in_set(gguf_ctx **v, int n,
                         const struct gguf_overlay_tensor *t, int64_t *j,
                         struct gguf_error *err) {
    for (int s = 0; s < n; s++)
        if ((*j = gguf_find_tensor(v[s], t->name, strlen(t->name))) >= 0) {
            if (gguf_tensor_size(v[s], *j) == t->size)
                return s;
            break;
        }
    gguf_fail(err, GGUF_E_CHANGED, "the file has no tensor %s of %llu bytes",
              t->name, (unsigned long long)t->size);
    return -1;
}

/* Writes the tensors t[0, nt) the overlay holds (its data file) into the
 * set v[0, n), each a crash-safe whole replace (gguf_stage_apply: old or
 * new after a crash; a second --overlay-apply writes the same bytes
 * again).  0, or -1 after one line. */
static int apply_tensors(const char *file, const char *opath, const char *path,
                         gguf_ctx **v, int n,
                         const struct gguf_overlay_tensor *t, size_t nt) {
    struct gguf_error err = {0};
    char shown[PATH_MAX + 64] = "";
    gguf_stage *sg = NULL;
    size_t done = 0;
    char *buf = NULL;
    int fd = nt ? gguf_overlay_data_open(opath, path, false, shown,
                                         sizeof shown, &err)
                : -1;
    if (nt && (fd < 0 || !(buf = malloc(1 << 20))))
        goto out;
    for (; done < nt; done++) {
        int64_t j = -1;
        int s = tensor_in_set(v, n, &t[done], &j, &err);
        if (s < 0 || gguf_stage_new(v[s], gguf_tensor_offset(v[s], j),
                                    t[done].size, &sg, &err) != GGUF_OK)
            goto out;
        for (uint64_t o = 0; o < t[done].size;) {
            size_t k = t[done].size - o < (1 << 20) ? (size_t)(t[done].size - o)
                                                    : (size_t)1 << 20;
            ssize_t r = pread(fd, buf, k, (off_t)(t[done].off + o));
            if (r != (ssize_t)k) {
                gguf_fail(&err, GGUF_E_IO, "cannot read %s", shown);
                goto out;
            }
            if (gguf_stage_write(v[s], sg, o, buf, k, &err) != GGUF_OK)
                goto out;
            o += k;
        }
        if (gguf_stage_apply(v[s], sg, &err) != GGUF_OK)
            goto out;
        gguf_stage_free(sg);
        sg = NULL;
    }
out:
    if (done < nt)
        fprintf(stderr,
                "ggufs: %s: writing the overlay's tensors in failed at %s: %s; "
                "the overlay is kept\n",
                file, t[done].name, err.msg);
    gguf_stage_free(sg);
    free(buf);
    if (fd >= 0)
        close(fd);
    return done < nt ? -1 : 0;
}

/* Whether the tensors t[0, nt) of the overlay's data file (fd) are the
 * bytes the set v[0, n) holds. */
static bool tensors_held(gguf_ctx **v, int n, int fd,
                         const struct gguf_overlay_tensor *t, size_t nt) {
    enum { CH = 1 << 20 };
    char *a = malloc(CH), *b = malloc(CH);
    bool same = a && b && (fd >= 0 || !nt);
    for (size_t i = 0; same && i < nt; i++) {
        int64_t j = -1;
        int s = tensor_in_set(v, n, &t[i], &j, NULL);
        same = s >= 0;
        uint64_t at = same ? gguf_tensor_offset(v[s], j) : 0;
        for (uint64_t o = 0; same && o < t[i].size; o += CH) {
            size_t k = t[i].size - o < CH ? (size_t)(t[i].size - o) : CH;
            same = pread(fd, a, k, (off_t)(t[i].off + o)) == (ssize_t)k &&
                   pread(gguf_fd(v[s]), b, k, (off_t)(at + o)) == (ssize_t)k &&
                   memcmp(a, b, k) == 0;
        }
    }
    free(a);
    free(b);
    return same;
}

/* Whether the set v[0, n) already holds every edit of the overlay at
 * opath, keys and tensors: what an --overlay-apply interrupted after its
 * commit, or a copy of the live view, leaves (issue 33).  Reads only. */
static bool edits_held(const char *opath, const char *path, gguf_ctx **v,
                       int n) {
    struct gguf_error err = {0};
    struct gguf_overlay_id made;
    struct gguf_overlay_tensor *t = NULL;
    gguf_ctx *ov = NULL, *now = NULL;
    bool found = false, held = false;
    int64_t set = 0, removed = 0;
    size_t nt = 0;
    char shown[PATH_MAX + 64];
    if (gguf_overlay_load(opath, path, &ov, &made, &found, &err) != GGUF_OK ||
        !found || gguf_reopen(v[0], &now, &err) != GGUF_OK ||
        gguf_overlay_apply(now, ov, &set, &removed, &err) != GGUF_OK || set ||
        removed || gguf_overlay_tensors(ov, &t, &nt, &err) != GGUF_OK)
        goto out;
    int fd = nt ? gguf_overlay_data_open(opath, path, false, shown,
                                         sizeof shown, &err)
                : -1;
    held = tensors_held(v, n, fd, t, nt);
    if (fd >= 0)
        close(fd);
out:
    gguf_overlay_tensors_free(t, nt);
    gguf_close(now);
    gguf_close(ov);
    return held;
}

/* Whether the overlay at opath was made for the file at path itself (its
 * recorded source), or for another (file is a copy of it): an overlay is
 * removed, and locked, only by an apply to its own source (issue 32: a
 * copy must never take a store's fix away).  No overlay: its own (the
 * apply says there is none). */
static bool overlay_own(const char *opath, const char *path, char *source,
                        size_t sn) {
    struct gguf_error err = {0};
    struct gguf_overlay_id made;
    gguf_ctx *ov = NULL;
    bool found = false;
    snprintf(source, sn, "%s", path);
    if (gguf_overlay_load(opath, path, &ov, &made, &found, &err) != GGUF_OK ||
        !found)
        return true; /* the apply's load says what is wrong */
    gguf_close(ov);
    snprintf(source, sn, "%s", made.source);
    return !made.remote && strcmp(made.source, path) == 0;
}

/* The end of an apply: the overlay removed when it is the file's own,
 * else kept (it belongs to its source), and the report (what: what was
 * done).  0 or EXIT_COMMIT. */
static int apply_done(const char *file, const char *opath, const char *path,
                      const char *shown, const char *source, bool own,
                      const char *what) {
    struct gguf_error err = {0};
    bool found = false;
    if (!own) {
        printf("ggufs: %s: overlay %s %s; the overlay was kept: it belongs "
               "to %s\n",
               file, shown, what, source);
        return 0;
    }
    enum gguf_status rs = gguf_overlay_remove(opath, path, &found, &err);
    printf("ggufs: %s: overlay %s %s%s\n", file, shown, what,
           rs == GGUF_OK ? "; the overlay was removed" : "");
    if (rs == GGUF_OK)
        return 0;
    fprintf(stderr,
            "ggufs: %s: the overlay could not be removed (%s); it no "
            "longer matches the file\n",
            file, err.msg);
    return EXIT_COMMIT;
}

int gfs_overlay_apply(const char *file, const char *opt) {
    struct gguf_error err = {0};
    struct gguf_commit_info info = {0};
    struct gguf_overlay_id id;
    char shown[PATH_MAX + 64], *opath = NULL, *path = NULL, what[256];
    char source[sizeof id.source];
    gguf_ctx **v = NULL;
    int n = 0, status = EXIT_BADFILE, lock = -1;
    int64_t set = 0, removed = 0;
    struct gguf_overlay_tensor *t = NULL;
    size_t nt = 0;
    if (gfs_remote_is(file))
        return apply_remote_refused(file, opt);
    if (!(path = realpath(file, NULL))) {
        fprintf(stderr, "ggufs: %s: %s\n", file, strerror(errno));
        goto out;
    }
    if (gfs_overlay_locate(file, path, opt, &opath, shown, sizeof shown) != 0 ||
        open_source(file, path, 1, &v, &n) != 0)
        goto out;
    /* A copy only reads the overlay (replaced whole by rename, its data
     * file only grows): its writer, a store's mount, may hold the lock. */
    bool own = overlay_own(opath, path, source, sizeof source);
    if (own &&
        (lock = gfs_overlay_take_lock(file, path, opath, shown, NULL, 0)) < 0)
        goto out;
    if (gguf_overlay_identify(v, n, path, false, NULL, &id, &err) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: %s\n", file, err.msg);
        goto out;
    }
    if (edits_held(opath, path, v, n)) {
        status = apply_done(file, opath, path, shown, source, own,
                            "is already in the file (an earlier "
                            "--overlay-apply, or a copy of the live view): "
                            "nothing written");
        goto out;
    }
    int r = gfs_overlay_load_apply(file, opath, shown, &id, v[0], &set,
                                   &removed, &t, &nt);
    if (r == 0)
        fprintf(stderr, "ggufs: %s: no overlay (none at %s)\n", file, shown);
    if (r <= 0)
        goto out;
    status = EXIT_COMMIT;
    /* Tensors first: the metadata's commit changes the header, after
     * which the overlay no longer matches the file (a crash between the
     * two leaves an overlay that applies again; one after the commit
     * leaves a file that holds every edit: edits_held). */
    if (apply_tensors(file, opath, path, v, n, t, nt) != 0)
        goto out;
    if (gfs_commit_metered(v[0], 0, &info, &err) != GGUF_OK) {
        fprintf(stderr,
                "ggufs: %s: committing the overlay %s failed: %s; the overlay "
                "is kept\n",
                file, shown, err.msg);
        goto out;
    }
    snprintf(what, sizeof what,
             "committed into the file (%lld key%s set, %lld removed; %s, data "
             "at %llu)",
             (long long)set, set == 1 ? "" : "s", (long long)removed,
             gfs_commit_how(&info), (unsigned long long)info.new_data_offset);
    status = apply_done(file, opath, path, shown, source, own, what);
    if (nt)
        printf("ggufs: %s: %zu tensor%s written in from the overlay\n", file,
               nt, nt == 1 ? "" : "s");
out:
    gguf_overlay_tensors_free(t, nt);
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
        path = gfs_overlay_absolute(file);
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
    if (!path ||
        gfs_overlay_locate(file, path, opt, &opath, shown, sizeof shown) != 0)
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
    if ((lock = gfs_overlay_take_lock(file, path, opath, shown, NULL, 0)) < 0)
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
static int rebase_open(const char *file, const char *path,
                       struct gfs_remote **rfs, gguf_ctx ***v, int *n,
                       struct gguf_overlay_id *id) {
    struct gguf_error err = {0};
    char bad[PATH_MAX + 64] = "", ident[512];
    if (gfs_remote_is(path)) {
        struct gfs_remote_opts ro = {.retries = -1,
                                     .hf = strncmp(file, "hf://", 5) == 0};
        if (!(*rfs = gfs_remote_open_alone(path, &ro, v, n, bad, sizeof bad,
                                           &err))) {
            fprintf(stderr, "ggufs: %s: %s\n", bad[0] ? bad : file, err.msg);
            return -1;
        }
        if (gfs_remote_identity_of(*rfs, ident, sizeof ident) != 0)
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
    struct gguf_overlay_tensor *t = NULL;
    size_t nt = 0; /* its tensors go along (a mount checks they fit) */
    if (gguf_overlay_apply(src, ov, &set, &removed, &err) != GGUF_OK ||
        gguf_overlay_tensors(ov, &t, &nt, &err) != GGUF_OK ||
        gguf_overlay_write(opath, src, disk, id, t, nt, &err) != GGUF_OK) {
        gguf_overlay_tensors_free(t, nt);
        fprintf(stderr,
                "ggufs: %s: rebasing the overlay %s failed: %s; the overlay "
                "is as it was\n",
                file, shown, err.msg);
        goto out;
    }
    gguf_overlay_tensors_free(t, nt);
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
    struct gfs_remote *rfs = NULL;
    gguf_ctx **v = NULL, *ov = NULL;
    int n = 0, status = EXIT_BADFILE, lock = -1;
    bool found = false;
    if (!path ||
        gfs_overlay_locate(file, path, opt, &opath, shown, sizeof shown) != 0 ||
        rebase_open(file, path, &rfs, &v, &n, &id) != 0 ||
        (lock = gfs_overlay_take_lock(file, path, opath, shown, NULL, 0)) < 0)
        goto out;
    if (gguf_overlay_load(opath, path, &ov, &made, &found, &err) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: %s\n", file, err.msg);
        goto out;
    }
    if (!found)
        fprintf(stderr, "ggufs: %s: no overlay (none at %s)\n", file, shown);
    else if (!gfs_overlay_same_source(&made, &id))
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
    gguf_close_set(v, n); /* the contexts first: they read from rfs */
    gfs_remote_free(rfs);
    free(opath);
    free(path);
    return status;
}
