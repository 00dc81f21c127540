/*
 * errno.c - the one mapping from library statuses to errno values (the
 * log is log.c's).
 */
#include "../ggufs.h"
#include "base.h"

#include <errno.h>

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
