/*
 * file.c - a model file opened once (gguf_file_open): the file by a
 * descriptor, its directory by another.
 *
 * Contract.  ggufs runs as root on models in directories other users can
 * write (/tmp), so a path is looked up exactly once.  gguf_file_open opens
 * the directory, then the file in it with O_NOFOLLOW (a symlink as last
 * component is refused: resolve a path the user meant with realpath
 * first, as the command does) and O_NONBLOCK (a FIFO cannot hang the
 * open), and checks it is a regular file.  Everything after (recovery,
 * parsing, the mount, the lock, the commit) uses that descriptor; the
 * files beside the model (journal, new file) are reached through the
 * directory's descriptor with *at() calls.  The path stays for messages
 * and for the names of those files.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void gguf_file_init(struct gguf_file *f) {
    memset(f, 0, sizeof *f);
    f->dfd = f->fd = -1;
}

void gguf_file_close(struct gguf_file *f) {
    if (f->fd >= 0)
        close(f->fd);
    if (f->dfd >= 0)
        close(f->dfd);
    free(f->path);
    gguf_file_init(f);
}

/* Opens f->base in f->dfd as the contract says; rdwr < 0: read-write if
 * permitted, else read-only. */
static enum gguf_status open_in_dir(struct gguf_file *f, int rdwr,
                                    struct gguf_error *err) {
    int base = O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
    int fd = openat(f->dfd, f->base, (rdwr ? O_RDWR : O_RDONLY) | base);
    if (fd < 0 && rdwr < 0 &&
        (errno == EACCES || errno == EROFS || errno == EPERM ||
         errno == ETXTBSY))
        fd = openat(f->dfd, f->base, O_RDONLY | base);
    if (fd < 0) {
        if (errno == ELOOP)
            return gguf_fail(err, GGUF_E_PERM,
                             "%s is a symbolic link (its last component): "
                             "name the file itself",
                             f->path);
        return gguf_sys_fail(err, errno, "cannot open %s", f->path);
    }
    if (fstat(fd, &f->sb) != 0) {
        int e = errno;
        close(fd);
        return gguf_sys_fail(err, e, "cannot stat %s", f->path);
    }
    if (!S_ISREG(f->sb.st_mode)) {
        close(fd);
        return gguf_fail(err, GGUF_E_INVAL, "%s is not a regular file",
                         f->path);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        return gguf_sys_fail(err, e, "cannot set the flags of %s", f->path);
    }
    if (f->fd >= 0)
        close(f->fd);
    f->fd = fd;
    f->writable = (fl & O_ACCMODE) == O_RDWR;
    return GGUF_OK;
}

enum gguf_status gguf_file_open_at(struct gguf_file *f, int dfd,
                                   const char *path, int rdwr,
                                   struct gguf_error *err) {
    enum gguf_status st;
    gguf_file_init(f);
    if (!path || !*path)
        return gguf_fail(err, GGUF_E_INVAL, "no file given");
    if (!(f->path = strdup(path)))
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    const char *slash = strrchr(f->path, '/');
    f->base = slash ? slash + 1 : f->path;
    if (!*f->base)
        st = gguf_fail(err, GGUF_E_INVAL, "%s names a directory", path);
    else if ((f->dfd = fcntl(dfd, F_DUPFD_CLOEXEC, 0)) < 0)
        st = gguf_sys_fail(err, errno, "cannot use the directory of %s", path);
    else
        st = open_in_dir(f, rdwr, err);
    if (st != GGUF_OK)
        gguf_file_close(f);
    return st;
}

enum gguf_status gguf_file_open(struct gguf_file *f, const char *path, int rdwr,
                                struct gguf_error *err) {
    gguf_file_init(f);
    if (!path || !*path)
        return gguf_fail(err, GGUF_E_INVAL, "no file given");
    const char *slash = strrchr(path, '/');
    if (slash && !slash[1])
        return gguf_fail(err, GGUF_E_INVAL, "%s names a directory", path);
    size_t dlen = slash ? (size_t)(slash - path) : 0;
    char *dir = slash ? strndup(path, dlen ? dlen : 1) : strdup(".");
    if (!dir)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    enum gguf_status st =
        dfd < 0 ? gguf_sys_fail(err, errno, "cannot open directory %s", dir)
                : gguf_file_open_at(f, dfd, path, rdwr, err);
    if (dfd >= 0)
        close(dfd);
    free(dir);
    return st;
}

enum gguf_status gguf_file_reopen(struct gguf_file *f, struct gguf_error *err) {
    return open_in_dir(f, f->writable ? 1 : 0, err);
}

/* n hex digits exactly at s (either case). */
static bool all_hex(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
              (c >= 'A' && c <= 'F')))
            return false;
    }
    return true;
}

bool gguf_name_is_hash(const char *path) {
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--;
    size_t b = len;
    while (b > 0 && path[b - 1] != '/')
        b--;
    const char *name = path + b;
    size_t nlen = len - b;
    if (nlen > 7 &&
        (strncmp(name, "sha256-", 7) == 0 || strncmp(name, "sha256:", 7) == 0))
        name += 7, nlen -= 7;
    if ((nlen == 40 || nlen == 64 || nlen == 128) && all_hex(name, nlen))
        return true;
    /* The directory it sits in: "blobs". */
    size_t d = b > 0 ? b - 1 : 0, ds = d;
    while (ds > 0 && path[ds - 1] != '/')
        ds--;
    return b > 0 && d - ds == 5 && strncmp(path + ds, "blobs", 5) == 0;
}

bool gguf_file_hash_named(const struct gguf_file *f, char *real, size_t n) {
    char link[64], buf[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", f->fd);
    ssize_t k = f->fd >= 0 ? readlink(link, buf, sizeof buf - 1) : -1;
    if (k > 0 && buf[0] == '/') {
        buf[k] = '\0';
        /* A file unlinked since: its name as it was. */
        if ((size_t)k > 10 && strcmp(buf + k - 10, " (deleted)") == 0)
            buf[k - 10] = '\0';
    } else {
        snprintf(buf, sizeof buf, "%s", f->path ? f->path : "");
    }
    if (real && n)
        snprintf(real, n, "%s", buf);
    return gguf_name_is_hash(buf);
}

enum gguf_status gguf_file_drop_write(struct gguf_file *f,
                                      struct gguf_error *err) {
    if (!f->writable)
        return GGUF_OK;
    struct stat was = f->sb;
    enum gguf_status st = open_in_dir(f, 0, err);
    if (st != GGUF_OK)
        return st;
    if (f->sb.st_dev != was.st_dev || f->sb.st_ino != was.st_ino)
        return gguf_fail(err, GGUF_E_CHANGED,
                         "%s was replaced while it was opened", f->path);
    return GGUF_OK;
}
