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

enum gguf_status gguf_file_open(struct gguf_file *f, const char *path, int rdwr,
                                struct gguf_error *err) {
    enum gguf_status st;
    char *dir = NULL;

    gguf_file_init(f);
    if (!path || !*path)
        return gguf_fail(err, GGUF_E_INVAL, "no file given");
    if (!(f->path = strdup(path)))
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    const char *slash = strrchr(f->path, '/');
    size_t dlen = slash ? (size_t)(slash - f->path) : 0;
    f->base = slash ? slash + 1 : f->path;
    dir = slash ? strndup(f->path, dlen ? dlen : 1) : strdup(".");
    if (!dir) {
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        goto out;
    }
    if (!*f->base) {
        st = gguf_fail(err, GGUF_E_INVAL, "%s names a directory", path);
        goto out;
    }
    f->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (f->dfd < 0) {
        st = gguf_sys_fail(err, errno, "cannot open directory %s", dir);
        goto out;
    }
    st = open_in_dir(f, rdwr, err);
out:
    free(dir);
    if (st != GGUF_OK)
        gguf_file_close(f);
    return st;
}

enum gguf_status gguf_file_reopen(struct gguf_file *f, struct gguf_error *err) {
    return open_in_dir(f, f->writable ? 1 : 0, err);
}
