/*
 * hfcache.c - the Hugging Face cache (huggingface_hub's layout):
 * models--OWNER--REPO/refs/main holds the commit the main branch points
 * to, snapshots/REV/PATH are symlinks (relative: ../../blobs/HASH) into
 * blobs/.  Each *.gguf file of a snapshot is a model named
 * OWNER/REPO/PATH without .gguf (shard sets once, as in folders:
 * folder.c's walk and rules) for the snapshot refs/main names, and
 * OWNER/REPO/PATH@REV for the other snapshots.  A file's path is the blob
 * its symlink resolves to, which must be beneath the store (cat_resolve);
 * content_addressed 1.  refs/main must hold a commit hash (40 or 64
 * lowercase hex digits): otherwise one log line and every snapshot is
 * listed with @REV.  Other directories (datasets--*, .locks) are not
 * models.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The commit refs/main of repo dir names into rev (65 bytes); 0, or -1
 * (logged unless absent). */
static int main_rev(struct cat_scan *s, const char *dir, char rev[65]) {
    char rel[300], buf[80];
    struct stat st;
    snprintf(rel, sizeof rel, "%s/refs/main", dir);
    int fd = cat_open_regular(s->dirfd, rel, O_RDONLY, &st);
    if (fd < 0) {
        if (errno != ENOENT)
            cat_logf(s, "%s: %s, every snapshot listed as @REV", rel,
                     cat_strerror(errno));
        return -1;
    }
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        n--;
    buf[n < 0 ? 0 : n] = 0;
    int ok =
        (n == 40 || n == 64) && strspn(buf, "0123456789abcdef") == (size_t)n;
    if (!ok) {
        cat_logf(s, "%s: not a commit hash, every snapshot listed as @REV",
                 rel);
        return -1;
    }
    memcpy(rev, buf, (size_t)n + 1);
    return 0;
}

/* The snapshots of one repo directory (models--OWNER--REPO). */
static void scan_repo(struct cat_scan *s, struct cat_found *found,
                      const char *dir) {
    char rev[65] = "", prefix[300], rel[600], suffix[300];
    const char *dash = strstr(dir + 8, "--");
    if (dash)
        snprintf(prefix, sizeof prefix, "%.*s/%s/", (int)(dash - dir - 8),
                 dir + 8, dash + 2);
    else
        snprintf(prefix, sizeof prefix, "%s/", dir + 8);
    main_rev(s, dir, rev);
    snprintf(rel, sizeof rel, "%s/snapshots", dir);
    DIR *d = cat_opendir(s->dirfd, rel);
    struct dirent *e;
    struct cat_walk w = {.s = s, .u = found, .file = cat_found_file};
    for (size_t n = 0; d && !s->oom && n < CAT_MAX_DIRENTS && (e = readdir(d));
         n++) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(rel, sizeof rel, "%s/snapshots/%s", dir, e->d_name);
        snprintf(suffix, sizeof suffix, "@%s", e->d_name);
        found->prefix = prefix;
        found->skip = strlen(rel) + 1;
        found->suffix = strcmp(e->d_name, rev) == 0 ? NULL : suffix;
        cat_walk_tree(&w, rel);
    }
    if (d)
        closedir(d);
}

void cat_scan_hf(struct cat_scan *s) {
    struct cat_found found = {.s = s};
    DIR *d = cat_opendir(s->dirfd, "");
    struct dirent *e;
    struct stat st;
    for (size_t n = 0; d && !s->oom && n < CAT_MAX_DIRENTS && (e = readdir(d));
         n++) {
        if (!cat_hf_repo_dir(e->d_name) || strlen(e->d_name) > 255 ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISDIR(st.st_mode))
            continue;
        scan_repo(s, &found, e->d_name);
    }
    if (d)
        closedir(d);
    cat_cands_group(s, &found.c, 1);
}
