/*
 * errno.c - how failures are reported: the one mapping from library
 * statuses to errno values, and the log (kept and written to the log
 * file by status.c).
 */
#include "ggufs.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>

int gfs_errno(const struct gguf_error *err) {
    switch (err->code) {
    case GGUF_OK:
        return 0;
    case GGUF_E_IO:
        return err->sys_errno ? err->sys_errno : EIO;
    case GGUF_E_NOMEM:
        return ENOMEM;
    case GGUF_E_FORMAT:
        return EIO;
    case GGUF_E_UNSUPPORTED:
        return ENOTSUP;
    case GGUF_E_INVAL:
        return EINVAL;
    case GGUF_E_RANGE:
        return EINVAL;
    case GGUF_E_NOTFOUND:
        return ENOENT;
    case GGUF_E_EXISTS:
        return EEXIST;
    case GGUF_E_PERM:
        return EPERM;
    case GGUF_E_CHANGED:
        return ESTALE;
    case GGUF_E_NOSPACE:
        return ENOSPC;
    case GGUF_E_BUSY:
        return EBUSY;
    }
    return EIO;
}

void gfs_log_line(struct gfs_log *l, const char *line) {
    gfs_status_note(l, line);
    if (l->foreground)
        fprintf(stderr, "ggufs: %s\n", line);
    else
        syslog(LOG_NOTICE, "%s", line);
}

void gfs_log(struct gfs *fs, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    gfs_log_line(fs->log, line);
}
