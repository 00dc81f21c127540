/*
 * commands.c - the commands that commit into a local model without
 * mounting it (issue 21):
 *
 *   ggufs --apply-saved EDITS MODEL  the edits a failed commit saved aside
 *                                    (PATH.ggufs-edits-*.gguf, saved.c)
 *                                    committed into MODEL
 *   ggufs --compact FILE             the smallest header, without ggufs's
 *                                    filler key, for publishing
 *
 * and the arguments of the overlay commands (--overlay-apply, -drop,
 * -rebase), which the overlay's code runs (fs/cmd/overlaycmds.c, daemon.h).
 *
 * Both open the model as the pending commands do (cli_open_model:
 * recovered, read-write, locked against mounts) and write it with
 * gguf_commit, the daemon's crash-safe commit (journal, or a copy
 * renamed over it).  Exit statuses (man/ggufs.1, EXIT STATUS): 0 done or
 * nothing to do, 1 the model or the edits cannot be used (refused,
 * nothing written), 2 usage, 4 the commit failed (the model as it was;
 * the edits file kept).
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The edits file at path, parsed (it is all header).  NULL after one
 * line naming model and the file. */
static gguf_ctx *open_edits(const char *model, const char *path) {
    struct gguf_error err = {0};
    gguf_ctx *e = NULL;
    if (gguf_open(&e, path, GGUF_OPEN_ALLOW_NESTED, &err) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: the saved edits %s: %s\n", model, path,
                err.msg);
        return NULL;
    }
    return e;
}

static int apply_saved_cmd(const char *edits, const char *model) {
    struct gguf_error err = {0};
    struct gguf_commit_info info = {0};
    struct gguf_buf names = {0};
    int64_t set = 0, removed = 0;
    int status = EXIT_BADFILE;
    char *path = NULL;
    gguf_ctx *ctx = NULL, *e = open_edits(model, edits);
    if (!e || !(ctx = cli_open_model(model, &path)))
        goto out;
    if (gguf_saved_apply(ctx, e, &names, &set, &removed, &err) != GGUF_OK) {
        fprintf(stderr, "ggufs: %s: the saved edits %s: %s\n", model, edits,
                err.msg);
        goto out;
    }
    if (set == 0 && removed == 0) {
        printf("ggufs: %s: the saved edits %s are already in the file "
               "(nothing written; %s may be removed)\n",
               model, edits, edits);
        status = 0;
        goto out;
    }
    status = EXIT_COMMIT;
    if (gfs_commit_metered(ctx, 0, &info, &err) != GGUF_OK) {
        fprintf(stderr,
                "ggufs: %s: committing the saved edits %s failed: %s; the "
                "file is as it was and %s is kept\n",
                model, edits, err.msg, edits);
        goto out;
    }
    printf("ggufs: %s: saved edits %s committed (%lld key%s set: %.*s; "
           "%lld removed; %s, data at %llu); %s may be removed\n",
           model, edits, (long long)set, set == 1 ? "" : "s", (int)names.len,
           names.p ? (const char *)names.p : "", (long long)removed,
           gfs_commit_how(&info), (unsigned long long)info.new_data_offset,
           edits);
    status = 0;
out:
    gguf_buf_free(&names);
    gguf_close(ctx);
    gguf_close(e);
    free(path);
    return status;
}

static int compact_cmd(const char *file) {
    struct gguf_error err = {0};
    struct gguf_commit_info info = {0};
    int status = EXIT_BADFILE;
    char *path = NULL;
    gguf_ctx *ctx = cli_open_model(file, &path);
    if (!ctx)
        goto out;
    status = EXIT_COMMIT;
    if (gfs_commit_metered(ctx, GGUF_COMMIT_COMPACT, &info, &err) != GGUF_OK) {
        fprintf(stderr,
                "ggufs: %s: compacting failed: %s; the file is as it "
                "was\n",
                file, err.msg);
        goto out;
    }
    if (info.how == GGUF_COMMIT_NONE)
        printf("ggufs: %s: already compact (data at %llu)\n", file,
               (unsigned long long)info.new_data_offset);
    else
        printf("ggufs: %s: compacted: the smallest header, no filler key "
               "(%s; data at %llu, was %llu)\n",
               file,
               info.how == GGUF_COMMIT_INPLACE ? "in place"
                                               : "the file rewritten",
               (unsigned long long)info.new_data_offset,
               (unsigned long long)info.old_data_offset);
    status = 0;
out:
    gguf_close(ctx);
    free(path);
    return status;
}

int cli_commands(int argc, char **argv) {
    int apply = argc >= 2 && strcmp(argv[1], "--apply-saved") == 0;
    int compact = argc >= 2 && strcmp(argv[1], "--compact") == 0;
    if (!apply && !compact)
        return -1;
    if (argc != (apply ? 4 : 3)) {
        fprintf(stderr, "ggufs: %s takes %s (see ggufs --help)\n", argv[1],
                apply ? "EDITS and MODEL" : "exactly one FILE.gguf");
        return EXIT_USAGE;
    }
    const char *model = argv[apply ? 3 : 2];
    if (gfs_remote_is(model)) {
        fprintf(stderr,
                "ggufs: %s: %s is for local files: a remote file is never "
                "written\n",
                model, argv[1]);
        return EXIT_BADFILE;
    }
    return apply ? apply_saved_cmd(argv[2], model) : compact_cmd(model);
}

/* ggufs --overlay-apply|--overlay-drop FILE [OVERLAY], --overlay-rebase
 * FILE|URL [OVERLAY] [--take-overlay]: the arguments checked, the command
 * run by the overlay's own code (fs/cmd/overlaycmds.c, through daemon.h). */
int cli_overlay_cmd(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--overlays") == 0)
        return gfs_overlays_list();
    if (argc >= 2 && strcmp(argv[1], "--overlay-rebase") == 0) {
        int take = argc >= 3 && strcmp(argv[argc - 1], "--take-overlay") == 0;
        if (argc - take != 3 && argc - take != 4) {
            fprintf(stderr, "ggufs: --overlay-rebase takes FILE.gguf or URL, "
                            "optionally the OVERLAY, then optionally "
                            "--take-overlay (see ggufs --help)\n");
            return EXIT_USAGE;
        }
        return gfs_overlay_rebase(argv[2], argc - take == 4 ? argv[3] : NULL,
                                  take);
    }
    int apply = argc >= 2 && strcmp(argv[1], "--overlay-apply") == 0;
    if (!apply && (argc < 2 || strcmp(argv[1], "--overlay-drop") != 0))
        return -1;
    if (argc != 3 && argc != 4) {
        fprintf(stderr,
                "ggufs: %s takes FILE.gguf and, optionally, the OVERLAY "
                "(see ggufs --help)\n",
                argv[1]);
        return EXIT_USAGE;
    }
    const char *opt = argc == 4 ? argv[3] : NULL;
    return apply ? gfs_overlay_apply(argv[2], opt)
                 : gfs_overlay_drop(argv[2], opt);
}
