/*
 * s3conf.c - S3's settings (issue 25), as the AWS CLI and SDKs find them:
 * the environment's variables (rmt_s3_load: each checked by rmt_s3_set),
 * then the AWS CLI's shared files: the profile AWS_PROFILE names
 * ("default" when unset), from
 *   the credentials file  AWS_SHARED_CREDENTIALS_FILE, else
 *                         ~/.aws/credentials: section [NAME]
 *   the config file       AWS_CONFIG_FILE, else ~/.aws/config: section
 *                         [profile NAME] ([default] for the default)
 * Keys aws_access_key_id, aws_secret_access_key, aws_session_token (the
 * credentials file first, then the config file), region and endpoint_url
 * (the config file; the credentials file's too).  They fill only what the
 * environment left unset (rmt_s3_load, below), the credentials only when
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

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONF_MAX (1 << 20)
#define KEY_ID_MAX 128
#define SECRET_MAX 256
#define TOKEN_MAX 8192

/* A setting's text: at most max bytes, no control character (a header
 * line or a user name must stay one). */
static int text_ok(const char *s, size_t max) {
    size_t len = strlen(s);
    if (!len || len > max)
        return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return 0;
    return 1;
}

/* REGION: 1..63 of [a-z0-9-] (it is part of a host name). */
static int region_ok(const char *s) {
    size_t len = strlen(s);
    return len && len < 64 &&
           strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == len;
}

/* An endpoint URL: http(s)://HOST[:PORT][/], no user info, path or
 * query; kept without its trailing '/'.  0 or -1 with msg. */
static int set_endpoint(struct rmt_s3 *c, const char *v, const char *from,
                        char *msg, size_t n) {
    CURLU *u = curl_url();
    char *scheme = NULL, *user = NULL, *path = NULL, *query = NULL;
    int r = -1;
    if (u && curl_url_set(u, CURLUPART_URL, v, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
        (!strcmp(scheme, "http") || !strcmp(scheme, "https")) &&
        curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_NO_USER &&
        curl_url_get(u, CURLUPART_QUERY, &query, 0) == CURLUE_NO_QUERY &&
        curl_url_get(u, CURLUPART_PATH, &path, 0) == CURLUE_OK &&
        strspn(path, "/") == strlen(path) && strlen(v) < 512) {
        free(c->endpoint);
        size_t len = strlen(v);
        while (len && v[len - 1] == '/')
            len--;
        c->endpoint = strndup(v, len);
        r = c->endpoint ? 0 : -1;
        if (r)
            snprintf(msg, n, "out of memory");
    } else {
        snprintf(msg, n,
                 "%s is not an endpoint URL (http(s)://HOST[:PORT], no path, "
                 "user info or query)",
                 from);
    }
    curl_free(scheme);
    curl_free(user);
    curl_free(path);
    curl_free(query);
    curl_url_cleanup(u);
    return r;
}

/* One setting (aws_access_key_id, aws_secret_access_key,
 * aws_session_token, region, endpoint_url; others ignored) from from (a
 * variable's or file's name for msg).  0 or -1 with msg. */
static int rmt_s3_set(struct rmt_s3 *c, const char *what, const char *v,
                      const char *from, char *msg, size_t n) {
    char **slot = !strcmp(what, "aws_access_key_id")       ? &c->key
                  : !strcmp(what, "aws_secret_access_key") ? &c->secret
                  : !strcmp(what, "aws_session_token")     ? &c->token
                                                           : NULL;
    size_t max = slot == &c->key      ? KEY_ID_MAX
                 : slot == &c->secret ? SECRET_MAX
                                      : TOKEN_MAX;
    if (!strcmp(what, "endpoint_url"))
        return set_endpoint(c, v, from, msg, n);
    if (!strcmp(what, "region")) {
        if (!region_ok(v)) {
            snprintf(msg, n, "%s is not a region name ([a-z0-9-], 1..63)",
                     from);
            return -1;
        }
        snprintf(c->region, sizeof c->region, "%s", v);
        return 0;
    }
    if (!slot)
        return 0;
    if (!text_ok(v, max) || (slot == &c->key && strchr(v, ':'))) {
        snprintf(
            msg, n,
            "%s is not a valid credential (empty, too long, or a control character)",
            from);
        return -1;
    }
    free(*slot);
    if (!(*slot = strdup(v))) {
        snprintf(msg, n, "out of memory");
        return -1;
    }
    return 0;
}

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

/* The shared files' profile: fills what c lacks; the credentials only if
 * keys.  0 or -1 with msg. */
static int rmt_s3_profile(struct rmt_s3 *c, int keys, char *msg, size_t n) {
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

/* The environment's settings, each set only if the environment has it. */
static int from_env(struct rmt_s3 *c, char *msg, size_t n) {
    static const char *const vars[][2] = {
        {"AWS_ACCESS_KEY_ID", "aws_access_key_id"},
        {"AWS_SECRET_ACCESS_KEY", "aws_secret_access_key"},
        {"AWS_SESSION_TOKEN", "aws_session_token"},
        {"AWS_REGION", "region"},
        {"AWS_ENDPOINT_URL_S3", "endpoint_url"},
    };
    static const char *const fallback[][2] = {
        {"AWS_DEFAULT_REGION", "region"},
        {"AWS_ENDPOINT_URL", "endpoint_url"},
    };
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i][0]);
        if (v && *v && rmt_s3_set(c, vars[i][1], v, vars[i][0], msg, n) != 0)
            return -1;
    }
    for (size_t i = 0; i < sizeof fallback / sizeof *fallback; i++) {
        const char *v = getenv(fallback[i][0]);
        int have = i == 0 ? c->region[0] != 0 : c->endpoint != NULL;
        if (!have && v && *v &&
            rmt_s3_set(c, fallback[i][1], v, fallback[i][0], msg, n) != 0)
            return -1;
    }
    return 0;
}

int rmt_s3_load(struct rmt_s3 *c, enum rmt_s3_style path_style, char *msg,
                size_t n) {
    *c = (struct rmt_s3){.path_style = path_style};
    /* The environment first; the profile fills only what it left unset,
     * and its keys only when the environment has none (a key from one
     * place and a secret from another would never sign right). */
    int env_key = getenv("AWS_ACCESS_KEY_ID") && *getenv("AWS_ACCESS_KEY_ID");
    int env_secret =
        getenv("AWS_SECRET_ACCESS_KEY") && *getenv("AWS_SECRET_ACCESS_KEY");
    if (env_key != env_secret) {
        snprintf(msg, n, "%s is set without %s",
                 env_key ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
                 env_key ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
        return -1;
    }
    if (from_env(c, msg, n) != 0 || rmt_s3_profile(c, !env_key, msg, n) != 0)
        return -1;
    if (!!c->key != !!c->secret) {
        snprintf(msg, n, "the profile has %s without %s",
                 c->key ? "aws_access_key_id" : "aws_secret_access_key",
                 c->key ? "aws_secret_access_key" : "aws_access_key_id");
        return -1;
    }
    if (!c->key && c->token) { /* a token alone signs nothing */
        free(c->token);
        c->token = NULL;
    }
    if (!c->region[0])
        snprintf(c->region, sizeof c->region, "us-east-1");
    snprintf(c->sigv4, sizeof c->sigv4, "aws:amz:%s:s3", c->region);
    return 0;
}
