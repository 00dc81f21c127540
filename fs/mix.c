/*
 * mix.c - a model mixed from several files (-o mix=RECIPE, issue 24).
 *
 * A recipe is a text file of rules, one a line, `REGEX SOURCE`: REGEX a
 * POSIX extended regular expression that must match a whole tensor name
 * (it cannot hold blanks: the first run of blanks ends it), SOURCE the
 * GGUF the matching tensors come from (a plain file or the first shard of
 * a set; relative to the recipe's directory).  Blank lines and lines
 * starting with `#` are skipped.  For each tensor of the base the LAST
 * matching rule wins; a tensor no rule matches is the base's own.
 *
 * The sources are opened read-only once, at mount, and appended to the
 * model's files (fs->shards[fs->n_shards .. fs->n_files)); fs->picks[g]
 * then says which file and which of its tensors base tensor g is.  Every
 * reader of a tensor asks gfs_tensor_ctx (tree.c), which answers with the
 * pick: tensors/, the views, the hashes and the live view (whose header
 * liveview.c plans anew with the sources' types) all show the mix without
 * knowing of it.  The rules a pick must meet (the name found in the
 * source, the same shape) are checked here, once, at mount: a tensor that
 * fails them refuses the mount with one line naming the tensor, both
 * files and both shapes.
 *
 * Bounds: the recipe is read whole up to GFS_MIX_MAX_BYTES, at most
 * GFS_MIX_MAX_RULES rules, GFS_MIX_MAX_SOURCES distinct sources.  A REGEX
 * is compiled only if what it may cost is known to be small (re_cost):
 * glibc's regcomp copies a repeated part once per repetition ({m,n}, and
 * nested repetitions multiply), and the closures of optional copies grow
 * as the square of their count: `(.{1,255}){1,255}{1,255}` took more
 * than 512 MiB.  A REGEX of more than GFS_MIX_MAX_REGEX bytes, nested
 * deeper than GFS_MIX_MAX_NEST groups, of more than GFS_MIX_MAX_COST
 * positions once its repetitions are counted out, or whose square brings
 * the recipe's sum of squares past GFS_MIX_MAX_COST2, is refused with
 * RECIPE:LINE before regcomp sees it.
 */
#include "ggufs.h"
#include "live/live.h"
#include "model.h"
#include "source/source.h"
#include "node/node.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GFS_MIX_MAX_BYTES (1 << 20)
#define GFS_MIX_MAX_RULES 4096
#define GFS_MIX_MAX_SOURCES 256
#define GFS_MIX_MAX_REGEX 1024
#define GFS_MIX_MAX_NEST 32
/* Positions of one REGEX, repetitions counted out (a name's usual rule,
 * `blk\.[0-9]+\.ffn_.*`, is about 20), and the recipe's sum of their
 * squares (measured: about 18 bytes of regcomp's a square position at
 * worst, so 4 Mi is about 75 MB; 4096 rules of 32 positions fit). */
#define GFS_MIX_MAX_COST 1024
#define GFS_MIX_MAX_COST2 ((uint64_t)1 << 22)

struct rule {
    regex_t re;
    int src;  /* index in struct recipe's sources */
    int line; /* for messages */
    int64_t used;
};

struct recipe {
    struct rule *rules;
    int n_rules;
    char *src[GFS_MIX_MAX_SOURCES]; /* resolved paths */
    int first[GFS_MIX_MAX_SOURCES]; /* its first file in fs->shards */
    int count[GFS_MIX_MAX_SOURCES]; /* and how many */
    int n_src;
    uint64_t cost2; /* the rules' REGEX costs' squares summed (re_cost) */
};

static void recipe_free(struct recipe *r) {
    for (int i = 0; i < r->n_rules; i++)
        regfree(&r->rules[i].re);
    free(r->rules);
    for (int i = 0; i < r->n_src; i++)
        free(r->src[i]);
}

/* The recipe's bytes, NUL-terminated, at most GFS_MIX_MAX_BYTES; NULL
 * with msg. */
static char *read_recipe(const char *path, char *msg, size_t n) {
    char *buf = NULL;
    struct stat sb;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        snprintf(msg, n, "%s: cannot open the recipe: %s", path,
                 strerror(errno));
        return NULL;
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(msg, n, "%s: the recipe is not a regular file", path);
        goto out;
    }
    if (sb.st_size > GFS_MIX_MAX_BYTES) {
        snprintf(msg, n, "%s: the recipe is over %d bytes", path,
                 GFS_MIX_MAX_BYTES);
        goto out;
    }
    if (!(buf = malloc((size_t)sb.st_size + 1))) {
        snprintf(msg, n, "%s: out of memory", path);
        goto out;
    }
    size_t got = 0;
    while (got < (size_t)sb.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)sb.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            snprintf(msg, n, "%s: cannot read the recipe: %s", path,
                     r < 0 ? strerror(errno) : "it shrank");
            free(buf);
            buf = NULL;
            goto out;
        }
        got += (size_t)r;
    }
    buf[got] = '\0';
    if (memchr(buf, '\0', got)) {
        snprintf(msg, n, "%s: the recipe holds a NUL byte", path);
        free(buf);
        buf = NULL;
    }
out:
    close(fd);
    return buf;
}

static int resolve(const char *dir, const char *s, char *path,
                   const char *where, char *msg, size_t n);

/* SOURCE of a rule as a path: absolute, or relative to the recipe's
 * directory dir.  The same file named twice is one source.  Its index, or
 * -1 with msg. */
static int add_source(struct recipe *r, const char *dir, const char *s,
                      const char *where, char *msg, size_t n) {
    char path[PATH_MAX];
    char *real = NULL;
    if (gfs_remote_is(s)) /* a URL: itself */
        real = strdup(s);
    else if (resolve(dir, s, path, where, msg, n) != 0)
        return -1;
    else
        real = realpath(path, NULL);
    if (!real) {
        snprintf(msg, n, "%s: %s: %s", where, gfs_remote_is(s) ? s : path,
                 strerror(errno));
        return -1;
    }
    for (int i = 0; i < r->n_src; i++)
        if (strcmp(r->src[i], real) == 0) {
            free(real);
            return i;
        }
    if (r->n_src == GFS_MIX_MAX_SOURCES) {
        snprintf(msg, n, "%s: more than %d sources", where,
                 GFS_MIX_MAX_SOURCES);
        free(real);
        return -1;
    }
    r->src[r->n_src] = real;
    return r->n_src++;
}

/* A local SOURCE's path into path: absolute, or relative to dir. */
static int resolve(const char *dir, const char *s, char *path,
                   const char *where, char *msg, size_t n) {
    int len = s[0] == '/' ? snprintf(path, PATH_MAX, "%s", s)
                          : snprintf(path, PATH_MAX, "%s/%s", dir, s);
    if (len < 0 || len >= PATH_MAX) {
        snprintf(msg, n, "%s: the source's path is too long", where);
        return -1;
    }
    return 0;
}

/* ---- what a REGEX may cost regcomp ------------------------------------ */

/* Saturating arithmetic of costs: past the bound they only need to stay
 * past it. */
#define COST_CAP ((uint64_t)1 << 40)
static uint64_t cost_mul(uint64_t a, uint64_t b) {
    return b && a > COST_CAP / b ? COST_CAP : a * b;
}

/* After an atom at re[i] ('{' of an interval): its largest count (m for
 * {m}, n for {m,n}, m + 1 for {m,}); *i past the '}'.  0 if re[i] does
 * not start a well-formed interval (regcomp judges it then). */
static uint64_t interval(const char *re, size_t *i) {
    size_t j = *i + 1;
    uint64_t m = 0, k = 0;
    int digits = 0, comma = 0;
    for (; re[j] && re[j] != '}'; j++) {
        if (re[j] == ',' && !comma) {
            comma = 1, k = m, m = 0, digits = 0;
            continue;
        }
        if (re[j] < '0' || re[j] > '9' || m > 100000)
            return 0;
        m = m * 10 + (uint64_t)(re[j] - '0'), digits = 1;
    }
    if (!re[j] || (!digits && !comma))
        return 0;
    *i = j;
    return !comma ? m : digits ? (m > k ? m : k) : k + 1;
}

/* The end of the bracket expression at re[i] ('['): the index of its ']'
 * (a ']' first, after '^', is a member; "[:alpha:]" and the like are
 * skipped whole), or the string's end. */
static size_t bracket_end(const char *re, size_t i) {
    size_t j = i + 1;
    if (re[j] == '^')
        j++;
    if (re[j] == ']')
        j++;
    for (; re[j] && re[j] != ']'; j++)
        if (re[j] == '[' &&
            (re[j + 1] == ':' || re[j + 1] == '.' || re[j + 1] == '=')) {
            const char *close = strchr(re + j + 2, re[j + 1]);
            while (close && close[1] != ']')
                close = strchr(close + 1, re[j + 1]);
            if (!close)
                return strlen(re);
            j = (size_t)(close + 1 - re);
        }
    return re[j] ? j : strlen(re);
}

/* The positions REGEX re may make in regcomp, its repetitions counted
 * out (an atom repeated {m,n} costs n times itself, '*', '+' and '?'
 * twice); -1 when its groups nest deeper than GFS_MIX_MAX_NEST. */
static int64_t re_cost(const char *re) {
    struct {
        uint64_t alts, cur;
    } st[GFS_MIX_MAX_NEST + 1] = {{0, 0}};
    int depth = 0;
    uint64_t last = 0; /* the cost of the atom just ended */
    for (size_t i = 0; re[i]; i++) {
        uint64_t k;
        switch (re[i]) {
        case '(':
            if (++depth > GFS_MIX_MAX_NEST)
                return -1;
            st[depth].alts = st[depth].cur = 0;
            last = 0;
            continue;
        case ')':
            if (depth == 0) {
                last = 1;
                break;
            }
            last = st[depth].alts + st[depth].cur;
            depth--;
            st[depth].cur += last;
            continue;
        case '|':
            st[depth].alts += st[depth].cur;
            st[depth].cur = last = 0;
            continue;
        case '*':
        case '+':
        case '?':
            st[depth].cur += last, last *= 2;
            continue;
        case '{':
            if ((k = interval(re, &i)) != 0 || re[i] == '}') {
                uint64_t now = cost_mul(last, k ? k : 1);
                st[depth].cur = st[depth].cur - last + now;
                last = now;
                continue;
            }
            last = 1;
            break;
        case '[': {
            size_t e = bracket_end(re, i); /* its ']', or the string's end */
            i = e - (re[e] ? 0 : 1);
            last = 1;
            break;
        }
        case '\\':
            i += re[i + 1] ? 1 : 0;
            last = 1;
            break;
        default:
            last = 1;
        }
        st[depth].cur += last;
        if (st[depth].cur > COST_CAP)
            st[depth].cur = COST_CAP;
    }
    while (depth > 0) { /* unbalanced: regcomp refuses it */
        st[depth - 1].cur += st[depth].alts + st[depth].cur;
        depth--;
    }
    uint64_t total = st[0].alts + st[0].cur;
    return total > COST_CAP ? (int64_t)COST_CAP : (int64_t)total;
}

/* Whether REGEX re of the rule at where may be compiled: 0, or -1 with
 * msg (one line naming where and the bound).  *sum2: the recipe's sum of
 * squares so far. */
static int re_bounded(const char *re, const char *where, uint64_t *sum2,
                      char *msg, size_t n) {
    int over = strlen(re) > GFS_MIX_MAX_REGEX;
    int64_t c = over ? 0 : re_cost(re);
    if (over)
        snprintf(msg, n, "%s: the REGEX is over %d bytes", where,
                 GFS_MIX_MAX_REGEX);
    else if (c < 0)
        snprintf(msg, n, "%s: the REGEX nests groups deeper than %d", where,
                 GFS_MIX_MAX_NEST);
    else if (c > GFS_MIX_MAX_COST)
        snprintf(msg, n,
                 "%s: the REGEX repeats too much (%" PRId64 "%s positions "
                 "once its repetitions are counted out, at most %d)",
                 where, c, c >= (int64_t)COST_CAP ? "+" : "", GFS_MIX_MAX_COST);
    else if ((*sum2 += (uint64_t)(c * c)) > GFS_MIX_MAX_COST2)
        snprintf(msg, n,
                 "%s: the recipe's REGEXes together repeat too much (their "
                 "positions' squares sum past %" PRIu64 ")",
                 where, GFS_MIX_MAX_COST2);
    else
        return 0;
    return -1;
}

/* One line of the recipe (NUL-terminated, no newline) into r; 0, or -1
 * with msg. */
static int parse_line(struct recipe *r, const char *file, const char *dir,
                      char *line, int no, char *msg, size_t n) {
    char where[PATH_MAX + 32];
    snprintf(where, sizeof where, "%s:%d", file, no);
    char *p = line + strspn(line, " \t");
    char *end = p + strlen(p);
    while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
        *--end = '\0';
    if (!*p || *p == '#')
        return 0;
    char *re = p;
    p += strcspn(p, " \t");
    if (!*p) {
        snprintf(msg, n, "%s: a rule is 'REGEX SOURCE': no SOURCE", where);
        return -1;
    }
    *p++ = '\0';
    p += strspn(p, " \t");
    if (r->n_rules == GFS_MIX_MAX_RULES) {
        snprintf(msg, n, "%s: more than %d rules", where, GFS_MIX_MAX_RULES);
        return -1;
    }
    struct rule *ru = &r->rules[r->n_rules];
    if (re_bounded(re, where, &r->cost2, msg, n) != 0 ||
        (ru->src = add_source(r, dir, p, where, msg, n)) < 0)
        return -1;
    /* A whole name: anchored at both ends. */
    size_t rl = strlen(re);
    char *anchored = malloc(rl + 5);
    if (!anchored) {
        snprintf(msg, n, "%s: out of memory", where);
        return -1;
    }
    snprintf(anchored, rl + 5, "^(%s)$", re);
    int rc = regcomp(&ru->re, anchored, REG_EXTENDED | REG_NOSUB);
    free(anchored);
    if (rc != 0) {
        char why[128];
        regerror(rc, &ru->re, why, sizeof why);
        snprintf(msg, n, "%s: %s: %s", where, re, why);
        return -1;
    }
    ru->line = no;
    ru->used = 0;
    r->n_rules++;
    return 0;
}

static int parse_recipe(struct recipe *r, const char *file, char *text,
                        char *msg, size_t n) {
    char *real = realpath(file, NULL);
    char *slash = real ? strrchr(real, '/') : NULL;
    int rc = -1;
    if (!slash) {
        snprintf(msg, n, "%s: %s", file, strerror(real ? EINVAL : errno));
        goto out;
    }
    *(slash == real ? slash + 1 : slash) = '\0';
    if (!(r->rules = calloc(GFS_MIX_MAX_RULES, sizeof *r->rules))) {
        snprintf(msg, n, "%s: out of memory", file);
        goto out;
    }
    int no = 0;
    for (char *line = text, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (parse_line(r, file, real, line, ++no, msg, n) != 0)
            goto out;
    }
    rc = 0;
out:
    free(real);
    return rc;
}

/* A local source's files [first, first + n) of fs->shards let their
 * descriptors go; the model's cache opens them on demand (source/fds.c:
 * by their absolute paths, checked to be the files validated here), so
 * many sources cost no descriptors.  A remote source has none.  0 or
 * ENOMEM. */
static int track(struct gfs *fs, int first, int n) {
    if (gfs_remote_file(fs, first))
        return 0;
    if (!fs->fds && gfs_fds_init(fs, gfs_fds_cap()) != 0)
        return ENOMEM;
    for (int f = first; f < first + n; f++) {
        gguf_release_fd(fs->shards[f]);
        int err = gfs_fds_add(fs, f, AT_FDCWD, gguf_path(fs->shards[f]));
        if (err)
            return err;
    }
    return 0;
}

/* Opens every source (a set: its shards) and appends its files to
 * fs->shards; 0, or -1 with msg. */
static int open_sources(struct gfs *fs, struct recipe *r, unsigned flags,
                        const struct gfs_remote_opts *ro, char *msg, size_t n) {
    int total = fs->n_files;
    for (int s = 0; s < r->n_src; s++) {
        gguf_ctx **v = NULL;
        int nv = 0;
        char bad[PATH_MAX + 64];
        struct gguf_error err = {0};
        unsigned fl = flags & GGUF_OPEN_ALLOW_NESTED;
        if (gfs_remote_is(r->src[s])
                ? gfs_remote_open_more(fs, r->src[s], ro, fl, &v, &nv, bad,
                                       sizeof bad, &err) != 0
                : gguf_open_set(r->src[s], NULL, fl, &v, &nv, bad, sizeof bad,
                                &err) != GGUF_OK) {
            snprintf(msg, n, "%s: %s", bad, err.msg);
            return -1;
        }
        gguf_ctx **grown =
            realloc(fs->shards, (size_t)(total + nv) * sizeof *grown);
        if (!grown) {
            gguf_close_set(v, nv);
            snprintf(msg, n, "%s: out of memory", r->src[s]);
            return -1;
        }
        fs->shards = grown;
        memcpy(fs->shards + total, v, (size_t)nv * sizeof *v);
        free(v);
        fs->n_files = total + nv;
        if (track(fs, total, nv) != 0) {
            snprintf(msg, n, "%s: out of memory", r->src[s]);
            return -1;
        }
        r->first[s] = total;
        r->count[s] = nv;
        total += nv;
        fs->n_files = total;
    }
    return 0;
}

/* A tensor's shape as "[a,b,c]" into out. */
static void shape_str(const gguf_ctx *c, int64_t i, char *out, size_t n) {
    size_t at = 0;
    uint32_t nd = gguf_tensor_n_dims(c, i);
    const int64_t *ne = gguf_tensor_ne(c, i);
    out[0] = '\0';
    for (uint32_t d = 0; d < nd && at < n; d++)
        at += (size_t)snprintf(out + at, n - at, "%s%" PRId64, d ? "," : "",
                               ne[d]);
    if (at < n)
        snprintf(out + at, n - at, "%s", nd ? "" : "scalar");
}

static int same_shape(const gguf_ctx *a, int64_t i, const gguf_ctx *b,
                      int64_t j) {
    uint32_t nd = gguf_tensor_n_dims(a, i);
    return nd == gguf_tensor_n_dims(b, j) &&
           memcmp(gguf_tensor_ne(a, i), gguf_tensor_ne(b, j),
                  nd * sizeof(int64_t)) == 0;
}

/* A base tensor (named name; *pk: where the base holds it) taken from
 * source s: *pk the source's, or -1 with msg naming the tensor, both
 * files and both shapes. */
static int pick_one(struct gfs *fs, struct gfs_pick *pk, const struct recipe *r,
                    int s, const char *name, size_t len, char *msg, size_t n) {
    int64_t bi = pk->i;
    const gguf_ctx *bc = fs->shards[pk->file];
    for (int f = r->first[s]; f < r->first[s] + r->count[s]; f++) {
        int64_t j = gguf_find_tensor(fs->shards[f], name, len);
        if (j < 0)
            continue;
        if (!same_shape(bc, bi, fs->shards[f], j)) {
            char s1[160], s2[160];
            shape_str(bc, bi, s1, sizeof s1);
            shape_str(fs->shards[f], j, s2, sizeof s2);
            snprintf(msg, n,
                     "tensor %s: %s has shape [%s] but the mix's source %s "
                     "has [%s]",
                     name, gguf_path(bc), s1, gguf_path(fs->shards[f]), s2);
            return -1;
        }
        pk->file = f;
        pk->i = j;
        return 0;
    }
    snprintf(
        msg, n,
        "tensor %s: the mix's source %s has no such tensor (the base is %s)",
        name, r->src[s], gguf_path(bc));
    return -1;
}

/* Each base tensor's pick: the last rule matching its whole name. */
static int pick_all(struct gfs *fs, struct recipe *r, char *msg, size_t n) {
    int64_t nt = fs->t_first[fs->n_shards];
    /* fs->picks stays NULL until done: gfs_tensor_ctx answers with the
     * base's tensors meanwhile. */
    struct gfs_pick *pk = calloc(nt ? (size_t)nt : 1, sizeof *pk);
    if (!pk) {
        snprintf(msg, n, "out of memory");
        return -1;
    }
    char name[4096];
    for (int64_t g = 0; g < nt; g++) {
        int64_t i;
        int s;
        gguf_ctx *c = gfs_tensor_ctx(fs, g, &i, &s);
        size_t len;
        const char *tn = gguf_tensor_name(c, i, &len);
        pk[g].file = s;
        pk[g].i = i;
        if (len >= sizeof name || memchr(tn, '\0', len))
            continue; /* no rule can name it */
        memcpy(name, tn, len);
        name[len] = '\0';
        for (int k = r->n_rules - 1; k >= 0; k--) {
            if (regexec(&r->rules[k].re, name, 0, NULL, 0) != 0)
                continue;
            r->rules[k].used++;
            if (pick_one(fs, &pk[g], r, r->rules[k].src, name, len, msg, n) !=
                0) {
                free(pk);
                return -1;
            }
            break;
        }
    }
    fs->picks = pk;
    return 0;
}

int gfs_mix_open(struct gfs *fs, const char *recipe, unsigned flags,
                 const struct gfs_remote_opts *ro,
                 void (*warn)(void *u, const char *line), void *u, char *msg,
                 size_t n) {
    struct recipe r = {0};
    int rc = -1;
    char *text = read_recipe(recipe, msg, n);
    if (!text)
        return -1;
    if (parse_recipe(&r, recipe, text, msg, n) != 0 ||
        open_sources(fs, &r, flags, ro, msg, n) != 0)
        goto out;
    /* Numbering of the base's tensors first: picks are by it. */
    if (!fs->t_first) {
        struct gguf_error err = {0};
        if (gfs_view_number(fs, &err) != 0) {
            snprintf(msg, n, "%s", err.msg);
            goto out;
        }
    }
    if (pick_all(fs, &r, msg, n) != 0)
        goto out;
    for (int k = 0; k < r.n_rules; k++)
        if (!r.rules[k].used && warn) {
            char line[PATH_MAX + 128];
            snprintf(line, sizeof line,
                     "%s:%d: warning: the rule matches no tensor of the base",
                     recipe, r.rules[k].line);
            warn(u, line);
        }
    rc = 0;
out:
    if (rc != 0) {
        free(fs->picks);
        fs->picks = NULL;
    }
    recipe_free(&r);
    free(text);
    return rc;
}

void gfs_mix_free(struct gfs *fs) {
    free(fs->picks);
    fs->picks = NULL;
}
