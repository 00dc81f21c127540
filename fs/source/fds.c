/*
 * fds.c - descriptors of a model's files, opened on demand (issue 24).
 *
 * A shard set (and a mix's source files, appended to fs->shards after the
 * base's) may have a thousand files: their contexts keep their headers
 * but not their descriptors (gguf_release_fd, gguf/shards.c).  Here file
 * i (an index into fs->shards) is opened again when its bytes are read:
 * by the name it was registered with, in the directory descriptor it was
 * registered with (never a path resolved twice: the model's directory
 * for a set beside its first file), O_RDONLY | O_NOFOLLOW | O_CLOEXEC
 * (and O_NONBLOCK until it is known to be a regular file: a FIFO put in
 * its place cannot hang the daemon).  The file opened must be the one
 * validated at mount: the same st_dev, st_ino, st_size and st_mtim as
 * gguf_ident says; another one (renamed over, rewritten, truncated) is
 * EIO, and one log line names it (once a file).
 *
 * Bounds.  At most cap descriptors stay open (gfs_fds_init); opening one
 * more closes the least recently used one nobody is reading from.  A
 * descriptor is pinned between gfs_fds_get and gfs_fds_put, and never
 * closed while pinned: when every open one is pinned, the cache holds one
 * more for a while (at most one a reading thread), and gives it up at its
 * put.
 *
 * Lock.  fds->mu, a leaf: guards the table, the list and the counts; held
 * over the open of a file (so that two readers never open the same file
 * twice) and never while a descriptor is read.  Callers hold fs->lock
 * (read), which keeps fs->shards as it is.
 */
#include "../base/base.h"
#include "source.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

struct fd_ent {
    char *name; /* to open it again in dfd; NULL: not registered */
    int dfd;    /* borrowed: open as long as the model is */
    int fd;     /* -1 while closed */
    int pins;   /* readers using fd now */
    int prev;   /* the LRU list of open entries: toward the most recent */
    int next;   /* toward the least recent */
    int said;   /* the log line about this file was written */
    struct gguf_ident id;
};

struct gfs_fds {
    pthread_mutex_t mu;
    struct fd_ent *e;
    int n;      /* entries (files registered or not) */
    int cap;    /* descriptors kept open at most (but pinned ones) */
    int n_open; /* descriptors open now */
    int head;   /* most recently used open entry, or -1 */
    int tail;   /* least recently used, or -1 */
};

void gfs_fds_rlimit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl); /* else the soft one stays */
    }
}

int gfs_fds_cap(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur / 8 < GFS_FDS_CAP)
        return rl.rlim_cur / 8 ? (int)(rl.rlim_cur / 8) : 1;
    return GFS_FDS_CAP;
}

int gfs_fds_init(struct gfs *fs, int cap) {
    struct gfs_fds *c = calloc(1, sizeof *c);
    if (!c)
        return ENOMEM;
    pthread_mutex_init(&c->mu, NULL);
    c->cap = cap > 0 ? cap : 1;
    c->head = c->tail = -1;
    fs->fds = c;
    return 0;
}

void gfs_fds_free(struct gfs *fs) {
    struct gfs_fds *c = fs->fds;
    if (!c)
        return;
    for (int i = 0; i < c->n; i++) {
        if (c->e[i].fd >= 0)
            close(c->e[i].fd);
        free(c->e[i].name);
    }
    free(c->e);
    pthread_mutex_destroy(&c->mu);
    free(c);
    fs->fds = NULL;
}

int gfs_fds_add(struct gfs *fs, int i, int dfd, const char *name) {
    struct gfs_fds *c = fs->fds;
    struct gguf_ident id;
    if (!c || i < 0 || i >= fs->n_files || !gguf_ident(fs->shards[i], &id))
        return EINVAL;
    if (i >= c->n) {
        struct fd_ent *ne = realloc(c->e, (size_t)(i + 1) * sizeof *ne);
        if (!ne)
            return ENOMEM;
        for (int k = c->n; k <= i; k++)
            ne[k] = (struct fd_ent){.fd = -1, .prev = -1, .next = -1};
        c->e = ne;
        c->n = i + 1;
    }
    char *copy = strdup(name);
    if (!copy)
        return ENOMEM;
    free(c->e[i].name);
    c->e[i].name = copy;
    c->e[i].dfd = dfd;
    c->e[i].id = id;
    return 0;
}

/* The LRU list (c->mu held). */
static void unlink_ent(struct gfs_fds *c, int i) {
    struct fd_ent *e = &c->e[i];
    if (e->prev >= 0)
        c->e[e->prev].next = e->next;
    else
        c->head = e->next;
    if (e->next >= 0)
        c->e[e->next].prev = e->prev;
    else
        c->tail = e->prev;
    e->prev = e->next = -1;
}

static void push_front(struct gfs_fds *c, int i) {
    c->e[i].prev = -1;
    c->e[i].next = c->head;
    if (c->head >= 0)
        c->e[c->head].prev = i;
    c->head = i;
    if (c->tail < 0)
        c->tail = i;
}

static void close_ent(struct gfs_fds *c, int i) {
    unlink_ent(c, i);
    close(c->e[i].fd);
    c->e[i].fd = -1;
    c->n_open--;
}

/* Closes least recently used descriptors nobody reads until fewer than
 * want are open (c->mu held). */
static void shrink(struct gfs_fds *c, int want) {
    for (int i = c->tail; i >= 0 && c->n_open > want;) {
        int prev = c->e[i].prev;
        if (c->e[i].pins == 0)
            close_ent(c, i);
        i = prev;
    }
}

/* Whether fd (just opened) is the file validated at mount. */
static int same_file(int fd, const struct gguf_ident *id) {
    struct stat sb;
    return fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_dev == id->dev &&
           sb.st_ino == id->ino && (uint64_t)sb.st_size == id->size &&
           (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec ==
               id->mtime_ns;
}

/* Opens file i again (c->mu held): its descriptor, or -1 with *err.  A
 * file that is gone or another one is EIO, with *say what to log (the
 * first time only: else NULL), after c->mu is let go. */
static int open_ent(struct gfs_fds *c, int i, int *err, const char **say) {
    struct fd_ent *e = &c->e[i];
    const char *why = "not the file validated at mount (replaced or "
                      "changed since)";
    int fd =
        openat(e->dfd, e->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOMEM ||
                   errno == EINTR)) {
        *err = errno; /* the daemon's trouble, not the file's */
        return -1;
    }
    if (fd >= 0 && same_file(fd, &e->id)) {
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == 0)
            return fd;
        why = "its flags cannot be set";
    } else if (fd < 0) {
        why = errno == ELOOP ? "a symbolic link now" : strerror(errno);
    }
    if (fd >= 0)
        close(fd);
    if (!e->said) {
        e->said = 1;
        *say = why;
    }
    *err = EIO;
    return -1;
}

int gfs_fds_get(struct gfs *fs, int i, int *fd) {
    struct gfs_fds *c = fs->fds;
    int err = 0;
    const char *say = NULL;
    if (!c || i < 0 || i >= c->n || !c->e[i].name)
        return EIO; /* a file with no descriptor and no way to open it */
    pthread_mutex_lock(&c->mu);
    struct fd_ent *e = &c->e[i];
    if (e->fd >= 0) {
        unlink_ent(c, i);
    } else {
        shrink(c, c->cap - 1);
        if ((e->fd = open_ent(c, i, &err, &say)) < 0)
            goto out;
        c->n_open++;
    }
    push_front(c, i);
    e->pins++;
    *fd = e->fd;
out:
    pthread_mutex_unlock(&c->mu);
    if (say)
        gfs_log(fs, "%s: %s: its reads fail with EIO", gguf_path(fs->shards[i]),
                say);
    return err;
}

void gfs_fds_put(struct gfs *fs, int i) {
    struct gfs_fds *c = fs->fds;
    pthread_mutex_lock(&c->mu);
    c->e[i].pins--;
    if (c->n_open > c->cap)
        shrink(c, c->cap);
    pthread_mutex_unlock(&c->mu);
}
