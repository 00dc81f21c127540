/*
 * error.c - error reporting: gguf_fail fills a struct gguf_error, and
 * gguf_quote makes untrusted names safe to put in a one-line message.
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

const char *gguf_quote(char *buf, size_t n, const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)s;
    size_t o = 0;
    if (n < 8) {
        if (n)
            buf[0] = '\0';
        return buf;
    }
    /* Leave room for "..." and the NUL whatever the last piece is. */
    size_t room = n - 4;
    for (size_t i = 0; i < len;) {
        char piece[8];
        size_t plen, adv = 1;
        size_t ulen = u[i] >= 0x80 ? gguf_utf8_seq(u + i, len - i) : 0;
        if (u[i] == '\\' || u[i] == '\'') {
            piece[0] = '\\';
            piece[1] = (char)u[i];
            plen = 2;
        } else if (u[i] >= 0x20 && u[i] < 0x7f) {
            piece[0] = (char)u[i];
            plen = 1;
        } else if (ulen) {
            memcpy(piece, u + i, ulen);
            plen = adv = ulen;
        } else {
            snprintf(piece, sizeof piece, "\\x%02x", u[i]);
            plen = 4;
        }
        if (o + plen > room) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        memcpy(buf + o, piece, plen);
        o += plen;
        i += adv;
    }
    buf[o] = '\0';
    return buf;
}
