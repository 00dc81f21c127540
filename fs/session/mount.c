/*
 * mount.c - the daemon's life: open and validate the source (a GGUF, a
 * shard set, or a remote file), set up the overlay, mount, detach, serve,
 * and at the end unmount, make the last commit and let everything go.
 * Reached from the command line (cli/) through daemon.h only:
 * gfs_daemon_run.  Every failure before the mount prints one line
 * "ggufs: FILE: what is wrong" and returns non-zero (status.h) with no
 * mount left behind.
 */
#include "../base/base.h"
#include "../base/devio.h"
#include "../ggufs.h"
#include "../model.h"
#include "../tensors/tensors.h"
#include "../views/views.h"
#include "mounts.h"
#include "../source/source.h"

#include "../../status.h"
#include "../ops.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_log.h>
#include <limits.h>
#include <malloc.h>
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
    struct gfs_mount *mount;
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
            gfs_devio_idle(c->mount->devio, HASH_YIELD_MS);
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
    struct gfs_mount mount;
    struct gfs *fs; /* a single-file mount's model (model.c), or NULL */
    char *shown;    /* a store's source as every user may see it */
    struct fuse_session *se;
    int mounted;
    struct gfs_sig sig; /* shared with the signal thread */
    pthread_t sig_thread;
    int handlers; /* sig_thread runs */
};

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
    int busy =
        real && !m->c->o.over && gfs_mount_point_of(real, what, sizeof what);
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
    if (fuse_opt_add_opt_escaped(&fsname, m->fs ? m->fs->path : m->shown) != 0)
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
    if (gfs_logfile_open(&m->mount.log, msg, sizeof msg) != 0) {
        fprintf(stderr,
                "ggufs: warning: no log file (%s); the log goes to "
                "syslog only\n",
                msg);
        return;
    }
    if (gguf_state_log_path(path, sizeof path, &err) == GGUF_OK)
        snprintf(m->mount.log.where, sizeof m->mount.log.where, "%s and syslog",
                 path);
}

/* The session's kernel shim (devio.h), before the first request (INIT)
 * is read: passthrough asked for when -o passthrough=auto and root (only
 * root may register backing files); shared mappings of direct-I/O files
 * when a single-file mount serves some (-o tensor_direct_io, the views,
 * writable tensors).  A failure only means neither, logged.  Then the
 * single-file mount's model is started on it; a store's models are, as
 * each opens (model.c). */
static void start_devio(struct gfs_main *m) {
    const char *why = "";
    int pt = m->c->o.passthrough == GFS_PT_AUTO && geteuid() == 0;
    int dio = m->fs && (m->fs->tensor_dio || gfs_views_any(m->fs) ||
                        gfs_tw_writable(m->fs));
    if (gfs_devio_start(&m->mount.devio, m->se, pt, dio, &why) != 0) {
        char line[600];
        snprintf(line, sizeof line, "%.400s: passthrough unavailable (%s)",
                 m->c->o.file, why);
        gfs_log_line(&m->mount.log, line);
    }
    if (m->fs) {
        (void)gfs_pt_start(m->fs, m->c->o.passthrough);
    }
}

/* Serve: mount, detach, and run the session until unmount or a signal.
 * Returns the exit status; cleanup undoes what was done. */
static int serve(struct gfs_main *m) {
    int r;
    m->se = fuse_session_new(&m->c->args, &gfs_session_ops,
                             sizeof gfs_session_ops, &m->mount);
    if (!m->se)
        return EXIT_MOUNT;
    m->mount.se = m->se;
    m->sig.se = m->se;
    sigemptyset(&m->sig.set);
    sigaddset(&m->sig.set, SIGTERM);
    sigaddset(&m->sig.set, SIGINT);
    sigaddset(&m->sig.set, SIGHUP);
    sigaddset(&m->sig.set, SIGUSR2);
    m->sig.mount = &m->mount;
    struct sigaction sa = {.sa_handler = gfs_wake};
    sigemptyset(&sa.sa_mask);
    if (pthread_sigmask(SIG_BLOCK, &m->sig.set, NULL) != 0 ||
        sigaction(SIGUSR1, &sa, NULL) != 0 ||
        signal(SIGPIPE, SIG_IGN) == SIG_ERR)
        return EXIT_MOUNT;
    if (mount_session(m) != 0)
        return EXIT_MOUNT;
    m->mounted = 1;
    start_devio(m);
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
    /* The device's fd closes in the unmount: no backing ioctl after. */
    gfs_devio_stop(m->mount.devio);
    if (m->mounted)
        fuse_session_unmount(m->se);
    if (m->handlers) {
        atomic_store(&m->sig.quit, 1);
        pthread_kill(m->sig_thread, SIGUSR2);
        pthread_join(m->sig_thread, NULL);
    }
    if (m->se)
        fuse_session_destroy(m->se); /* runs dispatch.c's destroy: open
                                        handles freed, the last commit */
    if (status == 0 && m->fs && m->fs->edits.commit_failed)
        status = EXIT_COMMIT;
    gfs_model_close(m->fs);
    gfs_store_close(m->mount.store);
    gfs_devio_free(m->mount.devio);
    free(m->shown);
    gfs_logfile_close(&m->mount.log);
    pthread_mutex_destroy(&m->mount.log.lock);
    return status;
}

/* The model: opened (model.c), and read-only when it had to be. */
static int open_model(struct gfs_main *m) {
    struct gfs_model_args a = {
        .file = m->c->o.file,
        .o = m->c->o,
        .mnt = m->c->co.mountpoint ? m->c->co.mountpoint : m->c->o.mnt,
        .mount = &m->mount,
        .parent = GFS_INO_ROOT, /* ".." of the mount's root is itself */
    };
    int status;
    if (!(m->fs = gfs_model_open(&a, &status)))
        return status;
    m->mount.single = m->fs;
    const struct gfs_opts *o = gfs_model_opts(m->fs);
    m->c->o.remote.hf = o->remote.hf;
    if (o->readonly && !m->c->o.readonly) {
        m->c->o.readonly = 1;
        if (fuse_opt_add_arg(&m->c->args, "-oro") != 0)
            return EXIT_MOUNT;
    }
    return 0;
}

/* A store (storefs.c): its models listed now, each opened when first
 * looked into.  A Hub repo's store is read-only unless -o overlay, as its
 * files are. */
static int open_store(struct gfs_main *m) {
    int status;
    const char *mnt = m->c->co.mountpoint ? m->c->co.mountpoint : m->c->o.mnt;
    int hub = gfs_remote_is(m->c->o.file);
    if (hub && !m->c->o.readonly && !m->c->o.overlay) {
        m->c->o.readonly = 1;
        if (fuse_opt_add_arg(&m->c->args, "-oro") != 0)
            return EXIT_MOUNT;
    }
    m->c->o.remote.hf = hub;
    struct gfs_storefs *st = gfs_store_open(&m->mount, &m->c->o, mnt, &status);
    if (!st)
        return status;
    char msg[300];
    m->shown = hub ? gfs_remote_shown(m->c->o.file, msg, sizeof msg)
                   : strdup(gfs_store_dir(st));
    if (!m->shown) {
        fprintf(stderr, "ggufs: %s: out of memory\n", m->c->o.file);
        return EXIT_BADFILE;
    }
    return 0;
}

int gfs_daemon_run(struct gfs_cmdline *c) {
    struct gfs_main m = {.c = c};
    int status;
    /* The mount first: anything may log. */
    m.mount.log.foreground = c->co.foreground;
    pthread_mutex_init(&m.mount.log.lock, NULL);
    snprintf(m.mount.log.where, sizeof m.mount.log.where, "syslog");
    gfs_fds_rlimit();
    /* The allocator's mmap threshold fixed: glibc raises it each time a
     * mapped block is freed, after which the next large buffers (a
     * tokenizer.json of tens of MB, its render's) come from a thread's
     * arena heap, whose free blocks malloc_trim does not always hand
     * back (mount_hfheld: 15 MB held after the file was closed, one run
     * in three).  Blocks of 1 MiB and more stay mappings of their own,
     * returned to the kernel when freed. */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    if ((status = gfs_store_is(c->o.file) ? open_store(&m) : open_model(&m)))
        goto out;
    status = EXIT_MOUNT;
    if (mount_options(&m) != 0)
        goto out;
    /* After the mountpoint's check: a failed mount says one line. */
    if (m.fs && gfs_views_init(m.fs, c->o.ggml, c->o.file) != 0) {
        status = EXIT_BADFILE;
        goto out;
    }
    status = serve(&m);
out:
    return cleanup(&m, status);
}
