/*
 * journal.c - the commit journal: its byte layout (encode, decode), its
 * file (written trailer last, read back, removed), and carrying out or
 * undoing the plan it records (shared by gguf_commit and gguf_recover).
 * When each of these happens is commit.c's policy (its crash-safety rules)
 * and recover.c's.
 *
 * Journal PATH.ggufs-journal, little-endian:
 *
 *   offset        size     field
 *   0             8        magic "GGUFSJNL"
 *   8             4        journal format version (1)
 *   12            4        op: 1 in place, 2 insert, 3 tensor bytes
 *                          (enum gguf_jnl_op)
 *   16            8        st_dev of the GGUF when the commit began
 *   24            8        st_ino
 *   32            8        file size before the commit
 *   40            8        mtime (ns) before the commit
 *   48            8        k: bytes inserted at offset 0 (0 in place)
 *   56            8        old_len: D, the old data offset
 *   64            8        new_len: D + k, the new data offset
 *   72            old_len  the old header bytes [0, D)
 *   72+old_len    new_len  the new header bytes [0, D + k)
 *   end-16        8        FNV-1a 64 of every byte before it
 *   end-8         8        end mark "GGUFSEND"
 *
 * Op 3 (tensorw.c, a stage applied): k is the offset of the bytes in the
 * file, old_len 0, new_len 16: the "new header" is the record [length,
 * FNV-1a 64 of the bytes], the bytes themselves in JOURNAL.data.
 *
 * The trailer is written by a separate, later write, so a journal cut
 * short at any point has no valid trailer, and a torn one (blocks of the
 * body missing after a power cut) fails the checksum.  A journal is only
 * relied on after it was fsync'ed with its directory; until then the GGUF
 * is untouched, which is why an incomplete journal is simply removed.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define JNL_MAGIC "GGUFSJNL"
#define JNL_END "GGUFSEND"
#define JNL_VERSION 1
#define JNL_FIXED 72

/* ---- journal layout ------------------------------------------------- */

uint64_t gguf_fnv_more(uint64_t h, const uint8_t *p, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

static uint64_t jnl_hash(const uint8_t *p, uint64_t n) {
    return gguf_fnv_more(GGUF_FNV_INIT, p, n);
}

enum gguf_status gguf_jnl_encode(const struct gguf_jnl *j, struct gguf_buf *out,
                                 struct gguf_error *err) {
    uint64_t total = (uint64_t)JNL_FIXED + GGUF_JNL_TRAILER;
    if (j->old_len > SIZE_MAX / 4 || j->new_len > SIZE_MAX / 4)
        return gguf_fail(err, GGUF_E_NOMEM, "header too large for a journal");
    total += j->old_len + j->new_len;
    size_t start = out->len;
    enum gguf_status st = gguf_buf_reserve(out, (size_t)total);
    if (st != GGUF_OK)
        return gguf_fail(err, st, "out of memory for a journal of %llu bytes",
                         (unsigned long long)total);
    uint8_t *p = out->p + start;
    memcpy(p, JNL_MAGIC, 8);
    gguf_wr32(p + 8, JNL_VERSION);
    gguf_wr32(p + 12, j->op);
    gguf_wr64(p + 16, j->dev);
    gguf_wr64(p + 24, j->ino);
    gguf_wr64(p + 32, j->orig_size);
    gguf_wr64(p + 40, (uint64_t)j->orig_mtime_ns);
    gguf_wr64(p + 48, j->k);
    gguf_wr64(p + 56, j->old_len);
    gguf_wr64(p + 64, j->new_len);
    if (j->old_len)
        memcpy(p + JNL_FIXED, j->old_hdr, (size_t)j->old_len);
    if (j->new_len)
        memcpy(p + JNL_FIXED + j->old_len, j->new_hdr, (size_t)j->new_len);
    uint64_t body = total - GGUF_JNL_TRAILER;
    gguf_wr64(p + body, jnl_hash(p, body));
    memcpy(p + body + 8, JNL_END, 8);
    out->len = start + (size_t)total;
    return GGUF_OK;
}

/* A journal without a valid trailer and checksum was never relied on
 * (cut short or torn), so it decodes as incomplete, not as an error; a
 * complete one that makes no sense is an error, never silently dropped. */
enum gguf_status gguf_jnl_decode(const uint8_t *p, uint64_t n,
                                 struct gguf_jnl *j, bool *complete,
                                 struct gguf_error *err) {
    *complete = false;
    memset(j, 0, sizeof *j);
    if (n < (uint64_t)JNL_FIXED + GGUF_JNL_TRAILER ||
        memcmp(p, JNL_MAGIC, 8) != 0)
        return GGUF_OK;
    uint64_t body = n - GGUF_JNL_TRAILER;
    if (memcmp(p + body + 8, JNL_END, 8) != 0 ||
        gguf_rd64(p + body) != jnl_hash(p, body))
        return GGUF_OK;
    *complete = true;

    uint32_t version = gguf_rd32(p + 8);
    if (version != JNL_VERSION)
        return gguf_fail(err, GGUF_E_UNSUPPORTED,
                         "journal format version %u is not %u: written by "
                         "another ggufs version",
                         version, JNL_VERSION);
    j->op = gguf_rd32(p + 12);
    j->dev = gguf_rd64(p + 16);
    j->ino = gguf_rd64(p + 24);
    j->orig_size = gguf_rd64(p + 32);
    j->orig_mtime_ns = (int64_t)gguf_rd64(p + 40);
    j->k = gguf_rd64(p + 48);
    j->old_len = gguf_rd64(p + 56);
    j->new_len = gguf_rd64(p + 64);
    uint64_t room = body - JNL_FIXED;
    if (j->old_len > room || j->new_len != room - j->old_len)
        return gguf_fail(err, GGUF_E_FORMAT,
                         "journal header lengths %llu + %llu do not match its "
                         "size %llu",
                         (unsigned long long)j->old_len,
                         (unsigned long long)j->new_len, (unsigned long long)n);
    bool ok = false;
    if (j->op == GGUF_JNL_INPLACE)
        ok = j->k == 0 && j->old_len == j->new_len;
    else if (j->op == GGUF_JNL_INSERT)
        ok = j->k > 0 && j->new_len - j->old_len == j->k &&
             j->orig_size <= UINT64_MAX - j->k;
    else if (j->op == GGUF_JNL_PATCH) /* record: len, checksum */
        ok = j->old_len == 0 && j->new_len == 16 && j->k <= j->orig_size &&
             gguf_rd64(p + JNL_FIXED) <= j->orig_size - j->k;
    if (!ok || j->new_len == 0)
        return gguf_fail(err, GGUF_E_FORMAT,
                         "journal plan is inconsistent (op %u, k %llu, "
                         "header %llu -> %llu bytes)",
                         j->op, (unsigned long long)j->k,
                         (unsigned long long)j->old_len,
                         (unsigned long long)j->new_len);
    j->old_hdr = p + JNL_FIXED;
    j->new_hdr = p + JNL_FIXED + j->old_len;
    return GGUF_OK;
}

/* ---- the journal file ----------------------------------------------- */

/* Steps (fault points): body, trailer, fsync, directory fsync.  On
 * failure no journal is left behind: the GGUF was not touched yet, so none
 * is needed. */
enum gguf_status gguf_jnl_write(const struct gguf_at *at,
                                const struct gguf_jnl *j, struct gguf_faults *f,
                                struct gguf_error *err) {
    const char *jpath = at->shown;
    enum gguf_status st;
    struct gguf_buf b = {0};
    int jfd = -1;
    bool created = false;

    st = gguf_jnl_encode(j, &b, err);
    if (st != GGUF_OK)
        goto out;
    jfd = openat(at->dfd, at->name,
                 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (jfd < 0) {
        if (errno == EEXIST)
            st = gguf_fail(err, GGUF_E_BUSY,
                           "%s exists: an interrupted commit must be "
                           "recovered first",
                           jpath);
        else
            st = gguf_sys_fail(err, errno, "cannot create %s", jpath);
        goto out;
    }
    created = true;
    /* Exactly 0600 whatever the umask: recovery trusts only journals of
     * that mode (recover.c, gguf_sidecar_distrust). */
    if (fchmod(jfd, 0600) < 0) {
        st = gguf_sys_fail(err, errno, "cannot set the mode of %s", jpath);
        goto out;
    }
    uint64_t body = b.len - GGUF_JNL_TRAILER;
    gguf_fault_point(f, "journal write, body");
    st = gguf_pwrite_full(jfd, b.p, body, 0, "the journal", err);
    if (st != GGUF_OK)
        goto out;
    gguf_fault_point(f, "journal write, trailer");
    st = gguf_pwrite_full(jfd, b.p + body, GGUF_JNL_TRAILER, body,
                          "the journal", err);
    if (st != GGUF_OK)
        goto out;
    gguf_fault_point(f, "fsync journal");
    if (fsync(jfd) < 0) {
        st = gguf_sys_fail(err, errno, "cannot sync %s", jpath);
        goto out;
    }
    gguf_fault_point(f, "fsync directory (journal)");
    st = gguf_fsync_dirfd(at->dfd, jpath, err);
out:
    if (jfd >= 0)
        close(jfd);
    /* Removed durably: a complete journal must not come back after a
     * power cut to carry out a commit that was reported failed. */
    if (st != GGUF_OK && created && unlinkat(at->dfd, at->name, 0) == 0)
        (void)gguf_fsync_dirfd(at->dfd, jpath, NULL);
    gguf_buf_free(&b);
    return st;
}

/* Steps (fault points): unlink, directory fsync. */
enum gguf_status gguf_jnl_drop(const struct gguf_at *at, struct gguf_faults *f,
                               struct gguf_error *err) {
    gguf_fault_point(f, "unlink journal");
    if (unlinkat(at->dfd, at->name, 0) < 0)
        return gguf_sys_fail(err, errno, "cannot remove %s", at->shown);
    gguf_fault_point(f, "fsync directory");
    return gguf_fsync_dirfd(at->dfd, at->shown, err);
}

enum gguf_status gguf_jnl_read(int jfd, const char *jpath, uint8_t **out,
                               uint64_t *n, struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    struct stat sb;
    *out = NULL;
    *n = 0;
    if (fstat(jfd, &sb) < 0) {
        st = gguf_sys_fail(err, errno, "cannot stat %s", jpath);
        goto out;
    }
    if ((uint64_t)sb.st_size > SIZE_MAX / 2) {
        st = gguf_fail(err, GGUF_E_NOMEM, "journal %s is too large", jpath);
        goto out;
    }
    *n = (uint64_t)sb.st_size;
    *out = malloc(*n ? (size_t)*n : 1);
    if (!*out) {
        st = gguf_fail(err, GGUF_E_NOMEM, "out of memory reading %s", jpath);
        goto out;
    }
    st = gguf_pread_full(jfd, *out, *n, 0, "the journal", err);
out:
    return st;
}

/* ---- carrying out and undoing a plan -------------------------------- */

/* The errnos with which fallocate(FALLOC_FL_INSERT_RANGE) says that this
 * filesystem (or this file: EINVAL for a range it cannot shift) does not
 * insert, as opposed to an insert that failed: decided here only, and
 * reported as GGUF_JNL_NO_INSERT. */
static bool insert_unsupported(int e) {
    return e == EOPNOTSUPP || e == EINVAL || e == ENOSYS || e == ENOTTY;
}

/* Steps (fault points): [insert-range, fsync] for inserts, then the new
 * header in two halves (so a kill can land mid-header), then fsync. */
enum gguf_status gguf_jnl_apply(int fd, const struct gguf_jnl *j, bool inserted,
                                struct gguf_faults *f,
                                enum gguf_jnl_stage *stage,
                                struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    *stage = inserted ? GGUF_JNL_INSERTED : GGUF_JNL_UNTOUCHED;

    if (j->op == GGUF_JNL_INSERT && !inserted) {
        gguf_fault_point(f, "insert-range");
        if (fallocate(fd, FALLOC_FL_INSERT_RANGE, 0, (off_t)j->k) < 0) {
            int e = errno;
            st = gguf_sys_fail(err, e,
                               "cannot insert %llu bytes before the header",
                               (unsigned long long)j->k);
            if (insert_unsupported(e))
                *stage = GGUF_JNL_NO_INSERT;
            goto out;
        }
        *stage = GGUF_JNL_INSERTED;
        gguf_fault_point(f, "fsync after insert-range");
        if (fsync(fd) < 0) {
            st = gguf_sys_fail(err, errno,
                               "cannot sync the file after the insert");
            goto out;
        }
    }
    /* Reserve the blocks of the header region (the inserted range is a
     * hole) so that a full device fails here, before any header byte has
     * changed.  KEEP_SIZE: never extends the file.  Filesystems without
     * fallocate (or that refuse this use of it) are fine: their writes below
     * report ENOSPC instead. */
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)j->new_len) < 0 &&
        errno != EOPNOTSUPP && errno != ENOSYS && errno != EINVAL) {
        st = gguf_sys_fail(err, errno,
                           "cannot allocate %llu bytes for the header",
                           (unsigned long long)j->new_len);
        goto out;
    }

    uint64_t half = j->new_len / 2;
    gguf_fault_point(f, "header write, first half");
    *stage = GGUF_JNL_WRITING;
    st = gguf_pwrite_full(fd, j->new_hdr, half, 0, "the new header", err);
    if (st != GGUF_OK)
        goto out;
    gguf_fault_point(f, "header write, second half");
    st = gguf_pwrite_full(fd, j->new_hdr + half, j->new_len - half, half,
                          "the new header", err);
    if (st != GGUF_OK)
        goto out;
    gguf_fault_point(f, "fsync file");
    if (fsync(fd) < 0) {
        st = gguf_sys_fail(err, errno, "cannot sync the file");
        goto out;
    }
out:
    return st;
}

/* Puts the file back as it was before j, after gguf_jnl_apply stopped at
 * stage.  The journal stays in place meanwhile: a crash during the undo
 * leaves a state recovery completes (forwards).  GGUF_OK means the file is
 * exactly as before and synced, and the journal may go. */
enum gguf_status gguf_jnl_rollback(int fd, const struct gguf_jnl *j,
                                   enum gguf_jnl_stage stage,
                                   struct gguf_error *err) {
    enum gguf_status st = GGUF_OK;
    if (stage == GGUF_JNL_UNTOUCHED || stage == GGUF_JNL_NO_INSERT)
        goto out;
    if (stage == GGUF_JNL_WRITING) {
        /* The old header lies at k after an insert, at 0 in place. */
        uint64_t keep = j->old_len < j->orig_size ? j->old_len : j->orig_size;
        st = gguf_pwrite_full(fd, j->old_hdr, keep, j->k, "the old header back",
                              err);
        if (st != GGUF_OK)
            goto out;
        if (j->op == GGUF_JNL_INPLACE &&
            ftruncate(fd, (off_t)j->orig_size) < 0) {
            st = gguf_sys_fail(err, errno, "cannot restore the file size");
            goto out;
        }
    }
    if (j->op == GGUF_JNL_INSERT &&
        fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 0, (off_t)j->k) < 0) {
        st = gguf_sys_fail(err, errno, "cannot remove the %llu inserted bytes",
                           (unsigned long long)j->k);
        goto out;
    }
    if (fsync(fd) < 0) {
        st = gguf_sys_fail(err, errno, "cannot sync the file");
        goto out;
    }
out:
    return st;
}
