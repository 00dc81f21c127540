/*
 * log.c - cat_logf: a scan's one line for the caller's log (no newline;
 * nothing when the caller gave no log).  The bottom of the catalog: every
 * file may call it, it calls none.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>

void cat_logf(struct cat_scan *s, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    if (!s->log)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    s->log(s->log_u, line);
}
