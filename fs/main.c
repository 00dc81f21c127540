/*
 * main.c - the ggufs command: parse options, open and validate the GGUF,
 * mount, serve, unmount.  Every failure before the mount prints one line
 * "ggufs: FILE: what is wrong" and exits non-zero with no mount left behind.
 *
 * Exit statuses: 0 success; 1 the GGUF cannot be used (unreadable, invalid,
 * unsupported); 2 usage error; 3 the mount itself failed.
 */
#include "ggufs.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { EXIT_BADFILE = 1, EXIT_USAGE = 2, EXIT_MOUNT = 3 };

struct gfs_opts {
    const char *file;   /* first non-option argument */
    int allow_nested;
    double timeout;
};

#define GFS_OPT(t, p, v) { t, offsetof(struct gfs_opts, p), v }
static const struct fuse_opt gfs_opt_spec[] = {
    GFS_OPT("allow_nested", allow_nested, 1),
    GFS_OPT("timeout=%lf", timeout, 0),
    FUSE_OPT_END
};

/* Takes the first non-option as the GGUF; leaves the second (the
 * mountpoint) and every other option to libfuse. */
static int gfs_opt_proc(void *data, const char *arg, int key,
                        struct fuse_args *outargs)
{
    (void)outargs;
    struct gfs_opts *o = data;
    if (key == FUSE_OPT_KEY_NONOPT && !o->file) {
        o->file = arg;
        return 0;
    }
    return 1;
}

static void usage(const char *prog)
{
    printf("usage: %s [options] FILE.gguf MOUNTPOINT\n\n"
           "Mounts a GGUF model file: MOUNTPOINT/meta/KEY holds each metadata\n"
           "value as text, MOUNTPOINT/tensors/NAME each tensor's raw bytes.\n\n"
           "ggufs options:\n"
           "    -o allow_nested        accept arrays of arrays (ggml rejects them)\n"
           "    -o timeout=SECONDS     attribute and entry cache timeout (default 3600)\n\n",
           prog);
}

int main(int argc, char *argv[])
{
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    struct fuse_cmdline_opts co = {0};
    struct gfs_opts o = { .timeout = 3600.0 };
    struct gfs fs = {0};
    struct gguf_error gerr = {0};
    struct fuse_session *se = NULL;
    char *path = NULL;
    int status = EXIT_USAGE, locks = 0, handlers = 0, mounted = 0;

    if (fuse_opt_parse(&args, &o, gfs_opt_spec, gfs_opt_proc) == -1)
        goto out;
    if (fuse_parse_cmdline(&args, &co) != 0)
        goto out;
    if (co.show_help) {
        usage(argv[0]);
        fuse_cmdline_help();
        fuse_lowlevel_help();
        status = 0;
        goto out;
    }
    if (co.show_version) {
        printf("ggufs version %s\n", GGUFS_VERSION);
        fuse_lowlevel_version();
        status = 0;
        goto out;
    }
    if (!o.file || !co.mountpoint) {
        fprintf(stderr, "ggufs: usage: ggufs [options] FILE.gguf MOUNTPOINT "
                        "(see ggufs --help)\n");
        goto out;
    }

    status = EXIT_BADFILE;
    /* Absolute: the daemon changes its directory to / when it detaches. */
    path = realpath(o.file, NULL);
    if (!path) {
        fprintf(stderr, "ggufs: %s: %s\n", o.file, strerror(errno));
        goto out;
    }
    unsigned flags = o.allow_nested ? GGUF_OPEN_ALLOW_NESTED : 0;
    if (gguf_open(&fs.ctx, path, flags, &gerr) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: %s\n", o.file, gerr.msg);
        goto out;
    }
    for (int w = 0; w < gguf_n_warnings(fs.ctx); w++)
        fprintf(stderr, "ggufs: %s: warning: %s\n", o.file,
                gguf_warning(fs.ctx, w));
    if (fstat(gguf_fd(fs.ctx), &fs.st) != 0) {
        fprintf(stderr, "ggufs: %s: %s\n", o.file, strerror(errno));
        goto out;
    }
    fs.path = path;
    fs.uid = getuid();
    fs.gid = getgid();
    fs.readonly = 1;
    fs.timeout = o.timeout;
    pthread_rwlock_init(&fs.lock, NULL);
    pthread_mutex_init(&fs.text_lock, NULL);
    locks = 1;

    status = EXIT_MOUNT;
    struct stat mst;
    if (stat(co.mountpoint, &mst) != 0) {
        fprintf(stderr, "ggufs: %s: %s\n", co.mountpoint, strerror(errno));
        goto out;
    }
    if (!S_ISDIR(mst.st_mode)) {
        fprintf(stderr, "ggufs: %s: mountpoint is not a directory\n",
                co.mountpoint);
        goto out;
    }
    /* fuse.ggufs with the GGUF as source, like other FUSE filesystems. */
    if (fuse_opt_add_arg(&args, "-osubtype=ggufs") != 0 ||
        fuse_opt_add_arg(&args, "-oro") != 0 ||
        fuse_opt_add_arg(&args, "-odefault_permissions") != 0)
        goto out;
    char *fsname = NULL;
    if (fuse_opt_add_opt_escaped(&fsname, path) != 0)
        goto out;
    char *fsopt = malloc(strlen(fsname) + 12);
    if (!fsopt) {
        free(fsname);
        goto out;
    }
    sprintf(fsopt, "-ofsname=%s", fsname);
    free(fsname);
    int r = fuse_opt_add_arg(&args, fsopt);
    free(fsopt);
    if (r != 0)
        goto out;

    se = fuse_session_new(&args, &gfs_ops, sizeof gfs_ops, &fs);
    if (!se)
        goto out;
    if (fuse_set_signal_handlers(se) != 0)
        goto out;
    handlers = 1;
    if (fuse_session_mount(se, co.mountpoint) != 0)
        goto out;
    mounted = 1;
    /* Returns in the parent only once the mount is in place. */
    fuse_daemonize(co.foreground);

    if (co.singlethread) {
        r = fuse_session_loop(se);
    } else {
        struct fuse_loop_config *lc = fuse_loop_cfg_create();
        if (!lc)
            goto out;
        fuse_loop_cfg_set_clone_fd(lc, (unsigned)co.clone_fd);
        fuse_loop_cfg_set_max_threads(lc, co.max_threads ? co.max_threads : 8);
        r = fuse_session_loop_mt(se, lc);
        fuse_loop_cfg_destroy(lc);
    }
    status = r == 0 ? 0 : EXIT_MOUNT;

out:
    if (mounted)
        fuse_session_unmount(se);
    if (handlers)
        fuse_remove_signal_handlers(se);
    if (se)
        fuse_session_destroy(se);
    if (locks) {
        gfs_texts_free(&fs);
        pthread_mutex_destroy(&fs.text_lock);
        pthread_rwlock_destroy(&fs.lock);
    }
    gguf_close(fs.ctx);
    free(path);
    free(co.mountpoint);
    fuse_opt_free_args(&args);
    return status;
}
