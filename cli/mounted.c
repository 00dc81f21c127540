/*
 * mounted.c - the commands on a mount, run by the user, never serving it:
 *
 *   ggufs -u MOUNTPOINT      commit (an fsync of the root, its progress
 *                            drawn on a terminal), unmount (asking the
 *                            daemon to go idle first), wait until the
 *                            daemon has let go of the GGUF, report; a
 *                            mount whose daemon died is unmounted and what
 *                            it left is named
 *   ggufs --status MOUNTPOINT  the mount's user.ggufs.status
 *
 * Exit statuses: status.h.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

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

/* Unmounts mnt, whose daemon is daemon (0: unknown).  The daemon is told
 * first (SIGUSR2) to end its long requests (a hash reading the model) and
 * start none for a while: the kernel refuses the unmount (EBUSY) while a
 * request is in flight.  Tries again for up to 2 s while busy.  0 or -1
 * (fusermount3's message printed). */
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

/* A report (user.ggufs.commit: a store's has a line per model), each
 * line after "ggufs: ". */
static void say_lines(FILE *f, const char *msg) {
    for (const char *p = msg, *nl; *p; p = nl + 1) {
        nl = strchr(p, '\n');
        fprintf(f, "ggufs: %.*s\n", (int)(nl ? nl - p : (long)strlen(p)), p);
        if (!nl)
            break;
    }
}

/* ggufs -u of a mount the kernel would not let go (EBUSY: a program has
 * a file or directory of it open, or its working directory there): what
 * the commit did (our fsync, before the unmount), that the mount stays,
 * and how to find the holder.  EXIT_BUSY when the commit succeeded (the
 * edits are in: only the unmount is left), else EXIT_COMMIT. */
static int busy(const char *arg, const char *mnt, const char *msg,
                int commit_err) {
    if (commit_err) {
        say_lines(stderr, msg[0] ? msg : strerror(commit_err));
        fprintf(stderr,
                "ggufs: %s: and the unmount failed (busy: 'fuser -vm "
                "%s' names the programs holding it)\n",
                arg, mnt);
        return EXIT_COMMIT;
    }
    say_lines(stdout, msg);
    fprintf(stderr,
            "ggufs: %s: the edits were committed, but the unmount failed "
            "and the mount stays (busy: 'fuser -vm %s' names the programs "
            "holding it; close them or leave the directory, then 'ggufs -u "
            "%s' again)\n",
            arg, mnt, mnt);
    return EXIT_BUSY;
}

/* ggufs -u MOUNTPOINT: commits pending edits (fsync of the root), unmounts,
 * and waits until the daemon has let go of the GGUF.  Exit 0 only if the
 * commit succeeded. */
int cli_unmount_cmd(const char *arg) {
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
    int fr = dfd >= 0 ? fsync(dfd) : 0, fe = errno, asked = dfd >= 0;
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
        if (asked) /* our fsync committed (or said why not) */
            status = busy(arg, mnt, msg, commit_err);
        else
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
        say_lines(stderr, msg[0] ? msg : strerror(commit_err));
        /* The daemon's last try failed the same way: told already. */
        (void)gguf_state_remove(src, GGUF_STATE_STATUS, NULL);
        status = EXIT_COMMIT;
        goto out;
    }
    say_lines(stdout, msg);
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

/* Whether mnt (resolved) is a model's directory inside a ggufs mount (a
 * store's MNT/MODEL, whose root has the model's user.ggufs.status); else
 * one line saying what it is.  The mount is the nearest ggufs mount
 * point above it. */
static int in_store(const char *arg, const char *mnt) {
    char up[4096], src[4096];
    snprintf(up, sizeof up, "%s", mnt);
    for (char *slash; (slash = strrchr(up, '/')) && slash > up;) {
        *slash = '\0';
        if (!gfs_find_mount(up, 0, src, sizeof src))
            continue;
        if (getxattr(mnt, "user.ggufs.status", NULL, 0) >= 0 ||
            errno != ENODATA)
            return 1; /* a model's root (or an error the read will say) */
        fprintf(stderr,
                "ggufs: %s: not a model's directory of the ggufs mount %s "
                "('ggufs --status %s' is the mount's)\n",
                arg, up, up);
        return 0;
    }
    fprintf(stderr, "ggufs: %s: not a ggufs mount\n", arg);
    return 0;
}

/* ggufs --status MOUNTPOINT (or a store's MOUNTPOINT/MODEL). */
int cli_status_cmd(const char *arg) {
    char *mnt = realpath(arg, NULL), src[4096];
    int status = EXIT_MOUNT; /* not a mount we can ask */
    char *buf = NULL;
    if (!mnt) {
        fprintf(stderr, "ggufs: %s: %s%s\n", arg, strerror(errno),
                errno == ENOTCONN ? " (the daemon of this mount is gone: "
                                    "'ggufs -u' unmounts it and says what "
                                    "it left)"
                                  : "");
        goto out;
    }
    if (!gfs_find_mount(mnt, 0, src, sizeof src) && !in_store(arg, mnt))
        goto out;
    ssize_t n = getxattr(mnt, "user.ggufs.status", NULL, 0);
    if (n > 0 && (buf = malloc((size_t)n + 1)))
        n = getxattr(mnt, "user.ggufs.status", buf, (size_t)n);
    if (n < 0 || !buf) {
        fprintf(stderr, "ggufs: %s: no status: %s\n", arg,
                n < 0 ? strerror(errno) : "out of memory");
        goto out;
    }
    fwrite(buf, 1, (size_t)n, stdout);
    status = 0;
out:
    free(buf);
    free(mnt);
    return status;
}
