/*
 * mount.c - the daemon's life: open and validate the source (a GGUF, a
 * shard set, or a remote file), set up the overlay, mount, detach, serve,
 * and at the end unmount, make the last commit and let everything go.
 * Reached from the command line (cli/) through daemon.h only:
 * gfs_daemon_run.  Every failure before the mount prints one line
 * "ggufs: FILE: what is wrong" and returns non-zero (status.h) with no
 * mount left behind.
 */
#include "ggufs.h"
#include "source/source.h"

#include "../status.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_log.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* ---- libfuse's log, caught ---------------------------------------------
 * While the command line is checked (cli/) and while the mount is made,
 * libfuse's errors are kept (it writes one message in several calls) to
 * be said as one line of ours; the rest goes to stderr. */

static char fuse_msg[512];
static void catch_fuse_log(enum fuse_log_level level, const char *fmt,
                           va_list ap) {
    if (level > FUSE_LOG_ERR) {
        vfprintf(stderr, fmt, ap);
        return;
    }
    size_t n = strlen(fuse_msg);
    if (n + 1 < sizeof fuse_msg)
        vsnprintf(fuse_msg + n, sizeof fuse_msg - n, fmt, ap);
}

void gfs_fuse_log_catch(int on) {
    if (on)
        fuse_msg[0] = '\0';
    fuse_set_log_func(on ? catch_fuse_log : NULL);
}

const char *gfs_fuse_log_caught(void) {
    char *nl = strchr(fuse_msg, '\n');
    if (nl)
        *nl = '\0';
    return strncmp(fuse_msg, "fuse: ", 6) == 0 ? fuse_msg + 6 : fuse_msg;
}

/* Finds a fuse.ggufs mount in /proc/self/mountinfo by its mountpoint
 * (by_source = 0) or by its GGUF path (by_source = 1); copies the other
 * field into out.  Returns 1 if found. */
int gfs_find_mount(const char *what, int by_source, char *out, size_t n) {
    FILE *f = fopen("/proc/self/mountinfo", "r");
    char line[8192];
    int found = 0;
    if (!f)
        return 0;
    while (!found && fgets(line, sizeof line, f)) {
        char mnt[4096], fstype[256], src[4096];
        char *dash = strstr(line, " - ");
        if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
            sscanf(dash + 3, "%255s %4095s", fstype, src) != 2)
            continue;
        if (strcmp(fstype, "fuse.ggufs") != 0)
            continue;
        /* mountinfo escapes space, tab, newline and backslash as \ooo. */
        for (char *fld = mnt; fld; fld = fld == mnt ? src : NULL) {
            char *r = fld, *w = fld;
            while (*r) {
                if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] &&
                    r[3]) {
                    *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 +
                                  (r[3] - '0'));
                    r += 4;
                } else {
                    *w++ = *r++;
                }
            }
            *w = '\0';
        }
        if (strcmp(by_source ? src : mnt, what) == 0) {
            snprintf(out, n, "%s", by_source ? mnt : src);
            found = 1;
        }
    }
    fclose(f);
    return found;
}

/* Raises the kernel's readahead of our mount to 1008 KiB (FUSE mounts get
 * 128 KiB, which caps every read request).  Needs root; silently skipped
 * otherwise.  The device number comes from mountinfo: a stat of the
 * mountpoint would block, as nothing serves it yet. */
static void raise_readahead(const char *mnt) {
    char *real = realpath(mnt, NULL);
    FILE *f = fopen("/proc/self/mountinfo", "r");
    char line[8192], dev[64] = "";
    if (!real || !f)
        goto out;
    while (fgets(line, sizeof line, f)) {
        char d[64], m[4096];
        if (sscanf(line, "%*s %*s %63s %*s %4095s", d, m) == 2 &&
            strcmp(m, real) == 0)
            snprintf(dev, sizeof dev, "%s", d); /* the last one is ours */
    }
    if (dev[0]) {
        char path[128];
        snprintf(path, sizeof path, "/sys/class/bdi/%s/read_ahead_kb", dev);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            if (write(fd, "1008", 4) < 0) {
                /* not ours to change: keep the default */
            }
            close(fd);
        }
    }
out:
    if (f)
        fclose(f);
    free(real);
}

/* Signals.  libfuse 3.14's own handlers race with its worker threads: a
 * signal that lands on a worker between its check for exit and its read of
 * /dev/fuse is lost, and the daemon never ends (seen under load).  So
 * SIGTERM/SIGINT/SIGHUP are blocked in every thread and taken by one thread
 * with sigwait, which ends the session and wakes the main thread (blocked
 * in sem_wait or read, neither restarted after a handler) with SIGUSR1. */
struct gfs_sig {
    sigset_t set;
    struct fuse_session *se;
    struct gfs *fs;
    pthread_t main;
    atomic_int quit; /* cleanup: the thread ends at its next signal (it
                        is woken with SIGUSR2, never cancelled: a thread
                        cancelled in sigwait leaves its frame poisoned
                        under AddressSanitizer) */
};

static void gfs_wake(int sig) {
    (void)sig;
}

/* How long a SIGUSR2 makes hashes yield (ms): long enough for ggufs -u
 * to unmount once the requests in flight have ended. */
#define HASH_YIELD_MS 5000

static void *gfs_sig_thread(void *arg) {
    struct gfs_sig *c = arg;
    int sig = 0;
    while (sigwait(&c->set, &sig) == 0) {
        if (atomic_load(&c->quit))
            break;
        if (sig == SIGUSR2) { /* ggufs -u: let the mount go idle */
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            atomic_store(&c->fs->hash_yield_ms, (long long)now.tv_sec * 1000 +
                                                    now.tv_nsec / 1000000 +
                                                    HASH_YIELD_MS);
            continue;
        }
        fuse_session_exit(c->se);
        pthread_kill(c->main, SIGUSR1);
        break;
    }
    return NULL;
}

/* What gfs_daemon_run sets up, step by step; cleanup undoes whatever was
 * done. */
struct gfs_main {
    struct gfs_cmdline *c; /* the command line (cli/ frees it) */
    struct gfs fs;
    char *path;  /* absolute path of the GGUF (fs.path) */
    char *shown; /* the source as every user may see it (/proc/mounts) and
                    the key of its state (overlay, outcome): path, or a
                    URL without user info and query string (own copy) */
    struct gguf_file file; /* the GGUF, opened once (gguf_file_open) */
    char *live_name;       /* fs.live_name when made here */
    char *mnt_abs;         /* fs.mnt resolved, when it could be */
    int locks;             /* fs's locks are initialised */
    struct fuse_session *se;
    int mounted;
    struct gfs_sig sig; /* shared with the signal thread */
    pthread_t sig_thread;
    int handlers; /* sig_thread runs */
};

/* A read-write mount first finishes a commit interrupted by a crash,
 * before anything reads the file.  0 or -1. */
static int recover_first(struct gfs_main *m) {
    struct gguf_error gerr = {0};
    bool did = false;
    if (gguf_recover_file(&m->file, &did, &gerr) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: %s\n", m->c->o.file, gerr.msg);
        return -1;
    }
    if (did)
        fprintf(stderr, "ggufs: %s: completed an interrupted commit\n",
                m->c->o.file);
    return 0;
}

/* One writer per file: read-write mounts lock it exclusively, read-only
 * mounts shared.  The lock is held until the last commit is done.  0 or
 * -1. */
static int lock_gguf(const struct gfs_main *m) {
    if (flock(gguf_fd(m->fs.ctx),
              (m->c->o.readonly ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0)
        return 0;
    char where[4096];
    if (gfs_find_mount(m->path, 1, where, sizeof where))
        fprintf(stderr, "ggufs: %s: already mounted at %s\n", m->c->o.file,
                where);
    else
        fprintf(stderr, "ggufs: %s: locked by another program (%s)\n",
                m->c->o.file, strerror(errno));
    return -1;
}

/* -o overlay or -o overlay=PATH was given. */
static int overlay_wanted(const struct gfs_main *m) {
    return m->c->o.overlay || m->c->o.overlay_path;
}

/* How the GGUF is opened: never for writing with -o overlay (the file may
 * be 0444, immutable, on a read-only filesystem: it is never written),
 * read-only with -o ro, else read-write if permitted (-1). */
static int overlay_rdwr(const struct gfs_main *m) {
    return m->c->o.readonly || overlay_wanted(m) ? 0 : -1;
}

/* -o overlay: the overlay found and applied once the GGUF is open
 * (fs/overlay.c); a remote source's is known by URL and the server's
 * version.  0 or -1 after one line. */
static int setup_overlay(struct gfs_main *m) {
    char ident[512];
    int remote = gfs_remote_is(m->c->o.file);
    if (!overlay_wanted(m)) {
        gfs_store_use_file(&m->fs);
        gfs_overlay_note(m->shown, m->c->o.file);
        return 0;
    }
    if (remote && gfs_remote_identity(&m->fs, ident, sizeof ident) != 0) {
        fprintf(stderr, "ggufs: %s: out of memory\n", m->c->o.file);
        return -1;
    }
    /* As mountinfo will show it (a bad one is reported by the mount). */
    char *mnt = realpath(m->c->o.mnt, NULL);
    struct gfs_overlay_args a = {.path = m->shown,
                                 .remote_id = remote ? ident : NULL,
                                 .opt = m->c->o.overlay_path,
                                 .file = m->c->o.file,
                                 .mnt = mnt,
                                 .readonly = m->c->o.readonly};
    int r = gfs_overlay_setup(&m->fs, &a);
    free(mnt);
    return r;
}

/* Source selection (issue 13): an http(s):// or hf:// source is opened
 * through fs/remote.c, read-only unless an overlay takes the edits (the
 * overlay has its own lock and is the durable store of the edits); there
 * is no file to recover, lock or keep pending edits of.  0, or -1 after
 * one line on stderr naming the source (or the shard at fault). */
static int open_remote(struct gfs_main *m) {
    struct gguf_error gerr = {0};
    char bad[PATH_MAX + 64], msg[512];
    m->c->o.remote.hf = strncmp(m->c->o.file, "hf://", 5) == 0;
    if (!(m->path = gfs_remote_resolve(m->c->o.file, msg, sizeof msg)) ||
        !(m->shown = gfs_remote_shown(m->path, msg, sizeof msg))) {
        fprintf(stderr, "ggufs: %s: %s\n", m->c->o.file, msg);
        return -1;
    }
    if (msg[0]) /* a credential in the URL */
        fprintf(stderr, "ggufs: %s: warning: %s\n", m->shown, msg);
    if (!m->c->o.readonly && !overlay_wanted(m)) {
        m->c->o.readonly = 1;
        fuse_opt_add_arg(&m->c->args, "-oro");
    }
    /* What an overlay mount's commit at unmount said, if nobody heard. */
    (void)gfs_print_outcome(m->shown);
    unsigned flags = m->c->o.allow_nested ? GGUF_OPEN_ALLOW_NESTED : 0;
    if (gfs_remote_open(&m->fs, m->path, &m->c->o.remote, flags, bad,
                        sizeof bad, &gerr) != 0) {
        /* An hf:// source names the URL it was resolved to: a 404 there
         * is a wrong owner, repository, revision or path. */
        int first = strcmp(bad, m->path) == 0;
        int hf = first && strcmp(m->c->o.file, m->path) != 0;
        fprintf(stderr, "ggufs: %s: %s%s%s%s\n", first ? m->c->o.file : bad,
                gerr.msg, hf ? " (at " : "", hf ? m->shown : "", hf ? ")" : "");
        return -1;
    }
    m->fs.ctx = m->fs.shards[0];
    if (gfs_view_layout(&m->fs, &gerr) != 0) {
        fprintf(stderr, "ggufs: %s: %s\n", m->c->o.file, gerr.msg);
        return -1;
    }
    for (int sh = 0; sh < m->fs.n_shards; sh++)
        for (int w = 0; w < gguf_n_warnings(m->fs.shards[sh]); w++)
            fprintf(stderr, "ggufs: %s: warning: %s\n",
                    sh ? gguf_path(m->fs.shards[sh]) : m->c->o.file,
                    gguf_warning(m->fs.shards[sh], w));
    gfs_remote_stat(&m->fs, &m->fs.st);
    return 0;
}

/* Open and check: the GGUF (or shard set) opened, validated, laid out and
 * locked.  0, or -1 after one line on stderr. */
static int open_gguf(struct gfs_main *m) {
    struct gguf_error gerr = {0};
    if (gfs_remote_is(m->c->o.file))
        return open_remote(m);
    /* Absolute: the daemon changes its directory to / when it detaches. */
    m->path = realpath(m->c->o.file, NULL);
    if (m->path && !(m->shown = strdup(m->path))) {
        free(m->path);
        m->path = NULL;
    }
    if (!m->path) {
        fprintf(stderr, "ggufs: %s: %s\n", m->c->o.file, strerror(errno));
        return -1;
    }
    char where[4096];
    if (gfs_wait_previous(m->path, m->c->o.file,
                          gfs_find_mount(m->path, 1, where, sizeof where)) != 0)
        return -1;
    unsigned flags = m->c->o.allow_nested ? GGUF_OPEN_ALLOW_NESTED : 0;
    int fallback_ro = 0;
    /* The one lookup of the path: everything below uses this descriptor
     * (gguf/file.c). */
    if (gguf_file_open(&m->file, m->path, overlay_rdwr(m), &gerr) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: %s\n", m->c->o.file, gerr.msg);
        return -1;
    }
    if (!m->c->o.readonly && !overlay_wanted(m) && !m->file.writable) {
        fallback_ro = 1;
        m->c->o.readonly = 1;
        fuse_opt_add_arg(&m->c->args, "-oro");
    }
    if (!m->c->o.readonly && !overlay_wanted(m)) {
        if (recover_first(m) != 0)
            return -1;
        flags |= GGUF_OPEN_RDWR;
    }
    char bad[PATH_MAX + 64];
    if (gguf_open_set(m->path, &m->file, flags, &m->fs.shards, &m->fs.n_shards,
                      bad, sizeof bad, &gerr) != GGUF_OK) {
        /* A read-only mount does not recover: a half-written header is
         * what an interrupted commit leaves, and the way out is named. */
        int interrupted = gguf_commit_interrupted(m->path);
        fprintf(stderr, "ggufs: %s: %s%s%s%s\n",
                strcmp(bad, m->path) == 0 ? m->c->o.file : bad, gerr.msg,
                interrupted ? "; a commit of this file was interrupted: "
                              "'ggufs --recover "
                            : "",
                interrupted ? m->c->o.file : "",
                interrupted ? "' completes it" : "");
        return -1;
    }
    m->fs.ctx = m->fs.shards[0];
    if (gfs_view_layout(&m->fs, &gerr) != 0) {
        fprintf(stderr, "ggufs: %s: %s\n", m->c->o.file, gerr.msg);
        return -1;
    }
    if (lock_gguf(m) != 0)
        return -1;
    /* Locked: no live daemon of this file is left, so any pending record
     * is a dead mount's.  A read-write mount would replace it. */
    (void)gfs_print_outcome(m->path);
    if (gfs_pending_note(m->path, m->c->o.file) && !m->c->o.readonly &&
        !overlay_wanted(m)) {
        fprintf(stderr,
                "ggufs: %s: not mounted read-write over pending edits (-o ro "
                "mounts it to look)\n",
                m->c->o.file);
        return -1;
    }
    if (fallback_ro)
        fprintf(stderr,
                "ggufs: %s: warning: not writable, mounting "
                "read-only (-o overlay takes edits without writing the "
                "file)\n",
                m->c->o.file);
    for (int sh = 0; sh < m->fs.n_shards; sh++)
        for (int w = 0; w < gguf_n_warnings(m->fs.shards[sh]); w++)
            fprintf(stderr, "ggufs: %s: warning: %s\n",
                    sh ? gguf_path(m->fs.shards[sh]) : m->c->o.file,
                    gguf_warning(m->fs.shards[sh], w));
    if (fstat(gguf_fd(m->fs.ctx), &m->fs.st) != 0) {
        fprintf(stderr, "ggufs: %s: %s\n", m->c->o.file, strerror(errno));
        return -1;
    }
    return 0;
}

/* Naming: the live view is named like the source (model.gguf); for a
 * shard set like the merged file (NAME.gguf for NAME-00001-of-00003.gguf,
 * as the library's gguf_split_name parses it): clients such as
 * node-llama-cpp see the -00001-of- pattern and go looking for the other
 * shards beside it.  Never meta, tensors, f32, npy or index.tsv (the
 * views, views.c); none if no name fits. */
static void name_live_view(struct gfs_main *m) {
    /* A URL's path ends at its query string ("?download=true"). */
    size_t plen = m->fs.remote ? strcspn(m->path, "?#") : strlen(m->path);
    const char *base = m->path + plen;
    while (base > m->path && base[-1] != '/')
        base--;
    char *name = strndup(base, (size_t)(m->path + plen - base));
    int sno, scount;
    size_t cut;
    if (!name)
        return;
    if (m->fs.n_shards > 1 && gguf_split_name(name, &sno, &scount, &cut) &&
        cut > 0)
        strcpy(name + cut, ".gguf"); /* shorter: the suffix is 20 bytes */
    m->live_name = name;
    if (name[0] && strcmp(name, "meta") != 0 && strcmp(name, "tensors") != 0 &&
        strcmp(name, "f32") != 0 && strcmp(name, "npy") != 0 &&
        strcmp(name, "index.tsv") != 0 && strcmp(name, "meta.tsv") != 0 &&
        strlen(name) <= 255)
        m->fs.live_name = name;
}

/* The rest of struct gfs, from the options, and its locks. */
static void init_state(struct gfs_main *m) {
    m->fs.path = m->shown; /* logs, state: the source as shown to all */
    m->fs.mnt = m->c->co.mountpoint ? m->c->co.mountpoint : m->c->o.mnt;
    if ((m->mnt_abs = realpath(m->fs.mnt, NULL))) /* before the mount */
        m->fs.mnt = m->mnt_abs;
    m->fs.uid = getuid();
    m->fs.gid = getgid();
    m->fs.readonly = m->c->o.readonly;
    m->fs.foreground = m->c->co.foreground;
    m->fs.commit_flags = m->c->o.no_insert ? GGUF_COMMIT_NO_INSERT : 0;
    m->fs.timeout = m->c->o.timeout;
    m->fs.max_value = m->c->o.max_value;
    m->fs.tensor_dio = m->c->o.tensor_dio;
    m->fs.max_drafts = m->c->o.max_drafts;
    pthread_rwlock_init(&m->fs.lock, NULL);
    pthread_mutex_init(&m->fs.text_lock, NULL);
    pthread_mutex_init(&m->fs.fh_lock, NULL);
    pthread_mutex_init(&m->fs.log_lock, NULL);
    snprintf(m->fs.log_where, sizeof m->fs.log_where, "syslog");
    gguf_set_progress(m->fs.ctx, gfs_progress_cb, &m->fs);
    m->locks = 1;
}

/* Whether the directory at real (a resolved path) is a mount point in
 * /proc/self/mountinfo: 1 with its type and source, else 0 (or no
 * mountinfo).  Fields are compared escaped as mountinfo writes them
 * (space, tab, newline, backslash as \ooo). */
static int mount_point_of(const char *real, char *what, size_t n) {
    char esc[4 * 4096 + 1], *w = esc;
    for (const char *r = real; *r && w < esc + sizeof esc - 5; r++)
        w += strchr(" \t\n\\", *r) ? sprintf(w, "\\%03o", (unsigned char)*r)
                                   : (*w = *r, 1);
    *w = '\0';
    FILE *f = fopen("/proc/self/mountinfo", "r");
    char line[16384];
    int found = 0;
    while (f && fgets(line, sizeof line, f)) {
        char mnt[16384], fstype[256], src[4096];
        char *dash = strstr(line, " - ");
        if (dash && sscanf(line, "%*s %*s %*s %*s %16383s", mnt) == 1 &&
            sscanf(dash + 3, "%255s %4095s", fstype, src) == 2 &&
            strcmp(mnt, esc) == 0) {
            snprintf(what, n, "%s of %s", fstype, src); /* the top one */
            found = 1;
        }
    }
    if (f)
        fclose(f);
    return found;
}

/* The mountpoint is checked (a directory, not already a mount point
 * unless -o over), and the mount named fuse.ggufs with the GGUF as
 * source, like other FUSE filesystems.  0 or -1. */
static int mount_options(struct gfs_main *m) {
    struct stat mst;
    char what[4400];
    if (stat(m->c->o.mnt, &mst) != 0) {
        fprintf(stderr, "ggufs: %s: %s\n", m->c->o.mnt, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(mst.st_mode)) {
        fprintf(stderr, "ggufs: %s: mountpoint is not a directory\n",
                m->c->o.mnt);
        return -1;
    }
    char *real = realpath(m->c->o.mnt, NULL);
    int busy = real && !m->c->o.over && mount_point_of(real, what, sizeof what);
    free(real);
    if (busy) {
        fprintf(stderr,
                "ggufs: %s: already a mount point (%s); -o over mounts on "
                "top of it\n",
                m->c->o.mnt, what);
        return -1;
    }
    if (fuse_opt_add_arg(&m->c->args, "-osubtype=ggufs") != 0 ||
        fuse_opt_add_arg(&m->c->args, "-odefault_permissions") != 0)
        return -1;
    char *fsname = NULL;
    if (fuse_opt_add_opt_escaped(&fsname, m->shown) != 0)
        return -1;
    char *fsopt = malloc(strlen(fsname) + 12);
    if (!fsopt) {
        free(fsname);
        return -1;
    }
    sprintf(fsopt, "-ofsname=%s", fsname);
    free(fsname);
    int r = fuse_opt_add_arg(&m->c->args, fsopt);
    free(fsopt);
    return r != 0 ? -1 : 0;
}

/* fuse_session_mount, its errors (libfuse's fuse_log lines, caught)
 * said as one line of ours, with a hint where the user may not use FUSE
 * (/dev/fuse is 0600 on some systems: only root opens it).  0 or -1. */
static int mount_session(struct gfs_main *m) {
    gfs_fuse_log_catch(1);
    int r = fuse_session_mount(m->se, m->c->o.mnt);
    gfs_fuse_log_catch(0);
    if (r == 0)
        return 0;
    const char *msg = gfs_fuse_log_caught();
    if (!msg[0])
        msg = "mount failed";
    int denied = strstr(msg, "/dev/fuse") && (strstr(msg, "ermission denied") ||
                                              strstr(msg, "not permitted"));
    fprintf(stderr, "ggufs: %s: %s%s\n", m->c->o.mnt, msg,
            denied ? " (FUSE needs root, or a user allowed to open /dev/fuse "
                     "(e.g. mode 0666) with fusermount3 installed setuid "
                     "root)"
                   : "");
    return -1;
}

/* A mount without a terminal (detached) logs to the log file in the state
 * directory as well as to syslog (where there is none, the file is all);
 * a file that cannot be used is said once, here, while stderr is still
 * the user's. */
static void open_log(struct gfs_main *m) {
    char msg[512], path[4096];
    struct gguf_error err = {0};
    if (m->c->co.foreground)
        return;
    if (gfs_logfile_open(&m->fs, msg, sizeof msg) != 0) {
        fprintf(stderr,
                "ggufs: warning: no log file (%s); the log goes to "
                "syslog only\n",
                msg);
        return;
    }
    if (gguf_state_log_path(path, sizeof path, &err) == GGUF_OK)
        snprintf(m->fs.log_where, sizeof m->fs.log_where, "%s and syslog",
                 path);
}

/* Serve: mount, detach, and run the session until unmount or a signal.
 * Returns the exit status; cleanup undoes what was done. */
static int serve(struct gfs_main *m) {
    int r;
    m->se = fuse_session_new(&m->c->args, &gfs_ops, sizeof gfs_ops, &m->fs);
    if (!m->se)
        return EXIT_MOUNT;
    m->fs.se = m->se;
    m->sig.se = m->se;
    sigemptyset(&m->sig.set);
    sigaddset(&m->sig.set, SIGTERM);
    sigaddset(&m->sig.set, SIGINT);
    sigaddset(&m->sig.set, SIGHUP);
    sigaddset(&m->sig.set, SIGUSR2);
    m->sig.fs = &m->fs;
    struct sigaction sa = {.sa_handler = gfs_wake};
    sigemptyset(&sa.sa_mask);
    if (pthread_sigmask(SIG_BLOCK, &m->sig.set, NULL) != 0 ||
        sigaction(SIGUSR1, &sa, NULL) != 0 ||
        signal(SIGPIPE, SIG_IGN) == SIG_ERR)
        return EXIT_MOUNT;
    if (mount_session(m) != 0)
        return EXIT_MOUNT;
    m->mounted = 1;
    /* Before the first request (INIT) is read: a failure only means no
     * passthrough, which gfs_pt_start logs. */
    (void)gfs_pt_start(&m->fs, m->se, m->c->o.passthrough);
    raise_readahead(m->c->o.mnt);
    open_log(m);
    /* Returns in the parent only once the mount is in place. */
    fuse_daemonize(m->c->co.foreground);
    /* After the fork of fuse_daemonize: threads do not survive it. */
    m->sig.main = pthread_self();
    if (pthread_create(&m->sig_thread, NULL, gfs_sig_thread, &m->sig) != 0)
        return EXIT_MOUNT;
    m->handlers = 1;

    if (m->c->co.singlethread) {
        r = fuse_session_loop(m->se);
    } else {
        struct fuse_loop_config *lc = fuse_loop_cfg_create();
        if (!lc)
            return EXIT_MOUNT;
        fuse_loop_cfg_set_clone_fd(lc, (unsigned)m->c->co.clone_fd);
        fuse_loop_cfg_set_max_threads(
            lc, m->c->co.max_threads ? m->c->co.max_threads : 8);
        r = fuse_session_loop_mt(m->se, lc);
        fuse_loop_cfg_destroy(lc);
    }
    /* libfuse returns the signal number after SIGTERM/SIGINT/SIGHUP: a
     * clean end like an unmount. */
    return (r == 0 || r == SIGTERM || r == SIGINT || r == SIGHUP) ? 0
                                                                  : EXIT_MOUNT;
}

/* Cleanup: unmount, the last commit (destroy), and every resource; returns
 * the final exit status. */
static int cleanup(struct gfs_main *m, int status) {
    if (m->mounted)
        fuse_session_unmount(m->se);
    if (m->handlers) {
        atomic_store(&m->sig.quit, 1);
        pthread_kill(m->sig_thread, SIGUSR2);
        pthread_join(m->sig_thread, NULL);
    }
    if (m->se)
        fuse_session_destroy(m->se); /* runs gfs_op_destroy: open handles
                                        applied and freed, the last commit */
    gfs_pt_stop(&m->fs);
    if (status == 0 && m->fs.store.commit_failed)
        status = EXIT_COMMIT;
    if (m->locks) {
        pthread_mutex_destroy(&m->fs.fh_lock);
        gfs_meta_free(&m->fs);
        gfs_texts_free(&m->fs);
        gfs_lnames_free(&m->fs);
        gfs_text_put(m->fs.live);
        pthread_mutex_destroy(&m->fs.text_lock);
        gfs_logfile_close(&m->fs);
        pthread_mutex_destroy(&m->fs.log_lock);
        pthread_rwlock_destroy(&m->fs.lock);
    }
    gfs_views_free(&m->fs);
    gfs_view_layout_free(&m->fs);
    gfs_overlay_free(&m->fs);
    gguf_close_set(m->fs.shards, m->fs.n_shards);
    gfs_remote_close(&m->fs);
    gguf_file_close(&m->file);
    free(m->path);
    free(m->shown);
    free(m->live_name);
    free(m->mnt_abs);
    return status;
}

int gfs_daemon_run(struct gfs_cmdline *c) {
    struct gfs_main m = {.c = c, .file = {.dfd = -1, .fd = -1}};
    int status = EXIT_BADFILE;
    if (open_gguf(&m) != 0 || setup_overlay(&m) != 0)
        goto out;
    name_live_view(&m);
    init_state(&m);
    status = EXIT_MOUNT;
    if (mount_options(&m) != 0)
        goto out;
    /* After the mountpoint's check: a failed mount says one line. */
    if (gfs_views_init(&m.fs, c->o.ggml, c->o.file) != 0) {
        status = EXIT_BADFILE;
        goto out;
    }
    status = serve(&m);
out:
    return cleanup(&m, status);
}
