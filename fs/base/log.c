/*
 * log.c - the daemon's log (struct gfs_log, one per mount): gfs_log's
 * lines go to stderr (foreground), else to the log file in the state
 * directory (gfs_logfile_open) and to syslog; the last GFS_LOG_RING lines
 * are kept in memory for the status (status.c).  The bottom of fs/: every
 * file may log, and this file calls only the library (the state
 * directory's log file).
 */
#include "../ggufs.h"
#include "base.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

/* A logged line (gfs_log's) kept and written to the log file. */
static void status_note(struct gfs_log *l, const char *line) {
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    if (!localtime_r(&now, &tm) ||
        !strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm))
        snprintf(stamp, sizeof stamp, "%lld", (long long)now);
    pthread_mutex_lock(&l->lock);
    snprintf(l->ring[l->n % GFS_LOG_RING], GFS_LOG_LINE, "%s %s", stamp, line);
    l->n++;
    if (l->file) {
        char buf[GFS_LOG_LINE + 64];
        int n = snprintf(buf, sizeof buf, "%s ggufs[%ld]: %s\n", stamp,
                         (long)getpid(), line);
        if (n >= (int)sizeof buf) { /* a long line, cut: still one line */
            n = (int)sizeof buf - 1;
            buf[n - 1] = '\n';
        }
        struct stat sb;
        /* Past the bound: the next file (the library rotates by name). */
        if (fstat(l->fd, &sb) == 0 && (uint64_t)sb.st_size >= GGUF_LOG_MAX) {
            struct gguf_error err = {0};
            int fd = gguf_state_log_open(&err);
            if (fd >= 0) {
                close(l->fd);
                l->fd = fd;
            }
        }
        if (n > 0 && write(l->fd, buf, (size_t)n) < 0) {
            /* a full disk: syslog still has it */
        }
    }
    pthread_mutex_unlock(&l->lock);
}

int gfs_logfile_open(struct gfs_log *l, char *where, size_t n) {
    struct gguf_error err = {0};
    int fd = gguf_state_log_open(&err);
    if (fd < 0) {
        snprintf(where, n, "%s", err.msg);
        return -1;
    }
    l->fd = fd;
    l->file = 1;
    return 0;
}

void gfs_logfile_close(struct gfs_log *l) {
    if (l->file)
        close(l->fd);
    l->file = 0;
}

void gfs_log_line(struct gfs_log *l, const char *line) {
    status_note(l, line);
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

static __thread struct gfs_log *say_sink;

void gfs_say_to(struct gfs_log *l) {
    say_sink = l;
}

void gfs_say(const char *fmt, ...) {
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (!say_sink) {
        fputs(line, stderr);
        return;
    }
    size_t n = strlen(line);
    if (n && line[n - 1] == '\n')
        line[--n] = '\0';
    gfs_log_line(say_sink, strncmp(line, "ggufs: ", 7) == 0 ? line + 7 : line);
}
