/*
 * s3conf.c - the AWS CLI's shared files, as the AWS CLI and SDKs read them
 * (issue 25): the profile AWS_PROFILE names ("default" when unset), from
 *   the credentials file  AWS_SHARED_CREDENTIALS_FILE, else
 *                         ~/.aws/credentials: section [NAME]
 *   the config file       AWS_CONFIG_FILE, else ~/.aws/config: section
 *                         [profile NAME] ([default] for the default)
 * Keys aws_access_key_id, aws_secret_access_key, aws_session_token (the
 * credentials file first, then the config file), region and endpoint_url
 * (the config file; the credentials file's too).  They fill only what the
 * environment left unset (s3.c's rmt_s3_load), the credentials only when
 * the environment has none.
 *
 * A root daemon reads these files for the user who ran ggufs, so with the
 * care of every other file ggufs reads for a user: opened once, never
 * through a symbolic link (O_NOFOLLOW), never blocking on a FIFO; a
 * regular file owned by that user (or root), writable by no one else, at
 * most CONF_MAX bytes.  One that is not is refused with one line naming
 * it; one that does not exist is skipped.  Its text is parsed as INI:
 * lines "[section]", "key = value", comments from '#' or ';' at a line's
 * start; the secret never appears in a message.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONF_MAX (1 << 20)

/* The file's text, NUL-terminated (malloc'ed), or NULL: *absent when it
 * does not exist, else -1 in *bad with msg. */
static char *read_conf(const char *path, int *absent, char *msg, size_t n) {
    struct stat sb;
    char *buf = NULL;
    *absent = 0;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            *absent = 1;
        else
            snprintf(msg, n, "%s: cannot be read: %s%s", path,
                     errno == ELOOP ? "a symbolic link" : strerror(errno),
                     errno == ELOOP ? " (not followed)" : "");
        return NULL;
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(msg, n, "%s: not a regular file", path);
    } else if (sb.st_uid != getuid() && sb.st_uid != 0) {
        snprintf(msg, n, "%s: owned by uid %u, not by you (uid %u) or root",
                 path, (unsigned)sb.st_uid, (unsigned)getuid());
    } else if (sb.st_mode & 022) {
        snprintf(msg, n, "%s: writable by others (mode %03o)", path,
                 (unsigned)(sb.st_mode & 0777));
    } else if (sb.st_size > CONF_MAX) {
        snprintf(msg, n, "%s: over %d bytes", path, CONF_MAX);
    } else if (!(buf = malloc((size_t)sb.st_size + 1))) {
        snprintf(msg, n, "out of memory");
    } else {
        ssize_t r = pread(fd, buf, (size_t)sb.st_size, 0);
        if (r != sb.st_size) {
            snprintf(msg, n, "%s: cannot be read", path);
            free(buf);
            buf = NULL;
        } else {
            buf[r] = '\0';
        }
    }
    close(fd);
    return buf;
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t')
        s++;
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
        *--e = '\0';
    return s;
}

/* Whether setting what may be taken from a file into c now. */
static int wanted(const struct rmt_s3 *c, const char *what, int keys) {
    if (!strcmp(what, "region"))
        return !c->region[0];
    if (!strcmp(what, "endpoint_url"))
        return !c->endpoint;
    if (!strcmp(what, "aws_access_key_id"))
        return keys && !c->key;
    if (!strcmp(what, "aws_secret_access_key"))
        return keys && !c->secret;
    if (!strcmp(what, "aws_session_token"))
        return keys && !c->token;
    return 0;
}

/* The settings of section sect of path's text into c.  0 or -1. */
static int apply(struct rmt_s3 *c, const char *path, char *text,
                 const char *sect, int keys, char *msg, size_t n) {
    int in = 0, no = 0;
    for (char *line = text, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        no++;
        char *s = trim(line);
        if (!*s || *s == '#' || *s == ';')
            continue;
        if (*s == '[') {
            char *e = strchr(s, ']');
            if (e)
                *e = '\0';
            in = !strcmp(trim(s + 1), sect);
            continue;
        }
        char *eq = strchr(s, '=');
        if (!in || !eq)
            continue;
        *eq = '\0';
        char *k = trim(s), *v = trim(eq + 1), from[4400];
        snprintf(from, sizeof from, "%s:%d (%s)", path, no, k);
        if (wanted(c, k, keys) && rmt_s3_set(c, k, v, from, msg, n) != 0)
            return -1;
    }
    return 0;
}

/* path from the variable env, else ~/.aws/name, into out. */
static int conf_path(const char *env, const char *name, char *out, size_t n) {
    const char *v = getenv(env);
    if (v && *v)
        return snprintf(out, n, "%s", v) < (int)n ? 0 : -1;
    const char *home = getenv("HOME");
    struct passwd *pw = (!home || !*home) ? getpwuid(getuid()) : NULL;
    if ((!home || !*home) && pw)
        home = pw->pw_dir;
    if (!home || !*home)
        return -1;
    return snprintf(out, n, "%s/.aws/%s", home, name) < (int)n ? 0 : -1;
}

int rmt_s3_profile(struct rmt_s3 *c, int keys, char *msg, size_t n) {
    const char *prof = getenv("AWS_PROFILE");
    char path[4096], sect[300];
    if (!prof || !*prof)
        prof = "default";
    if (strlen(prof) > 256) {
        snprintf(msg, n, "AWS_PROFILE is too long");
        return -1;
    }
    static const struct {
        const char *env, *name;
        int config;
    } files[] = {{"AWS_SHARED_CREDENTIALS_FILE", "credentials", 0},
                 {"AWS_CONFIG_FILE", "config", 1}};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        int absent;
        if (conf_path(files[i].env, files[i].name, path, sizeof path) != 0)
            continue; /* no home: no files */
        char *text = read_conf(path, &absent, msg, n);
        if (!text && !absent)
            return -1;
        if (!text)
            continue;
        snprintf(sect, sizeof sect, "%s%s",
                 files[i].config && strcmp(prof, "default") ? "profile " : "",
                 prof);
        int r = apply(c, path, text, sect, keys, msg, n);
        free(text);
        if (r != 0)
            return -1;
    }
    return 0;
}
