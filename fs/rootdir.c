/*
 * rootdir.c - a model's root directory, as a row of the kinds' table
 * (kinds.h): its entries are the rows that are root entries (meta/,
 * tensors/, the live view, meta.tsv, the views), in the table's order,
 * then, for a store's model, the live view again under each of its
 * aliases' names (ALIAS.gguf: MNT/ALIAS/ALIAS.gguf through the alias's
 * link is the view; struct gfs, alias_names).
 * fsync of it commits every pending edit (ggufs -u).  Its extended
 * attributes:
 *   user.ggufs.commit  the report of the last commit
 *   user.ggufs.pid     the daemon's process id (ggufs -u waits for it)
 *   user.ggufs.overlay where the overlay is (an overlay mount)
 *   a remote source's (source/remote.c); status.c's, asked first
 */
#include "edits/edits.h"
#include "kinds.h"
#include "source/source.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int root_stat(struct gfs *fs, fuse_ino_t ino, struct stat *st) {
    (void)fs, (void)ino;
    st->st_mode = S_IFDIR | 0555;
    st->st_nlink = 4;
    return 0;
}

/* The root entry named name (the live view for name NULL): its inode
 * and mode.  Names first: an entry's inode can cost a rendering (the live
 * view's header), made only for the entry looked up.  0 or ENOENT. */
static int entry_named(struct gfs *fs, const char *name, fuse_ino_t *ino,
                       mode_t *mode) {
    const char *nm;
    if (!name && !(name = fs->live_name))
        return ENOENT;
    for (int64_t k = 0; !gfs_kind_root_entry(fs, k, &nm, NULL, mode); k++)
        if (strcmp(nm, name) == 0)
            return gfs_kind_root_entry(fs, k, &nm, ino, mode) ? ENOENT : 0;
    return ENOENT;
}

/* A store model's alias name k (0-based: struct gfs, alias_names) into
 * out (with its NUL), or name's index when out is NULL; -1 if none. */
static int64_t alias_name(struct gfs *fs, int64_t k, const char *name,
                          struct gguf_buf *out) {
    int64_t found = -1;
    pthread_mutex_lock(&fs->alias_mu);
    const char *p = fs->alias_names;
    for (int64_t i = 0; fs->live_name && i < (int64_t)fs->n_alias_names;
         i++, p += strlen(p) + 1)
        if (out ? i == k : strcmp(p, name) == 0) {
            found = i;
            break;
        }
    if (found >= 0 && out) {
        out->len = 0;
        if (gguf_buf_add(out, p, strlen(p) + 1) != GGUF_OK)
            found = -2;
    }
    pthread_mutex_unlock(&fs->alias_mu);
    return found;
}

static int root_lookup(struct gfs *fs, fuse_ino_t dir, const char *name,
                       fuse_ino_t *out) {
    (void)dir;
    mode_t mode;
    if (entry_named(fs, name, out, &mode) == 0)
        return 0;
    /* Another name of a store's model: MNT/ALIAS/ALIAS.gguf is the view. */
    if (alias_name(fs, 0, name, NULL) >= 0)
        return entry_named(fs, NULL, out, &mode);
    return ENOENT;
}

/* The entries of the kinds' rows (the aliases' views come after). */
static int64_t rows_n(struct gfs *fs) {
    const char *nm;
    mode_t mode;
    int64_t k = 0;
    while (!gfs_kind_root_entry(fs, k, &nm, NULL, &mode))
        k++;
    return k;
}

static int64_t root_n(struct gfs *fs, fuse_ino_t dir) {
    (void)dir;
    pthread_mutex_lock(&fs->alias_mu);
    int64_t aliases = fs->live_name ? (int64_t)fs->n_alias_names : 0;
    pthread_mutex_unlock(&fs->alias_mu);
    return rows_n(fs) + aliases;
}

static int root_dirent(struct gfs *fs, fuse_ino_t dir, int64_t k,
                       struct gfs_dir_pos *pos, struct gguf_buf *name,
                       fuse_ino_t *child, mode_t *mode) {
    (void)dir, (void)pos;
    const char *nm;
    int64_t rows = rows_n(fs);
    if (k >= rows) { /* an alias's name of the live view */
        int64_t a = alias_name(fs, k - rows, NULL, name);
        if (a == -2)
            return -1;
        return a >= 0 && entry_named(fs, NULL, child, mode) == 0;
    }
    if (gfs_kind_root_entry(fs, k, &nm, child, mode))
        return 0;
    name->len = 0;
    return gguf_buf_add(name, nm, strlen(nm) + 1) == GGUF_OK ? 1 : -1;
}

static int root_getxattr(struct gfs *fs, fuse_ino_t ino, const char *name,
                         struct gguf_buf *out) {
    (void)ino;
    if (strcmp(name, "user.ggufs.commit") == 0 && fs->edits.commit_msg[0])
        return gfs_add_str(out, fs->edits.commit_msg);
    if (strcmp(name, "user.ggufs.overlay") == 0 && gfs_overlay_where(fs))
        return gfs_add_str(out, gfs_overlay_where(fs));
    if (strcmp(name, "user.ggufs.pid") == 0) {
        char tmp[32];
        snprintf(tmp, sizeof tmp, "%ld", (long)getpid());
        return gfs_add_str(out, tmp);
    }
    return gfs_remote_xattr(fs, name, out);
}

static int root_listxattr(struct gfs *fs, fuse_ino_t ino,
                          struct gguf_buf *out) {
    (void)ino;
    if (fs->edits.commit_msg[0] &&
        gguf_buf_add(out, "user.ggufs.commit", 18) != GGUF_OK)
        return ENOMEM;
    if (gfs_overlay_where(fs) &&
        gguf_buf_add(out, "user.ggufs.overlay", 19) != GGUF_OK)
        return ENOMEM;
    return gfs_remote_xattr_list(fs, out) != 0 ? ENOMEM : 0;
}

const struct gfs_kind_ops gfs_kind_root = {
    .kind = GFS_ROOT,
    .ino_lo = GFS_INO_ROOT,
    .ino_hi = GFS_INO_ROOT + 1,
    .commits = 1,
    .stat = root_stat,
    .lookup = root_lookup,
    .n_entries = root_n,
    .dirent = root_dirent,
    .getxattr = root_getxattr,
    .listxattr = root_listxattr,
};
