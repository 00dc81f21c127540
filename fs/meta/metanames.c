/*
 * metanames.c - which names in meta/ are editors' scratch files: the
 * backups and temporary files that tools make beside the file they save
 * (ggufs(1), NAMES IN META/).  metaedit.c keeps such names as FILEs (held
 * in memory, never committed) and refuses every other name that cannot be
 * a key (EINVAL at create and rename), so that a name is either a key or
 * plainly a scratch file.
 *
 * A backup name (gfs_meta_backup_name) marks a name as a copy even when
 * it is a valid key name ("general.name.bak"): a key renamed to it is set
 * aside, not renamed.  The patterns, from the tools of tests/mount_save.py
 * and the usual editors:
 *
 *   .*                  hidden files: vim's .K.swp, rsync's .K.XXXXXX,
 *                       emacs's .#K
 *   *~                  vim, emacs, cp --backup (K~, K.~1~)
 *   #*#                 emacs's auto-save
 *   *.bak *.orig *.rej *.tmp *.swp *.old *.save
 *                       sed -i.bak, perl -pi.bak, fileinput, patch, mv K
 *                       K.orig, cp/rsync --suffix=.bak
 *   digits only         vim's write test (4913)
 *
 * A temporary name (gfs_meta_scratch_name, beyond the backups) is a name
 * with a random part: 6 to 12 ASCII letters and digits, as the whole name
 * (perl -pi's XXXXXXXX, sed -i's sedXXXXXX) or after its last '.' (GNU
 * patch's K.oXXXXXX, mktemp's tmp.XXXXXXXXXX).  Such names are checked
 * only when they are not valid keys: a random name in lower case is a
 * valid key, made a key at create, and saved onto the target key by the
 * rename that follows (metaedit.c, key_onto_key).
 */
#include "../ggufs.h"
#include "meta.h"

#include <string.h>

static int ends_with(const char *s, size_t n, const char *suffix) {
    size_t k = strlen(suffix);
    return n > k && memcmp(s + n - k, suffix, k) == 0;
}

int gfs_meta_backup_name(const char *name) {
    static const char *const suffixes[] = {".bak", ".orig", ".rej", ".tmp",
                                           ".swp", ".old",  ".save"};
    size_t n = strlen(name);
    if (n == 0)
        return 0;
    if (name[0] == '.' || name[n - 1] == '~' ||
        (n >= 2 && name[0] == '#' && name[n - 1] == '#'))
        return 1;
    for (size_t k = 0; k < sizeof suffixes / sizeof *suffixes; k++)
        if (ends_with(name, n, suffixes[k]))
            return 1;
    return strspn(name, "0123456789") == n;
}

/* True if s[0..n) is a random part: 6 to 12 ASCII letters and digits. */
static int random_part(const char *s, size_t n) {
    static const char alnum[] = "abcdefghijklmnopqrstuvwxyz"
                                "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    if (n < 6 || n > 12)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!s[i] || !strchr(alnum, s[i]))
            return 0;
    return 1;
}

int gfs_meta_scratch_name(const char *name) {
    if (gfs_meta_backup_name(name))
        return 1;
    size_t n = strlen(name);
    const char *dot = strrchr(name, '.');
    if (dot)
        return dot > name && random_part(dot + 1, n - (size_t)(dot + 1 - name));
    return random_part(name, n);
}
