/*
 * main.c - the ggufs command: parse options, open and validate the GGUF,
 * mount, serve, unmount.  Every failure before the mount prints one line
 * "ggufs: FILE: what is wrong" and exits non-zero with no mount left behind.
 *
 * Exit statuses: 0 success; 1 the GGUF cannot be used (unreadable, invalid,
 * unsupported, locked by another mount, missing for --recover); 2 usage
 * error (found before anything is opened: unknown options, bad numbers,
 * missing or extra arguments); 3 the mount itself failed, or -u could not
 * unmount; 4 a commit failed (the edits were saved beside the GGUF).
 * man/ggufs.1, EXIT STATUS, is the contract; tests/cli.py checks it.
 */
#include "ggufs.h"
#include "source/source.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_log.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { EXIT_BADFILE = 1, EXIT_USAGE = 2, EXIT_MOUNT = 3, EXIT_COMMIT = 4 };
/* ggufs -u committed, but files in meta/ were not (FILEs: not keys): the
 * report names them (issue 21). */
enum { EXIT_UNCOMMITTED = 5 };
enum {
    KEY_RO,
    KEY_MAX_READ,
    KEY_TIMEOUT,
    KEY_MAX_THREADS,
    KEY_MAX_IDLE,
    KEY_MAX_VALUE,
    KEY_MAX_DRAFTS,
    KEY_CACHE_MAX,
    KEY_NET_TIMEOUT,
    KEY_NET_RETRIES,
    KEY_MAX_HEADER,
    KEY_PASSTHROUGH
};

#define TIMEOUT_MAX 2147483647.0 /* seconds; the kernel's are 64-bit */
#define THREADS_MAX 100000       /* libfuse 3.14 ignores larger values */

struct gfs_opts {
    const char *file; /* first non-option argument */
    const char *mnt;  /* second: checked by us, for a one-line error */
    int allow_nested;
    int readonly;
    int no_insert;
    int tensor_dio; /* -o tensor_direct_io */
    double timeout;
    size_t max_value;  /* bytes a meta file being written may hold */
    size_t max_drafts; /* bytes all of them together may hold */
    enum gfs_pt_mode passthrough;
    char *ggml; /* -o ggml=PATH|none: ggml's library (views.c);
                          fuse_opt's copy, freed by cleanup */
    struct gfs_remote_opts remote; /* http(s)/hf:// sources (issue 13) */
    int overlay;                   /* -o overlay[=PATH]: edits to an overlay */
    const char *overlay_path;      /* its PATH, or NULL for the default */
    int over;                      /* -o over: mount on top of a mount */
};

#define GFS_OPT(t, p, v)                                                       \
    { t, offsetof(struct gfs_opts, p), v }
static const struct fuse_opt gfs_opt_spec[] = {
    GFS_OPT("allow_nested", allow_nested, 1),
    GFS_OPT("no_insert_range", no_insert, 1),
    GFS_OPT("tensor_direct_io", tensor_dio, 1), GFS_OPT("ggml=%s", ggml, 0),
    GFS_OPT("overlay", overlay, 1), GFS_OPT("overlay=%s", overlay_path, 0),
    GFS_OPT("over", over, 1), FUSE_OPT_KEY("timeout=", KEY_TIMEOUT),
    FUSE_OPT_KEY("ro", KEY_RO), FUSE_OPT_KEY("max_value=", KEY_MAX_VALUE),
    FUSE_OPT_KEY("max_drafts=", KEY_MAX_DRAFTS),
    FUSE_OPT_KEY("passthrough=", KEY_PASSTHROUGH),
    FUSE_OPT_KEY("max_read=", KEY_MAX_READ),
    /* libfuse's own numeric options, checked here (its sscanf takes "-5"
     * as 4294967291) and then passed on */
    FUSE_OPT_KEY("max_threads=", KEY_MAX_THREADS),
    FUSE_OPT_KEY("max_idle_threads=", KEY_MAX_IDLE),
    /* remote sources (issue 13): remote_opt */
    GFS_OPT("cache=%s", remote.cache_dir, 0),
    GFS_OPT("header=%s", remote.header_file, 0),
    FUSE_OPT_KEY("cache_max=", KEY_CACHE_MAX),
    FUSE_OPT_KEY("net_timeout=", KEY_NET_TIMEOUT),
    FUSE_OPT_KEY("net_retries=", KEY_NET_RETRIES),
    FUSE_OPT_KEY("max_header=", KEY_MAX_HEADER), FUSE_OPT_END};

/* ---- usage errors ----------------------------------------------------
 * A usage error is one line "ggufs: WHAT" on stderr and exit status 2,
 * whoever finds it: our option table, libfuse's parsers (their fuse_log
 * messages are caught while the command line is checked), or main. */

static char usage_msg[512]; /* the first problem found; "" if none */

/* Records the first usage problem (later ones are consequences). */
static void usage_note(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static void usage_note(const char *fmt, ...) {
    if (usage_msg[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(usage_msg, sizeof usage_msg, fmt, ap);
    va_end(ap);
}

/* fuse_log while the command line is checked: errors are kept (libfuse
 * writes one message in several calls), the rest goes to stderr. */
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

/* Prints the usage error (ours, else libfuse's first line without its
 * "fuse: " prefix, else a generic one) and returns EXIT_USAGE. */
static int usage_error(void) {
    const char *m = usage_msg;
    char *nl = strchr(fuse_msg, '\n');
    if (nl)
        *nl = '\0';
    if (!m[0] && fuse_msg[0]) {
        m = fuse_msg;
        if (strncmp(m, "fuse: ", 6) == 0)
            m += 6;
    }
    if (!m[0])
        m = "invalid command line";
    fprintf(stderr, "ggufs: %s (see ggufs --help)\n", m);
    return EXIT_USAGE;
}

/* A whole decimal number in [lo, hi] (no sign, no spaces); 0 or -1. */
static int parse_count(const char *s, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long v = (*s >= '0' && *s <= '9') ? strtol(s, &end, 10) : -1;
    if (!end || *end || errno || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* A size: a whole decimal number of bytes, optionally followed by one of
 * K, M, G (binary: KiB, MiB, GiB), in [lo, hi]; 0 or -1. */
static int parse_size(const char *s, size_t lo, size_t hi, size_t *out) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = (*s >= '0' && *s <= '9') ? strtoull(s, &end, 10) : 0;
    if (!end || errno)
        return -1;
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10;
    else if (*end == 'M' || *end == 'm')
        shift = 20;
    else if (*end == 'G' || *end == 'g')
        shift = 30;
    if (shift)
        end++;
    if (*end || v > (unsigned long long)hi >> shift)
        return -1;
    v <<= shift;
    if (v < lo)
        return -1;
    *out = (size_t)v;
    return 0;
}

/* The numeric options: each checked in full, refused with one line. */
static int numeric_opt(struct gfs_opts *o, const char *arg, int key) {
    const char *eq = strchr(arg, '=');
    const char *val = eq ? eq + 1 : "";
    long n;
    if (key == KEY_MAX_VALUE) {
        if (parse_size(val, 1, GFS_MAX_FILE_BYTES, &o->max_value) != 0) {
            usage_note("-o %s: the size is a number of bytes (suffix K, M "
                       "or G for KiB, MiB, GiB) from 1 to 1G",
                       arg);
            return -1;
        }
        return 0;
    }
    if (key == KEY_MAX_DRAFTS) {
        if (parse_size(val, 1, SIZE_MAX / 2, &o->max_drafts) != 0) {
            usage_note("-o %s: the size is a number of bytes (suffix K, M "
                       "or G for KiB, MiB, GiB), at least 1",
                       arg);
            return -1;
        }
        return 0;
    }
    if (key == KEY_TIMEOUT) {
        char *end = NULL;
        double t = *val ? strtod(val, &end) : -1;
        if (!end || *end || !isfinite(t) || t < 0 || t > TIMEOUT_MAX) {
            usage_note("-o %s: the timeout is a number of seconds from 0 to "
                       "%.0f",
                       arg, TIMEOUT_MAX);
            return -1;
        }
        o->timeout = t;
        return 0;
    }
    long lo = key == KEY_MAX_THREADS ? 1 : 0;
    if (parse_count(val, lo, THREADS_MAX, &n) != 0) {
        usage_note("-o %s: expected a whole number from %ld to %d", arg, lo,
                   THREADS_MAX);
        return -1;
    }
    return 1; /* libfuse's: keep it */
}

/* The numeric options of remote sources (issue 13); 0 or -1. */
static int remote_opt(struct gfs_opts *o, const char *arg, int key) {
    const char *val = strchr(arg, '=') + 1;
    size_t sz;
    long n;
    char *end = NULL;
    double t;
    switch (key) {
    case KEY_CACHE_MAX:
    case KEY_MAX_HEADER:
        if (parse_size(val, key == KEY_MAX_HEADER, SIZE_MAX >> 1, &sz) == 0) {
            *(key == KEY_CACHE_MAX ? &o->remote.cache_max
                                   : &o->remote.max_header) = sz;
            return 0;
        }
        usage_note("-o %s: the size is a number of bytes (suffix K, M or G)",
                   arg);
        return -1;
    case KEY_NET_TIMEOUT:
        t = *val ? strtod(val, &end) : -1;
        if (end && !*end && isfinite(t) && t >= 0.1 && t <= 3600) {
            o->remote.net_timeout = t;
            return 0;
        }
        usage_note("-o %s: the timeout is a number of seconds from 0.1 to "
                   "3600",
                   arg);
        return -1;
    default:
        if (parse_count(val, 0, 20, &n) == 0) {
            o->remote.retries = (int)n;
            return 0;
        }
        usage_note("-o %s: expected a whole number from 0 to 20", arg);
        return -1;
    }
}

/* Takes the first non-option as the GGUF and the second as the mountpoint
 * (a third is a usage error); checks numeric options; leaves every other
 * option to libfuse, whose parsers check them (check_fuse_options). */
static int gfs_opt_proc(void *data, const char *arg, int key,
                        struct fuse_args *outargs) {
    (void)outargs;
    struct gfs_opts *o = data;
    switch (key) {
    case KEY_MAX_READ:
        /* libfuse 3.14 mounts with it, then ends the session at start-up
         * ("init() and fuse_session_new() requested different maximum read
         * size"): refuse it here rather than leave a dead mount. */
        usage_note("-o max_read is not supported (libfuse 3.14 fails with "
                   "it); requests are up to 1008 KiB anyway");
        return -1;
    case KEY_TIMEOUT:
    case KEY_MAX_VALUE:
    case KEY_MAX_DRAFTS:
    case KEY_MAX_THREADS:
    case KEY_MAX_IDLE:
        return numeric_opt(o, arg, key);
    case KEY_PASSTHROUGH:
        if (strcmp(arg, "passthrough=auto") == 0) {
            o->passthrough = GFS_PT_AUTO;
            return 0;
        }
        if (strcmp(arg, "passthrough=off") == 0) {
            o->passthrough = GFS_PT_OFF;
            return 0;
        }
        usage_note("-o %s: expected passthrough=auto or passthrough=off", arg);
        return -1;
    case KEY_CACHE_MAX:
    case KEY_MAX_HEADER:
    case KEY_NET_TIMEOUT:
    case KEY_NET_RETRIES:
        return remote_opt(o, arg, key);
    case KEY_RO:
        o->readonly = 1;
        return 1; /* libfuse mounts read-only too */
    case FUSE_OPT_KEY_NONOPT:
        if (!o->file) {
            o->file = arg;
            return 0;
        }
        if (!o->mnt) {
            o->mnt = arg;
            return 0;
        }
        usage_note("unexpected argument '%s' after FILE.gguf and MOUNTPOINT",
                   arg);
        return -1;
    default:
        return 1;
    }
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

/* True while pid runs; a zombie (a daemon run with -f by a parent that has
 * not reaped it yet) counts as gone. */
static int process_alive(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return kill(pid, 0) == 0 || errno != ESRCH;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

/* ggufs -u MOUNTPOINT: commits pending edits (fsync of the root), unmounts,
 * and waits until the daemon has let go of the GGUF.  Exit 0 only if the
 * commit succeeded. */
/* The absolute form of arg without touching it: realpath would stat a
 * dead FUSE mount and fail with ENOTCONN.  NULL if out of memory. */
static char *absolute(const char *arg) {
    char cwd[4096], *out = NULL;
    if (arg[0] == '/')
        out = strdup(arg);
    else if (getcwd(cwd, sizeof cwd) && asprintf(&out, "%s/%s", cwd, arg) < 0)
        out = NULL;
    for (size_t n = out ? strlen(out) : 0; n > 1 && out[n - 1] == '/'; n--)
        out[n - 1] = '\0';
    return out;
}

/* The absolute path of arg with its directory resolved (realpath) and its
 * last component as given, not followed.  NULL with errno. */
static char *resolve_dir(const char *arg) {
    char *copy = strdup(arg), *out = NULL;
    if (!copy)
        return NULL;
    char *slash = strrchr(copy, '/');
    const char *base = slash ? slash + 1 : copy;
    char *dir = slash ? (slash == copy ? "/" : copy) : ".";
    if (slash)
        *slash = '\0';
    char *rdir = *base ? realpath(dir, NULL) : NULL;
    if (!*base)
        errno = EISDIR;
    if (rdir &&
        asprintf(&out, "%s/%s", strcmp(rdir, "/") ? rdir : "", base) < 0)
        out = NULL;
    free(rdir);
    free(copy);
    return out;
}

/* Runs fusermount3 -u (and -uz if that fails) on mnt; 0 on success. */
static int fusermount_u(const char *mnt) {
    static const char *const flags[] = {"-u", "-uz"};
    for (int k = 0; k < 2; k++) {
        pid_t pid = fork();
        if (pid == 0) {
            execlp("fusermount3", "fusermount3", flags[k], mnt, (char *)NULL);
            _exit(127);
        }
        int ws = 0;
        if (pid > 0 && waitpid(pid, &ws, 0) == pid && WIFEXITED(ws) &&
            WEXITSTATUS(ws) == 0)
            return 0;
    }
    return -1;
}

/* ggufs -u on a mount whose daemon is gone (killed, crashed): unmount it,
 * then say what the daemon left: pending edits, an interrupted commit, a
 * recorded outcome.  Exit 4: whatever was pending was not committed. */
static int unmount_dead(const char *arg, const char *mnt, const char *src) {
    if (fusermount_u(mnt) != 0) {
        fprintf(stderr, "ggufs: %s: the daemon is gone and unmounting failed\n",
                arg);
        return EXIT_MOUNT;
    }
    fprintf(stderr, "ggufs: %s: the daemon of this mount had died; unmounted\n",
            arg);
    (void)gfs_print_outcome(src);
    if (gguf_commit_interrupted(src))
        fprintf(stderr,
                "ggufs: %s: its commit was interrupted: 'ggufs --recover %s' "
                "completes it\n",
                src, src);
    else if (!gfs_overlay_dead_note(src, mnt) && !gfs_pending_note(src, src))
        fprintf(stderr, "ggufs: %s: no edits were pending\n", src);
    return EXIT_COMMIT;
}

/* fusermount3 -u mnt, quietly unless last; 0 on success. */
static int fusermount_once(const char *mnt, int last) {
    pid_t pid = fork();
    if (pid == 0) {
        int null = last ? -1 : open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (null >= 0)
            dup2(null, 2);
        execlp("fusermount3", "fusermount3", "-u", mnt, (char *)NULL);
        _exit(127);
    }
    int ws = 0;
    return pid > 0 && waitpid(pid, &ws, 0) == pid && WIFEXITED(ws) &&
                   WEXITSTATUS(ws) == 0
               ? 0
               : -1;
}

/* Unmounts mnt, whose daemon is daemon (0: unknown).  The daemon is told
 * first (SIGUSR2) to end its long requests (a hash reading the model) and
 * start none for a while: the kernel refuses the unmount (EBUSY) while a
 * request is in flight.  Tries again for up to 2 s while busy.  0 or -1
 * (fusermount3's message printed). */
/* True if process pid blocks sig (its SigBlk in /proc): a daemon of
 * another version might not take SIGUSR2, whose default ends it. */
static int blocks_signal(pid_t pid, int sig) {
    char path[64], line[256];
    int yes = 0;
    snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
    FILE *f = fopen(path, "re");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "SigBlk:", 7) == 0)
            yes = (strtoull(line + 7, NULL, 16) >> (sig - 1)) & 1;
    if (f)
        fclose(f);
    return yes;
}

static int unmount_idle(const char *mnt, pid_t daemon) {
    if (daemon > 0 && blocks_signal(daemon, SIGUSR2))
        (void)kill(daemon, SIGUSR2);
    for (int i = 0; i < 20; i++) {
        if (fusermount_once(mnt, 0) == 0)
            return 0;
        usleep(100000);
    }
    return fusermount_once(mnt, 1);
}

static int unmount_cmd(const char *arg) {
    char *mnt = realpath(arg, NULL);
    char src[4096], msg[1024] = "";
    int status = EXIT_MOUNT, dfd = -1, commit_err = 0;

    if (!mnt && errno == ENOTCONN)
        mnt = absolute(arg);
    if (!mnt) {
        fprintf(stderr, "ggufs: %s: %s\n", arg, strerror(errno));
        goto out;
    }
    if (!gfs_find_mount(mnt, 0, src, sizeof src)) {
        fprintf(stderr, "ggufs: %s: not a ggufs mount\n", arg);
        goto out;
    }
    char pidbuf[32];
    ssize_t pl = getxattr(mnt, "user.ggufs.pid", pidbuf, sizeof pidbuf - 1);
    if (pl < 0 && (errno == ENOTCONN || errno == ECONNABORTED)) {
        status = unmount_dead(arg, mnt, src);
        goto out;
    }
    pid_t daemon = pl > 0 ? (pidbuf[pl] = '\0', (pid_t)atol(pidbuf)) : 0;
    dfd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct gfs_meter meter; /* the commit's progress, on a terminal */
    gfs_meter_watch(&meter, mnt);
    int fr = dfd >= 0 ? fsync(dfd) : 0, fe = errno;
    gfs_meter_stop(&meter);
    if (fr != 0 && (fe == ECONNABORTED || fe == ENOTCONN)) {
        /* The daemon died in the commit (killed, crashed). */
        close(dfd);
        status = unmount_dead(arg, mnt, src);
        goto out;
    }
    if (fr != 0)
        commit_err = fe;
    if (dfd >= 0) {
        ssize_t r = getxattr(mnt, "user.ggufs.commit", msg, sizeof msg - 1);
        msg[r > 0 ? r : 0] = '\0';
    }
    if (dfd >= 0)
        close(dfd);
    dfd = -1;
    if (unmount_idle(mnt, daemon) != 0) {
        fprintf(stderr, "ggufs: %s: unmount failed\n", arg);
        goto out;
    }
    /* The daemon commits whatever came after our fsync when it sees the
     * unmount, then exits: wait for that (at most 10 minutes). */
    for (int waited = 0; daemon > 0 && waited < 600000; waited += 10) {
        if (!process_alive(daemon))
            break;
        usleep(10000);
    }

    if (commit_err) {
        fprintf(stderr, "ggufs: %s\n", msg[0] ? msg : strerror(commit_err));
        /* The daemon's last try failed the same way: told already. */
        (void)gguf_state_remove(src, GGUF_STATE_STATUS, NULL);
        status = EXIT_COMMIT;
        goto out;
    }
    if (msg[0])
        printf("ggufs: %s\n", msg);
    /* Edits made between our fsync and the unmount were committed by the
     * daemon as it stopped: their outcome too. */
    status = gfs_print_outcome(src)         ? EXIT_COMMIT
             : strstr(msg, "not committed") ? EXIT_UNCOMMITTED
                                            : 0;
    if (status == EXIT_UNCOMMITTED)
        fprintf(stderr,
                "ggufs: %s: files in meta/ were not committed (named "
                "above)\n",
                arg);
out:
    free(mnt);
    return status;
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

/* ggufs --recover FILE.  The file must exist: a commit never leaves it
 * missing (a rewrite renames over it), so a missing file is a wrong
 * name, not "nothing to recover". */
static int recover_cmd(const char *file) {
    struct gguf_error err = {0};
    struct gguf_file f;
    bool did = false;
    int status = EXIT_BADFILE;
    /* Recovery writes what a file beside the model says: the model is
     * the file named, never what a symlink there points to (its
     * directory is resolved, so the name is the one a mount commits
     * under); it is opened once and recovered through that descriptor
     * (gguf/file.c). */
    char *path = resolve_dir(file);
    if (!path) {
        fprintf(stderr, "ggufs: %s: %s\n", file, strerror(errno));
        return EXIT_BADFILE;
    }
    if (gguf_file_open(&f, path, -1, &err) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: %s\n", file, err.msg);
        goto out;
    }
    if (gguf_recover_file(&f, &did, &err) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: %s\n", file, err.msg);
        goto out;
    }
    printf("ggufs: %s: %s\n", file,
           did ? "interrupted commit completed" : "nothing to recover");
    (void)gfs_print_outcome(path);
    (void)gfs_pending_note(path, file);
    status = 0;
out:
    gguf_file_close(&f);
    free(path);
    return status;
}

static void usage(const char *prog) {
    printf(
        "usage: %s [options] FILE.gguf|URL MOUNTPOINT\n"
        "       %s -u MOUNTPOINT        commit, unmount, report\n"
        "       ggufs --status MOUNTPOINT  source, pending edits, refusals, last commit\n"
        "       %s --recover FILE.gguf  finish an interrupted commit\n"
        "       %s --apply-pending FILE.gguf   commit the edits a dead mount left\n"
        "       %s --drop-pending FILE.gguf    forget them\n"
        "       ggufs --show-pending FILE.gguf    name them and their values\n"
        "       ggufs --overlay-apply FILE.gguf [OVERLAY]  commit an overlay into the file\n"
        "       ggufs --overlay-drop FILE.gguf|URL [OVERLAY]  forget it\n"
        "       ggufs --overlay-rebase FILE.gguf|URL [OVERLAY] [--take-overlay]\n"
        "                              carry it onto the source's new version\n"
        "       ggufs --apply-saved EDITS FILE.gguf  commit edits a failed commit saved\n"
        "       ggufs --compact FILE.gguf  smallest header, no filler (to publish)\n"
        "       ggufs --help | --version\n\n"
        "Mounts a GGUF model file: MOUNTPOINT/meta/KEY holds each metadata\n"
        "value as text, MOUNTPOINT/tensors/NAME each tensor's raw bytes.\n\n"
        "ggufs options:\n"
        "    -o allow_nested        accept arrays of arrays (ggml rejects them)\n"
        "    -o timeout=SECONDS     attribute and entry cache timeout (default 3600)\n"
        "    -o ro                  read-only: every change fails with EROFS\n"
        "    -o max_value=SIZE      most bytes a file in meta/ being written may\n"
        "                           hold (K, M, G suffixes; default 64M, at most 1G)\n"
        "    -o max_drafts=SIZE     most bytes all files in meta/ being written\n"
        "                           may hold together (default 256M; ENOSPC)\n"
        "    -o no_insert_range     grow headers by rewriting the file, not by\n"
        "                           inserting blocks\n"
        "    -o passthrough=auto|off  serve the unedited live view by FUSE\n"
        "                           passthrough when possible (default auto)\n"
        "    -o tensor_direct_io    open tensor files with direct I/O (bulk\n"
        "                           sequential readers: faster once, no cache)\n"
        "    -o ggml=PATH|none      ggml's libggml-base.so for f32/ and npy/ of\n"
        "                           the types ggufs does not convert itself\n"
        "                           (default: $GGUFS_GGML_LIB, else the usual\n"
        "                           places; none: ggufs's own converters only)\n"
        "    -o overlay[=PATH]      keep the edits in an overlay, never in the\n"
        "                           file (default PATH in ~/.local/state/ggufs)\n"
        "    -o over                mount even where something is mounted already\n\n"
        "Remote sources (http://, https://, hf://OWNER/REPO/PATH[@REVISION]),\n"
        "mounted through a block cache, read-only unless -o overlay:\n"
        "    -o header=FILE         extra request headers, 'Name: value' lines\n"
        "                           (sent to the URL's own host only)\n"
        "    -o cache=DIR           the cache (default ~/.cache/ggufs)\n"
        "    -o cache_max=SIZE      bound on the cache (K, M, G; default none)\n"
        "    -o net_timeout=SECONDS connect and low-speed timeout (default 15)\n"
        "    -o net_retries=N       retries of a failed request (default 3)\n"
        "    -o max_header=SIZE     most bytes of a remote header (default 256M)\n\n",
        prog, prog, prog, prog, prog);
}

/* -o passthrough's default: auto, unless GGUFS_PASSTHROUGH=off in the
 * environment (the test suite's second run; the option wins). */
static enum gfs_pt_mode default_passthrough(void) {
    const char *v = getenv("GGUFS_PASSTHROUGH");
    return v && strcmp(v, "off") == 0 ? GFS_PT_OFF : GFS_PT_AUTO;
}

/* What main sets up, step by step; cleanup undoes whatever was done. */
struct gfs_main {
    struct fuse_args args;
    struct fuse_cmdline_opts co;
    struct gfs_opts o;
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

enum { GO_ON = -1 };

/* The options libfuse will be given, checked now by its own parser (a
 * session made and dropped, nothing mounted): an unknown option is a
 * usage error before the GGUF is opened, not a failed mount after.  0 or
 * -1 (the message caught in fuse_msg). */
static int check_fuse_options(const struct fuse_args *args) {
    struct fuse_args copy = FUSE_ARGS_INIT(0, NULL);
    int r = -1;
    for (int i = 0; i < args->argc; i++)
        if (fuse_opt_add_arg(&copy, args->argv[i]) != 0)
            goto out;
    struct fuse_session *se =
        fuse_session_new(&copy, &gfs_ops, sizeof gfs_ops, NULL);
    if (se) {
        fuse_session_destroy(se);
        r = 0;
    }
out:
    fuse_opt_free_args(&copy);
    return r;
}

/* Options: GO_ON, or the exit status (help, version, usage errors). */
static int parse_options(struct gfs_main *m, const char *prog) {
    int status = GO_ON;
    fuse_set_log_func(catch_fuse_log);
    if (fuse_opt_parse(&m->args, &m->o, gfs_opt_spec, gfs_opt_proc) == -1 ||
        fuse_parse_cmdline(&m->args, &m->co) != 0) {
        status = usage_error();
        goto out;
    }
    if (m->co.show_help) {
        usage(prog);
        fuse_cmdline_help();
        fuse_lowlevel_help();
        status = 0;
        goto out;
    }
    if (m->co.show_version) {
        /* Ours first: libfuse's lines come partly from fusermount3, a
         * child that writes straight to the same stdout. */
        printf("ggufs version %s\n", GGUFS_VERSION);
        fflush(stdout);
        fuse_lowlevel_version();
        status = 0;
        goto out;
    }
    if (!m->o.file || !m->o.mnt) {
        usage_note("%s", m->o.file ? "missing MOUNTPOINT after FILE.gguf"
                                   : "missing FILE.gguf and MOUNTPOINT");
        status = usage_error();
        goto out;
    }
    if (check_fuse_options(&m->args) != 0)
        status = usage_error();
out:
    fuse_set_log_func(NULL); /* libfuse's own again, for the mount */
    return status;
}

/* A read-write mount first finishes a commit interrupted by a crash,
 * before anything reads the file.  0 or -1. */
static int recover_first(struct gfs_main *m) {
    struct gguf_error gerr = {0};
    bool did = false;
    if (gguf_recover_file(&m->file, &did, &gerr) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: %s\n", m->o.file, gerr.msg);
        return -1;
    }
    if (did)
        fprintf(stderr, "ggufs: %s: completed an interrupted commit\n",
                m->o.file);
    return 0;
}

/* One writer per file: read-write mounts lock it exclusively, read-only
 * mounts shared.  The lock is held until the last commit is done.  0 or
 * -1. */
static int lock_gguf(const struct gfs_main *m) {
    if (flock(gguf_fd(m->fs.ctx),
              (m->o.readonly ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0)
        return 0;
    char where[4096];
    if (gfs_find_mount(m->path, 1, where, sizeof where))
        fprintf(stderr, "ggufs: %s: already mounted at %s\n", m->o.file, where);
    else
        fprintf(stderr, "ggufs: %s: locked by another program (%s)\n",
                m->o.file, strerror(errno));
    return -1;
}

/* -o overlay or -o overlay=PATH was given. */
static int overlay_wanted(const struct gfs_main *m) {
    return m->o.overlay || m->o.overlay_path;
}

/* How the GGUF is opened: never for writing with -o overlay (the file may
 * be 0444, immutable, on a read-only filesystem: it is never written),
 * read-only with -o ro, else read-write if permitted (-1). */
static int overlay_rdwr(const struct gfs_main *m) {
    return m->o.readonly || overlay_wanted(m) ? 0 : -1;
}

/* -o overlay: the overlay found and applied once the GGUF is open
 * (fs/overlay.c); a remote source's is known by URL and the server's
 * version.  0 or -1 after one line. */
static int setup_overlay(struct gfs_main *m) {
    char ident[512];
    int remote = gfs_remote_is(m->o.file);
    if (!overlay_wanted(m)) {
        gfs_overlay_note(m->shown, m->o.file);
        return 0;
    }
    if (remote && gfs_remote_identity(&m->fs, ident, sizeof ident) != 0) {
        fprintf(stderr, "ggufs: %s: out of memory\n", m->o.file);
        return -1;
    }
    /* As mountinfo will show it (a bad one is reported by the mount). */
    char *mnt = realpath(m->o.mnt, NULL);
    struct gfs_overlay_args a = {.path = m->shown,
                                 .remote_id = remote ? ident : NULL,
                                 .opt = m->o.overlay_path,
                                 .file = m->o.file,
                                 .mnt = mnt,
                                 .readonly = m->o.readonly};
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
    m->o.remote.hf = strncmp(m->o.file, "hf://", 5) == 0;
    if (!(m->path = gfs_remote_resolve(m->o.file, msg, sizeof msg)) ||
        !(m->shown = gfs_remote_shown(m->path, msg, sizeof msg))) {
        fprintf(stderr, "ggufs: %s: %s\n", m->o.file, msg);
        return -1;
    }
    if (msg[0]) /* a credential in the URL */
        fprintf(stderr, "ggufs: %s: warning: %s\n", m->shown, msg);
    if (!m->o.readonly && !overlay_wanted(m)) {
        m->o.readonly = 1;
        fuse_opt_add_arg(&m->args, "-oro");
    }
    /* What an overlay mount's commit at unmount said, if nobody heard. */
    (void)gfs_print_outcome(m->shown);
    unsigned flags = m->o.allow_nested ? GGUF_OPEN_ALLOW_NESTED : 0;
    if (gfs_remote_open(&m->fs, m->path, &m->o.remote, flags, bad, sizeof bad,
                        &gerr) != 0) {
        /* An hf:// source names the URL it was resolved to: a 404 there
         * is a wrong owner, repository, revision or path. */
        int first = strcmp(bad, m->path) == 0;
        int hf = first && strcmp(m->o.file, m->path) != 0;
        fprintf(stderr, "ggufs: %s: %s%s%s%s\n", first ? m->o.file : bad,
                gerr.msg, hf ? " (at " : "", hf ? m->shown : "", hf ? ")" : "");
        return -1;
    }
    m->fs.ctx = m->fs.shards[0];
    if (gfs_view_layout(&m->fs, &gerr) != 0) {
        fprintf(stderr, "ggufs: %s: %s\n", m->o.file, gerr.msg);
        return -1;
    }
    for (int sh = 0; sh < m->fs.n_shards; sh++)
        for (int w = 0; w < gguf_n_warnings(m->fs.shards[sh]); w++)
            fprintf(stderr, "ggufs: %s: warning: %s\n",
                    sh ? gguf_path(m->fs.shards[sh]) : m->o.file,
                    gguf_warning(m->fs.shards[sh], w));
    gfs_remote_stat(&m->fs, &m->fs.st);
    return 0;
}

/* Open and check: the GGUF (or shard set) opened, validated, laid out and
 * locked.  0, or -1 after one line on stderr. */
static int open_gguf(struct gfs_main *m) {
    struct gguf_error gerr = {0};
    if (gfs_remote_is(m->o.file))
        return open_remote(m);
    /* Absolute: the daemon changes its directory to / when it detaches. */
    m->path = realpath(m->o.file, NULL);
    if (m->path && !(m->shown = strdup(m->path))) {
        free(m->path);
        m->path = NULL;
    }
    if (!m->path) {
        fprintf(stderr, "ggufs: %s: %s\n", m->o.file, strerror(errno));
        return -1;
    }
    char where[4096];
    if (gfs_wait_previous(m->path, m->o.file,
                          gfs_find_mount(m->path, 1, where, sizeof where)) != 0)
        return -1;
    unsigned flags = m->o.allow_nested ? GGUF_OPEN_ALLOW_NESTED : 0;
    int fallback_ro = 0;
    /* The one lookup of the path: everything below uses this descriptor
     * (gguf/file.c). */
    if (gguf_file_open(&m->file, m->path, overlay_rdwr(m), &gerr) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: %s\n", m->o.file, gerr.msg);
        return -1;
    }
    if (!m->o.readonly && !overlay_wanted(m) && !m->file.writable) {
        fallback_ro = 1;
        m->o.readonly = 1;
        fuse_opt_add_arg(&m->args, "-oro");
    }
    if (!m->o.readonly && !overlay_wanted(m)) {
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
                strcmp(bad, m->path) == 0 ? m->o.file : bad, gerr.msg,
                interrupted ? "; a commit of this file was interrupted: "
                              "'ggufs --recover "
                            : "",
                interrupted ? m->o.file : "",
                interrupted ? "' completes it" : "");
        return -1;
    }
    m->fs.ctx = m->fs.shards[0];
    if (gfs_view_layout(&m->fs, &gerr) != 0) {
        fprintf(stderr, "ggufs: %s: %s\n", m->o.file, gerr.msg);
        return -1;
    }
    if (lock_gguf(m) != 0)
        return -1;
    /* Locked: no live daemon of this file is left, so any pending record
     * is a dead mount's.  A read-write mount would replace it. */
    (void)gfs_print_outcome(m->path);
    if (gfs_pending_note(m->path, m->o.file) && !m->o.readonly &&
        !overlay_wanted(m)) {
        fprintf(stderr,
                "ggufs: %s: not mounted read-write over pending edits (-o ro "
                "mounts it to look)\n",
                m->o.file);
        return -1;
    }
    if (fallback_ro)
        fprintf(stderr,
                "ggufs: %s: warning: not writable, mounting "
                "read-only (-o overlay takes edits without writing the "
                "file)\n",
                m->o.file);
    for (int sh = 0; sh < m->fs.n_shards; sh++)
        for (int w = 0; w < gguf_n_warnings(m->fs.shards[sh]); w++)
            fprintf(stderr, "ggufs: %s: warning: %s\n",
                    sh ? gguf_path(m->fs.shards[sh]) : m->o.file,
                    gguf_warning(m->fs.shards[sh], w));
    if (fstat(gguf_fd(m->fs.ctx), &m->fs.st) != 0) {
        fprintf(stderr, "ggufs: %s: %s\n", m->o.file, strerror(errno));
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
    m->fs.mnt = m->co.mountpoint ? m->co.mountpoint : m->o.mnt;
    if ((m->mnt_abs = realpath(m->fs.mnt, NULL))) /* before the mount */
        m->fs.mnt = m->mnt_abs;
    m->fs.uid = getuid();
    m->fs.gid = getgid();
    m->fs.readonly = m->o.readonly;
    m->fs.foreground = m->co.foreground;
    m->fs.commit_flags = m->o.no_insert ? GGUF_COMMIT_NO_INSERT : 0;
    m->fs.timeout = m->o.timeout;
    m->fs.max_value = m->o.max_value;
    m->fs.tensor_dio = m->o.tensor_dio;
    m->fs.max_drafts = m->o.max_drafts;
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
    if (stat(m->o.mnt, &mst) != 0) {
        fprintf(stderr, "ggufs: %s: %s\n", m->o.mnt, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(mst.st_mode)) {
        fprintf(stderr, "ggufs: %s: mountpoint is not a directory\n", m->o.mnt);
        return -1;
    }
    char *real = realpath(m->o.mnt, NULL);
    int busy = real && !m->o.over && mount_point_of(real, what, sizeof what);
    free(real);
    if (busy) {
        fprintf(stderr,
                "ggufs: %s: already a mount point (%s); -o over mounts on "
                "top of it\n",
                m->o.mnt, what);
        return -1;
    }
    if (fuse_opt_add_arg(&m->args, "-osubtype=ggufs") != 0 ||
        fuse_opt_add_arg(&m->args, "-odefault_permissions") != 0)
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
    int r = fuse_opt_add_arg(&m->args, fsopt);
    free(fsopt);
    return r != 0 ? -1 : 0;
}

/* fuse_session_mount, its errors (libfuse's fuse_log lines, caught)
 * said as one line of ours, with a hint where the user may not use FUSE
 * (/dev/fuse is 0600 on some systems: only root opens it).  0 or -1. */
static int mount_session(struct gfs_main *m) {
    fuse_msg[0] = '\0';
    fuse_set_log_func(catch_fuse_log);
    int r = fuse_session_mount(m->se, m->o.mnt);
    fuse_set_log_func(NULL);
    if (r == 0)
        return 0;
    char *nl = strchr(fuse_msg, '\n');
    if (nl)
        *nl = '\0';
    const char *msg = strncmp(fuse_msg, "fuse: ", 6) == 0 ? fuse_msg + 6
                      : fuse_msg[0]                       ? fuse_msg
                                                          : "mount failed";
    int denied = strstr(msg, "/dev/fuse") && (strstr(msg, "ermission denied") ||
                                              strstr(msg, "not permitted"));
    fprintf(stderr, "ggufs: %s: %s%s\n", m->o.mnt, msg,
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
    if (m->co.foreground)
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
    m->se = fuse_session_new(&m->args, &gfs_ops, sizeof gfs_ops, &m->fs);
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
    (void)gfs_pt_start(&m->fs, m->se, m->o.passthrough);
    raise_readahead(m->o.mnt);
    open_log(m);
    /* Returns in the parent only once the mount is in place. */
    fuse_daemonize(m->co.foreground);
    /* After the fork of fuse_daemonize: threads do not survive it. */
    m->sig.main = pthread_self();
    if (pthread_create(&m->sig_thread, NULL, gfs_sig_thread, &m->sig) != 0)
        return EXIT_MOUNT;
    m->handlers = 1;

    if (m->co.singlethread) {
        r = fuse_session_loop(m->se);
    } else {
        struct fuse_loop_config *lc = fuse_loop_cfg_create();
        if (!lc)
            return EXIT_MOUNT;
        fuse_loop_cfg_set_clone_fd(lc, (unsigned)m->co.clone_fd);
        fuse_loop_cfg_set_max_threads(lc, m->co.max_threads ? m->co.max_threads
                                                            : 8);
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
    if (status == 0 && m->fs.commit_failed)
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
    free(m->o.ggml);
    gfs_view_layout_free(&m->fs);
    gfs_overlay_free(&m->fs);
    free((char *)m->o.overlay_path); /* fuse_opt's copy of -o overlay= */
    gguf_close_set(m->fs.shards, m->fs.n_shards);
    gfs_remote_close(&m->fs);
    free((char *)m->o.remote.cache_dir); /* strdup'ed by fuse_opt_parse */
    free((char *)m->o.remote.header_file);
    gguf_file_close(&m->file);
    free(m->path);
    free(m->shown);
    free(m->live_name);
    free(m->mnt_abs);
    free(m->co.mountpoint);
    fuse_opt_free_args(&m->args);
    return status;
}

/* --recover, --apply-pending, --drop-pending of a URL: a remote file is
 * never written, so it has no commit to finish and no pending record
 * (the edits of a remote mount live in its overlay).  One line. */
static int remote_cmd_refused(const char *cmd, const char *url) {
    fprintf(stderr,
            "ggufs: %s: %s is for local files: a remote file is never "
            "written (the edits of a remote mount are in its overlay: -o "
            "overlay shows them, --overlay-drop forgets them)\n",
            url, cmd);
    return EXIT_BADFILE;
}

int main(int argc, char *argv[]) {
    static const struct {
        const char *name;
        int (*run)(const char *);
    } cmds[] = {{"-u", unmount_cmd},
                {"--recover", recover_cmd},
                {"--apply-pending", gfs_apply_pending_cmd},
                {"--drop-pending", gfs_drop_pending_cmd},
                {"--show-pending", gfs_show_pending_cmd},
                {"--status", gfs_status_cmd}};
    int ov = gfs_overlay_cmd(argc, argv);
    if (ov < 0)
        ov = gfs_commands(argc, argv);
    if (ov >= 0)
        return ov;
    for (size_t c = 0; argc >= 2 && c < sizeof cmds / sizeof *cmds; c++) {
        if (strcmp(argv[1], cmds[c].name) != 0)
            continue;
        int on_mount =
            cmds[c].run == unmount_cmd || cmds[c].run == gfs_status_cmd;
        if (argc != 3) {
            usage_note("%s takes exactly one %s", argv[1],
                       on_mount ? "MOUNTPOINT" : "FILE.gguf");
            return usage_error();
        }
        if (!on_mount && gfs_remote_is(argv[2]))
            return remote_cmd_refused(argv[1], argv[2]);
        return cmds[c].run(argv[2]);
    }

    struct gfs_main m = {.args = FUSE_ARGS_INIT(argc, argv),
                         .o = {.timeout = 3600.0,
                               .max_value = GFS_MAX_VALUE_DEFAULT,
                               .max_drafts = GFS_MAX_DRAFTS_DEFAULT,
                               .remote = {.retries = -1},
                               .passthrough = default_passthrough()},
                         .file = {.dfd = -1, .fd = -1}};
    int status = parse_options(&m, argv[0]);
    if (status != GO_ON)
        goto out;
    status = EXIT_BADFILE;
    if (open_gguf(&m) != 0 || setup_overlay(&m) != 0)
        goto out;
    name_live_view(&m);
    init_state(&m);
    status = EXIT_MOUNT;
    if (mount_options(&m) != 0)
        goto out;
    /* After the mountpoint's check: a failed mount says one line. */
    if (gfs_views_init(&m.fs, m.o.ggml, m.o.file) != 0) {
        status = EXIT_BADFILE;
        goto out;
    }
    status = serve(&m);
out:
    return cleanup(&m, status);
}
