/*
 * main.c - the ggufs command: which of its programs argv asks for (a
 * command on a mount or a model, which never serves FUSE, or a mount),
 * and the mount's command line (options.c) handed to the daemon
 * (daemon.h: gfs_daemon_run).  man/ggufs.1 is the contract of the
 * command line; its EXIT STATUS, status.h's enum.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -o passthrough's default: auto, unless GGUFS_PASSTHROUGH=off in the
 * environment (the test suite's second run; the option wins). */
static enum gfs_pt_mode default_passthrough(void) {
    const char *v = getenv("GGUFS_PASSTHROUGH");
    return v && strcmp(v, "off") == 0 ? GFS_PT_OFF : GFS_PT_AUTO;
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

/* The commands that take one argument: a MOUNTPOINT or a FILE.gguf. */
static const struct {
    const char *name;
    int (*run)(const char *);
} cmds[] = {{"-u", cli_unmount_cmd},
            {"--recover", cli_recover_cmd},
            {"--apply-pending", cli_apply_pending_cmd},
            {"--drop-pending", cli_drop_pending_cmd},
            {"--show-pending", cli_show_pending_cmd},
            {"--status", cli_status_cmd}};

/* The command argv names, run: its exit status, or -1 if argv names
 * none (a mount). */
static int command(int argc, char *argv[]) {
    int ov = cli_edit_cmd(argc, argv);
    if (ov < 0)
        ov = cli_overlay_cmd(argc, argv);
    if (ov < 0)
        ov = cli_commands(argc, argv);
    if (ov >= 0)
        return ov;
    for (size_t c = 0; argc >= 2 && c < sizeof cmds / sizeof *cmds; c++) {
        if (strcmp(argv[1], cmds[c].name) != 0)
            continue;
        int on_mount =
            cmds[c].run == cli_unmount_cmd || cmds[c].run == cli_status_cmd;
        if (argc != 3) {
            cli_usage_note("%s takes exactly one %s", argv[1],
                           on_mount ? "MOUNTPOINT" : "FILE.gguf");
            return cli_usage_error();
        }
        if (!on_mount && gfs_remote_is(argv[2]))
            return remote_cmd_refused(argv[1], argv[2]);
        return cmds[c].run(argv[2]);
    }
    return -1;
}

/* A mount: the command line checked, then the daemon's (it mounts and
 * serves until unmount or a signal); then what fuse_opt and libfuse
 * allocated for the command line is freed. */
static int mount(int argc, char *argv[]) {
    struct gfs_cmdline c = {.args = FUSE_ARGS_INIT(argc, argv),
                            .o = {.timeout = 3600.0,
                                  .max_value = GFS_MAX_VALUE_DEFAULT,
                                  .max_drafts = GFS_MAX_DRAFTS_DEFAULT,
                                  .remote = {.retries = -1},
                                  .passthrough = default_passthrough()}};
    int status = cli_parse_options(&c, argv[0]);
    if (status == CLI_GO_ON)
        status = gfs_daemon_run(&c);
    free(c.o.ggml);
    free((char *)c.o.overlay_path); /* fuse_opt's copy of -o overlay= */
    free((char *)c.o.mix);
    free((char *)c.o.remote.cache_dir); /* strdup'ed by fuse_opt_parse */
    free((char *)c.o.remote.header_file);
    free(c.co.mountpoint);
    fuse_opt_free_args(&c.args);
    return status;
}

int main(int argc, char *argv[]) {
    int status = command(argc, argv);
    return status >= 0 ? status : mount(argc, argv);
}
