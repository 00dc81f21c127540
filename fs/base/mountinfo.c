/*
 * mountinfo.c - what /proc/self/mountinfo says of ggufs's mounts: a
 * fuse.ggufs mount by its mountpoint or its source (gfs_find_mount:
 * daemon.h; the commands, the overlay's lock, a model's "already mounted
 * at"), and whether a directory is a mount point (the mountpoint's check).
 * Reads the file only: the bottom of fs/.
 */
#include "../ggufs.h"
#include "base.h"

#include <stdio.h>
#include <string.h>

/* Finds a fuse.ggufs mount in /proc/self/mountinfo by its mountpoint
 * (by_source = 0) or by its GGUF path (by_source = 1); copies the other
 * field into out.  Returns 1 if found. */
int gfs_find_mount(const char *what, int by_source, char *out, size_t n) {
    FILE *f = fopen("/proc/self/mountinfo", "r");
    char line[8192];
    int found = 0;
    if (!f)
        return 0;
    while (!found && fgets(line, sizeof line, f)) {
        char mnt[4096], fstype[256], src[4096];
        char *dash = strstr(line, " - ");
        if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
            sscanf(dash + 3, "%255s %4095s", fstype, src) != 2)
            continue;
        if (strcmp(fstype, "fuse.ggufs") != 0)
            continue;
        /* mountinfo escapes space, tab, newline and backslash as \ooo. */
        for (char *fld = mnt; fld; fld = fld == mnt ? src : NULL) {
            char *r = fld, *w = fld;
            while (*r) {
                if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] &&
                    r[3]) {
                    *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 +
                                  (r[3] - '0'));
                    r += 4;
                } else {
                    *w++ = *r++;
                }
            }
            *w = '\0';
        }
        if (strcmp(by_source ? src : mnt, what) == 0) {
            snprintf(out, n, "%s", by_source ? mnt : src);
            found = 1;
        }
    }
    fclose(f);
    return found;
}

/* Whether the directory at real (a resolved path) is a mount point in
 * /proc/self/mountinfo: 1 with its type and source, else 0 (or no
 * mountinfo).  Fields are compared escaped as mountinfo writes them
 * (space, tab, newline, backslash as \ooo). */
int gfs_mount_point_of(const char *real, char *what, size_t n) {
    char esc[4 * 4096 + 1], *w = esc;
    for (const char *r = real; *r && w < esc + sizeof esc - 5; r++)
        w += strchr(" \t\n\\", *r) ? sprintf(w, "\\%03o", (unsigned char)*r)
                                   : (*w = *r, 1);
    *w = '\0';
    FILE *f = fopen("/proc/self/mountinfo", "r");
    char line[16384];
    int found = 0;
    while (f && fgets(line, sizeof line, f)) {
        char mnt[16384], fstype[256], src[4096];
        char *dash = strstr(line, " - ");
        if (dash && sscanf(line, "%*s %*s %*s %*s %16383s", mnt) == 1 &&
            sscanf(dash + 3, "%255s %4095s", fstype, src) == 2 &&
            strcmp(mnt, esc) == 0) {
            snprintf(what, n, "%s of %s", fstype, src); /* the top one */
            found = 1;
        }
    }
    if (f)
        fclose(f);
    return found;
}
