/*
 * open.c - where a header's bytes come from: a path (gguf_open), an open
 * file (gguf_open_file, gguf_reopen), memory (gguf_open_mem,
 * gguf_check_header, gguf_open_original) or a caller's reader
 * (gguf_open_reader).  Each makes a context (ctx.c), records what it was
 * opened from (the file's identity for commits, the reader), and hands
 * the bytes to read.c's parser (gguf_parse), which reads and validates
 * the header the same way whatever the source.
 *
 * Calls: open.c calls read.c (gguf_parse) and ctx.c; read.c calls
 * neither open.c nor anything that opens a file.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The reader of a local file: pread on its descriptor. */
static enum gguf_status fd_read(void *u, uint64_t off, void *buf, size_t n,
                                size_t *got, struct gguf_error *err) {
    int fd = *(const int *)u;
    for (;;) {
        ssize_t r = pread(fd, buf, n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return gguf_fail(err, GGUF_E_IO,
                             "reading the header at offset %llu: %s",
                             (unsigned long long)off, strerror(errno));
        *got = (size_t)r;
        return GGUF_OK;
    }
}

/* Makes a context of the open regular file fd in the directory dfd (both
 * owned by the context from here on, also on failure; dfd may be -1) and
 * parses its header. */
static enum gguf_status open_fd(gguf_ctx **out, int fd, int dfd,
                                const char *path, unsigned flags,
                                struct gguf_error *err) {
    gguf_ctx *ctx = NULL;
    enum gguf_status st = GGUF_OK;
    struct stat sb;

    if (fstat(fd, &sb) != 0) {
        st = gguf_fail(err, GGUF_E_IO, "cannot stat the file: %s",
                       strerror(errno));
        goto out;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = gguf_fail(err, GGUF_E_INVAL, "not a regular file");
        goto out;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        st = gguf_fail(err, GGUF_E_IO, "cannot set the file's flags: %s",
                       strerror(errno));
        goto out;
    }
    if (!(ctx = gguf_ctx_alloc()) || !(ctx->path = strdup(path))) {
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory");
        goto out;
    }
    ctx->fd = fd;
    fd = -1;
    ctx->dfd = dfd;
    dfd = -1;
    const char *slash = strrchr(ctx->path, '/');
    ctx->base = slash ? slash + 1 : ctx->path;
    ctx->dev = sb.st_dev;
    ctx->ino = sb.st_ino;
    ctx->mtime_ns =
        (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
    ctx->ctime_ns =
        (int64_t)sb.st_ctim.tv_sec * 1000000000 + sb.st_ctim.tv_nsec;
    struct gguf_reader rd = {.read = fd_read, .u = &ctx->fd};
    st = gguf_parse(ctx, &rd, NULL, (uint64_t)sb.st_size, (uint64_t)sb.st_size,
                    flags, err);
out:
    if (fd >= 0)
        close(fd);
    if (dfd >= 0)
        close(dfd);
    if (st != GGUF_OK) {
        gguf_close(ctx);
        return st;
    }
    *out = ctx;
    return GGUF_OK;
}

/* A duplicate of fd (close-on-exec), or -1 (open_fd says so). */
static int dup_cloexec(int fd) {
    return fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

enum gguf_status gguf_open(gguf_ctx **out, const char *path, unsigned flags,
                           struct gguf_error *err) {
    if (!out || !path)
        return gguf_fail(err, GGUF_E_INVAL, "no file given");
    *out = NULL;
    /* O_NONBLOCK so that a FIFO given by mistake cannot hang the open; it
     * is cleared again once the file is known to be regular.  O_NOFOLLOW:
     * the command resolves the path the user gave once (realpath); a
     * symlink found now was put there since. */
    const char *base = "";
    int dfd = gguf_open_dir_of(path, &base, NULL);
    /* A path without a last name ("/", "dir/") names a directory: opened
     * as it is, so that the check of its type refuses it (GGUF_E_INVAL). */
    int fd = -1;
    if (dfd >= 0 && !base[0])
        fd = open(path, O_RDONLY | O_CLOEXEC);
    else if (dfd >= 0)
        fd = openat(dfd, base,
                    ((flags & GGUF_OPEN_RDWR) ? O_RDWR : O_RDONLY) | O_CLOEXEC |
                        O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0) {
        int e = errno;
        if (dfd >= 0)
            close(dfd);
        return gguf_fail(err, GGUF_E_IO, "cannot open the file: %s",
                         e == ELOOP ? "it is a symbolic link" : strerror(e));
    }
    if (!(flags & GGUF_OPEN_RDWR)) { /* a reader writes nothing beside it */
        close(dfd);
        dfd = -1;
    }
    return open_fd(out, fd, dfd, path, flags, err);
}

enum gguf_status gguf_reopen(const gguf_ctx *ctx, gguf_ctx **out,
                             struct gguf_error *err) {
    if (!out || !ctx || ctx->fd < 0 || !ctx->path)
        return gguf_fail(err, GGUF_E_INVAL, "the context has no file");
    *out = NULL;
    return open_fd(out, dup_cloexec(ctx->fd), dup_cloexec(ctx->dfd), ctx->path,
                   GGUF_OPEN_ALLOW_NESTED, err);
}

enum gguf_status gguf_open_file(gguf_ctx **out, const struct gguf_file *f,
                                unsigned flags, struct gguf_error *err) {
    if (!out || !f || f->fd < 0)
        return gguf_fail(err, GGUF_E_INVAL, "no file given");
    *out = NULL;
    if ((flags & GGUF_OPEN_RDWR) && !f->writable)
        return gguf_fail(err, GGUF_E_PERM, "%s is open read-only", f->path);
    /* The directory only for a writer: a reader writes nothing beside the
     * file (and a store's models count their descriptors). */
    return open_fd(out, dup_cloexec(f->fd),
                   flags & GGUF_OPEN_RDWR ? dup_cloexec(f->dfd) : -1, f->path,
                   flags, err);
}

enum gguf_status gguf_open_mem(gguf_ctx **out, const void *data, size_t len,
                               unsigned flags, struct gguf_error *err) {
    if (!out || (!data && len))
        return gguf_fail(err, GGUF_E_INVAL, "no bytes given");
    *out = NULL;
    gguf_ctx *ctx = gguf_ctx_alloc();
    if (!ctx)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    enum gguf_status st = gguf_parse(ctx, NULL, data, len, len, flags, err);
    if (st != GGUF_OK) {
        gguf_close(ctx);
        return st;
    }
    *out = ctx;
    return GGUF_OK;
}

enum gguf_status gguf_open_reader(gguf_ctx **out, const struct gguf_reader *rd,
                                  const char *name, unsigned flags,
                                  struct gguf_error *err) {
    if (!out || !rd || !rd->read || !name)
        return gguf_fail(err, GGUF_E_INVAL, "no source given");
    *out = NULL;
    if (flags & GGUF_OPEN_RDWR)
        return gguf_fail(err, GGUF_E_PERM, "%s can only be read", name);
    gguf_ctx *ctx = gguf_ctx_alloc();
    if (!ctx || !(ctx->path = strdup(name))) {
        gguf_close(ctx);
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    }
    enum gguf_status st =
        gguf_parse(ctx, rd, NULL, rd->size, rd->size, flags, err);
    if (st != GGUF_OK) {
        gguf_close(ctx);
        return st;
    }
    ctx->rd = *rd;
    *out = ctx;
    return GGUF_OK;
}

/* The header alone: hdr[0, len) is parsed and validated exactly as
 * gguf_open would, except that the tensor data is checked against a file
 * of file_size bytes (which is not read; a tensor-less file may end
 * before its padded header).  The data offset must be len: hdr is a
 * journal's whole header region [0, D). */
enum gguf_status gguf_check_header(const uint8_t *hdr, uint64_t len,
                                   uint64_t file_size, unsigned flags,
                                   struct gguf_error *err) {
    if (!hdr || len == 0)
        return gguf_fail(err, GGUF_E_FORMAT, "empty header");
    gguf_ctx *ctx = gguf_ctx_alloc();
    if (!ctx)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    enum gguf_status st =
        gguf_parse(ctx, NULL, hdr, len, file_size, flags, err);
    if (st == GGUF_OK && ctx->data_offset != len)
        st = gguf_fail(
            err, GGUF_E_FORMAT, "header puts the data at %llu, not at %llu",
            (unsigned long long)ctx->data_offset, (unsigned long long)len);
    gguf_close(ctx);
    return st;
}

enum gguf_status gguf_open_original(gguf_ctx **out, const gguf_ctx *ctx,
                                    unsigned flags, struct gguf_error *err) {
    if (!out || !ctx || !ctx->hdr)
        return gguf_fail(err, GGUF_E_INVAL, "no header to parse");
    *out = NULL;
    gguf_ctx *c = gguf_ctx_alloc();
    if (!c)
        return gguf_fail(err, GGUF_E_NOMEM, "out of memory");
    enum gguf_status st =
        gguf_parse(c, NULL, ctx->hdr, ctx->hdr_len, ctx->file_size, flags, err);
    if (st != GGUF_OK) {
        gguf_close(c);
        return st;
    }
    *out = c;
    return GGUF_OK;
}
