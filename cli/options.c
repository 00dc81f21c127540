/*
 * options.c - the command line of a mount: ggufs's options (the fuse_opt
 * table), each checked in full, and libfuse's, checked by its own parser
 * before anything is opened, so that every problem is a usage error (one
 * line, exit status 2) and never a failed mount after; --help, --version.
 */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    KEY_PASSTHROUGH,
    KEY_S3_PATH_STYLE,
    KEY_MAX_MODELS
};

#define TIMEOUT_MAX 2147483647.0 /* seconds; the kernel's are 64-bit */
#define THREADS_MAX 100000       /* libfuse 3.14 ignores larger values */

#define GFS_OPT(t, p, v)                                                       \
    { t, offsetof(struct gfs_opts, p), v }
static const struct fuse_opt gfs_opt_spec[] = {
    GFS_OPT("allow_nested", allow_nested, 1),
    GFS_OPT("no_insert_range", no_insert, 1),
    GFS_OPT("tensor_direct_io", tensor_dio, 1), GFS_OPT("ggml=%s", ggml, 0),
    GFS_OPT("overlay", overlay, 1), GFS_OPT("overlay=%s", overlay_path, 0),
    GFS_OPT("mix=%s", mix, 0), GFS_OPT("over", over, 1),
    FUSE_OPT_KEY("timeout=", KEY_TIMEOUT), FUSE_OPT_KEY("ro", KEY_RO),
    FUSE_OPT_KEY("max_value=", KEY_MAX_VALUE),
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
    FUSE_OPT_KEY("max_header=", KEY_MAX_HEADER),
    FUSE_OPT_KEY("s3_path_style=", KEY_S3_PATH_STYLE),
    GFS_OPT("store=%s", store, 0), FUSE_OPT_KEY("max_models=", KEY_MAX_MODELS),
    FUSE_OPT_END};

/* ---- usage errors ----------------------------------------------------
 * A usage error is one line "ggufs: WHAT" on stderr and exit status 2,
 * whoever finds it: our option table, libfuse's parsers (their fuse_log
 * messages are caught while the command line is checked), or main. */

static char usage_msg[512]; /* the first problem found; "" if none */

/* Records the first usage problem (later ones are consequences). */
void cli_usage_note(const char *fmt, ...) {
    if (usage_msg[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(usage_msg, sizeof usage_msg, fmt, ap);
    va_end(ap);
}

/* Prints the usage error (ours, else libfuse's first line without its
 * "fuse: " prefix, else a generic one) and returns EXIT_USAGE. */
int cli_usage_error(void) {
    const char *m = usage_msg;
    if (!m[0])
        m = gfs_fuse_log_caught();
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
            cli_usage_note("-o %s: the size is a number of bytes (suffix K, M "
                           "or G for KiB, MiB, GiB) from 1 to 1G",
                           arg);
            return -1;
        }
        return 0;
    }
    if (key == KEY_MAX_DRAFTS) {
        if (parse_size(val, 1, SIZE_MAX / 2, &o->max_drafts) != 0) {
            cli_usage_note("-o %s: the size is a number of bytes (suffix K, M "
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
            cli_usage_note(
                "-o %s: the timeout is a number of seconds from 0 to "
                "%.0f",
                arg, TIMEOUT_MAX);
            return -1;
        }
        o->timeout = t;
        return 0;
    }
    long lo = key == KEY_MAX_THREADS ? 1 : 0;
    if (parse_count(val, lo, THREADS_MAX, &n) != 0) {
        cli_usage_note("-o %s: expected a whole number from %ld to %d", arg, lo,
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
        cli_usage_note(
            "-o %s: the size is a number of bytes (suffix K, M or G)", arg);
        return -1;
    case KEY_NET_TIMEOUT:
        t = *val ? strtod(val, &end) : -1;
        if (end && !*end && isfinite(t) && t >= 0.1 && t <= 3600) {
            o->remote.net_timeout = t;
            return 0;
        }
        cli_usage_note("-o %s: the timeout is a number of seconds from 0.1 to "
                       "3600",
                       arg);
        return -1;
    default:
        if (parse_count(val, 0, 20, &n) == 0) {
            o->remote.retries = (int)n;
            return 0;
        }
        cli_usage_note("-o %s: expected a whole number from 0 to 20", arg);
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
        cli_usage_note("-o max_read is not supported (libfuse 3.14 fails with "
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
        cli_usage_note("-o %s: expected passthrough=auto or passthrough=off",
                       arg);
        return -1;
    case KEY_CACHE_MAX:
    case KEY_MAX_HEADER:
    case KEY_NET_TIMEOUT:
    case KEY_NET_RETRIES:
        return remote_opt(o, arg, key);
    case KEY_S3_PATH_STYLE: /* issue 25: s3:// URLs' style */
        if (strcmp(arg, "s3_path_style=yes") == 0 ||
            strcmp(arg, "s3_path_style=no") == 0) {
            o->remote.s3_path_style =
                arg[14] == 'y' ? RMT_S3_PATH : RMT_S3_VHOST;
            return 0;
        }
        cli_usage_note("-o %s: expected s3_path_style=yes or s3_path_style=no",
                       arg);
        return -1;
    case KEY_RO:
        o->readonly = 1;
        return 1; /* libfuse mounts read-only too */
    case KEY_MAX_MODELS: {
        long n;
        if (parse_count(strchr(arg, '=') + 1, 1, 100000, &n) != 0) {
            cli_usage_note("-o %s: expected a whole number from 1 to 100000",
                           arg);
            return -1;
        }
        o->max_models = n;
        return 0;
    }
    case FUSE_OPT_KEY_NONOPT:
        if (!o->file) {
            o->file = arg;
            return 0;
        }
        if (!o->mnt) {
            o->mnt = arg;
            return 0;
        }
        cli_usage_note(
            "unexpected argument '%s' after FILE.gguf and MOUNTPOINT", arg);
        return -1;
    default:
        return 1;
    }
}

/* The --help text of ggufs's own options and commands (libfuse's follow). */
static void usage(const char *prog) {
    printf(
        "usage: %s [options] FILE.gguf|URL|DIR MOUNTPOINT\n"
        "       %s -u MOUNTPOINT        commit, unmount, report\n"
        "       ggufs --status MOUNTPOINT[/MODEL]  source, pending edits, refusals,\n"
        "                              last commit (a store's MODEL: its own)\n"
        "       %s --recover FILE.gguf  finish an interrupted commit\n"
        "       %s --apply-pending FILE.gguf   commit the edits a dead mount left\n"
        "       %s --drop-pending FILE.gguf    forget them\n"
        "       ggufs --show-pending FILE.gguf    name them and their values\n"
        "       ggufs --overlay-apply FILE.gguf [OVERLAY]  commit an overlay into the file\n"
        "       ggufs --overlay-drop FILE.gguf|URL [OVERLAY]  forget it\n"
        "       ggufs --overlays    list the overlays: source, still there, keys\n"
        "       ggufs --overlay-rebase FILE.gguf|URL [OVERLAY] [--take-overlay]\n"
        "                              carry it onto the source's new version\n"
        "       ggufs --apply-saved EDITS FILE.gguf  commit edits a failed commit saved\n"
        "       ggufs --compact FILE.gguf  smallest header, no filler (to publish)\n"
        "       ggufs get [-o OPT] FILE.gguf NAME...   values as meta/NAME shows them\n"
        "       ggufs set [-o OPT] FILE.gguf NAME=TEXT|NAME=@FILE|NAME:TYPE=...|\n"
        "                              --remove NAME ...   edits as meta/ takes them, one commit\n"
        "       ggufs ls|tensors [-o OPT] FILE.gguf   meta.tsv | index.tsv\n"
        "                              (no mount, no /dev/fuse; OPT: overlay[=PATH],\n"
        "                              allow_nested, ggml=PATH, max_value=SIZE)\n"
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
        "    -o mix=RECIPE          a model's tensors taken from other files:\n"
        "                           lines 'REGEX SOURCE' (ggufs(1), MIXES)\n"
        "    -o over                mount even where something is mounted already\n\n"
        "Remote sources (http://, https://, hf://OWNER/REPO/PATH[@REVISION],\n"
        "s3://BUCKET/KEY),\n"
        "mounted through a block cache, read-only unless -o overlay:\n"
        "    -o header=FILE         extra request headers, 'Name: value' lines\n"
        "                           (sent to the URL's own host only)\n"
        "    -o cache=DIR           the cache (default ~/.cache/ggufs)\n"
        "    -o cache_max=SIZE      bound on the cache (K, M, G; default none)\n"
        "    -o net_timeout=SECONDS connect and low-speed timeout (default 15)\n"
        "    -o net_retries=N       retries of a failed request (default 3)\n"
        "    -o max_header=SIZE     most bytes of a remote header (default 256M)\n"
        "    -o s3_path_style=yes|no  s3:// by ENDPOINT/BUCKET/KEY or by\n"
        "                           BUCKET.HOST/KEY (default: path style for\n"
        "                           a custom endpoint, not for AWS)\n\n"
        "Stores (DIR: ollama's models, the Hugging Face cache, LM Studio's\n"
        "models, any folder of GGUFs; hf://OWNER/REPO[@REVISION]: a Hub repo;\n"
        "s3://BUCKET/PREFIX/ or s3://BUCKET: a bucket's GGUFs):\n"
        "one directory per model, each the tree of a single-file mount:\n"
        "    -o store=KIND          ollama, hf, lmstudio or dir (default: from\n"
        "                           the layout)\n"
        "    -o max_models=N        models open at once (default 32)\n\n",
        prog, prog, prog, prog, prog);
}

/* The options libfuse will be given, checked now by its own parser (a
 * session made and dropped, nothing mounted): an unknown option is a
 * usage error before the GGUF is opened, not a failed mount after.  0 or
 * -1 (the message caught: gfs_fuse_log_caught).  The session has no
 * operations: they are not looked at before a mount. */
static int check_fuse_options(const struct fuse_args *args) {
    struct fuse_args copy = FUSE_ARGS_INIT(0, NULL);
    int r = -1;
    for (int i = 0; i < args->argc; i++)
        if (fuse_opt_add_arg(&copy, args->argv[i]) != 0)
            goto out;
    static const struct fuse_lowlevel_ops none;
    struct fuse_session *se = fuse_session_new(&copy, &none, sizeof none, NULL);
    if (se) {
        fuse_session_destroy(se);
        r = 0;
    }
out:
    fuse_opt_free_args(&copy);
    return r;
}

int cli_parse_options(struct gfs_cmdline *m, const char *prog) {
    int status = CLI_GO_ON;
    gfs_fuse_log_catch(1);
    if (fuse_opt_parse(&m->args, &m->o, gfs_opt_spec, gfs_opt_proc) == -1 ||
        fuse_parse_cmdline(&m->args, &m->co) != 0) {
        status = cli_usage_error();
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
        cli_usage_note("%s", m->o.file ? "missing MOUNTPOINT after FILE.gguf"
                                       : "missing FILE.gguf and MOUNTPOINT");
        status = cli_usage_error();
        goto out;
    }
    if (check_fuse_options(&m->args) != 0)
        status = cli_usage_error();
out:
    gfs_fuse_log_catch(0); /* libfuse's own again, for the mount */
    return status;
}
