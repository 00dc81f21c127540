/*
 * cli.h - the parts of the ggufs command (cli/) for each other.  cli/ is
 * the command line: its dispatch (main.c), options and usage (options.c),
 * and the commands that never serve FUSE (mounted.c: -u, --status;
 * leftover.c: --recover and the pending edits; commands.c: --apply-saved,
 * --compact and the overlay commands' arguments).  It reaches the daemon
 * (fs/) only through daemon.h, and the model's files through the gguf
 * library's public header.  Each command returns its exit status
 * (status.h).  Prefix cli_.
 */
#ifndef GGUFS_CLI_H
#define GGUFS_CLI_H

#include "../status.h"
#include "daemon.h"

/* ---- options.c ---------------------------------------------------------
 * A usage error is one line "ggufs: WHAT" on stderr and exit status 2.
 * cli_usage_note records the first problem found (later ones are
 * consequences); cli_usage_error prints it (else libfuse's caught line,
 * else a generic one) and returns EXIT_USAGE. */
void cli_usage_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int cli_usage_error(void);
/* cli_parse_options' "go on and mount". */
enum { CLI_GO_ON = -1 };
/* Parses and checks the command line of a mount in c (whose args and o
 * hold their defaults): CLI_GO_ON, or the exit status (--help,
 * --version, usage errors). */
int cli_parse_options(struct gfs_cmdline *c, const char *prog);

/* mounted.c: ggufs -u MOUNTPOINT, ggufs --status MOUNTPOINT. */
int cli_unmount_cmd(const char *mnt);
int cli_status_cmd(const char *mnt);

/* leftover.c: ggufs --recover, --apply-pending, --drop-pending,
 * --show-pending FILE.  cli_open_model: a local model for a command that
 * commits into it: its absolute path into *path (the caller frees it),
 * the last outcome told, recovered, opened read-write and locked against
 * mounts; NULL after one line. */
int cli_recover_cmd(const char *file);
int cli_apply_pending_cmd(const char *file);
int cli_drop_pending_cmd(const char *file);
int cli_show_pending_cmd(const char *file);
gguf_ctx *cli_open_model(const char *file, char **path);

/* commands.c: ggufs --apply-saved EDITS MODEL, --compact FILE
 * (cli_commands), the overlay commands (cli_overlay_cmd); the exit
 * status, or -1 when argv is none of them. */
int cli_commands(int argc, char **argv);
int cli_overlay_cmd(int argc, char **argv);
/* edit.c: ggufs get|set|ls|tensors FILE ... without a mount (issue 37);
 * the exit status, or -1 when argv[1] is none of them. */
int cli_edit_cmd(int argc, char **argv);

#endif
