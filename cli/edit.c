/*
 * edit.c - the commands that read or edit a model with no mount (issue
 * 37), their arguments; fs/cmd/nomount.c runs them through the mount's own
 * code (daemon.h, gfs_nomount_show and gfs_nomount_set):
 *
 *   ggufs get [-o OPT] FILE NAME...    meta/NAME of each, as cat shows it
 *   ggufs ls [-o OPT] FILE             meta.tsv
 *   ggufs tensors [-o OPT] FILE        index.tsv
 *   ggufs set [-o OPT] FILE EDIT...    the edits, one commit
 *
 * An EDIT is NAME=TEXT (`echo TEXT > meta/NAME`: the text and a newline),
 * NAME=@PATH (`cp PATH meta/NAME`: the file's bytes; @- standard input),
 * NAME:TYPE=TEXT or NAME:TYPE=@PATH (the key's type set first, as
 * `setfattr -n user.gguf.type -v TYPE` does: a new key of that type, or
 * an existing one converted), or `--remove NAME` (`rm meta/NAME`).  NAME
 * is a file name of meta/ (a key, escaped as meta/ escapes it).  OPT:
 * overlay, overlay=PATH (set: the edits into the overlay, the model
 * untouched; the others: the overlay's edits shown), allow_nested,
 * ggml=PATH, max_value=SIZE (what an @PATH may hold, as a file of meta/).
 * Exit statuses as the mount's commit (status.h): 2 usage, 1 the model or
 * an edit refused (nothing written), 4 the commit failed.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct edit_opts {
    char *overlay_path, *ggml, *max_value;
    int overlay, allow_nested;
};

#define EDIT_OPT(t, p)                                                         \
    { t, offsetof(struct edit_opts, p), 1 }
static const struct fuse_opt edit_opt_spec[] = {
    EDIT_OPT("overlay", overlay),
    EDIT_OPT("overlay=%s", overlay_path),
    EDIT_OPT("allow_nested", allow_nested),
    EDIT_OPT("ggml=%s", ggml),
    EDIT_OPT("max_value=%s", max_value),
    FUSE_OPT_END};

/* Refuses what the table does not know (fuse_opt keeps it otherwise). */
static int edit_opt_proc(void *data, const char *arg, int key,
                         struct fuse_args *outargs) {
    (void)data, (void)outargs;
    if (key == FUSE_OPT_KEY_OPT && strcmp(arg, "--remove") != 0) {
        cli_usage_note("unknown option -o %s for this command", arg);
        return -1;
    }
    return 1; /* a non-option: kept in args */
}

/* The bytes of @PATH (or standard input for @-), at most max bytes: a
 * regular file or a pipe, opened without following a final symlink.
 * 0, or EXIT_BADFILE after one line. */
static int read_value(const char *path, size_t max, struct gguf_buf *out) {
    int fd = strcmp(path, "-") == 0
                 ? dup(0)
                 : open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    int err = fd < 0 || fstat(fd, &st) != 0 ? errno : 0;
    if (!err && !S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
        err = EINVAL;
    if (!err && S_ISREG(st.st_mode) && fcntl(fd, F_SETFL, 0) != 0)
        err = errno;
    char chunk[65536];
    for (ssize_t n = 1; !err && n > 0;) {
        n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            err = errno;
        else if (out->len + (size_t)n > max)
            err = EFBIG;
        else if (gguf_buf_add(out, chunk, (size_t)n) != GGUF_OK)
            err = ENOMEM;
    }
    if (fd >= 0)
        close(fd);
    if (err)
        fprintf(stderr, "ggufs: %s: %s%s\n", path,
                err == EINVAL ? "not a regular file or a pipe" : strerror(err),
                err == EFBIG ? " (-o max_value=SIZE, as for a file of meta/)"
                             : "");
    return err ? EXIT_BADFILE : 0;
}

/* One EDIT argument into e (its text in *text, owned by the caller).  0,
 * or the exit status after one line. */
static int parse_edit(char *arg, size_t max, struct gfs_nm_edit *e,
                      struct gguf_buf *text) {
    char *eq = strchr(arg, '=');
    if (!eq || eq == arg) {
        cli_usage_note("'%s' is not NAME=TEXT, NAME=@FILE or NAME:TYPE=...",
                       arg);
        return cli_usage_error();
    }
    *eq = '\0';
    char *colon = strrchr(arg, ':');
    if (colon) {
        *colon = '\0';
        e->type = colon + 1;
    }
    e->name = arg;
    const char *v = eq + 1;
    int status = 0;
    if (v[0] == '@')
        status = read_value(v + 1, max, text);
    else if (gguf_buf_add(text, v, strlen(v)) != GGUF_OK ||
             gguf_buf_add(text, "\n", 1) != GGUF_OK)
        status = EXIT_BADFILE;
    e->text = text->p ? (const char *)text->p : "";
    e->len = text->len;
    return status;
}

/* ggufs set: the edits parsed (all of them before the model is opened),
 * then made and committed once. */
static int set_cmd(const struct gfs_opts *o, char **argv, int argc,
                   size_t max) {
    struct gfs_nm_edit *e = calloc((size_t)argc, sizeof *e);
    struct gguf_buf *texts = calloc((size_t)argc, sizeof *texts);
    int n = 0, status = e && texts ? 0 : EXIT_BADFILE;
    for (int k = 0; k < argc && !status; k++, n++) {
        if (strcmp(argv[k], "--remove") == 0 && k + 1 < argc) {
            e[n].name = argv[++k];
            e[n].remove = 1;
        } else if (strcmp(argv[k], "--remove") == 0) {
            cli_usage_note("--remove takes a NAME");
            status = cli_usage_error();
        } else {
            status = parse_edit(argv[k], max, &e[n], &texts[n]);
        }
    }
    if (!status)
        status = gfs_nomount_set(o, e, n);
    for (int k = 0; texts && k < argc; k++)
        gguf_buf_free(&texts[k]);
    free(texts);
    free(e);
    return status;
}

/* -o max_value=SIZE: bytes, with K, M or G. */
static int parse_size(const char *s, size_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
    if (shift)
        end++;
    if (errno || end == s || *end || s[0] == '-' ||
        v > (GFS_MAX_FILE_BYTES >> shift))
        return -1;
    *out = (size_t)(v << shift);
    return 0;
}

/* The command's options and FILE; args keeps the rest.  0, or the exit
 * status (a usage error). */
static int parse_common(struct fuse_args *args, struct edit_opts *eo,
                        struct gfs_opts *o, size_t *max) {
    if (fuse_opt_parse(args, eo, edit_opt_spec, edit_opt_proc) != 0)
        return cli_usage_error();
    if (eo->max_value && parse_size(eo->max_value, max) != 0) {
        cli_usage_note("-o max_value=%s: not a size", eo->max_value);
        return cli_usage_error();
    }
    if (args->argc < 3) {
        cli_usage_note("%s takes a FILE.gguf", args->argv[1]);
        return cli_usage_error();
    }
    o->file = args->argv[2];
    o->overlay = eo->overlay || eo->overlay_path;
    o->overlay_path = eo->overlay_path;
    o->allow_nested = eo->allow_nested;
    o->ggml = eo->ggml;
    o->timeout = 3600.0;
    o->max_value = *max;
    o->max_drafts = GFS_MAX_DRAFTS_DEFAULT;
    o->remote.retries = -1;
    return 0;
}

static int run(const char *verb, struct fuse_args *args,
               const struct gfs_opts *o, size_t max) {
    int rest = args->argc - 3;
    char **more = args->argv + 3;
    if (strcmp(verb, "set") == 0 && rest > 0)
        return set_cmd(o, more, rest, max);
    if (strcmp(verb, "get") == 0 && rest > 0)
        return gfs_nomount_show(o, GFS_NM_GET, more, rest);
    if (strcmp(verb, "ls") == 0 && rest == 0)
        return gfs_nomount_show(o, GFS_NM_LS, NULL, 0);
    if (strcmp(verb, "tensors") == 0 && rest == 0)
        return gfs_nomount_show(o, GFS_NM_TENSORS, NULL, 0);
    cli_usage_note(strcmp(verb, "set") == 0   ? "set takes FILE EDIT..."
                   : strcmp(verb, "get") == 0 ? "get takes FILE NAME..."
                                              : "%s takes FILE only",
                   verb);
    return cli_usage_error();
}

int cli_edit_cmd(int argc, char **argv) {
    static const char *const verbs[] = {"get", "set", "ls", "tensors"};
    int known = 0;
    for (size_t k = 0; argc >= 2 && k < sizeof verbs / sizeof *verbs; k++)
        known |= strcmp(argv[1], verbs[k]) == 0;
    if (!known)
        return -1;
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    struct edit_opts eo = {0};
    struct gfs_opts o = {0};
    size_t max = GFS_MAX_VALUE_DEFAULT;
    int status = parse_common(&args, &eo, &o, &max);
    if (!status && gfs_remote_is(o.file) && strcmp(argv[1], "set") == 0 &&
        !o.overlay) {
        fprintf(stderr,
                "ggufs: %s: a remote file is never written (-o overlay "
                "keeps the edits in its overlay)\n",
                o.file);
        status = EXIT_BADFILE;
    }
    if (!status)
        status = run(argv[1], &args, &o, max);
    fuse_opt_free_args(&args);
    free(eo.overlay_path);
    free(eo.ggml);
    free(eo.max_value);
    return status;
}
