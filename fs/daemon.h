/*
 * daemon.h - the one seam between the ggufs command (cli/) and the daemon
 * (fs/): the options the command line parsed, the one function that mounts
 * and serves with them, and the few facts of a model's mounts and
 * records that the commands which never mount read or report.  cli/
 * includes this header and no other of fs/; fs/ never calls cli/.
 *
 * Exit statuses: ../status.h.  Prefix gfs_.
 */
#ifndef GGUFS_DAEMON_H
#define GGUFS_DAEMON_H

/* libfuse 3.12's API, as libfuse 3.14 offers it (the daemon and cli/). */
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "remote.h" /* enum rmt_s3_style */

/* ---- the options ------------------------------------------------------ */

/* The most bytes a FILE in meta/ may hold (the format's string limit). */
#define GFS_MAX_FILE_BYTES ((size_t)1 << 30)
/* The most bytes a file in meta/ being written (a key's draft, a FILE) may
 * hold, unless -o max_value=SIZE says otherwise (at most
 * GFS_MAX_FILE_BYTES, the format's string limit).  Writes and truncates
 * past it fail with EFBIG before anything is allocated: one truncate(2)
 * must not make the daemon allocate gigabytes. */
#define GFS_MAX_VALUE_DEFAULT ((size_t)64 << 20)
/* The most bytes all drafts and FILEs together may hold (memcap.c), unless
 * -o max_drafts=SIZE says otherwise. */
#define GFS_MAX_DRAFTS_DEFAULT ((size_t)256 << 20)

/* Remote sources (remote.c, issue 13). */
struct gfs_remote_opts {
    const char *cache_dir;   /* -o cache=DIR, or NULL: the default */
    uint64_t cache_max;      /* -o cache_max=SIZE, 0: no bound */
    const char *header_file; /* -o header=FILE, or NULL */
    double net_timeout;      /* -o net_timeout=SECONDS, 0: default */
    int retries;             /* -o net_retries=N, -1: default */
    int hf;                  /* the source given was hf:// (HF_TOKEN) */
    uint64_t max_header;     /* -o max_header=SIZE, 0: GFS_MAX_HEADER */
    /* -o s3_path_style=yes|no, else RMT_S3_AUTO (issue 25) */
    enum rmt_s3_style s3_path_style;
};

/* -o passthrough=auto|off (passthrough.c). */
enum gfs_pt_mode { GFS_PT_AUTO, GFS_PT_OFF };

/* ggufs's own options, as cli/ parsed them. */
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
                          fuse_opt's copy */
    struct gfs_remote_opts remote; /* http(s)/hf:// sources (issue 13) */
    int overlay;                   /* -o overlay[=PATH]: edits to an overlay */
    const char *overlay_path;      /* its PATH, or NULL for the default */
    const char *mix; /* -o mix=RECIPE: tensors from other files (mix.c) */
    int over;        /* -o over: mount on top of a mount */
    /* Stores (storefs.c, issue 23): -o store=KIND (ollama, hf, lmstudio,
     * dir; NULL: recognised from the layout), -o max_models=N (models
     * open at once; 0: GFS_MAX_MODELS_DEFAULT). */
    const char *store;
    long max_models;
};
/* Models of a store open at once by default: a model's header takes up
 * to ~8 MiB (a 150k-token vocabulary), so a store of a thousand models
 * stays under ~256 MiB. */
#define GFS_MAX_MODELS_DEFAULT 32

/* A checked command line: ours, libfuse's (co) and what is left for the
 * session (args).  cli/ owns and frees it; the daemon may add to args
 * (-oro, the fsname) and set o.readonly and o.remote.hf. */
struct gfs_cmdline {
    struct fuse_args args;
    struct fuse_cmdline_opts co;
    struct gfs_opts o;
};

/* ---- the daemon -------------------------------------------------------- */

/* mount.c: opens the source (or shard set), validates it, mounts at
 * c->o.mnt, detaches unless -f, serves until unmount or a signal, makes
 * the last commit and lets everything go.  Every failure before the
 * mount is one line "ggufs: FILE: what is wrong" with no mount left
 * behind.  Returns the exit status (status.h). */
int gfs_daemon_run(struct gfs_cmdline *c);

/* mount.c: libfuse's fuse_log caught while the command line is checked
 * or the mount is made (on), or libfuse's own again (off).
 * gfs_fuse_log_caught: the first error line caught, without libfuse's
 * "fuse: " prefix; "" if none. */
void gfs_fuse_log_catch(int on);
const char *gfs_fuse_log_caught(void);

/* ---- what the commands read of mounts and records --------------------- */

/* mountinfo.c: a fuse.ggufs mount in /proc/self/mountinfo by its mountpoint
 * (by_source 0) or its source (1); the other field into out; 1 if
 * found. */
int gfs_find_mount(const char *what, int by_source, char *out, size_t n);
/* remote.c: true if source names a remote file (http://, https://,
 * hf://, s3://). */
int gfs_remote_is(const char *source);

/* leftover.c: gfs_print_outcome prints and forgets the model's status
 * record (a commit's outcome nobody waited for); 1 if it was a failure.
 * gfs_pending_note: says so (one line, how to apply or drop) if path has
 * pending edits of a dead mount; 1 if it has. */
int gfs_print_outcome(const char *path);
/* leftover.c: 1 after one line if the file f has open is named by its
 * hash (gguf_file_hash_named: an ollama or HF cache blob), which no
 * command writes (cmd: "--compact", ...), else 0.  Issue 32: mounts put
 * such a file's edits in its overlay; the commands refuse it. */
int gfs_hash_named_refused(const struct gguf_file *f, const char *file,
                           const char *cmd);
int gfs_pending_note(const char *path, const char *file);

/* overlay.c: the overlay commands, their arguments checked by cli/:
 * `ggufs --overlay-apply FILE [OVERLAY]` commits an overlay into its
 * local GGUF and removes it, `--overlay-drop FILE|URL [OVERLAY]` removes
 * it, `--overlay-rebase FILE|URL [OVERLAY] [--take-overlay]` carries it
 * onto its source's new version (opt: OVERLAY, or NULL for the default);
 * each returns its exit status.  gfs_overlay_dead_note: ggufs -u of a
 * mount whose daemon died: if it was a read-write overlay mount of
 * source at mnt, one line saying where its edits are; 1 if so. */
int gfs_overlay_apply(const char *file, const char *opt);
int gfs_overlay_drop(const char *file, const char *opt);
int gfs_overlay_rebase(const char *file, const char *opt, int take);
int gfs_overlay_dead_note(const char *source, const char *mnt);
/* overlays.c: `ggufs --overlays`, every overlay of the state directory
 * with its source, whether that is still there, and its keys; the exit
 * status. */
int gfs_overlays_list(void);

/* nomount.c: the commands that read or edit a model without a mount
 * (ggufs get|ls|tensors|set, issue 37), through the mount's own code: o
 * as a mount's (o->file the model; -o overlay, ro, allow_nested, ggml).
 * gfs_nomount_show prints meta/NAME of each name (GFS_NM_GET), meta.tsv
 * (GFS_NM_LS) or index.tsv (GFS_NM_TENSORS) as the mount serves them.
 * gfs_nomount_set makes the edits in order as meta/ makes them (name: a
 * file name of meta/; type: user.gguf.type's text, or NULL; text: the
 * bytes written, or NULL for none; remove: rm) and commits them once;
 * the first refused edit stops it with nothing written.  Each returns
 * its exit status (status.h), after one line on stderr if not 0. */
enum gfs_nm_show { GFS_NM_GET, GFS_NM_LS, GFS_NM_TENSORS };
struct gfs_nm_edit {
    const char *name, *type, *text;
    size_t len;
    int remove;
};
int gfs_nomount_show(const struct gfs_opts *o, enum gfs_nm_show what,
                     char *const *names, int n);
int gfs_nomount_set(const struct gfs_opts *o, const struct gfs_nm_edit *edits,
                    int n);

/* edits/status.c: the progress of a long command on a terminal (stderr a
 * tty), drawn once the work has taken a second, cleared at its end.
 * gfs_meter_watch: a thread that polls user.ggufs.progress of mnt and
 * shows it until gfs_meter_stop (`ggufs -u`, whose commit runs in the
 * daemon); gfs_commit_metered: a command's own commit. */
struct gfs_meter {
    int tty;
    double start;
    int shown;
    const char *mnt;
    pthread_t thread;
    int running;
    atomic_int stop;
};
void gfs_meter_watch(struct gfs_meter *m, const char *mnt);
void gfs_meter_stop(struct gfs_meter *m);
/* gguf_commit of a command (not the daemon), its progress drawn on a
 * terminal as it goes (a rewrite of gigabytes takes seconds). */
enum gguf_status gfs_commit_metered(gguf_ctx *ctx, unsigned flags,
                                    struct gguf_commit_info *info,
                                    struct gguf_error *err);
/* How a commit went, in a few words ("in place", ...). */
const char *gfs_commit_how(const struct gguf_commit_info *info);

#endif
