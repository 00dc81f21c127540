/*
 * carry.c - a store model's edits follow its name (issue 32, item 6).
 * The edits of a model of an ollama or Hugging Face store are kept in the
 * default overlay of its blob (edits/overlay.c), so a single-file mount of
 * the blob and the store show the same edits.  When the tool updates the
 * model (`ollama pull` writes a new blob for the same tag, a new revision
 * of a Hub repo moves refs/main), the name leads to a new blob, which has
 * no overlay: the edits would be orphaned silently.  So the name is
 * recorded too: a state record of kind GGUF_STATE_OVERLAY_NAME, keyed by
 * the store's directory and the model's name ("STORE\nNAME", the overlay
 * args' name_key), holds the source (blob path) whose overlay holds that
 * name's edits.  It is written by a read-write mount when the model's
 * overlay is applied or first written (gfs_carry_record).
 *
 * When a store model is opened and its blob has no overlay
 * (gfs_carry_find), the record's overlay, if it is another blob's, is
 * carried onto the new blob as `ggufs --overlay-rebase` does: refused,
 * with one line naming the model and the keys, when upstream changed a
 * key the edits change too (gguf_overlay_conflicts), or when the overlay
 * holds tensors (a new blob's tensors are not the old one's); else
 * applied, and on a read-write mount written as the new blob's overlay
 * (a read-only mount shows it, writing nothing).  The old overlay is
 * kept: its blob may still be another name's, and `ggufs --overlays`
 * lists it with whether its source is still there.  A store's mount
 * says, while stderr is still the user's, which models' names lead to
 * new files and whether their edits will be carried (gfs_carry_notes:
 * the records of that store, found by the key each record starts with).
 * Lines go through gfs_say (the mount's log in a store).  Prefix
 * gfs_carry_.
 */
#include "../base/base.h"
#include "overlay.h"
#include "edits.h"

#include "../ggufs.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The model's name, for messages: what follows the store in the key. */
static const char *name_of(const char *key) {
    const char *nl = strchr(key, '\n');
    return nl ? nl + 1 : key;
}

/* The record's source into out (n bytes); 1 if there is one. */
static int record_read(const char *key, char *out, size_t n) {
    struct gguf_buf b = {0};
    bool found = false;
    int r = 0;
    if (gguf_state_read(key, GGUF_STATE_OVERLAY_NAME, &b, &found, NULL) ==
            GGUF_OK &&
        found && b.len > 1 && b.len < n && b.p[b.len - 1] == '\n' &&
        !memchr(b.p, '\n', b.len - 1) && !memchr(b.p, '\0', b.len)) {
        memcpy(out, b.p, b.len - 1);
        out[b.len - 1] = '\0';
        r = 1;
    }
    gguf_buf_free(&b);
    return r;
}

void gfs_carry_record(const char *key, const char *source) {
    char was[PATH_MAX + 1];
    if (!key || (record_read(key, was, sizeof was) && !strcmp(was, source)))
        return;
    char *body = NULL;
    int n = asprintf(&body, "%s\n", source);
    struct gguf_error err = {0};
    if (n > 0 && gguf_state_write(key, GGUF_STATE_OVERLAY_NAME, body, (size_t)n,
                                  &err) != GGUF_OK)
        gfs_say("ggufs: %s: cannot record which overlay holds its edits: "
                "%s\n",
                name_of(key), err.msg);
    free(body);
}

/* Whether ov may be carried onto src: 0, or -1 after one line (keys
 * upstream changed too, tensors held). */
static int carry_check(const char *key, const char *file, const char *old,
                       const char *shown, const gguf_ctx *ov,
                       const gguf_ctx *src) {
    struct gguf_error err = {0};
    struct gguf_buf names = {0};
    struct gguf_overlay_tensor *t = NULL;
    size_t nt = 0;
    int64_t nc = 0;
    bool based = false;
    int r = -1;
    if (gguf_overlay_conflicts(ov, src, &names, &nc, &based, &err) != GGUF_OK ||
        gguf_overlay_tensors(ov, &t, &nt, &err) != GGUF_OK) {
        gfs_say("ggufs: %s: the overlay %s: %s\n", name_of(key), shown,
                err.msg);
        goto out;
    }
    if (nc || nt) {
        char why[512];
        if (nc)
            snprintf(why, sizeof why,
                     "%lld key%s it edits changed in the new "
                     "file too%s: %.*s",
                     (long long)nc, nc == 1 ? "" : "s",
                     based ? "" : " (or may have: it predates base records)",
                     (int)names.len, names.p ? (const char *)names.p : "");
        else
            snprintf(why, sizeof why, "it holds %zu written tensor%s", nt,
                     nt == 1 ? "" : "s");
        gfs_say("ggufs: %s: its edits no longer apply: the overlay %s was "
                "made for %s, the file the name led to before, and %s; not "
                "carried to its new file %s, shown without them ('ggufs "
                "--overlay-rebase %s %s --take-overlay' with the store "
                "unmounted carries them at the next mount, 'ggufs "
                "--overlay-drop %s' forgets them)\n",
                name_of(key), shown, old, why, file, file, shown, old);
        goto out;
    }
    r = 0;
out:
    gguf_overlay_tensors_free(t, nt);
    gguf_buf_free(&names);
    return r;
}

int gfs_carry_find(struct gfs *fs, const char *key, const char *file,
                   const struct gguf_overlay_id *id, int readonly, int64_t *set,
                   int64_t *removed) {
    struct gguf_error err = {0};
    struct gguf_overlay_id made;
    char old[PATH_MAX + 1], shown[PATH_MAX + 64];
    gguf_ctx *ov = NULL, *disk = NULL;
    bool found = false;
    int r = 0;
    if (!key || !record_read(key, old, sizeof old) || !strcmp(old, id->source))
        return 0;
    if (gguf_overlay_default_path(old, shown, sizeof shown, NULL) != GGUF_OK)
        snprintf(shown, sizeof shown, "of %s", old);
    if (gguf_overlay_load(NULL, old, &ov, &made, &found, &err) != GGUF_OK) {
        gfs_say("ggufs: %s: %s\n", name_of(key), err.msg);
        goto out;
    }
    if (!found || made.remote || id->remote ||
        carry_check(key, file, old, shown, ov, fs->shards[0]) != 0)
        goto out;
    if (gguf_open_original(&disk, fs->shards[0], GGUF_OPEN_ALLOW_NESTED,
                           &err) != GGUF_OK ||
        gguf_overlay_apply(fs->shards[0], ov, set, removed, &err) != GGUF_OK ||
        (!readonly && gguf_overlay_write(NULL, fs->shards[0], disk, id, NULL, 0,
                                         &err) != GGUF_OK)) {
        gfs_say("ggufs: %s: carrying the overlay %s to its new file %s "
                "failed: %s\n",
                name_of(key), shown, file, err.msg);
        r = -1;
        goto out;
    }
    gfs_say("ggufs: %s: its edits (%lld key%s set, %lld removed) carried "
            "from the overlay %s of %s, the file the name led to before, "
            "to its new file %s%s\n",
            name_of(key), (long long)*set, *set == 1 ? "" : "s",
            (long long)*removed, shown, old, file,
            readonly ? " (shown; written to its overlay by a read-write mount)"
                     : "");
    if (!readonly)
        gfs_carry_record(key, id->source);
    r = 1;
out:
    gguf_close(disk);
    gguf_close(ov);
    return r;
}

/* ---- at a store's mount ------------------------------------------------ */

#define NOTE_MAX 65536 /* a name record: a store, a name, a path */

/* The record named ent in the state directory dfd, if it is one of
 * store's: the key ("STORE\nNAME") into key (kn bytes), 1; read raw only
 * to learn the key (gguf_state_read then reads it checked). */
static int record_key(int dfd, const char *ent, const char *store, char *key,
                      size_t kn) {
    static const char magic[] = "ggufs-state 1\n";
    char buf[NOTE_MAX];
    struct stat sb;
    int fd = openat(dfd, ent, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    ssize_t n = -1;
    if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
        sb.st_uid == geteuid() && !(sb.st_mode & 022) && sb.st_size < NOTE_MAX)
        n = pread(fd, buf, sizeof buf - 1, 0);
    if (fd >= 0)
        close(fd);
    size_t sl = strlen(store), ml = sizeof magic - 1;
    if (n < (ssize_t)(ml + sl + 2) || memcmp(buf, magic, ml) != 0 ||
        memcmp(buf + ml, store, sl) != 0 || buf[ml + sl] != '\n' ||
        buf[n - 1] != '\n')
        return 0;
    buf[n - 1] = '\0'; /* the source is the last line: the key is before */
    char *last = strrchr(buf + ml + sl + 1, '\n');
    if (!last || (size_t)(last - (buf + ml)) >= kn)
        return 0;
    memcpy(key, buf + ml, (size_t)(last - (buf + ml)));
    key[last - (buf + ml)] = '\0';
    return 1;
}

/* Whether the overlay of old (shown) can be carried onto now, asked of
 * their headers (read only): 0, or -1 after carry_check's line (or one
 * of its own when a file cannot be read). */
static int carry_ahead(const char *key, const char *old, const char *now,
                       int dfd, const char *shown) {
    struct gguf_error err = {0};
    struct gguf_overlay_id made;
    struct gguf_file f;
    gguf_ctx *ov = NULL, *src = NULL;
    bool found = false;
    int r = -1;
    if ((dfd >= 0 ? gguf_file_open_at(&f, dfd, now, 0, &err)
                  : gguf_file_open(&f, now, 0, &err)) != GGUF_OK ||
        gguf_open_file(&src, &f, 0, &err) != GGUF_OK ||
        gguf_overlay_load(NULL, old, &ov, &made, &found, &err) != GGUF_OK)
        gfs_say("ggufs: %s: %s\n", name_of(key), err.msg);
    else if (found)
        r = carry_check(key, now, old, shown, ov, src);
    gguf_close(ov);
    gguf_close(src);
    gguf_file_close(&f);
    return r;
}

void gfs_carry_notes(const char *store,
                     const char *(*now_of)(void *u, const char *name, char *buf,
                                           size_t n, int *dfd),
                     void *u) {
    int dfd = gguf_state_dir_fd(NULL);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    struct dirent *e;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return;
    }
    while ((e = readdir(d))) {
        char key[NOTE_MAX], old[PATH_MAX + 1], now[PATH_MAX], shown[PATH_MAX];
        char mine[PATH_MAX];
        struct stat sb;
        int nfd = -1; /* now's directory (now_of's), or -1 */
        size_t l = strlen(e->d_name);
        if (l < 13 || strcmp(e->d_name + l - 13, ".overlay-name") != 0 ||
            !record_key(dirfd(d), e->d_name, store, key, sizeof key) ||
            !record_read(key, old, sizeof old) ||
            !now_of(u, name_of(key), now, sizeof now, &nfd))
            continue;
        /* the overlays' paths are the state directory's: ours */
        if (strcmp(now, old) != 0 &&
            !gguf_overlay_default_path(old, shown, sizeof shown, NULL) &&
            !gguf_overlay_default_path(now, mine, sizeof mine, NULL) &&
            lstat(shown, &sb) == 0 && lstat(mine, &sb) != 0 &&
            carry_ahead(key, old, now, nfd, shown) == 0)
            gfs_say("ggufs: %s: its file changed since its edits were made "
                    "(they are in the overlay %s, of %s): they are carried to "
                    "its new file %s when the model is first opened\n",
                    name_of(key), shown, old, now);
        if (nfd >= 0)
            close(nfd);
    }
    closedir(d);
}
