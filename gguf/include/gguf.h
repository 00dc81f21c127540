/*
 * gguf.h - the GGUF format library of ggufs: read, validate, render as text,
 * edit and write the header of a GGUF file.  It knows nothing of FUSE.
 *
 * Byte layout of a GGUF file (all integers little-endian; v2 and v3):
 *
 *   offset  size  field
 *   0       4     magic "GGUF"
 *   4       4     uint32 version (2 or 3; v1 used uint32 counts and is refused)
 *   8       8     uint64 n_tensors
 *   16      8     uint64 n_kv
 *   24      ...   n_kv key/value pairs:
 *                   string key      (uint64 len + len bytes, no NUL)
 *                   uint32 type     (enum gguf_type)
 *                   value:  scalar   1/2/4/8 bytes; bool is one byte (0 or 1)
 *                           string   uint64 len + bytes
 *                           array    uint32 elem type, uint64 count, elements
 *                                    (string elements carry their own length)
 *   ...     ...   n_tensors tensor infos:
 *                   string name, uint32 n_dims, n_dims x uint64 ne,
 *                   uint32 ggml type, uint64 offset (relative to data start)
 *   ...     ...   zero padding up to a multiple of ALIGNMENT
 *                 (general.alignment, a uint32 power of two, default 32)
 *   data    ...   tensor data in info order, each padded to ALIGNMENT
 *
 * The data start is computed (end of tensor infos rounded up to ALIGNMENT),
 * never stored: a header edited in place must end on the same padded
 * boundary, which ggufs achieves with a filler key (GGUF_FILLER_KEY).
 * docs/format.md states these facts and the limits below with their
 * reasons.
 *
 * Conventions: one opaque context (gguf_ctx); getters are const and never
 * abort; find-by-name returns -1 when absent; fallible calls return an
 * enum gguf_status and fill a struct gguf_error whose message names what was
 * expected and where (offset, key or tensor).
 */
#ifndef GGUF_GGUF_H
#define GGUF_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4
#define GGUF_MAX_TENSOR_NAME 63             /* bytes; ggml rejects 64+ */
#define GGUF_MAX_STRING (UINT64_C(1) << 30) /* ggml rejects longer strings */
#define GGUF_MAX_ARRAY (UINT64_C(1) << 30)  /* and arrays with more elements */
#define GGUF_MAX_NESTING 8 /* arrays of arrays, deepest level */
/* Key of the filler KV that absorbs slack when a header is rewritten in
 * place.  Hidden from listings; docs/format.md, The filler key
 * ggufs.padding. */
#define GGUF_FILLER_KEY "ggufs.padding"
/* The key that sets the alignment of tensor data (a uint32 power of two). */
#define GGUF_ALIGNMENT_KEY "general.alignment"

/* Metadata value types, numbered as on disk. */
enum gguf_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
};

enum gguf_status {
    GGUF_OK = 0,
    GGUF_E_IO,     /* a system call failed; gguf_error.sys_errno says why */
    GGUF_E_NOMEM,  /* allocation failed */
    GGUF_E_FORMAT, /* the file is not a valid GGUF (corrupt, truncated) */
    GGUF_E_UNSUPPORTED, /* valid but not handled: big-endian, v1 */
    GGUF_E_INVAL,       /* bad argument: unparsable text, bad key name */
    GGUF_E_RANGE,       /* value does not fit the type */
    GGUF_E_NOTFOUND,    /* no such key or tensor */
    GGUF_E_EXISTS,      /* key already exists */
    GGUF_E_PERM,        /* change not allowed (general.alignment) */
    GGUF_E_CHANGED,     /* file changed under us since it was opened */
    GGUF_E_NOSPACE,     /* no room on the device */
    GGUF_E_BUSY,        /* locked by another writer */
};

struct gguf_error {
    enum gguf_status code;
    int sys_errno; /* errno for GGUF_E_IO / NOSPACE, else 0 */
    char msg[512]; /* one line, no trailing newline, no file name prefix */
};

/* A growable byte buffer; zero-initialise, free with gguf_buf_free. */
struct gguf_buf {
    uint8_t *p;
    size_t len, cap;
};

typedef struct gguf_ctx gguf_ctx;

/* ---- errors and messages (gguf/error.c; gguf_quote: textesc.c) ---- */

/* Sets err (may be NULL) and returns code. printf-style message. */
enum gguf_status gguf_fail(struct gguf_error *err, enum gguf_status code,
                           const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *gguf_status_name(enum gguf_status s);

/* Writes the bytes s[0, len) into buf (n bytes, n >= 8) as the body of a
 * quotation for a one-line message: printable ASCII and well-formed UTF-8
 * pass, other bytes become \xHH, '\\' and '\'' are escaped, and a long
 * name is cut with "...".  Returns buf.  For messages only. */
#define GGUF_QUOTE_MAX 160 /* a good size for gguf_quote's buffer */
const char *gguf_quote(char *buf, size_t n, const char *s, size_t len);

/* ---- buffers ------------------------------------------------------- */

enum gguf_status gguf_buf_reserve(struct gguf_buf *b, size_t extra);
enum gguf_status gguf_buf_add(struct gguf_buf *b, const void *p, size_t n);
void gguf_buf_free(struct gguf_buf *b);

/* ---- types --------------------------------------------------------- */

/* "uint8", "string", "array", ... ; NULL if out of range. */
const char *gguf_type_name(enum gguf_type t);
/* Inverse of gguf_type_name for scalar names and "string"; -1 if unknown. */
int gguf_type_from_name(const char *name, size_t len);
/* Bytes of a fixed-size scalar type; 0 for string, array and unknown. */
size_t gguf_type_size(enum gguf_type t);

/* ggml tensor types.  Returns false for unknown or removed ids. */
bool gguf_ggml_type_known(uint32_t ggml_type);
/* Lower-case ggml name ("f32", "q4_K", "bf16"); NULL if unknown. */
const char *gguf_ggml_type_name(uint32_t ggml_type);
int gguf_ggml_type_from_name(const char *name); /* -1 if unknown */
/* The name llama.cpp gives a general.file_type value (its llama_ftype:
 * "Q4_K_M", "F16", "BF16", ...); NULL if unknown. */
const char *gguf_file_type_name(uint64_t file_type);
uint32_t gguf_ggml_blck_size(uint32_t ggml_type); /* 0 if unknown */
uint32_t gguf_ggml_type_size(uint32_t ggml_type); /* bytes per block */
/* Bytes of a tensor of that type and shape; false on overflow, unknown
 * type, or ne[0] not a multiple of the block size. */
bool gguf_ggml_nbytes(uint32_t ggml_type, uint32_t n_dims, const int64_t *ne,
                      uint64_t *out);

/* ---- reserved keys and layout rules (gguf/keys.c) ------------------- */

/* True if key (len bytes) is GGUF_FILLER_KEY, the hidden filler KV. */
bool gguf_key_is_filler(const char *key, size_t len);
/* Whether key i is ggufs's own header padding (hidden from listings): a
 * key named so that ggufs did not write is a normal key (keys.c). */
bool gguf_kv_is_padding(const gguf_ctx *ctx, int64_t i);
/* True if key (len bytes) is GGUF_ALIGNMENT_KEY. */
bool gguf_key_is_alignment(const char *key, size_t len);
/* True if key is in the overlay's own namespace (GGUF_OVERLAY_NS): such
 * keys say which source an overlay belongs to, and are never part of the
 * model it describes. */
bool gguf_key_is_overlay(const char *key, size_t len);
/* x rounded up to a multiple of align (> 0): the rule for the data start
 * (end of the tensor infos) and for each tensor's padding. */
uint64_t gguf_align_up(uint64_t x, uint64_t align);
/* Parses a split-set file name "...-NNNNN-of-MMMMM.gguf" (gguf-split's
 * naming, docs/format.md, Split sets): *no and *count (1-based) and *cut,
 * the offset of the '-' that starts the suffix.  False if path has no such
 * suffix. */
bool gguf_split_name(const char *path, int *no, int *count, size_t *cut);

/* ---- opening (gguf/read.c; gguf_new, gguf_close: gguf/ctx.c) ------- */

enum gguf_open_flags {
    GGUF_OPEN_RDWR = 1 << 0, /* open fd O_RDWR (for commits) */
    GGUF_OPEN_ALLOW_NESTED = 1
                             << 1, /* accept arrays of arrays (ggml doesn't) */
};

/* Reads and validates the header of the GGUF file at path (never the
 * tensor data).  On success *out is a new context.  On failure returns the
 * status and err->msg names the problem and where, e.g.
 * "tensor 'x' data ends at 5368709120, past the end of the file (4294967296)".
 * Files ggml's reference reader accepts are accepted, except those whose
 * tensor data runs past the end of the file; files it rejects are refused,
 * except the looser cases that only record a warning: non-contiguous but
 * in-bounds, non-overlapping tensor data, tensor type ids from 40 up (sized
 * from the next tensor's offset) and bool bytes other than 0 and 1
 * (docs/format.md, Where ggufs differs from ggml). */
enum gguf_status gguf_open(gguf_ctx **out, const char *path, unsigned flags,
                           struct gguf_error *err);
/* A model file opened once (file.c): the path is looked up one time, the
 * last component without following a symlink (O_NOFOLLOW) and checked to
 * be a regular file; recovery, parsing, the mount's lock and the commit
 * then use fd, and the files beside the model are reached through dfd.
 * rdwr: 1 read-write, 0 read-only, -1 read-write if permitted.  On failure
 * f is closed and err names the path and why. */
struct gguf_file {
    int dfd, fd;      /* its directory; the file itself */
    char *path;       /* as given: for messages and the names beside it */
    const char *base; /* its last component (points into path) */
    struct stat sb;   /* fstat of fd when opened */
    int writable;     /* fd is open read-write */
};
void gguf_file_init(struct gguf_file *f);
enum gguf_status gguf_file_open(struct gguf_file *f, const char *path, int rdwr,
                                struct gguf_error *err);
/* gguf_file_open with its directory already open (dfd, duplicated: the
 * caller keeps its own): no path is looked up but path's last component,
 * in dfd, without following a symlink; path names the file in messages
 * and the names beside it.  For a directory opened where a path must not
 * be followed (a store's model, opened beneath the store). */
enum gguf_status gguf_file_open_at(struct gguf_file *f, int dfd,
                                   const char *path, int rdwr,
                                   struct gguf_error *err);
/* Opens f->base in f->dfd again (after recovery replaced the inode). */
enum gguf_status gguf_file_reopen(struct gguf_file *f, struct gguf_error *err);
/* Content-addressed files (issue 32): a file whose name is its hash is
 * never written by any mount, since a write makes the name a lie (an
 * ollama blob, a Hugging Face cache blob reached through its snapshot's
 * symbolic link).  The rule, on a path's last two components: the name
 * is 40, 64 or 128 hex digits (sha1, sha256, sha512: the HF cache's
 * blobs/HASH), optionally after "sha256-" or "sha256:" (ollama's
 * blobs/sha256-HEX, older ollamas' sha256:HEX), or the file sits in a
 * directory named "blobs" (a store's blob directory, whatever its names).
 * The hash is not checked (that reads the whole file): the name decides.
 * gguf_name_is_hash applies it to a path; gguf_file_hash_named to the file
 * f has open, by the name the kernel gives its descriptor
 * (/proc/self/fd/N: every symbolic link resolved, so a snapshot's link
 * counts as its blob), else f->path; the name used into real (n bytes)
 * when real is not NULL. */
bool gguf_name_is_hash(const char *path);
bool gguf_file_hash_named(const struct gguf_file *f, char *real, size_t n);
/* f open read-write becomes read-only: f->base opened again read-only in
 * f->dfd and checked to be the same file (device, inode); GGUF_E_CHANGED
 * when the name now leads elsewhere. */
enum gguf_status gguf_file_drop_write(struct gguf_file *f,
                                      struct gguf_error *err);
void gguf_file_close(struct gguf_file *f);
/* gguf_open on a file already open: the context gets its own duplicate of
 * f->fd (same open file description: a flock taken on either holds for
 * both) and f->path as its path. */
enum gguf_status gguf_open_file(gguf_ctx **out, const struct gguf_file *f,
                                unsigned flags, struct gguf_error *err);
/* The file of ctx parsed again as it is now, through ctx's own descriptor
 * (no path lookup): what a diff against the file on disk needs. */
enum gguf_status gguf_reopen(const gguf_ctx *ctx, gguf_ctx **out,
                             struct gguf_error *err);
/* Same, on bytes in memory (copied); used by tests and fuzzers. */
enum gguf_status gguf_open_mem(gguf_ctx **out, const void *data, size_t len,
                               unsigned flags, struct gguf_error *err);
/* A source of a GGUF's bytes other than a local file (a remote one, see
 * remote/): the parser asks read for growing ranges of the header
 * (first_chunk bytes first, 0: 1 MiB, then at least double, or what a
 * count says is needed; never past size).  read fills buf with n bytes at
 * off, or fewer only where the source ends (*got), and returns GGUF_OK;
 * else a status and err naming what failed.  A local file opened by
 * gguf_open/gguf_open_file is read through the same interface. */
struct gguf_reader {
    enum gguf_status (*read)(void *u, uint64_t off, void *buf, size_t n,
                             size_t *got, struct gguf_error *err);
    void *u;
    uint64_t size;        /* bytes in the source */
    uint64_t first_chunk; /* bytes of the first read; 0: 1 MiB */
    /* The most header bytes read (0: size).  A source whose size is only
     * a claim (a server's) bounds with it what the parser reads and keeps:
     * a header that needs more is refused (GGUF_E_FORMAT) before it is
     * read. */
    uint64_t max_header;
};
/* Parses and validates the header read through rd, as gguf_open does.
 * The context has no file descriptor (gguf_fd is -1) and name (a URL) as
 * its path; it can be read and edited in memory, never committed
 * (GGUF_OPEN_RDWR is refused).  The context keeps rd (the unedited live
 * header is the source's own bytes, read through it): the source must
 * outlive the context. */
enum gguf_status gguf_open_reader(gguf_ctx **out, const struct gguf_reader *rd,
                                  const char *name, unsigned flags,
                                  struct gguf_error *err);
/* The header ctx was opened from, as it was read (before any edit; a
 * commit does not change it), parsed again from the bytes ctx keeps: no
 * I/O, whatever the source (a file, a remote reader).  A memory context
 * with ctx's keys and tensor infos; flags as for gguf_open. */
enum gguf_status gguf_open_original(gguf_ctx **out, const gguf_ctx *ctx,
                                    unsigned flags, struct gguf_error *err);
/* A new, empty context (no keys, no tensors) of the given version. */
gguf_ctx *gguf_new(uint32_t version);
void gguf_close(gguf_ctx *ctx);

/* Warnings recorded while opening (looser cases above). */
int gguf_n_warnings(const gguf_ctx *ctx);
const char *gguf_warning(const gguf_ctx *ctx, int i);

/* ---- file-level getters (gguf/ctx.c, as the two sections below) ---- */

uint32_t gguf_version(const gguf_ctx *ctx);
uint32_t gguf_alignment(const gguf_ctx *ctx);
/* Absolute offset of the data section as read from the file. */
uint64_t gguf_data_offset(const gguf_ctx *ctx);
uint64_t gguf_file_size(const gguf_ctx *ctx);
/* The file descriptor the context reads from (-1 for memory and reader
 * contexts, and once gguf_release_fd has closed it). */
int gguf_fd(const gguf_ctx *ctx);
/* The identity of the file a context was opened from (fstat when opened,
 * or after a commit): what a descriptor opened again later must match.
 * gguf_ident is false for memory and reader contexts. */
struct gguf_ident {
    dev_t dev;
    ino_t ino;
    uint64_t size;
    int64_t mtime_ns;
};
bool gguf_ident(const gguf_ctx *ctx, struct gguf_ident *out);
/* Closes ctx's descriptor: its header, path and identity stay, so it can
 * still be looked at (never read, edited into a commit or reopened by
 * gguf_reopen); whoever reads its file opens it again and checks it with
 * gguf_ident.  gguf_open_set releases every shard's but the first's. */
void gguf_release_fd(gguf_ctx *ctx);
const char *gguf_path(const gguf_ctx *ctx);

/* ---- key/value pairs ---------------------------------------------- */

/* KV index i is in [0, gguf_n_kv).  Indices change when keys are removed;
 * gguf_kv_id is stable for the life of the context. */
int64_t gguf_n_kv(const gguf_ctx *ctx);
int64_t gguf_find_key(const gguf_ctx *ctx, const char *key, size_t len);
/* Key bytes (NUL-terminated for convenience; keys may contain NUL, so use
 * the length). */
const char *gguf_kv_key(const gguf_ctx *ctx, int64_t i, size_t *len);
uint32_t gguf_kv_id(const gguf_ctx *ctx, int64_t i);
/* One past the highest id given so far: ids are never reused, and a key
 * added later gets an id >= the value read now. */
uint32_t gguf_kv_id_end(const gguf_ctx *ctx);
int64_t gguf_find_id(const gguf_ctx *ctx, uint32_t id);
enum gguf_type gguf_kv_type(const gguf_ctx *ctx, int64_t i);
/* For arrays: element type and count; GGUF_TYPE_COUNT / 0 otherwise. */
enum gguf_type gguf_kv_arr_type(const gguf_ctx *ctx, int64_t i);
uint64_t gguf_kv_arr_n(const gguf_ctx *ctx, int64_t i);
/* The value's on-disk bytes after the uint32 type field (for an array:
 * elem type, count, elements).  Valid until the key is edited. */
const uint8_t *gguf_kv_payload(const gguf_ctx *ctx, int64_t i, size_t *len);
/* True if key i of a and key j of b hold the same type and value (the
 * same payload bytes); false if either index is out of range. */
bool gguf_kv_same(const gguf_ctx *a, int64_t i, const gguf_ctx *b, int64_t j);
/* Type as shown to users: "uint32", "string", "array[string]",
 * "array[array]"; writes into buf (>= 32 bytes) and returns buf. */
const char *gguf_kv_type_str(const gguf_ctx *ctx, int64_t i, char *buf,
                             size_t n);
/* Typed accessors: return false (and leave *out alone) on a wrong type. */
bool gguf_kv_get_u64(const gguf_ctx *ctx, int64_t i,
                     uint64_t *out); /* any unsigned int */
bool gguf_kv_get_i64(const gguf_ctx *ctx, int64_t i,
                     int64_t *out); /* any int that fits */
bool gguf_kv_get_str(const gguf_ctx *ctx, int64_t i, const char **s,
                     size_t *len);

/* ---- tensors ------------------------------------------------------ */

int64_t gguf_n_tensors(const gguf_ctx *ctx);
int64_t gguf_find_tensor(const gguf_ctx *ctx, const char *name, size_t len);
const char *gguf_tensor_name(const gguf_ctx *ctx, int64_t i, size_t *len);
uint32_t gguf_tensor_type(const gguf_ctx *ctx, int64_t i);
uint32_t gguf_tensor_n_dims(const gguf_ctx *ctx, int64_t i);
/* ne[0..3]; missing dimensions are 1. */
const int64_t *gguf_tensor_ne(const gguf_ctx *ctx, int64_t i);
/* Offset relative to the data section, as stored. */
uint64_t gguf_tensor_rel_offset(const gguf_ctx *ctx, int64_t i);
/* Absolute offset in the file = data offset + relative offset. */
uint64_t gguf_tensor_offset(const gguf_ctx *ctx, int64_t i);
uint64_t gguf_tensor_size(const gguf_ctx *ctx, int64_t i);

/* ---- text codec (gguf/text.c, textesc.c, textfloat.c) -------------- */

/* Renders a value's payload (as from gguf_kv_payload) in the text format of
 * man/ggufs.1, appending to out.  Lossless: gguf_parse_text of the result
 * gives back the identical payload (except a bool byte other than 0 and 1,
 * which renders as "true"). */
enum gguf_status gguf_render(enum gguf_type type, const uint8_t *payload,
                             size_t len, struct gguf_buf *out,
                             struct gguf_error *err);
/* The length of the text gguf_render would produce, measured without
 * making it (memory: one element's text, an inner array's line in pieces
 * of 64 KiB): the size of a file in meta/ at the cost of a scan. */
enum gguf_status gguf_render_size(enum gguf_type type, const uint8_t *payload,
                                  size_t len, uint64_t *size,
                                  struct gguf_error *err);
/* Where a value's text can be made again from the middle: the text offset,
 * payload position and element index of the first array element boundary
 * every GGUF_TEXT_STEP bytes of text (so marks cost 24 bytes per 64 KiB of
 * text).  Only arrays have marks; other values are one line. */
#define GGUF_TEXT_STEP ((uint64_t)64 << 10)
struct gguf_text_mark {
    uint64_t text, pos, elem;
};
struct gguf_text_map {
    uint64_t size; /* the text's length */
    struct gguf_text_mark *marks;
    size_t n, cap;
};
/* gguf_render_size that also records the marks (map is reset first). */
enum gguf_status gguf_render_map(enum gguf_type type, const uint8_t *payload,
                                 size_t len, struct gguf_text_map *map,
                                 struct gguf_error *err);
/* Appends to out the bytes [off, off + n) of the text (fewer at its end),
 * made from the last mark of map (NULL: none) at or before off: the cost
 * of n bytes plus at most GGUF_TEXT_STEP bytes and one element, in time
 * and memory.  map must have been made from this very payload. */
enum gguf_status gguf_render_window(enum gguf_type type, const uint8_t *payload,
                                    size_t len, const struct gguf_text_map *map,
                                    uint64_t off, size_t n,
                                    struct gguf_buf *out,
                                    struct gguf_error *err);
void gguf_text_map_free(struct gguf_text_map *map);
/* Parses text as a value of type (with arr_type for arrays) and appends
 * the on-disk payload to out.  Refuses malformed text, out-of-range values
 * and partial array lines with GGUF_E_INVAL / GGUF_E_RANGE and a message
 * naming the line. */
enum gguf_status gguf_parse_text(enum gguf_type type, enum gguf_type arr_type,
                                 const char *text, size_t len,
                                 struct gguf_buf *out, struct gguf_error *err);
/* Escapes one string array element so that it is one line (no newline
 * appended); and its inverse.  Used by the codec; exported for tests. */
enum gguf_status gguf_escape_line(const uint8_t *s, size_t len,
                                  struct gguf_buf *out);
enum gguf_status gguf_unescape_line(const char *s, size_t len,
                                    struct gguf_buf *out,
                                    struct gguf_error *err);
/* True if s is valid UTF-8 (no overlongs, no surrogates, nothing above
 * U+10FFFF). */
bool gguf_utf8_valid(const uint8_t *s, size_t len);

/* ---- one-line summaries (gguf/summary.c) --------------------------- */

/* The most bytes of a value's text a summary shows (the rule: summary.c). */
#define GGUF_SHORT_MAX 80
/* The header line of a summary (meta.tsv), and a key's line: its file name
 * in meta/ (gguf_name_escape), type, element count (1 for a scalar) and
 * its value shortened (gguf_value_short), tab-separated, '\n'-ended,
 * appended to out. */
#define GGUF_SUMMARY_HEADER "name\ttype\tcount\tvalue\n"
enum gguf_status gguf_kv_summary(const gguf_ctx *ctx, int64_t i,
                                 struct gguf_buf *out, struct gguf_error *err);
/* A value (type and payload as from gguf_kv_payload, validated) as one
 * line of at most about GGUF_SHORT_MAX bytes, marked where cut; appended
 * to out (no newline). */
enum gguf_status gguf_value_short(enum gguf_type type, const uint8_t *payload,
                                  size_t len, struct gguf_buf *out,
                                  struct gguf_error *err);
/* The edits that make after from before (before NULL: every key of after
 * is new), one line each: the key's file name, type, its value before
 * ("(new)" if it had none) and after ("(removed)"), shortened,
 * tab-separated: first the keys after sets (in its order), then those it
 * removed.  The first max_lines lines are appended to out, *n_diff counts
 * them all.  The filler is never a difference. */
#define GGUF_DIFF_HEADER "name\ttype\tbefore\tafter\n"
enum gguf_status gguf_diff_summary(const gguf_ctx *before,
                                   const gguf_ctx *after, size_t max_lines,
                                   struct gguf_buf *out, uint64_t *n_diff,
                                   struct gguf_error *err);

/* ---- file names (gguf/names.c) ------------------------------------- */

/* Maps a key or tensor name to a file name (<= 255 bytes, no '/', no NUL,
 * never "." or ".."): '%' -> %25, '/' -> %2F, bytes < 0x20, 0x7f and bytes
 * not part of valid UTF-8 -> %HH, "." and ".." -> %2E and %2E%2E; a name
 * whose escaped form exceeds 255 bytes is cut at 237 bytes (never inside a
 * %HH) and ends in "%~" and 16 hex digits of a 64-bit FNV-1a hash of the
 * whole name.  Appends to out. */
enum gguf_status gguf_name_escape(const char *name, size_t len,
                                  struct gguf_buf *out);
/* Inverse for names without a "%~" hash suffix.  GGUF_E_INVAL for a
 * malformed %-sequence or a hashed name. */
enum gguf_status gguf_name_unescape(const char *fname, size_t len,
                                    struct gguf_buf *out,
                                    struct gguf_error *err);

/* ---- editing (gguf/edit.c) ---------------------------------------- */

/* True if key follows the specification's rules for new keys: ASCII
 * lower_snake_case segments ([a-z0-9_]+) joined by '.', at most 65535 bytes
 * (docs/format.md, Value types). */
bool gguf_key_valid(const char *key, size_t len);
/* Sets key to a value given as its on-disk payload (validated).  An existing
 * key keeps its position; a new key goes last.  general.alignment is
 * refused with GGUF_E_PERM. */
enum gguf_status gguf_set_payload(gguf_ctx *ctx, const char *key, size_t klen,
                                  enum gguf_type type, const uint8_t *payload,
                                  size_t len, struct gguf_error *err);
enum gguf_status gguf_remove_key(gguf_ctx *ctx, int64_t i,
                                 struct gguf_error *err);
enum gguf_status gguf_rename_key(gguf_ctx *ctx, int64_t i, const char *key,
                                 size_t klen, struct gguf_error *err);
/* Appends a tensor info (used to build fixtures): offset is placed after the
 * previous tensor, rounded up to the alignment. */
enum gguf_status gguf_add_tensor(gguf_ctx *ctx, const char *name, size_t nlen,
                                 uint32_t ggml_type, uint32_t n_dims,
                                 const int64_t *ne, struct gguf_error *err);
/* True once any key was set, removed or renamed. */
bool gguf_dirty(const gguf_ctx *ctx);

/* ---- writing (gguf/write.c) ---------------------------------------- */

/* Bytes of the smallest serialized header up to the end of the tensor
 * infos (without padding) for the current keys and tensors, not counting
 * a filler KV (the writer drops or resizes it as needed). */
uint64_t gguf_header_size(const gguf_ctx *ctx);
/* Serializes the header and pads it with zeros to exactly target bytes
 * (target 0: to the next multiple of the alignment).  If target is larger
 * than the padded header, the slack is absorbed by a GGUF_FILLER_KEY string
 * KV placed last (replacing an existing one), so that the data section
 * starts exactly at target.  GGUF_E_RANGE if the header cannot fit. */
enum gguf_status gguf_write_header(const gguf_ctx *ctx, uint64_t target,
                                   struct gguf_buf *out,
                                   struct gguf_error *err);
/* Writes a whole new GGUF file (header, then tensor data with zero padding)
 * at path; data(i) returns tensor i's bytes (gguf_tensor_size of them) or
 * NULL for zeros.  Used for fixtures. */
enum gguf_status gguf_write_file(const gguf_ctx *ctx, const char *path,
                                 const void *(*data)(void *u, int64_t i),
                                 void *u, struct gguf_error *err);

/* ---- incremental text checks and key order (gguf/textcheck.c) ------ */

/* Validates text being written piecemeal as a value of type/arr_type,
 * before it is complete.  For arrays, complete lines from *checked onwards
 * are parsed and *checked advances past the last complete line; for
 * scalars, text with a newline must parse completely and text without one
 * must be a plausible prefix of a valid value.  Returns GGUF_OK if the text
 * can still become valid. */
enum gguf_status gguf_text_check_prefix(enum gguf_type type,
                                        enum gguf_type arr_type,
                                        const char *text, size_t len,
                                        size_t *checked,
                                        struct gguf_error *err);
/* The zero value of a type (0, false, "", empty array of arr_type) as a
 * payload appended to out. */
enum gguf_status gguf_zero_payload(enum gguf_type type, enum gguf_type arr_type,
                                   struct gguf_buf *out);
/* Moves KV i to position pos (clamped), keeping the order of the others. */
enum gguf_status gguf_move_key(gguf_ctx *ctx, int64_t i, int64_t pos,
                               struct gguf_error *err);

/* ---- the header a commit would write (gguf/live.c) ------------------ */

/* Serializes the header that gguf_commit would write for ctx's current
 * metadata into out, and sets *data_offset to where the data section would
 * start: the current data start if the header fits (or ctx is not dirty:
 * then out is the file's own header bytes), else the grown start, with the
 * same block rounding and headroom a commit uses.  Lets a reader see the
 * committed file before the commit happens (the live view). */
enum gguf_status gguf_plan_header(const gguf_ctx *ctx, struct gguf_buf *out,
                                  uint64_t *data_offset,
                                  struct gguf_error *err);

/* ---- shard sets (gguf/shards.c) ------------------------------------- */

/* Opens path (or first, if not NULL: that file, already open) and, if it
 * is the first file of a split set
 * (NAME-00001-of-0000N.gguf with split.count N > 1), every other shard,
 * checking split.no, split.count, split.tensors.count and that no tensor
 * name repeats.  *out gets n contexts (1 for a plain file); flags apply to
 * the first, the others are read-only and have their descriptors released
 * (gguf_release_fd: only the first keeps one).  On failure bad names the
 * shard at fault and err says what is wrong with it. */
enum gguf_status gguf_open_set(const char *path, const struct gguf_file *first,
                               unsigned flags, gguf_ctx ***out, int *n,
                               char *bad, size_t bad_len,
                               struct gguf_error *err);
/* The same for any source: open(u, name, flags, &ctx, err) opens one file
 * of the set, path first, then each sibling named like it
 * (NAME-0000K-of-0000N.gguf: the same prefix, a URL's too). */
typedef enum gguf_status (*gguf_opener)(void *u, const char *name,
                                        unsigned flags, gguf_ctx **out,
                                        struct gguf_error *err);
enum gguf_status gguf_open_set_by(const char *path, gguf_opener open, void *u,
                                  unsigned flags, gguf_ctx ***out, int *n,
                                  char *bad, size_t bad_len,
                                  struct gguf_error *err);
void gguf_close_set(gguf_ctx **v, int n);
/* The context of the single file gguf-split --merge would write for the
 * set: the first shard's keys (split.count set to 0, which moves it last),
 * then every shard's tensor infos in order, offsets recomputed.  NULL and
 * err on failure. */
gguf_ctx *gguf_merge(gguf_ctx *const *v, int n, struct gguf_error *err);
/* The context of one file with first's keys (split: as gguf_merge, else
 * unchanged) and the n tensor infos t names, in that order: each the
 * name, type and shape of tensor t[g].i of t[g].ctx, offsets laid out
 * anew at first's alignment.  A mix of tensors from several files
 * (ggufs -o mix).  NULL and err on failure. */
struct gguf_pick {
    const gguf_ctx *ctx;
    int64_t i;
};
gguf_ctx *gguf_merge_picks(const gguf_ctx *first, bool split,
                           const struct gguf_pick *t, int64_t n,
                           struct gguf_error *err);

/* ---- commit (gguf/commit.c, recover.c, saved.c) -------------------- */

enum gguf_commit_how {
    GGUF_COMMIT_NONE,    /* nothing to do: no edits */
    GGUF_COMMIT_INPLACE, /* new header fit before the data start */
    GGUF_COMMIT_INSERT,  /* grew: blocks inserted with FALLOC_FL_INSERT_RANGE */
    GGUF_COMMIT_REWRITE, /* grew: new file written beside, renamed over */
};

/* Progress of long work (a rewrite commit's copy of the data): fn is
 * called from the working thread with the bytes done so far and the
 * total, every few MiB, and once with total 0 when the work is over. */
typedef void (*gguf_progress_fn)(void *user, uint64_t done, uint64_t total);
/* Sets ctx's progress callback for its commits (NULL: none). */
void gguf_set_progress(gguf_ctx *ctx, gguf_progress_fn fn, void *user);

struct gguf_commit_info {
    enum gguf_commit_how how;
    uint64_t old_data_offset, new_data_offset;
    uint64_t bytes_written; /* header + copied data, excluding the journal */
};

enum gguf_commit_flags {
    GGUF_COMMIT_NO_INSERT = 1 << 0, /* skip insert-range (tests of rewrite) */
    /* Never change the file's bytes (in place or insert): readers hold it
     * (the live view by passthrough maps the file itself), so the commit
     * writes a new file beside and renames it over, and they keep the old
     * inode.  Costs a copy of the data. */
    GGUF_COMMIT_NEW_FILE = 1 << 1,
    /* Write the smallest header, without ggufs's filler key
     * (GGUF_FILLER_KEY), padded to the alignment, edits or not (ggufs
     * --compact): in place when that keeps the data start, else by a
     * rewrite (the data start moves down). */
    GGUF_COMMIT_COMPACT = 1 << 2,
};

/* Writes ctx's current metadata into its file (opened with GGUF_OPEN_RDWR),
 * moving no tensor byte when the header still fits, crash-safely: a
 * journal FILE.ggufs-journal beside the file (in the user's state
 * directory if the file's directory is not writable) is fsync'ed before
 * the file is touched, so a kill at any instant leaves a state
 * gguf_recover completes.
 * Refuses with GGUF_E_CHANGED if the file's identity, size, mtime or ctime
 * differ from what ctx last saw (the ctime catches an in-place write whose
 * mtime was put back).  On success ctx describes the file as written
 * (data offset, fd, identity) and gguf_dirty is false; kv ids are kept. */
enum gguf_status gguf_commit(gguf_ctx *ctx, unsigned flags,
                             struct gguf_commit_info *info,
                             struct gguf_error *err);
/* Completes (or, if the journal is incomplete, discards) an interrupted
 * commit of the file at path.  *did is set to true if anything was done.
 * Acts only on what a commit of this file could have left (recover.c,
 * Trust): path must not be a symlink (its last component) and must be a
 * regular file; a journal must be a regular 0600 file with one link, owned
 * by the effective uid or the file's owner, recorded for the file's device
 * and inode, with valid old and new headers; a PATH.ggufs-new is removed
 * only if regular, one link, owned likewise.  Otherwise nothing is written
 * or removed and the status is GGUF_E_PERM (GGUF_E_CHANGED for another
 * inode's journal) with one line naming the file and why. */
enum gguf_status gguf_recover(const char *path, bool *did,
                              struct gguf_error *err);
/* Same, on a file opened with gguf_file_open (read-write, if anything is
 * to be done).  If recovery put a new inode in place (an insert finished
 * by a rewrite), f->fd is the new file afterwards. */
enum gguf_status gguf_recover_file(struct gguf_file *f, bool *did,
                                   struct gguf_error *err);
/* Tensor bytes written (tensorw.c, issue 24; the rules are its top
 * comment).  In place: gguf_data_pwrite writes n bytes at absolute file
 * offset pos, which must lie in the data section (GGUF_E_RANGE);
 * gguf_data_sync makes them durable (fdatasync); gguf_data_adopt takes
 * the file's times after such writes, so that a commit does not refuse
 * the file as changed by someone else.  A stage replaces [pos, pos + len)
 * whole, crash-safely: gguf_stage_new makes its unnamed file (beside the
 * GGUF, or in the state directory), gguf_stage_write / gguf_stage_read
 * take off relative to pos (bytes never written are the file's old ones),
 * gguf_stage_apply copies it in under a journal (op 3) and the commit
 * lock: after a crash at any step, gguf_recover leaves the old bytes or
 * the new ones.  A stage may be written and applied again. */
typedef struct gguf_stage gguf_stage;
enum gguf_status gguf_data_pwrite(gguf_ctx *ctx, uint64_t pos, const void *p,
                                  size_t n, struct gguf_error *err);
enum gguf_status gguf_data_sync(gguf_ctx *ctx, struct gguf_error *err);
void gguf_data_adopt(gguf_ctx *ctx);
enum gguf_status gguf_stage_new(gguf_ctx *ctx, uint64_t pos, uint64_t len,
                                gguf_stage **out, struct gguf_error *err);
enum gguf_status gguf_stage_write(gguf_ctx *ctx, gguf_stage *s, uint64_t off,
                                  const void *p, size_t n,
                                  struct gguf_error *err);
enum gguf_status gguf_stage_read(gguf_ctx *ctx, gguf_stage *s, uint64_t off,
                                 void *p, size_t n, struct gguf_error *err);
enum gguf_status gguf_stage_apply(gguf_ctx *ctx, gguf_stage *s,
                                  struct gguf_error *err);
void gguf_stage_free(gguf_stage *s);
/* True if a journal of an interrupted commit lies beside path, or in the
 * user's state directory for path's device and inode (a commit whose
 * directory was not writable); gguf_recover completes it. */
bool gguf_commit_interrupted(const char *path);
/* Saves ctx's metadata (all keys, as a tensor-less GGUF, plus the list of
 * removed keys) to a new file beside the GGUF, named in out (>= PATH_MAX),
 * so that failed commits lose no edit. */
enum gguf_status gguf_save_edits(const gguf_ctx *ctx, char *out, size_t n,
                                 struct gguf_error *err);

/* Applies a file of edits gguf_save_edits wrote (e, opened from it) to
 * ctx: the model's metadata becomes what the failed commit meant to
 * write (every key of e set, the keys it lists as removed removed; an
 * existing key keeps its place, a new one goes last).  Refuses, changing
 * nothing: a file with tensors or an overlay's keys (GGUF_E_FORMAT,
 * GGUF_E_INVAL), a general.alignment of another value (GGUF_E_PERM), and
 * a model with a key e neither holds nor removes (GGUF_E_CHANGED: the
 * edits were saved from another version; err names the keys).  *set and *removed count the keys changed; names (emptied
 * first) lists the changed keys, or the unknown ones, ", "-separated and
 * shortened. */
enum gguf_status gguf_saved_apply(gguf_ctx *ctx, const gguf_ctx *e,
                                  struct gguf_buf *names, int64_t *set,
                                  int64_t *removed, struct gguf_error *err);

/* ---- per-user state of a model (gguf/state.c, gguf/pending.c) ------- */

/* Files ggufs keeps about a model in the user's state directory
 * ($XDG_STATE_HOME/ggufs, else ~/.local/state/ggufs), keyed by the model's
 * absolute path: its pending (uncommitted) edits and the outcome of the
 * last commit nobody waited for.  Checked as hostile on every read (owner,
 * no symlinks, at most GGUF_STATE_MAX bytes). */
enum gguf_state_kind {
    GGUF_STATE_PENDING,
    GGUF_STATE_STATUS,
    GGUF_STATE_PENDING_OLD,
    GGUF_STATE_OVERLAY_MOUNT, /* a read-write overlay mount's mountpoint and
                                 overlay, while it runs (fs/cmd/overlaycmds.c) */
    GGUF_STATE_OVERLAY_NAME   /* keyed by a store model's name: the source
                                 whose overlay holds its edits
                                 (fs/edits/carry.c) */
};
#define GGUF_STATE_MAX (UINT64_C(1) << 31)
/* Where the file of that kind for model (an absolute path) is. */
enum gguf_status gguf_state_path(const char *model, enum gguf_state_kind kind,
                                 char *out, size_t n, struct gguf_error *err);
/* Replaces it atomically and durably with body. */
enum gguf_status gguf_state_write(const char *model, enum gguf_state_kind kind,
                                  const void *body, size_t len,
                                  struct gguf_error *err);
/* Its body into out; *found false (and GGUF_OK) when there is none. */
enum gguf_status gguf_state_read(const char *model, enum gguf_state_kind kind,
                                 struct gguf_buf *out, bool *found,
                                 struct gguf_error *err);
enum gguf_status gguf_state_remove(const char *model, enum gguf_state_kind kind,
                                   struct gguf_error *err);
/* The state directory opened for listing (checked as the state's: a
 * directory owned by the effective user, writable by nobody else; never
 * created): its descriptor, or -1 with err (GGUF_E_NOTFOUND: none yet).
 * Its files are read by gguf_state_read (or gguf_overlay_load), which
 * check them. */
int gguf_state_dir_fd(struct gguf_error *err);
/* Saves ctx's edits (the keys that differ from the file and the removed
 * ones, with the identity of the file they were made against) as the
 * model's pending record.  disk, if not NULL, caches the file as it is on
 * disk between calls: opened at the first (NULL in), kept for the next;
 * the caller closes it, and must once the file changes (a commit). */
enum gguf_status gguf_pending_save(const gguf_ctx *ctx, gguf_ctx **disk,
                                   struct gguf_error *err);
/* Applies the model's pending record to ctx (opened on that model), if
 * there is one (*found): GGUF_E_CHANGED, nothing applied, if the file is
 * not the one the edits were made against.  The caller commits. */
enum gguf_status gguf_pending_apply(gguf_ctx *ctx, bool *found,
                                    struct gguf_error *err);
/* One line on what the pending record of path holds ("3 keys set, 1
 * removed", counted against the file as it is now) into out; *found false
 * when there is none; *in_file true when the file already holds exactly
 * those edits (a commit completed after the record was written); *stale
 * true when the file at path is not the one the edits were made against
 * (another inode, size or mtime). */
enum gguf_status gguf_pending_describe(const char *path, char *out, size_t n,
                                       bool *found, bool *in_file, bool *stale,
                                       struct gguf_error *err);
/* The pending record of path as lines (gguf_diff_summary: name, type,
 * value now, value the edits set or "(removed)") against the file as it
 * is now, applied in memory only; *found false when there is none. */
enum gguf_status gguf_pending_show(const char *path, size_t max_lines,
                                   struct gguf_buf *out, uint64_t *n_diff,
                                   bool *found, struct gguf_error *err);
/* The daemons' log (a mount without a terminal logs there, and to
 * syslog): LOG in the state directory, at most GGUF_LOG_MAX bytes (and a
 * line per daemon) before it is rotated to LOG.1, which it replaces.
 * gguf_state_log_open: an fd for appending (O_APPEND), the directory and
 * the file checked as the state's (owner, one link, O_NOFOLLOW),
 * rotating a full file first; -1 with err. */
#define GGUF_LOG_MAX (UINT64_C(1) << 20)
enum gguf_status gguf_state_log_path(char *out, size_t n,
                                     struct gguf_error *err);
int gguf_state_log_open(struct gguf_error *err);
/* Moves the pending record of path aside (kind GGUF_STATE_PENDING_OLD,
 * replacing an older one), so that a new mount may keep its own. */
enum gguf_status gguf_state_retire(const char *model, struct gguf_error *err);

/* ---- overlays (gguf/overlay.c) ------------------------------------- */

/* An overlay keeps the edits of a model that must not change (read-only,
 * immutable, shared, remote) in a file of its own: a tensor-less GGUF
 * whose first keys, in the namespace GGUF_OVERLAY_NS, say which source it
 * belongs to (struct gguf_overlay_id), then every key the edits set
 * (changed or new), in the edited model's order, then the list of the
 * source's keys the edits removed.  Applying it removes the listed keys
 * and sets the others (a key the source has keeps its place, a new one goes last),
 * which gives the edited model's keys in its order.  The file's rules
 * (layout, where it lives, trust, crash-safe writes, fault points):
 * overlay.c. */
#define GGUF_OVERLAY_NS "ggufs.overlay."
#define GGUF_OVERLAY_VERSION 1
/* Which source an overlay belongs to.  A local source is known by its
 * contents (size and a hash of every shard's header), not by its path: a
 * model moved with its overlay named explicitly still matches, a model
 * changed in place does not.  A remote source adds its URL and ETag. */
struct gguf_overlay_id {
    char source[4096]; /* absolute path, or the URL of a remote source */
    char etag[512];    /* remote: the server's version its bytes were read
                          under (ETag; fs/source/remote.c makes the text) */
    bool remote;
    uint64_t size;   /* bytes of the source, every shard counted */
    uint32_t shards; /* files in the set (1 for a plain file) */
    char hash[48];   /* "xxh3-128:" and 32 hex digits, of the shards'
                        headers (to the end of the tensor infos) in order */
};
/* The identity of the set v[0..n) (contexts as opened, before any edit)
 * as the source named source (remote: a URL, with etag).  GGUF_E_PERM if
 * the first file has a key in the GGUF_OVERLAY_NS namespace (it would
 * clash with the overlay's own). */
enum gguf_status gguf_overlay_identify(gguf_ctx *const *v, int n,
                                       const char *source, bool remote,
                                       const char *etag,
                                       struct gguf_overlay_id *id,
                                       struct gguf_error *err);
/* Where the overlay of source (absolute path or URL) is by default: the
 * user's state directory, named by a hash of source. */
enum gguf_status gguf_overlay_default_path(const char *source, char *out,
                                           size_t n, struct gguf_error *err);
/* Reads the overlay at path (NULL: source's default) and parses it into
 * *ov (a memory context) and its identity into *id; *found false (and
 * GGUF_OK) when there is none.  Refuses (GGUF_E_PERM, one line naming the
 * file) a symlink, anything but a regular file with one link owned by the
 * effective user and writable by nobody else, more than GGUF_STATE_MAX
 * bytes; GGUF_E_FORMAT for a file that is not a valid GGUF or not an
 * overlay. */
enum gguf_status gguf_overlay_load(const char *path, const char *source,
                                   gguf_ctx **ov, struct gguf_overlay_id *id,
                                   bool *found, struct gguf_error *err);
/* True if an overlay made for `made` applies to the source `now`; else
 * false and why (one clause per difference: "made for 1234 bytes, the
 * source has 1240") in why[0, n). */
bool gguf_overlay_matches(const struct gguf_overlay_id *made,
                          const struct gguf_overlay_id *now, char *why,
                          size_t n);
/* Applies overlay ov to ctx (the source as opened; see above); *set and
 * *removed count the keys changed or added and the keys removed. */
enum gguf_status gguf_overlay_apply(gguf_ctx *ctx, const gguf_ctx *ov,
                                    int64_t *set, int64_t *removed,
                                    struct gguf_error *err);
/* The keys overlay ov edits (sets or removes) whose value in src, the
 * source's new version, is neither the one ov recorded as its base nor
 * the overlay's own (upstream changed them too): appended to names as
 * "k1, k2", *n counting them.  *based false for an overlay without bases
 * (older ggufs): then every key src does not hold as ov does counts. */
enum gguf_status gguf_overlay_conflicts(const gguf_ctx *ov, const gguf_ctx *src,
                                        struct gguf_buf *names, int64_t *n,
                                        bool *based, struct gguf_error *err);
/* Writes the edits of ctx against disk (the source as opened, without
 * edits) as the overlay of id at path (NULL: the default), crash-safely:
 * a new file beside it, synced, renamed over it, the directory synced; a
 * kill at any instant leaves the old overlay or the new one whole.  Never
 * writes the source. */
/* Tensors an overlay holds (ovtensors.c, issue 24): each written tensor's
 * bytes whole at off in the overlay's data file (the overlay's name +
 * GGUF_OVERLAY_DATA_SUFFIX, beside it, its trust rule), recorded in the
 * overlay (key ggufs.overlay.tensors), so they survive remounts.
 * gguf_overlay_tensors reads ov's records (malloc'ed, *n of them; none:
 * NULL, 0); gguf_overlay_data_open opens the data file (created 0600 if
 * create; shown: its path for messages), -1 with err (GGUF_E_NOTFOUND:
 * none); gguf_overlay_data_remove removes it if there is one. */
#define GGUF_OVERLAY_DATA_SUFFIX ".ggufs-tensors"
struct gguf_overlay_tensor {
    char *name;         /* the tensor's name */
    uint64_t off, size; /* its bytes in the data file */
};
enum gguf_status gguf_overlay_tensors(const gguf_ctx *ov,
                                      struct gguf_overlay_tensor **v, size_t *n,
                                      struct gguf_error *err);
void gguf_overlay_tensors_free(struct gguf_overlay_tensor *v, size_t n);
int gguf_overlay_data_open(const char *path, const char *source, bool create,
                           char *shown, size_t sn, struct gguf_error *err);
enum gguf_status gguf_overlay_data_remove(const char *path, const char *source,
                                          struct gguf_error *err);
/* ... and t[0, nt), the tensors it holds, recorded (none: NULL, 0). */
enum gguf_status gguf_overlay_write(const char *path, const gguf_ctx *ctx,
                                    const gguf_ctx *disk,
                                    const struct gguf_overlay_id *id,
                                    const struct gguf_overlay_tensor *t,
                                    size_t nt, struct gguf_error *err);
/* Removes the overlay at path (NULL: source's default), durably, if it is
 * one the user may trust (as gguf_overlay_load checks, the contents
 * aside); *found false when there is none. */
enum gguf_status gguf_overlay_remove(const char *path, const char *source,
                                     bool *found, struct gguf_error *err);
/* Takes the overlay's lock (path NULL: source's default; overlay.c,
 * "Lock"): *fd holds it until closed, and holder (one line or two of
 * text, or NULL) is written into it for the next one to read.
 * GGUF_E_BUSY when another holds it, with what that one wrote in
 * held_by[0, hn) (bounded, control bytes but newlines replaced);
 * GGUF_E_PERM for a lock file not to be trusted. */
enum gguf_status gguf_overlay_lock(const char *path, const char *source,
                                   const char *holder, int *fd, char *held_by,
                                   size_t hn, struct gguf_error *err);
/* Lets go of the lock fd took (closing it), removing the lock file first
 * if it is still the one fd holds: a lock file exists only while held. */
void gguf_overlay_unlock(const char *path, const char *source, int fd);

/* ---- tensor values as float32 (gguf/dequant.c, ggmlrt.c) ----------- */

/* ggufs's own converters for the simple types, and ggml's own code found
 * at run time for the rest.
 *
 * A tensor's data is a run of blocks, rows one after the other with no
 * gap: element k (ggml order, ne[0] fastest) lies in block k / blck, which
 * starts at byte (k / blck) * size.  So any byte range of the float32
 * values maps to whole blocks of the data, converted alone: a converter
 * takes whole blocks and writes blck floats per block.
 *
 * ggufs's own code covers f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0
 * and q2_K, q3_K, q4_K, q5_K, q6_K (docs/format.md, Tensor block
 * formats).  Every other type is converted by ggml's libggml-base,
 * dlopen'ed (RTLD_LOCAL) from a list of usual places or a path, and
 * trusted only once the name, block size and block bytes it reports for
 * every type ggufs knows (ids 0-39) agree with ggufs's table; ids from
 * 40 up, which ggufs does not know, take their name and sizes from ggml,
 * once ggml's own GGUF reader accepts the id. */

/* Converts n elements (a multiple of the block size) at src to float32;
 * src and dst never overlap (some converters are compiled on that
 * promise: restrict). */
typedef void (*gguf_to_float_fn)(const void *src, float *dst, int64_t n);

/* How one tensor type becomes float32. */
struct gguf_dq {
    uint32_t type;
    const char *name; /* "q4_K" */
    uint32_t blck;    /* elements per block */
    uint32_t size;    /* bytes per block */
    gguf_to_float_fn to_float;
    bool ggml; /* ggml's code (else ggufs's own) */
};

typedef struct gguf_ggml gguf_ggml; /* ggml's library, loaded (ggmlrt.c) */

/* The converter of ggml type t into dq: ggufs's own for the types it
 * covers (the vectorized one when the CPU has one), else ggml's (g may be
 * NULL) if ggml has one.  false if none. */
bool gguf_dq_find(const gguf_ggml *g, uint32_t t, struct gguf_dq *dq);
/* Name and sizes of type t: ggufs's table, else ggml's for the ids ggufs
 * does not know (g may be NULL).  false if neither knows t. */
bool gguf_dq_type(const gguf_ggml *g, uint32_t t, const char **name,
                  uint32_t *blck, uint32_t *size);
/* Elements of a tensor of that shape and the bytes its blocks take with
 * that type; false on overflow (elements past 2^61) or a first dimension
 * that is not a multiple of the block size. */
bool gguf_dq_extent(const gguf_ggml *g, uint32_t t, uint32_t n_dims,
                    const int64_t *ne, uint64_t *elems, uint64_t *bytes);

/* ---- ggml's library (ggmlrt.c) ------------------------------------- */

/* Loads ggml's library from path, or (path NULL) from the first usual
 * place that has one.  The file must be a regular file owned by root or
 * the effective user and writable by nobody else, in a directory of the
 * same kind (ggufs runs as root: a library is code).  Refused, with a
 * message naming the file, when it lacks the functions ggufs calls or
 * disagrees with ggufs's table.  GGUF_E_NOTFOUND when path is NULL and
 * no usual place has one. */
enum gguf_status gguf_ggml_load(gguf_ggml **out, const char *path,
                                struct gguf_error *err);
void gguf_ggml_unload(gguf_ggml *g);
const char *gguf_ggml_path(const gguf_ggml *g);
/* ggml's converter and sizes for type t; false if it has none. */
bool gguf_ggml_dq(const gguf_ggml *g, uint32_t t, struct gguf_dq *dq);

#endif
