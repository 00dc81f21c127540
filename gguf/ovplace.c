/*
 * ovplace.c - where an overlay is and whether its files are trusted
 * (overlay.c's header comment: "Where" and "Trust"): the default path in
 * the user's state directory, the overlay's directory opened, and the
 * trust rule on a file of the overlay's (the overlay, its lock, its data
 * file).  Below overlay.c and ovtensors.c, which both call it and which
 * it never calls (no file circle: dev/layers).
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The default overlay's name in the state directory. */
static void default_name(const char *source, char *out, size_t n) {
    snprintf(out, n, "%016llx.overlay.gguf",
             (unsigned long long)gguf_hash(source, strlen(source)));
}

enum gguf_status gguf_overlay_default_path(const char *source, char *out,
                                           size_t n, struct gguf_error *err) {
    char name[64];
    default_name(source, name, sizeof name);
    /* The state directory's path: the pending record's, less its name. */
    enum gguf_status st =
        gguf_state_path(source, GGUF_STATE_PENDING, out, n, err);
    if (st != GGUF_OK)
        return st;
    char *slash = strrchr(out, '/');
    if (!slash || (size_t)(slash + 1 - out) + strlen(name) >= n)
        return gguf_fail(err, GGUF_E_RANGE, "state path too long");
    strcpy(slash + 1, name);
    return GGUF_OK;
}

/* Where the overlay is: its directory opened (the returned fd), its name
 * in it (base), and the whole path for messages (shown).  path NULL: the
 * state directory (created if create) and the default name.  -1 with err
 * set, or -1 with *absent when that directory does not exist and !create. */
int gguf_ovl_open_parent(const char *path, const char *source, bool create,
                         char *base, size_t bn, char *shown, size_t sn,
                         bool *absent, struct gguf_error *err) {
    *absent = false;
    if (!path) {
        default_name(source, base, bn);
        if (gguf_overlay_default_path(source, shown, sn, err) != GGUF_OK)
            return -1;
        return gguf_state_dir_open(create, absent, err);
    }
    const char *slash = strrchr(path, '/');
    const char *b = slash ? slash + 1 : path;
    if (!*b || strlen(b) >= bn || strlen(path) >= sn) {
        gguf_fail(err, GGUF_E_INVAL, "%s: not a file name for an overlay",
                  path);
        return -1;
    }
    strcpy(base, b);
    strcpy(shown, path);
    return gguf_open_dir_of(path, &b, err); /* durable.c: the one opener */
}

/* The trust rule of the header comment, on fstat/lstat sb of the file
 * shown, what it is ("overlay", "overlay lock"); GGUF_OK or GGUF_E_PERM
 * with the reason. */
enum gguf_status gguf_ovl_check_trusted(const struct stat *sb, const char *what,
                                        const char *shown,
                                        struct gguf_error *err) {
    if (S_ISLNK(sb->st_mode))
        return gguf_fail(err, GGUF_E_PERM, "%s %s is a symbolic link: not used",
                         what, shown);
    if (!S_ISREG(sb->st_mode))
        return gguf_fail(err, GGUF_E_PERM,
                         "%s %s is not a regular file: not used", what, shown);
    if (sb->st_uid != geteuid())
        return gguf_fail(err, GGUF_E_PERM,
                         "%s %s is owned by uid %u, not by uid %u: not used",
                         what, shown, (unsigned)sb->st_uid,
                         (unsigned)geteuid());
    if (sb->st_mode & 022)
        return gguf_fail(err, GGUF_E_PERM,
                         "%s %s is writable by others (mode %04o): not used",
                         what, shown, (unsigned)(sb->st_mode & 07777));
    if (sb->st_nlink != 1)
        return gguf_fail(err, GGUF_E_PERM, "%s %s has %llu links: not used",
                         what, shown, (unsigned long long)sb->st_nlink);
    return GGUF_OK;
}
