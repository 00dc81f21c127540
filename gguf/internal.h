/*
 * internal.h - the context's representation, shared by the library's own
 * files only (read.c, edit.c, write.c, ...).  Not installed, not used by fs/.
 *
 * A value is kept as its on-disk payload bytes (everything after the uint32
 * type field).  That makes rendering, editing and writing lossless by
 * construction: the writer copies payloads, edits replace them.
 *
 * Declarations are grouped by the file that owns them, each with its
 * contract.
 */
#ifndef GGUF_INTERNAL_H
#define GGUF_INTERNAL_H

#include "gguf.h"

#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

enum gguf_kv_flags {
    GGUF_KV_OWN_KEY = 1 << 0, /* key points to its own malloc'ed copy */
    GGUF_KV_OWN_VAL = 1 << 1, /* val points to its own malloc'ed copy */
    GGUF_KV_PADDING = 1 << 2, /* ggufs's own filler (gguf_mark_padding) */
};

struct gguf_kv {
    const char *key; /* NUL-terminated; in ctx->names or owned */
    uint64_t key_len;
    const uint8_t *val; /* payload; in ctx->hdr or owned */
    uint64_t val_len;
    uint32_t type;     /* enum gguf_type */
    uint32_t arr_type; /* element type for arrays, else GGUF_TYPE_COUNT */
    uint64_t arr_n;    /* element count for arrays, else 0 */
    uint32_t id;       /* stable id, unique within the context */
    uint32_t flags;    /* enum gguf_kv_flags */
};

struct gguf_tensor {
    const char *name; /* NUL-terminated; in ctx->names or owned */
    uint64_t name_len;
    uint32_t n_dims;
    uint32_t type; /* ggml type id */
    int64_t ne[GGUF_MAX_DIMS];
    uint64_t offset; /* relative to the data section */
    uint64_t size;   /* bytes */
    bool own_name;
};

/* Open-addressing hash index over names (keys or tensor names). */
struct gguf_index {
    int64_t *slot;  /* -1 for empty, else an index into the kv/tensor array */
    size_t n_slots; /* power of two, 0 when empty */
};

struct gguf_ctx {
    char *path;            /* NULL for memory contexts */
    int fd;                /* -1 for memory and reader contexts */
    int dfd;               /* file contexts opened for writing: the
                              directory the file was opened in, held open
                              (else -1).  Every file a
                              commit or a stage puts beside the model is
                              reached through it (*at calls), never by
                              path: a directory of the path renamed or
                              swapped meanwhile cannot send them elsewhere
                              (issue 33) */
    const char *base;      /* the file's name in dfd (points into path) */
    struct gguf_reader rd; /* reader contexts (gguf_open_reader): the
                              source, which outlives the context; else
                              rd.read is NULL */
    dev_t dev;             /* identity of the file when opened (for commits) */
    ino_t ino;
    int64_t mtime_ns;
    int64_t ctime_ns; /* st_ctim: an in-place write that puts the mtime
                         back still changes it (commit.c check_unchanged) */

    uint8_t *hdr; /* header bytes [0, hdr_len) as read */
    size_t hdr_len;
    char *names; /* NUL-terminated copies of keys and tensor names */

    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;
    uint64_t file_size;

    struct gguf_kv *kv;
    int64_t n_kv, cap_kv;
    uint32_t next_id;
    struct gguf_index kv_index;

    struct gguf_tensor *t;
    int64_t n_t, cap_t;
    struct gguf_index t_index;

    char **warnings;
    int n_warnings;
    bool dirty;
    gguf_progress_fn progress; /* gguf_set_progress (commit.c) */
    void *progress_user;
};

/* Little-endian loads and stores (the host may be either). */
static inline uint32_t gguf_rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}
static inline uint64_t gguf_rd64(const uint8_t *p) {
    return (uint64_t)gguf_rd32(p) | (uint64_t)gguf_rd32(p + 4) << 32;
}
static inline void gguf_wr32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}
static inline void gguf_wr64(uint8_t *p, uint64_t v) {
    gguf_wr32(p, (uint32_t)v);
    gguf_wr32(p + 4, (uint32_t)(v >> 32));
}

/* ---- name indexes (index.c) ------------------------------------------ */

uint64_t gguf_hash(const void *p, size_t len); /* 64-bit FNV-1a */
void gguf_index_free(struct gguf_index *ix);
/* (Re)builds ix over n names given by name(i, &len). */
enum gguf_status gguf_index_build(struct gguf_index *ix, int64_t n,
                                  const char *(*name)(const void *base,
                                                      int64_t i, size_t *len),
                                  const void *base);
int64_t gguf_index_find(const struct gguf_index *ix, const char *s, size_t len,
                        const char *(*name)(const void *base, int64_t i,
                                            size_t *len),
                        const void *base);
/* Adds entry i to an index that holds entries 0..i-1 (and nothing else),
 * growing it to keep the load at most 1/2.  If an equal name is present,
 * nothing is added and *dup is its index; else *dup = -1. */
enum gguf_status gguf_index_add(struct gguf_index *ix, int64_t i,
                                const char *(*name)(const void *base, int64_t i,
                                                    size_t *len),
                                const void *base, int64_t *dup);

/* Position pos (named s[0, len) before the edit) was removed from the
 * array, which the name callback now shows without it; positions after
 * it moved down by one. */
void gguf_index_remove(struct gguf_index *ix, int64_t pos, const char *s,
                       size_t len,
                       const char *(*name)(const void *base, int64_t i,
                                           size_t *len),
                       const void *base);
/* The entry at pos, formerly named old, now has the name the callback
 * gives.  Cannot fail: the number of entries is unchanged. */
void gguf_index_rename(struct gguf_index *ix, int64_t pos, const char *old,
                       size_t old_len,
                       const char *(*name)(const void *base, int64_t i,
                                           size_t *len),
                       const void *base);
/* The entry at from moved to to, the ones between shifted by one. */
void gguf_index_move(struct gguf_index *ix, int64_t from, int64_t to);

/* ---- payload validation (payload.c) ---------------------------------- */

/* Validates a payload of the given type in [p, p+len): exact length,
 * bools 0/1, string and array lengths within GGUF_MAX_*, nesting depth,
 * arrays of arrays only if allow_nested.  On success *used is the number of
 * bytes the value occupies (== len for a standalone payload).  `where` names
 * the key for messages.  Shared by the reader and the editor. */
enum gguf_status gguf_payload_check(enum gguf_type type, const uint8_t *p,
                                    uint64_t len, bool allow_nested,
                                    uint64_t *used, const char *where,
                                    uint64_t file_off, struct gguf_error *err);
/* The reader's form of gguf_payload_check.  Bounds and messages use len
 * (the bytes from p to the end of the file); only [p, p+avail) is in memory
 * (avail <= len).  If the value continues past avail, returns GGUF_OK with
 * out->need > 0: the caller makes at least out->need bytes from p
 * available and calls again.  Otherwise out->need == 0 and out->used is the
 * value's size. */
enum gguf_pcheck_flags {
    GGUF_PCHECK_NESTED = 1 << 0,   /* accept arrays of arrays */
    GGUF_PCHECK_ANY_BOOL = 1 << 1, /* accept bool bytes > 1 (ggml reads them
                                      as true) and count them in out */
};
struct gguf_pscan {
    uint64_t used, need;
    uint64_t odd_bools; /* bool bytes other than 0/1 (GGUF_PCHECK_ANY_BOOL) */
    uint64_t odd_off;   /* file offset of the first of them */
    uint8_t odd_val;    /* and its value */
};
enum gguf_status gguf_payload_scan(enum gguf_type type, const uint8_t *p,
                                   uint64_t avail, uint64_t len, unsigned flags,
                                   struct gguf_pscan *out, const char *where,
                                   uint64_t file_off, struct gguf_error *err);

/* ---- layout rules (keys.c; the public ones are in gguf.h) ------------ */

/* The alignment ctx's data and tensors follow: ctx->alignment, or
 * GGUF_DEFAULT_ALIGNMENT where none is set. */
uint32_t gguf_ctx_alignment(const gguf_ctx *ctx);

/* ---- editing (edit.c) ------------------------------------------------ */

/* Sets general.alignment (uint32, a power of two) in a context that has no
 * tensor infos yet, and ctx->alignment with it.  For building fixtures;
 * gguf_set_payload refuses the key because existing data depends on it. */
enum gguf_status gguf_set_alignment(gguf_ctx *ctx, uint32_t alignment,
                                    struct gguf_error *err);

/* ---- header parts (write.c) ------------------------------------------ */

/* The one writer of the header's byte layout (see gguf.h): each writes at
 * p, which must have room, and returns the end of what it wrote.  Used by
 * gguf_write_header and by the saved-edits file (saved.c). */
/* Magic, version, tensor count, KV count: the first 24 bytes. */
uint8_t *gguf_put_preamble(uint8_t *p, uint32_t version, uint64_t n_tensors,
                           uint64_t n_kv);
/* A GGUF string: uint64 length n, then the n bytes of s. */
uint8_t *gguf_put_str(uint8_t *p, const void *s, uint64_t n);
/* A KV record: the key as a string, uint32 type, then vlen payload bytes
 * of val (val may be NULL when vlen is 0: the caller writes the payload at
 * the returned pointer). */
uint8_t *gguf_put_kv(uint8_t *p, const char *key, uint64_t klen, uint32_t type,
                     const void *val, uint64_t vlen);
/* Bytes of a KV record with a klen-byte key and a vlen-byte payload. */
uint64_t gguf_kv_record_size(uint64_t klen, uint64_t vlen);

/* ---- the header a commit writes (live.c) ----------------------------- */

enum gguf_plan_how {
    GGUF_PLAN_UNCHANGED, /* a file-backed ctx without edits: hdr is the
                            file's own bytes [0, min(D, file size)) */
    GGUF_PLAN_INPLACE,   /* hdr is exactly D bytes (the filler absorbs the
                            slack): written over [0, D) */
    GGUF_PLAN_GROWN,     /* hdr is exactly D' bytes, D' > D the grown data
                            start (whole filesystem blocks for a file) */
};
/* The one decision of what header a commit writes, for gguf_commit and the
 * live view (gguf_plan_header): empties hdr, fills it per *how and sets
 * *data_offset (D or D').  Reads nothing but, for UNCHANGED, the file's
 * header; writes nothing. */
enum gguf_status gguf_plan_commit(const gguf_ctx *ctx, struct gguf_buf *hdr,
                                  enum gguf_plan_how *how,
                                  uint64_t *data_offset,
                                  struct gguf_error *err);

/* ---- crash-safe write path: durable I/O (durable.c) ------------------ */

/* Files beside the GGUF at PATH: PATH.ggufs-journal (the plan of an
 * in-place or insert commit, present from before the file is touched until
 * after it is synced; layout: journal.c) and PATH.ggufs-new (a rewritten
 * copy before its rename), as gguf_sidecar_path names them (a long PATH
 * is shortened).  The rules: commit.c. */
#define GGUF_JOURNAL_SUFFIX ".ggufs-journal"
#define GGUF_NAME_MAX 255    /* NAME_MAX of Linux file systems */
#define GGUF_SIDECAR_HASH 17 /* "~" and 16 hex digits (gguf_sidecar_path) */
#define GGUF_NEWFILE_SUFFIX ".ggufs-new"

/* Fault injection (tests), one per commit or recovery: with GGUFS_FAULT=N
 * in the environment, the Nth gguf_fault_point since gguf_faults_init
 * raises SIGKILL; GGUFS_FAULT_TRACE=1 prints each step to stderr as
 * "ggufs fault point N: WHAT".  A NULL f is no fault point. */
struct gguf_faults {
    long at;    /* GGUFS_FAULT, 0 when off */
    long count; /* points passed since gguf_faults_init */
    bool trace;
};
void gguf_faults_init(struct gguf_faults *f);
void gguf_fault_point(struct gguf_faults *f, const char *what);
/* Takes (lock) or releases the commit lock on fd, a whole-file OFD write
 * lock that gguf_commit holds throughout and gguf_recover takes too;
 * GGUF_E_BUSY if another open file holds it. */
enum gguf_status gguf_commit_lock(int fd, bool lock, struct gguf_error *err);
/* errno e -> GGUF_E_NOSPACE (ENOSPC, EDQUOT) or GGUF_E_IO, with sys_errno
 * set and ": strerror(e)" appended to the message. */
enum gguf_status gguf_sys_fail(struct gguf_error *err, int e, const char *fmt,
                               ...) __attribute__((format(printf, 3, 4)));
/* Writes exactly n bytes (retrying short writes and EINTR). */
enum gguf_status gguf_pwrite_full(int fd, const void *p, uint64_t n,
                                  uint64_t off, const char *what,
                                  struct gguf_error *err);
/* Reads exactly n bytes; a short file is GGUF_E_CHANGED. */
enum gguf_status gguf_pread_full(int fd, void *p, uint64_t n, uint64_t off,
                                 const char *what, struct gguf_error *err);
/* fsyncs the directory holding path, or the directory dfd (holding the
 * file that messages call of): makes creates, renames, unlinks durable.
 * The rule for a failure is durable.c's (EINVAL and EROFS are success). */
enum gguf_status gguf_fsync_dir(const char *path, struct gguf_error *err);
enum gguf_status gguf_fsync_dirfd(int dfd, const char *of,
                                  struct gguf_error *err);
/* The directory of path, opened (O_DIRECTORY, path's own directory part
 * followed as given), and *base pointed at path's last component; -1 with
 * err set on failure. */
int gguf_open_dir_of(const char *path, const char **base,
                     struct gguf_error *err);

/* A file's place: the directory it is in (held open by the caller) and
 * its name there; shown is its whole path, for messages only. */
struct gguf_at {
    int dfd;
    const char *name;
    const char *shown;
};
/* at for the file named by suffix beside the file at `of` (sidecar, a
 * gguf_sidecar_path of of->shown: the name is its part past of's
 * directory, which the two share). */
static inline struct gguf_at gguf_at_beside(const struct gguf_at *of,
                                            const char *sidecar) {
    struct gguf_at a = {of->dfd, sidecar + (of->name - of->shown), sidecar};
    return a;
}

/* Atomic replacement of NAME in the directory dfd (durable.c; the steps
 * and the rule for a failed directory fsync are in its top comment):
 *
 *   struct gguf_replace r = {.dfd = dfd, .name = NAME, .shown = ...};
 *   snprintf(r.tmp, sizeof r.tmp, ...);           the new file's name
 *   st = gguf_replace_open(&r, 0600, flags, err); r.fd is the new file
 *   ... write r.fd ...
 *   if (st == GGUF_OK) st = gguf_replace_commit(&r, err);
 *   gguf_replace_end(&r);   closes r.fd, removes the new file unless renamed
 *
 * Fault points (r.f, NULL for none): "create new WHAT" in open; "fsync new
 * WHAT", "rename over WHAT", "fsync directory" in commit (the caller's own
 * points, e.g. the writing, go between).  With r.same_as >= 0 the rename
 * replaces NAME only while it is still the file open as same_as (else
 * GGUF_E_CHANGED, NAME untouched): a commit never writes over whatever
 * NAME names now.  A caller that keeps the new file takes r.fd (sets it
 * to -1) after a successful commit. */
#define GGUF_REPLACE_RANDOM 1u /* tmp ends in X's: made random (retried) */
#define GGUF_REPLACE_STALE 2u  /* a file at tmp is our leftover: removed */
struct gguf_replace {
    int dfd;                     /* NAME's directory; the caller's */
    const char *name;            /* NAME, one component */
    const char *shown;           /* NAME as messages show it */
    const char *what;            /* fault points' noun; NULL: "file" */
    struct gguf_faults *f;       /* NULL: no fault points */
    int same_as;                 /* -1, or the file NAME must still be */
    char tmp[GGUF_NAME_MAX + 1]; /* the new file's name in dfd */
    int fd;                      /* the new file (gguf_replace_open) */
    bool renamed;                /* commit's rename is done */
};
enum gguf_status gguf_replace_open(struct gguf_replace *r, mode_t mode,
                                   unsigned flags, struct gguf_error *err);
enum gguf_status gguf_replace_commit(struct gguf_replace *r,
                                     struct gguf_error *err);
void gguf_replace_end(struct gguf_replace *r);
/* The path of the file named by suffix beside the GGUF at path: the same
 * directory, the GGUF's base name, then suffix; but where that name would
 * exceed GGUF_NAME_MAX bytes, the base name is cut (at a UTF-8 boundary)
 * so that the cut, "~", 16 hex digits of the 64-bit FNV-1a hash of the
 * whole base name (GGUF_SIDECAR_HASH bytes in all) and suffix make exactly
 * as much as fits.  Every file ggufs creates beside a GGUF is named by this
 * function, and recovery finds them by it.  malloc'ed; NULL if out of
 * memory or suffix alone is too long. */
char *gguf_sidecar_path(const char *path, const char *suffix);
/* True if something (even a dangling symlink) is at path. */
bool gguf_path_exists(const char *path);
/* Bytes free on fd's filesystem for this user; UINT64_MAX if unknown. */
uint64_t gguf_free_bytes(int fd);

/* ---- crash-safe write path: the journal (journal.c) ------------------ */

enum gguf_jnl_op {
    GGUF_JNL_INPLACE = 1, /* new_hdr replaces [0, old_len); k == 0 */
    GGUF_JNL_INSERT = 2,  /* k bytes inserted at 0, then new_hdr written */
    GGUF_JNL_PATCH = 3,   /* a stage's bytes copied to k (tensorw.c) */
};

/* FNV-1a 64: the journal's checksum, and a stage's (journal.c). */
#define GGUF_FNV_INIT UINT64_C(0xcbf29ce484222325)
uint64_t gguf_fnv_more(uint64_t h, const uint8_t *p, uint64_t n);

/* Stages (tensorw.c): the staged bytes of a journal JPATH are named
 * JPATH.data once applied (gguf_stage_path: malloc'ed, NULL out of
 * memory); gguf_stage_copy_in copies len bytes of sfd into fd at pos and
 * syncs fd (fault points "tensor write" halves, "fsync file");
 * gguf_stage_checksum is the FNV-1a 64 of sfd's first len bytes (*ok
 * false when they cannot be read). */
#define GGUF_STAGE_SUFFIX ".data"
char *gguf_stage_path(const char *jpath);
enum gguf_status gguf_stage_copy_in(int sfd, int fd, uint64_t pos, uint64_t len,
                                    struct gguf_faults *f,
                                    struct gguf_error *err);
uint64_t gguf_stage_checksum(int fd, uint64_t len, bool *ok);

/* One planned header rewrite.  old_hdr is [0, D) before the commit, new_hdr
 * is [0, D + k) after it; orig_size is the file size before. */
struct gguf_jnl {
    uint32_t op;
    uint64_t dev, ino, orig_size, k;
    int64_t orig_mtime_ns;
    const uint8_t *old_hdr;
    uint64_t old_len;
    const uint8_t *new_hdr;
    uint64_t new_len;
};

/* How far gguf_jnl_apply got before it failed. */
enum gguf_jnl_stage {
    GGUF_JNL_UNTOUCHED, /* the file is exactly as before */
    GGUF_JNL_NO_INSERT, /* the file is exactly as before, because this
                           filesystem (or file) does not support
                           insert-range: finish the change by a rewrite */
    GGUF_JNL_INSERTED,  /* k bytes inserted, header bytes not yet written */
    GGUF_JNL_WRITING,   /* some new header bytes may be in the file */
};

/* Journal bytes of j; the last GGUF_JNL_TRAILER bytes (checksum and end
 * mark) must reach the disk last.  Appends to out. */
#define GGUF_JNL_TRAILER 16
enum gguf_status gguf_jnl_encode(const struct gguf_jnl *j, struct gguf_buf *out,
                                 struct gguf_error *err);
/* Parses a journal read whole into p[0, n).  *complete is false for
 * anything without a valid trailer and checksum (then GGUF_OK).  A
 * complete journal of an unknown version or with an inconsistent plan is
 * an error.  On success j's header pointers point into p. */
enum gguf_status gguf_jnl_decode(const uint8_t *p, uint64_t n,
                                 struct gguf_jnl *j, bool *complete,
                                 struct gguf_error *err);
/* Creates the journal at `at` exclusively and makes it durable: body,
 * trailer, fsync, fsync of its directory (beside the GGUF, or the state
 * directory).  Until this returns GGUF_OK the GGUF must not be touched; on
 * failure no journal is left (its removal synced too). */
enum gguf_status gguf_jnl_write(const struct gguf_at *at,
                                const struct gguf_jnl *j, struct gguf_faults *f,
                                struct gguf_error *err);
/* Removes the journal of a finished (or fully undone) commit, durably. */
enum gguf_status gguf_jnl_drop(const struct gguf_at *at, struct gguf_faults *f,
                               struct gguf_error *err);
/* Reads the whole journal open as jfd (named jpath in messages) into *out
 * (*n bytes, malloc'ed). */
enum gguf_status gguf_jnl_read(int jfd, const char *jpath, uint8_t **out,
                               uint64_t *n, struct gguf_error *err);
/* Carries out j on fd: the insert unless `inserted`, then the new header,
 * fsync.  On failure *stage says what the file holds (see above);
 * GGUF_JNL_NO_INSERT is the one answer to "is insert-range supported". */
enum gguf_status gguf_jnl_apply(int fd, const struct gguf_jnl *j, bool inserted,
                                struct gguf_faults *f,
                                enum gguf_jnl_stage *stage,
                                struct gguf_error *err);
/* Undoes what gguf_jnl_apply did up to stage (the journal must still be in
 * place).  GGUF_OK: the file is as before j, synced. */
enum gguf_status gguf_jnl_rollback(int fd, const struct gguf_jnl *j,
                                   enum gguf_jnl_stage stage,
                                   struct gguf_error *err);

/* ---- recovery's trust and matching checks (recover.c) -------------- */

/* Whether the file beside the model with lstat/fstat sb may be acted on by
 * recovery (running with effective uid euid; model: fstat of the model):
 * a regular file with one link, owned by euid or by the model's owner,
 * and for a journal (journal true) of mode exactly 0600.  False with the
 * reason in why[0, n) ("is owned by uid 65534, not by ..."). */
bool gguf_sidecar_trusted(const struct stat *sb, const struct stat *model,
                          uid_t euid, bool journal, char *why, size_t n);
/* Whether the decoded complete journal j was written for this model:
 * its device and inode are the model's, and its old and new headers pass
 * gguf_check_header (old: for orig_size bytes, new: for the size after
 * the commit).  False with the reason in why[0, n). */
bool gguf_jnl_plausible(const struct gguf_jnl *j, const struct stat *model,
                        char *why, size_t n);
/* Whether a file of `size` bytes whose first n bytes are have[0, n)
 * (n = min(size, new_len)) is at some point of carrying out j; *inserted:
 * the insert is done. */
bool gguf_jnl_matches(const struct gguf_jnl *j, uint64_t size,
                      const uint8_t *have, uint64_t n, bool *inserted);
/* Parses and validates hdr[0, len) as gguf_open would a file's header,
 * with the tensor data checked against a file of file_size bytes that is
 * not read; the data offset must be len (read.c). */
enum gguf_status gguf_check_header(const uint8_t *hdr, uint64_t len,
                                   uint64_t file_size, unsigned flags,
                                   struct gguf_error *err);

/* ---- crash-safe write path: the rewrite (rewrite.c) ------------------ */

/* Writes the file at `at` (open as fd, with fstat sb, data at d) anew as
 * PATH.ggufs-new beside it (in at->dfd) with hdr (d2 bytes) as header and
 * its data at d2, syncs it and renames it over at->name.  *newfd: the new file, O_RDWR, once renamed
 * (else -1), with fd's flock carried over; *copied: data bytes; pfn
 * (may be NULL) told of the copy's progress.  The caller holds the commit
 * lock on fd. */
struct stat;
enum gguf_status gguf_rewrite_file(int fd, const struct gguf_at *at,
                                   const struct stat *sb, uint64_t d,
                                   const uint8_t *hdr, uint64_t d2,
                                   struct gguf_faults *f, int *newfd,
                                   uint64_t *copied, gguf_progress_fn pfn,
                                   void *puser, struct gguf_error *err);

/* ---- edits as a file (edits.c; used by saved.c, pending.c, overlay.c) - */

/* The key under which an edits file lists the keys of the file on disk
 * that the edits remove (an array of strings). */
#define GGUF_REMOVED_KEY "ggufs.removed_keys"
/* An edits file: a tensor-less GGUF of ctx's keys (the filler left out;
 * with changes_only, also every key disk holds with the same type and
 * value) plus GGUF_REMOVED_KEY listing the keys of disk (the file as it is
 * on disk, or NULL) that ctx no longer has.  Appended to b. */
enum gguf_status gguf_edits_serialize(const gguf_ctx *ctx, const gguf_ctx *disk,
                                      bool changes_only, struct gguf_buf *b,
                                      struct gguf_error *err);

/* Same, with lead_n KV records (lead_len bytes at lead, laid out by
 * gguf_put_kv) first: an overlay's own keys (overlay.c).  ctx must have no
 * key of those names. */
enum gguf_status gguf_edits_serialize_led(const gguf_ctx *ctx,
                                          const gguf_ctx *disk,
                                          bool changes_only,
                                          const uint8_t *lead, size_t lead_len,
                                          uint64_t lead_n, struct gguf_buf *b,
                                          struct gguf_error *err);

/* Applies KV i of an edits file e to ctx: the filler is
 * skipped, GGUF_REMOVED_KEY removes the keys it lists, a key whose type
 * and payload ctx already has is left alone (general.alignment among
 * them), any other is set (an existing key keeps its place). */
enum gguf_status gguf_edits_apply_kv(gguf_ctx *ctx, const gguf_ctx *e,
                                     int64_t i, struct gguf_error *err);
/* Applies every key of the edits file e to ctx (gguf_edits_apply_kv), the
 * filler and an overlay's own keys left out: *set counts the keys changed
 * or added (listed in names, if not NULL, by gguf_edits_list_name),
 * *removed the keys removed.  Overlays, saved edits. */
enum gguf_status gguf_edits_apply(gguf_ctx *ctx, const gguf_ctx *e,
                                  struct gguf_buf *names, int64_t *set,
                                  int64_t *removed, struct gguf_error *err);
/* Appends key k (quoted) to the list in b, ", " between; past about 400
 * bytes only "...": for one-line messages. */
void gguf_edits_list_name(struct gguf_buf *b, const char *k, size_t kl);
/* True if KV i of the edits file e is its list of removed keys. */
bool gguf_edits_is_removal(const gguf_ctx *e, int64_t i);
/* The next name of a removal list's payload p (uint32 type, uint64
 * count, then strings, validated by gguf_open_mem), *off advancing from
 * 12; the list must be of strings. */
const char *gguf_edits_next_name(const uint8_t *p, uint64_t *off, size_t *len);

/* ---- the header parser (read.c; its callers: open.c) ---------------- */

/* Parses the header from rd (if not NULL) or mem, size bytes readable,
 * into the fresh context ctx, the tensor data checked against a file of
 * fsize bytes (size, except for a header checked alone).  On failure ctx
 * holds no entries (gguf_close is safe) and err says what is wrong. */
enum gguf_status gguf_parse(gguf_ctx *ctx, const struct gguf_reader *rd,
                            const uint8_t *mem, uint64_t size, uint64_t fsize,
                            unsigned flags, struct gguf_error *err);

/* ---- the context (ctx.c) -------------------------------------------- */

/* Free the copies that a KV or tensor info owns (GGUF_KV_OWN_KEY/_OWN_VAL,
 * own_name; made by edit.c) and leave pointers into ctx->hdr/ctx->names
 * alone.  gguf_close calls them on every KV and tensor info; edit.c on
 * what an edit drops. */
void gguf_kv_release(struct gguf_kv *kv);
void gguf_tensor_release(struct gguf_tensor *t);

/* Records a one-line warning on ctx (advisory: at most 64 are kept, a
 * failed allocation drops it). */
void gguf_warn(gguf_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A fresh, empty context (version 3, default alignment, no file); NULL if
 * out of memory.  Shared by gguf_new and the openers in read.c. */
gguf_ctx *gguf_ctx_alloc(void);
/* Name callbacks for gguf_index_build/_find over a finished context
 * (base): the key or the whole tensor name of entry i.  Slots depend only on
 * the names, so an index built with these is interchangeable with the ones
 * read.c leaves in a context it opened. */
const char *gguf_ctx_key_name(const void *base, int64_t i, size_t *len);
const char *gguf_ctx_tensor_name(const void *base, int64_t i, size_t *len);

/* ---- the text codec's parts (text.c, textesc.c, textfloat.c) ---------- */

/* Hex digits: the value of c (either case), -1 if c is none; the lower-case
 * digit of v's low four bits. */
static inline int gguf_hexval(int c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}
static inline char gguf_hexdigit(uint64_t v) {
    return "0123456789abcdef"[v & 15];
}

/* Appending to the codec's output.  gguf_text_room ensures n free bytes,
 * growing at least geometrically (to max(n, len, 64) more) so that many
 * small appends stay linear whatever gguf_buf_reserve's own policy is. */
static inline enum gguf_status gguf_text_room(struct gguf_buf *b, size_t n) {
    if (b->cap >= b->len && b->cap - b->len >= n)
        return GGUF_OK;
    size_t extra = n;
    if (extra < b->len)
        extra = b->len;
    if (extra < 64)
        extra = 64;
    if (extra != n && gguf_buf_reserve(b, extra) == GGUF_OK)
        return GGUF_OK;
    return gguf_buf_reserve(b, n);
}
static inline enum gguf_status gguf_text_put(struct gguf_buf *b, const void *p,
                                             size_t n) {
    if (n == 0)
        return GGUF_OK;
    enum gguf_status st = gguf_text_room(b, n);
    if (st != GGUF_OK)
        return st;
    memcpy(b->p + b->len, p, n);
    b->len += n;
    return GGUF_OK;
}
static inline enum gguf_status gguf_text_put1(struct gguf_buf *b, uint8_t c) {
    if (b->cap <= b->len) {
        enum gguf_status st = gguf_text_room(b, 1);
        if (st != GGUF_OK)
            return st;
    }
    b->p[b->len++] = c;
    return GGUF_OK;
}

/* text.c.  gguf_parse_text of text that begins at line `first` of a larger
 * text (gguf_text_check_prefix's complete lines): messages name lines of
 * the whole.  gguf_text_bad_value: the one message for a scalar that is
 * not of its type (st GGUF_E_INVAL: "line L: 'x' is not a T") or out of its
 * range (GGUF_E_RANGE: "line L: x is out of range for T"), x shown by
 * gguf_text_snippet; returns st. */
enum gguf_status gguf_parse_text_from(enum gguf_type type,
                                      enum gguf_type arr_type, const char *text,
                                      size_t len, uint64_t first,
                                      struct gguf_buf *out,
                                      struct gguf_error *err);
enum gguf_status gguf_text_bad_value(struct gguf_error *err,
                                     enum gguf_status st, uint64_t line,
                                     const char *s, size_t n, enum gguf_type t);

/* textesc.c.  gguf_utf8_seq: length (1..4) of the valid UTF-8 sequence at
 * s[0..n), 0 if none (strict: no overlongs, surrogates or code points above
 * U+10FFFF); names.c and error.c use it too. */
size_t gguf_utf8_seq(const uint8_t *s, size_t n);
/* A short rendition of s[0, n) for messages, as the user typed it, in o
 * (osz bytes, >= 8 for any output): at most 40 bytes of s (never a cut
 * UTF-8 sequence), printable ASCII (the backslash and the quote included)
 * and valid UTF-8 as they are, "\n", "\r" and "\t" for those control
 * bytes, \xHH for other control bytes and for bytes that are not valid
 * UTF-8, then "..." when cut.  Returns o. */
const char *gguf_text_snippet(const char *s, size_t n, char *o, size_t osz);
/* Appends s[0, n) escaped so that it is one line; in quoted mode (strings
 * inside a bracketed inner array) '"' is escaped too. */
enum gguf_status gguf_text_escape(const uint8_t *s, size_t n, bool quoted,
                                  struct gguf_buf *out);
/* Appends s[0, n) with its escapes decoded.  Quoted mode: stops at the
 * first unescaped '"' (*used = its index; an error if there is none) and
 * accepts \".  Messages name line (0: none) and the column of s[i] as
 * col0 + i. */
enum gguf_status gguf_text_unescape(const char *s, size_t n, bool quoted,
                                    size_t *used, struct gguf_buf *out,
                                    struct gguf_error *err, uint64_t line,
                                    size_t col0);

/* textfloat.c; run in the "C" locale (printf and strtod are used).
 * gguf_fmt_u64: v in decimal at o (20 bytes), no NUL; returns the length.
 * gguf_fmt_float: the float32 (f32) or float64 with the given bits as the
 * codec renders it (shortest round-trip digits, text.c's header comment),
 * at o (40 bytes), no NUL; returns the length.
 * gguf_parse_float: text s[0, n) as the codec parses a float into its bits:
 * GGUF_OK, GGUF_E_INVAL (not a float), GGUF_E_RANGE (overflow, NaN payload
 * too wide) or GGUF_E_NOMEM; no message. */
size_t gguf_fmt_u64(uint64_t v, char *o);
size_t gguf_fmt_float(uint64_t bits, bool f32, char *o);
enum gguf_status gguf_parse_float(const char *s, size_t n, bool f32,
                                  uint64_t *out);
/* Test hook: the number of floats whose shortest digits needed the slow
 * printf search (the exact algorithm failed or disagreed with strtod; the
 * tests expect none). */
unsigned long gguf_text_float_fallbacks(void);

/* The path (into out) of the journal of a commit of the file model when
 * its directory is not writable: in the user's state directory (checked,
 * created if create), named by device and inode (state.c).  GGUF_E_NOTFOUND
 * if there is no state directory and !create.  dfd (may be NULL): that
 * directory, as checked, left open for the caller (else closed), through
 * which the journal is written and read (its name: out's last part). */
enum gguf_status gguf_state_journal(const struct stat *model, bool create,
                                    char *out, size_t n, int *dfd,
                                    struct gguf_error *err);

/* After parsing (keys.c): marks the key named GGUF_FILLER_KEY as ggufs's
 * padding only if it has the shape ggufs writes (the last key; a string
 * of spaces or a uint8 0); any other key of that name is someone else's:
 * a normal key (listed, kept, editable), and a warning; while it is
 * there no filler can be added (write.c). */
void gguf_mark_padding(gguf_ctx *ctx);
/* Whether kv is ggufs's padding (never listed, saved or merged). */
bool gguf_kv_padding(const struct gguf_kv *kv);

/* Opens the state directory (state.c; created 0700 if create), with its
 * trust checks (a real directory of the effective user, writable by
 * nobody else).  Its fd, or -1 with err set, or -1 with *absent when it
 * does not exist and create is false. */
int gguf_state_dir_open(bool create, bool *absent, struct gguf_error *err);

/* ---- hostile files' parsers, apart from their I/O (fuzz targets) ----- */

/* An overlay's bytes (what gguf_overlay_load read from shown) parsed into
 * *ov and its identity *id: GGUF_E_FORMAT (one line naming shown) for
 * bytes that are not a valid GGUF or not an overlay; *ov NULL then. */
enum gguf_status gguf_overlay_parse(const uint8_t *p, size_t n,
                                    const char *shown, gguf_ctx **ov,
                                    struct gguf_overlay_id *id,
                                    struct gguf_error *err);
/* A pending record's bytes (identity line, then the edits file) parsed:
 * the edits as a memory context, as gguf_pending_apply applies them. */
enum gguf_status gguf_pending_parse(const uint8_t *p, size_t n,
                                    gguf_ctx **edits, struct gguf_error *err);

/* ---- overlays' place and tensors (ovplace.c, ovtensors.c) ------------ */

/* ovplace.c.  The overlay's directory (path NULL: the state directory, named for
 * source) opened, its file name into base, its path as shown into shown;
 * -1 with err (*absent: no state directory yet). */
int gguf_ovl_open_parent(const char *path, const char *source, bool create,
                         char *base, size_t bn, char *shown, size_t sn,
                         bool *absent, struct gguf_error *err);
/* ovplace.c.  The trust rule on the fstat of a file of the overlay's. */
enum gguf_status gguf_ovl_check_trusted(const struct stat *sb, const char *what,
                                        const char *shown,
                                        struct gguf_error *err);
/* The key ggufs.overlay.tensors of t[0, nt) appended to out as a KV
 * record. */
enum gguf_status gguf_ovl_tensors_kv(const struct gguf_overlay_tensor *t,
                                     size_t nt, struct gguf_buf *out);

#endif
