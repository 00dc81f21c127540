/*
 * error.c - error reporting: gguf_fail fills a struct gguf_error, and the
 * statuses' names.  It calls nothing else of the library (gguf_quote, which
 * makes untrusted names safe to put in a one-line message, is textesc.c's,
 * beside the escapes it shares the UTF-8 rule with).
 */
#include "internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Contract (gguf.h): err may be NULL; the message is one line (any control
 * character that slipped in is replaced by a space); sys_errno is the errno
 * at entry for GGUF_E_IO and GGUF_E_NOSPACE, else 0.  Returns code. */
enum gguf_status gguf_fail(struct gguf_error *err, enum gguf_status code,
                           const char *fmt, ...) {
    int saved = errno; /* vsnprintf may clobber it */
    if (!err)
        return code;
    err->code = code;
    err->sys_errno = (code == GGUF_E_IO || code == GGUF_E_NOSPACE) ? saved : 0;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        snprintf(err->msg, sizeof err->msg, "%s", gguf_status_name(code));
    for (char *p = err->msg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    errno = saved;
    return code;
}

const char *gguf_status_name(enum gguf_status s) {
    switch (s) {
    case GGUF_OK:
        return "ok";
    case GGUF_E_IO:
        return "I/O error";
    case GGUF_E_NOMEM:
        return "out of memory";
    case GGUF_E_FORMAT:
        return "invalid GGUF file";
    case GGUF_E_UNSUPPORTED:
        return "unsupported GGUF file";
    case GGUF_E_INVAL:
        return "invalid argument";
    case GGUF_E_RANGE:
        return "value out of range";
    case GGUF_E_NOTFOUND:
        return "not found";
    case GGUF_E_EXISTS:
        return "already exists";
    case GGUF_E_PERM:
        return "not permitted";
    case GGUF_E_CHANGED:
        return "file changed";
    case GGUF_E_NOSPACE:
        return "no space left";
    case GGUF_E_BUSY:
        return "busy";
    }
    return "unknown status";
}
