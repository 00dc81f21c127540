/*
 * fuzz_journal.c - libFuzzer target: any bytes as a commit journal
 * (PATH.ggufs-journal, layout in gguf/journal.c), through the decoder and
 * recovery's trust and matching checks (gguf/recover.c):
 *
 *   gguf_jnl_decode: a refusal carries a one-line message and its status;
 *   a complete journal decodes to a consistent plan (lengths add up to the
 *   size, op and k agree, the header pointers lie inside the bytes) and
 *   gguf_jnl_encode of it gives back exactly the input.
 *   gguf_jnl_plausible (which runs gguf_check_header on both headers):
 *   never true for a model of another inode; when true for the recorded
 *   one, both headers are valid GGUF headers.
 *   gguf_jnl_matches: the file in its state before the commit (old size,
 *   old bytes) and after it (end size, new header) both match, the first
 *   as not inserted, the second as inserted for an insert.
 *   gguf_sidecar_trusted, on a stat made of the first 12 input bytes:
 *   true exactly for a regular file with one link, owned by the running
 *   uid or the model's owner, mode 0600 for a journal; a refusal says why
 *   on one line.
 *
 * Each input is tried as is and with its trailer made valid, so that the
 * fuzzer's mutations of the body reach the checks past the checksum.
 *
 * Any violated property aborts with a message on stderr, which libFuzzer
 * (and tests/fuzz/replay.c) report as a crash.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

__attribute__((noreturn, format(printf, 1, 2))) static void bug(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "fuzz_journal: property violated: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

static void one_line(const char *s, size_t cap, const char *what)
{
    size_t n = strnlen(s, cap);
    if (n == cap)
        bug("%s: message not NUL-terminated", what);
    if (n == 0)
        bug("%s: empty message", what);
    if (memchr(s, '\n', n))
        bug("%s: message is more than one line: %s", what, s);
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

/* The trust rule on a stat made of p[0, 12): mode, uid, nlink. */
static void check_trust(const uint8_t *p)
{
    struct stat sb = {0}, model = {0};
    char why[400];
    sb.st_mode = rd32(p) & (S_IFMT | 07777);
    sb.st_uid = rd32(p + 4) % 4;       /* 0..3 */
    sb.st_nlink = (nlink_t)(rd32(p + 8) % 3);
    model.st_uid = (rd32(p + 8) >> 8) % 4;
    uid_t euid = (rd32(p + 8) >> 16) % 4;
    for (int journal = 0; journal < 2; journal++) {
        bool want = S_ISREG(sb.st_mode) && sb.st_nlink == 1 &&
                    (sb.st_uid == euid || sb.st_uid == model.st_uid) &&
                    (!journal || (sb.st_mode & 07777) == 0600);
        why[0] = '\0';
        bool got = gguf_sidecar_trusted(&sb, &model, euid, journal, why,
                                        sizeof why);
        if (got != want)
            bug("gguf_sidecar_trusted(mode %o, uid %u, nlink %u; model uid %u, "
                "euid %u, journal %d) is %d, want %d",
                (unsigned)sb.st_mode, (unsigned)sb.st_uid,
                (unsigned)sb.st_nlink, (unsigned)model.st_uid, (unsigned)euid,
                journal, got, want);
        if (!got)
            one_line(why, sizeof why, "gguf_sidecar_trusted");
    }
}

/* The file's first n bytes in the state before the commit: the old header
 * bytes, zeros past them. */
static uint8_t *before_bytes(const struct gguf_jnl *j, uint64_t n)
{
    uint8_t *b = calloc(1, n ? (size_t)n : 1);
    if (!b)
        abort();
    uint64_t m = n < j->old_len ? n : j->old_len;
    if (m)
        memcpy(b, j->old_hdr, (size_t)m);
    return b;
}

static void check_matches(const struct gguf_jnl *j)
{
    bool inserted = true;
    /* Before: the old size, the old bytes. */
    uint64_t size = j->orig_size;
    uint64_t n = size < j->new_len ? size : j->new_len;
    uint8_t *b = before_bytes(j, n);
    if (!gguf_jnl_matches(j, size, b, n, &inserted) || inserted)
        bug("the file before the commit (%llu bytes) does not match its own "
            "journal as not inserted",
            (unsigned long long)size);
    free(b);
    /* After: the end size, the new header. */
    size = j->orig_size + j->k;
    if (size < j->new_len)
        size = j->new_len;
    n = size < j->new_len ? size : j->new_len;
    if (!gguf_jnl_matches(j, size, j->new_hdr, n, &inserted))
        bug("the file after the commit (%llu bytes) does not match its journal",
            (unsigned long long)size);
    if (inserted != (j->op == GGUF_JNL_INSERT))
        bug("the file after an %s commit is taken as %sinserted",
            j->op == GGUF_JNL_INSERT ? "insert" : "in-place",
            inserted ? "" : "not ");
}

static void check_plausible(const struct gguf_jnl *j)
{
    struct stat model = {0};
    char why[400];
    model.st_dev = (dev_t)j->dev;
    model.st_ino = (ino_t)(j->ino + 1);
    if ((uint64_t)model.st_dev == j->dev && (uint64_t)model.st_ino != j->ino) {
        why[0] = '\0';
        if (gguf_jnl_plausible(j, &model, why, sizeof why))
            bug("a journal for inode %llu is plausible for inode %llu",
                (unsigned long long)j->ino, (unsigned long long)model.st_ino);
        one_line(why, sizeof why, "gguf_jnl_plausible (other inode)");
    }
    model.st_ino = (ino_t)j->ino;
    if ((uint64_t)model.st_ino != j->ino || (uint64_t)model.st_dev != j->dev)
        return; /* not representable in this stat */
    why[0] = '\0';
    if (gguf_jnl_plausible(j, &model, why, sizeof why)) {
        struct gguf_error e = {0};
        uint64_t end = j->orig_size + j->k;
        if (gguf_check_header(j->new_hdr, j->new_len,
                              end > j->new_len ? end : j->new_len,
                              GGUF_OPEN_ALLOW_NESTED, &e) != GGUF_OK)
            bug("plausible journal with an invalid new header: %s", e.msg);
    } else {
        one_line(why, sizeof why, "gguf_jnl_plausible");
    }
}

static void check_journal(const uint8_t *data, size_t size)
{
    struct gguf_jnl j;
    struct gguf_error err = {0};
    bool complete = false;

    enum gguf_status st = gguf_jnl_decode(data, size, &j, &complete, &err);
    if (st != GGUF_OK) {
        one_line(err.msg, sizeof err.msg, "gguf_jnl_decode");
        if (err.code != st)
            bug("gguf_jnl_decode returned %s but err.code is %s",
                gguf_status_name(st), gguf_status_name(err.code));
        if (!complete)
            bug("gguf_jnl_decode refused an incomplete journal: %s", err.msg);
        return;
    }
    if (!complete)
        return;
    if ((uint64_t)72 + j.old_len + j.new_len + GGUF_JNL_TRAILER != size)
        bug("lengths %llu + %llu do not add up to %zu",
            (unsigned long long)j.old_len, (unsigned long long)j.new_len, size);
    if (j.old_hdr != data + 72 || j.new_hdr != data + 72 + j.old_len)
        bug("header pointers outside the journal");
    if (j.new_len == 0 ||
        (j.op == GGUF_JNL_INPLACE && (j.k != 0 || j.old_len != j.new_len)) ||
        (j.op == GGUF_JNL_INSERT && (j.k == 0 || j.new_len != j.old_len + j.k)) ||
        (j.op != GGUF_JNL_INPLACE && j.op != GGUF_JNL_INSERT))
        bug("inconsistent plan accepted: op %u k %llu %llu -> %llu", j.op,
            (unsigned long long)j.k, (unsigned long long)j.old_len,
            (unsigned long long)j.new_len);

    struct gguf_buf out = {0};
    if (gguf_jnl_encode(&j, &out, &err) != GGUF_OK)
        bug("gguf_jnl_encode of a decoded journal failed: %s", err.msg);
    if (out.len != size || memcmp(out.p, data, size) != 0)
        bug("gguf_jnl_encode does not give back the journal it decoded");
    gguf_buf_free(&out);

    check_matches(&j);
    check_plausible(&j);
}

/* The input as is, then (so that mutations of the body get past the
 * checksum to the plan and header checks) with its trailer made valid:
 * the last 16 bytes replaced by the FNV-1a 64 of the rest and the end
 * mark, as journal.c writes them. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size >= 12)
        check_trust(data);
    check_journal(data, size);
    if (size < 72 + GGUF_JNL_TRAILER)
        return 0;
    uint8_t *p = malloc(size);
    if (!p)
        abort();
    memcpy(p, data, size);
    size_t body = size - GGUF_JNL_TRAILER;
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < body; i++) {
        h ^= p[i];
        h *= UINT64_C(0x100000001b3);
    }
    for (int i = 0; i < 8; i++)
        p[body + i] = (uint8_t)(h >> (8 * i));
    memcpy(p + body + 8, "GGUFSEND", 8);
    check_journal(p, size);
    free(p);
    return 0;
}
