/*
 * walk.c - the safe walk of a store (internal.h): every path is opened
 * beneath the store's descriptor, one component at a time with O_NOFOLLOW
 * (or by openat2 with RESOLVE_BENEATH where the kernel has it), so that no
 * name in the store, and no change to it during the walk, leads outside
 * it.  Symlinks are followed only by cat_resolve, which refuses any that
 * leave the store.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* openat2(2) (glibc has no wrapper before 2.38); -1 with ENOSYS on a
 * kernel without it (before 5.6), or when built with CAT_NO_OPENAT2 (the
 * tests' build of the walk by hand, tests/meson.build). */
static int sys_openat2(int dirfd, const char *path, int flags,
                       uint64_t resolve) {
#if defined(SYS_openat2) && !defined(CAT_NO_OPENAT2)
    struct open_how how = {.flags = (uint64_t)flags, .resolve = resolve};
    int fd, tries = 0;
    /* EAGAIN: a rename anywhere on the system during a RESOLVE_BENEATH
     * walk with ".." (openat2(2) asks the caller to try again); still
     * EAGAIN after that, the callers walk by hand */
    do
        fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
    while (fd < 0 && errno == EAGAIN && ++tries < 16);
    return fd;
#else
    (void)dirfd, (void)path, (void)flags, (void)resolve;
    errno = ENOSYS;
    return -1;
#endif
}

/* Opens rel beneath dirfd when no component of it is a symlink: by hand,
 * one O_PATH|O_NOFOLLOW directory at a time, the last with flags. */
static int open_plain_by_hand(int dirfd, const char *rel, int flags) {
    char comp[256];
    int at = dirfd, fd = -1;
    for (const char *p = rel;;) {
        while (*p == '/')
            p++;
        size_t len = strcspn(p, "/");
        const char *next = p + len;
        while (*next == '/')
            next++;
        if (len == 0 || len >= sizeof comp ||
            (len <= 2 && strncmp(p, "..", len) == 0)) {
            errno = len >= sizeof comp ? ENAMETOOLONG : EXDEV;
            fd = -1;
            break;
        }
        memcpy(comp, p, len);
        comp[len] = 0;
        int last = *next == 0;
        fd = openat(at, comp,
                    last ? flags | O_NOFOLLOW | O_CLOEXEC
                         : O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (at != dirfd)
            close(at);
        if (fd < 0 || last)
            return fd;
        at = fd;
        p = next;
    }
    if (at != dirfd)
        close(at);
    return fd;
}

int cat_open_plain(int dirfd, const char *rel, int flags) {
    int fd = sys_openat2(dirfd, rel, flags | O_NOFOLLOW | O_CLOEXEC,
                         RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                             RESOLVE_NO_MAGICLINKS);
    if (fd >= 0 || (errno != ENOSYS && errno != EAGAIN))
        return fd;
    return open_plain_by_hand(dirfd, rel, flags);
}

int cat_open_regular(int dirfd, const char *rel, int flags, struct stat *st) {
    /* O_NONBLOCK: a FIFO's open returns at once (and a device's cannot
     * wait), so that a planted one cannot hang the daemon; cleared again
     * once the file is known to be regular. */
    int fd = cat_open_plain(dirfd, rel, flags | O_NONBLOCK);
    if (fd < 0)
        return -1;
    int fl = -1, e = EINVAL;
    if (fstat(fd, st) != 0)
        e = errno;
    else if (S_ISREG(st->st_mode) && (fl = fcntl(fd, F_GETFL)) >= 0 &&
             fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == 0)
        return fd;
    else if (S_ISREG(st->st_mode))
        e = errno;
    close(fd);
    errno = e;
    return -1;
}

int cat_open_dir_of(int dirfd, const char *rel) {
    const char *slash = strrchr(rel, '/');
    if (!slash) /* beside the store's top */
        return fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    char *dir = strndup(rel, (size_t)(slash - rel));
    if (!dir)
        return -1;
    int fd = cat_open_plain(dirfd, dir, O_RDONLY | O_DIRECTORY);
    int e = errno;
    free(dir);
    errno = e;
    return fd;
}

const char *cat_strerror(int e) {
    return e == EINVAL ? "not a regular file" : strerror(e);
}

int cat_open_file(int dirfd, const struct cat_file *f, int flags) {
    struct stat st;
    int fd = cat_open_regular(dirfd, f->path, flags, &st);
    if (fd < 0)
        return -1;
    if (st.st_dev != f->dev || st.st_ino != f->ino) {
        close(fd);
        errno = ESTALE;
        return -1;
    }
    return fd;
}

DIR *cat_opendir(int parent, const char *name) {
    int fd = *name ? cat_open_plain(parent, name, O_RDONLY | O_DIRECTORY)
                   : openat(parent, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    DIR *d = fdopendir(fd);
    if (!d)
        close(fd);
    return d;
}

/* ---- resolving symlinks beneath the store ---------------------------- */

/* The state of one resolution: the directories walked so far, by
 * descriptor (fds[k] is the directory at depth k + 1; the store is depth
 * 0), and the canonical path to the top one (its length at each depth in
 * ends). */
#define RES_DEPTH 64
struct res {
    int dirfd;
    int fds[RES_DEPTH];
    size_t ends[RES_DEPTH];
    size_t nfd;
    char path[CAT_MAX_PATH];
    size_t plen;
};

static int res_top(const struct res *r) {
    return r->nfd ? r->fds[r->nfd - 1] : r->dirfd;
}

static void res_up(struct res *r) {
    close(r->fds[--r->nfd]);
    r->plen = r->nfd ? r->ends[r->nfd - 1] : 0;
    r->path[r->plen] = 0;
}

/* Appends component c to the canonical path; -1 if it gets too long. */
static int res_append(struct res *r, const char *c) {
    size_t cl = strlen(c), need = r->plen + (r->plen ? 1 : 0) + cl;
    if (need >= sizeof r->path)
        return -1;
    if (r->plen)
        r->path[r->plen++] = '/';
    memcpy(r->path + r->plen, c, cl + 1);
    r->plen += cl;
    return 0;
}

/* Replaces rest (the path left to walk, after the current component at
 * *next) by the link's target followed by it. */
static int res_splice(struct res *r, const char *c, char *rest,
                      const char *next, const char **why) {
    char target[CAT_MAX_PATH], tmp[CAT_MAX_PATH];
    ssize_t n = readlinkat(res_top(r), c, target, sizeof target - 1);
    if (n < 0) {
        *why = "unreadable symlink";
        return -1;
    }
    target[n] = 0;
    if (target[0] == '/') {
        *why = "absolute symlink (leaves the store)";
        errno = EXDEV;
        return -1;
    }
    if ((size_t)snprintf(tmp, sizeof tmp, "%s/%s", target, next) >=
        sizeof tmp) {
        *why = "path too long";
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(rest, tmp, strlen(tmp) + 1);
    return 0;
}

/* One component c of a resolution: 1 when c was a symlink (rest now
 * starts with its target), 0 when walked (*done set when c was the
 * file), -1 (*why) when refused. */
static int res_step(struct res *r, const char *c, char *rest, const char *next,
                    int *links, struct stat *st, int *done, const char **why) {
    if (strcmp(c, "..") == 0) {
        if (r->nfd == 0) {
            *why = "leaves the store (..)";
            errno = EXDEV;
            return -1;
        }
        res_up(r);
        return 0;
    }
    if (fstatat(res_top(r), c, st, AT_SYMLINK_NOFOLLOW) != 0) {
        *why = errno == ENOENT ? "missing" : "cannot stat";
        return -1;
    }
    if (S_ISLNK(st->st_mode)) {
        if (++*links > CAT_MAX_LINKS) {
            *why = "too many symlinks";
            errno = ELOOP;
            return -1;
        }
        return res_splice(r, c, rest, next, why) ? -1 : 1;
    }
    if (res_append(r, c) != 0) {
        *why = "path too long";
        errno = ENAMETOOLONG;
        return -1;
    }
    if (next[strspn(next, "/")] == 0) {
        *done = 1;
        return 0;
    }
    if (!S_ISDIR(st->st_mode) || r->nfd == RES_DEPTH) {
        *why = r->nfd == RES_DEPTH ? "too deep" : "not a directory";
        errno = ENOTDIR;
        return -1;
    }
    int fd =
        openat(res_top(r), c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        *why = "changed while walked";
        return -1;
    }
    r->ends[r->nfd] = r->plen;
    r->fds[r->nfd++] = fd;
    return 0;
}

/* The kernel's opinion of the same path (openat2, RESOLVE_BENEATH):
 * it must open the file the walk by hand found. */
static int res_confirm(int dirfd, const char *rel, const struct stat *st,
                       const char **why) {
    int fd = sys_openat2(dirfd, rel, O_PATH | O_CLOEXEC,
                         RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
    struct stat k;
    if (fd < 0 && (errno == ENOSYS || errno == EAGAIN))
        return 0; /* no opinion: the walk by descriptors stands */
    if (fd < 0) {
        *why = errno == EXDEV ? "leaves the store" : "cannot open";
        return -1;
    }
    int same =
        fstat(fd, &k) == 0 && k.st_dev == st->st_dev && k.st_ino == st->st_ino;
    close(fd);
    if (!same) {
        *why = "changed while walked";
        errno = ESTALE;
        return -1;
    }
    return 0;
}

/* True if rel is already canonical: relative, no empty, "." or ".."
 * component. */
static bool canonical(const char *rel) {
    for (const char *p = rel;; p++) {
        size_t len = strcspn(p, "/");
        if (len == 0 || (len == 1 && p[0] == '.') ||
            (len == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        p += len;
        if (!*p)
            return true;
    }
}

/* The common case first: a canonical path without any symlink is its
 * own answer (one open, one fstat).  1 when it is not that case. */
static int resolve_plain(int dirfd, const char *rel, char **canon,
                         struct stat *st, const char **why) {
    if (!canonical(rel))
        return 1;
    int fd = cat_open_plain(dirfd, rel, O_PATH);
    if (fd < 0) {
        if (errno != ENOENT)
            return 1; /* ELOOP (a symlink on the way), ...: walk it */
        *why = "missing";
        return -1;
    }
    int ok = fstat(fd, st) == 0;
    close(fd);
    if (ok && S_ISLNK(st->st_mode))
        return 1; /* O_PATH|O_NOFOLLOW opened the last symlink: walk it */
    if (!ok || !(*canon = strdup(rel))) {
        *why = ok ? "out of memory" : "cannot stat";
        return -1;
    }
    return 0;
}

int cat_resolve(int dirfd, const char *rel, char **canon, struct stat *st,
                const char **why) {
    struct res r = {.dirfd = dirfd};
    char rest[CAT_MAX_PATH], c[256];
    int links = 0, done = 0, rc = -1;
    *why = NULL;
    if (rel[0] == '/' || strlen(rel) >= sizeof rest) {
        *why = rel[0] == '/' ? "absolute path" : "path too long";
        errno = EXDEV;
        return -1;
    }
    int plain = resolve_plain(dirfd, rel, canon, st, why);
    if (plain <= 0)
        return plain;
    *why = NULL;
    memcpy(rest, rel, strlen(rel) + 1);
    for (size_t at = 0; !done;) {
        at += strspn(rest + at, "/");
        size_t len = strcspn(rest + at, "/");
        if (len == 0 || len >= sizeof c) {
            *why = len ? "name too long" : "empty path";
            errno = len ? ENAMETOOLONG : ENOENT;
            goto out;
        }
        memcpy(c, rest + at, len);
        c[len] = 0;
        at += len;
        if (strcmp(c, ".") == 0)
            continue;
        int step = res_step(&r, c, rest, rest + at, &links, st, &done, why);
        if (step < 0)
            goto out;
        if (step == 1)
            at = 0; /* a symlink replaced the rest: walk its target */
    }
    if (res_confirm(dirfd, rel, st, why) != 0 || !(*canon = strdup(r.path))) {
        if (!*why)
            *why = "out of memory";
        goto out;
    }
    rc = 0;
out:
    while (r.nfd)
        res_up(&r);
    return rc;
}

/* ---- the folder walk ------------------------------------------------- */

/* Walks directory d (at rel, depth levels below the walk's start). */
static int walk_dir(struct cat_walk *w, DIR *d, char *rel, size_t rlen,
                    int depth) {
    struct dirent *e;
    size_t count = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (++count > CAT_MAX_DIRENTS) {
            cat_logf(w->s, "%s: more than %d entries, the rest left out",
                     rlen ? rel : ".", CAT_MAX_DIRENTS);
            break;
        }
        size_t nl = strlen(e->d_name);
        if (rlen + 1 + nl >= CAT_MAX_PATH) {
            cat_logf(w->s, "%s/%s: path too long, left out", rel, e->d_name);
            continue;
        }
        size_t at = rlen;
        if (rlen)
            rel[at++] = '/';
        memcpy(rel + at, e->d_name, nl + 1);
        unsigned char t = e->d_type;
        struct stat st;
        if (t == DT_UNKNOWN &&
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
            t = S_ISDIR(st.st_mode)   ? DT_DIR
                : S_ISLNK(st.st_mode) ? DT_LNK
                                      : DT_REG;
        if (t != DT_DIR)
            w->file(w->u, rel, t);
        else if (depth + 1 > CAT_MAX_DEPTH)
            cat_logf(w->s, "%s: deeper than %d levels, not walked", rel,
                     CAT_MAX_DEPTH);
        else {
            DIR *sub = cat_opendir(dirfd(d), e->d_name);
            if (!sub)
                cat_logf(w->s, "%s: cannot open: %s", rel, strerror(errno));
            else if (fstat(dirfd(sub), &st) == 0 && w->dir)
                w->dir(w->u, rel, &st);
            int rc = sub ? walk_dir(w, sub, rel, at + nl, depth + 1) : 0;
            if (sub)
                closedir(sub);
            if (rc != 0)
                return -1;
        }
        rel[rlen] = 0;
        if (w->s->oom)
            return -1;
    }
    return 0;
}

int cat_walk_tree(struct cat_walk *w, const char *start) {
    char rel[CAT_MAX_PATH];
    struct stat st;
    size_t len = strlen(start);
    if (len >= sizeof rel)
        return 0;
    DIR *d = cat_opendir(w->s->dirfd, start);
    if (!d) {
        cat_logf(w->s, "%s: cannot open: %s", *start ? start : ".",
                 strerror(errno));
        return 0;
    }
    memcpy(rel, start, len + 1);
    if (w->dir && fstat(dirfd(d), &st) == 0)
        w->dir(w->u, rel, &st);
    int rc = walk_dir(w, d, rel, len, 0);
    closedir(d);
    return rc;
}
