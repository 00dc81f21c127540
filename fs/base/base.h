/*
 * base.h - the bottom of fs/ (every file may call it): the mount's log
 * (log.c), library statuses as errno values (errno.c), the memory grants
 * of drafts and of the texts made at an edit generation (memcap.c), and
 * what /proc/self/mountinfo says (mountinfo.c).  The kernel shim is
 * devio.h's.  Knows struct gfs by name only: gfs_log and the grants take
 * a model to name it in their lines and to count against its bounds.
 */
#ifndef GGUFS_FS_BASE_H
#define GGUFS_FS_BASE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h" /* struct gguf_error */

struct gfs;

/* The log lines a mount keeps in memory for its status (log.c), and
 * their most bytes each. */
#define GFS_LOG_RING 20
#define GFS_LOG_LINE 512

/* The log (log.c): its last GFS_LOG_RING lines, and the log file
 * (fd, when file) of a mount without a terminal; where (set at mount) says
 * where the log goes, for the status.  One per mount, shared by its
 * models; lock is a leaf taken by gfs_log under any other lock. */
struct gfs_log {
    pthread_mutex_t lock;
    char ring[GFS_LOG_RING][GFS_LOG_LINE];
    unsigned n; /* lines logged so far */
    int fd, file;
    int foreground; /* lines go to stderr, not syslog */
    char where[4200];
};

/* One line to stderr (foreground) or syslog, and to the log's memory
 * and file.  No lock. */
void gfs_log(struct gfs *fs, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void gfs_log_line(struct gfs_log *l, const char *line);
/* What the code shared by the commands and the mounts says on stderr
 * ("ggufs: ...\n", as fprintf would) goes to the log l instead, on this
 * thread, while l is set (gfs_say_to(l) ... gfs_say_to(NULL)): a store
 * opens its models after the daemon detached, when stderr is /dev/null
 * (issue 32: an overlay refused there was said to nobody). */
void gfs_say_to(struct gfs_log *l);
void gfs_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* gfs_logfile_open: at mount, before detaching; 0, or -1 with why in
 * msg. */
int gfs_logfile_open(struct gfs_log *l, char *msg, size_t n);
void gfs_logfile_close(struct gfs_log *l);

/* errno.c: the one place library statuses become errno values. */
int gfs_errno(const struct gguf_error *err);

/* Moves a buffer's grant (*granted) to want bytes (memcap.c): call before
 * it grows past *granted, and with the new size after it shrinks or is
 * freed (0).  0, or ENOSPC (nothing changed) past fs->max_drafts. */
int gfs_mem_grant(struct gfs *fs, size_t *granted, size_t want);
/* The daemon's texts made at an edit generation (GFS_TEXTS_MAX, all
 * models together): room is what is left now (the bound to make the next
 * one with); grant counts n more bytes (0, or ENOMEM past the bound,
 * nothing counted, one log line naming fs the first time); release
 * uncounts them.  No lock. */
size_t gfs_texts_room(void);
int gfs_texts_grant(struct gfs *fs, size_t n);
void gfs_texts_release(size_t n);

/* The texts of the tokenizer's files (tokdir.c, made whole at each edit
 * generation by gfs_text_of_gen) that the daemon holds at once, all
 * models together (memcap.c, gfs_texts_grant): a hostile vocabulary of 42 MB
 * rendered 360 MB of texts (escapes: \xHH, \u00HH).  A text is made with
 * what is left of it as its bound, so that one past it stops early; the
 * largest real tokenizer.json (a 256k vocabulary) is about 33 MB. */
#define GFS_TEXTS_MAX ((size_t)128 << 20)

/* mountinfo.c: gfs_find_mount: daemon.h.  gfs_mount_point_of: whether
 * the directory at real (a resolved path) is a mount point: 1 with its
 * type and source in what, else 0 (or no mountinfo). */
int gfs_mount_point_of(const char *real, char *what, size_t n);

#endif
