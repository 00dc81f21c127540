/*
 * tokdir.c - MNT/tokenizer/ and MNT/hf/ (issue 26): the model's tokenizer
 * as plain text for grep and diff (tokens.tsv, special, merges.txt) and
 * the Hugging Face files tools look for beside a model (tokenizer.json,
 * tokenizer_config.json, special_tokens_map.json, README), made by vocab/
 * (vocab.h, which states their formats and rules) from the metadata as it
 * is now.  A directory lists a file while the metadata makes it (voc_has;
 * for tokenizer.json, whether it is made: its check is the render's
 * by-product, asked once per edit generation, present()); both are
 * always there, hf/ with at least its README saying why the others are
 * absent.
 *
 * Like meta.tsv (metatsv.c) each file is made on its first stat or open
 * at an edit generation (gfs_text_of_gen: one text per fs->generation,
 * cached under text_lock, so pending edits of meta/ show), and an open
 * serves the text of its open.  Bounded (tok_make): a file past
 * GFS_TEXTS_MAX alone is EFBIG, one past what the texts of all models
 * leave of it ENOMEM (said in the log); a text is held while cached or
 * open, and made again only after an edit, but one longer than
 * GFS_TEXT_WHOLE is dropped from the cache at the release of an open of
 * it (file_release).  Read-write mounts open them in direct I/O
 * with attributes never cached (a size taken before an edit never cuts
 * the text read after it).  Read-only.
 */
#include "../base/base.h"
#include "../kinds.h"
#include "tok.h"
#include "vocab.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

/* The payload of string array key (len bytes: the element type, the
 * count, then each string as a uint64 length and its bytes, validated at
 * open), or NULL without the key or with too short a payload. */
static const uint8_t *strings_of(const gguf_ctx *ctx, const char *key,
                                 size_t *len) {
    int64_t i = gguf_find_key(ctx, key, strlen(key));
    const uint8_t *p = i < 0 || gguf_kv_arr_type(ctx, i) != GGUF_TYPE_STRING
                           ? NULL
                           : gguf_kv_payload(ctx, i, len);
    return p && *len >= 12 ? p : NULL;
}

/* The strings' bytes, from the payload's size alone (no walk). */
static uint64_t strings_bytes(const uint8_t *p, size_t len) {
    uint64_t n;
    memcpy(&n, p + 4, 8);
    return n <= (len - 12) / 8 ? len - 12 - 8 * n : 0;
}

/* What the strings are at least once escaped, by either of the files'
 * escapes (tokens.tsv's and merges.txt's gguf_escape_line,
 * tokenizer.json's JSON): a control byte but tab, newline and CR is at
 * least 4 bytes (\xHH, \u00HH), those three and '\\' 2, any other 1 (a
 * pass over the bytes). */
static uint64_t strings_escaped(const uint8_t *p, size_t len) {
    uint64_t floor = 0;
    for (size_t at = 12; at + 8 <= len;) {
        uint64_t k;
        memcpy(&k, p + at, 8);
        at += 8;
        for (size_t end = at + (k < len - at ? k : len - at); at < end; at++)
            floor += p[at] >= 0x20 && p[at] != '\\' ? 1
                     : p[at] == '\t' || p[at] == '\n' || p[at] == '\r' ||
                             p[at] == '\\'
                         ? 2
                         : 4;
    }
    return floor;
}

/* What file f's text is at least, known before it is made, as far as
 * bound max needs to know: tokens.tsv and tokenizer.json hold every
 * token's text, merges.txt every merge's, escaped.  Their bytes alone
 * (the payload's size) where four times them (every byte escaped) is
 * within max: then the escaped floor is too, and no pass is made over
 * the strings (a 262k vocabulary's was 3% of its tokenizer.json); else
 * the escaped floor (a pass over the bytes, no rendering).  0 without
 * the key. */
static uint64_t tok_floor(const gguf_ctx *ctx, enum voc_file f, uint64_t max) {
    const char *key = f == VOC_TOKENS_TSV || f == VOC_HF_TOKENIZER
                          ? "tokenizer.ggml.tokens"
                      : f == VOC_MERGES ? "tokenizer.ggml.merges"
                                        : NULL;
    size_t len = 0;
    const uint8_t *p = key ? strings_of(ctx, key, &len) : NULL;
    if (!p)
        return 0;
    uint64_t raw = strings_bytes(p, len);
    return raw <= max / 4 ? raw : strings_escaped(p, len);
}

/* File *arg's text now (gfs_text_of_gen's make), made within
 * what is left of the daemon's GFS_TEXTS_MAX (below GFS_MAX_TEXT): one
 * whose strings alone pass it is refused before it is made, one that
 * passes it while made stops there.  EFBIG when it would pass the whole
 * bound alone, ENOMEM when the texts of others hold the rest. */
static int tok_make(struct gfs *fs, void *arg, struct gguf_buf *b) {
    _Static_assert(GFS_TEXTS_MAX <= GFS_MAX_TEXT, "the smaller bound");
    enum voc_file f = *(const enum voc_file *)arg;
    struct gguf_error gerr = {0};
    /* Under text_lock, at the generation present() asked (the caller
     * holds fs->lock): once tokenizer.json was made at it (present()), a
     * text dropped from the cache is made again without its check; 0
     * before: the check is made with the file, one walk (vocab.h). */
    uint32_t known =
        fs->tok->mask_gen == fs->generation + 1 ? fs->tok->mask : 0;
    size_t max = gfs_texts_room();
    uint64_t floor = tok_floor(fs->ctx, f, max);
    if (floor > max)
        gguf_fail(&gerr, GGUF_E_RANGE,
                  "%s would pass %zu bytes: its strings alone hold %llu",
                  voc_file_name(f), max, (unsigned long long)floor);
    else if (voc_render_known(fs->ctx, f, known, max, b, &gerr) == GGUF_OK)
        return 0;
    if (gerr.code == GGUF_E_RANGE) {
        gfs_log(fs,
                "%s: %s (%zu bytes left of the %zu that the tokenizer's "
                "files of all models may hold together)",
                fs->path, gerr.msg, max, GFS_TEXTS_MAX);
        return max < GFS_TEXTS_MAX ? ENOMEM : EFBIG;
    }
    if (gerr.code != GGUF_E_NOTFOUND)
        gfs_log(fs, "tokenizer/%s: %s", voc_file_name(f), gerr.msg);
    return gfs_errno(&gerr);
}

/* File f's text made (or the one made at this generation), with a
 * reference; NULL with *err.  Caller holds fs->lock (read at least). */
static struct gfs_text *tok_made(struct gfs *fs, enum voc_file f, int *err) {
    pthread_mutex_lock(&fs->text_lock);
    struct gfs_text *old = fs->tok->file[f];
    pthread_mutex_unlock(&fs->text_lock);
    struct gfs_text *t = gfs_text_of_gen(
        fs, &fs->tok->file[f], &fs->tok->gen[f], tok_make, &f, 1, err);
    /* A text made now (tens of MB for a large vocabulary) leaves its
     * buffer and the renderer's index freed but held by the allocator's
     * arena of this thread: handed back, so that the daemon holds the
     * text and no more. */
    if (t && t != old)
        malloc_trim(0);
    return t;
}

/* Whether file f is there now: voc_has, but for tokenizer.json, whose
 * check (a pass over the vocabulary, which a 262k vocabulary makes in
 * tens of milliseconds) is asked once per generation and only when
 * asked, and is made as the by-product of making the file itself: the
 * file made means it is there (one walk of the vocabulary for both, not
 * voc_present's check and then the render's), NOTFOUND that it is not;
 * only when the file cannot be made for another reason (past the texts'
 * bound, out of memory) does voc_present's check alone decide, so that
 * such a file is listed and its open says why.  The text made stays in
 * its slot for the open that follows a lookup.  Caller holds fs->lock
 * (read at least: the generation cannot change); takes text_lock. */
static int present(struct gfs *fs, int f) {
    if (f < 0 || f >= VOC_N_FILES || !voc_has(fs->ctx, f))
        return 0;
    if (f != VOC_HF_TOKENIZER)
        return 1;
    pthread_mutex_lock(&fs->text_lock);
    int asked = fs->tok->mask_gen == fs->generation + 1;
    uint32_t m = fs->tok->mask;
    pthread_mutex_unlock(&fs->text_lock);
    if (asked)
        return m >> f & 1;
    int err = 0;
    struct gfs_text *t = tok_made(fs, (enum voc_file)f, &err);
    m = t ? 1u << f : err == ENOENT ? 0 : voc_present(fs->ctx);
    gfs_text_put(t);
    pthread_mutex_lock(&fs->text_lock);
    fs->tok->mask = m;
    fs->tok->mask_gen = fs->generation + 1;
    pthread_mutex_unlock(&fs->text_lock);
    if (!t)
        malloc_trim(0); /* voc_present's index, see tok_made */
    return m >> f & 1;
}

static enum voc_dir dir_of(fuse_ino_t dir) {
    return dir == GFS_INO_DIR_HF ? VOC_DIR_HF : VOC_DIR_TOKENIZER;
}

/* File f's text now, or NULL with *err (ENOENT while the metadata does
 * not make it).  Caller holds fs->lock (read at least). */
static struct gfs_text *tok_text(struct gfs *fs, enum voc_file f, int *err) {
    if (!present(fs, f)) {
        *err = ENOENT;
        return NULL;
    }
    return tok_made(fs, f, err);
}

static int dir_lookup(struct gfs *fs, fuse_ino_t dir, const char *name,
                      fuse_ino_t *out) {
    for (int f = 0; f < VOC_N_FILES; f++)
        if (voc_file_dir(f) == dir_of(dir) &&
            strcmp(name, voc_file_name(f)) == 0 && present(fs, f)) {
            *out = GFS_INO_TOKFILE + (fuse_ino_t)f;
            return 0;
        }
    return ENOENT;
}

static int64_t dir_n(struct gfs *fs, fuse_ino_t dir) {
    (void)fs, (void)dir;
    return VOC_N_FILES; /* those absent are skipped */
}

static int dir_entry(struct gfs *fs, fuse_ino_t dir, int64_t k,
                     struct gfs_dir_pos *pos, struct gguf_buf *name,
                     fuse_ino_t *child, mode_t *mode) {
    (void)pos;
    if (k < 0 || k >= VOC_N_FILES || voc_file_dir(k) != dir_of(dir) ||
        !present(fs, (int)k))
        return 0;
    const char *nm = voc_file_name((enum voc_file)k);
    name->len = 0;
    if (gguf_buf_add(name, nm, strlen(nm) + 1) != GGUF_OK)
        return -1;
    *child = GFS_INO_TOKFILE + (fuse_ino_t)k;
    *mode = S_IFREG;
    return 1;
}

static int file_stat(struct gfs *fs, fuse_ino_t ino, struct stat *st) {
    int err = 0;
    struct gfs_text *t =
        tok_text(fs, (enum voc_file)(ino - GFS_INO_TOKFILE), &err);
    return gfs_kind_text_stat(t, err, st);
}

static int file_open(struct gfs *fs, struct gfs_fh *fh,
                     struct fuse_file_info *fi, int wants_write) {
    (void)wants_write; /* read-only: the core refuses writes */
    int err = 0;
    struct gfs_text *t =
        tok_text(fs, (enum voc_file)(fh->ino - GFS_INO_TOKFILE), &err);
    return gfs_kind_text_open(fs, fh, fi, t, err);
}

/* A text longer than GFS_TEXT_WHOLE (the size past which meta/ holds no
 * value's text either) is held from its making until the release of an
 * open of it, not for the mount's life: the cache's reference and the
 * handle's go at the release, the memory back to the system (tens of MB
 * for a large tokenizer.json; a later open makes it again). */
static void file_release(struct gfs *fs, struct gfs_fh *fh) {
    enum voc_file f = (enum voc_file)(fh->ino - GFS_INO_TOKFILE);
    struct gfs_text *t = fh->text, *cached = NULL;
    if (!t || t->len <= GFS_TEXT_WHOLE || (unsigned)f >= VOC_N_FILES)
        return;
    pthread_mutex_lock(&fs->text_lock);
    if (fs->tok->file[f] == t) {
        cached = t;
        fs->tok->file[f] = NULL;
    }
    pthread_mutex_unlock(&fs->text_lock);
    gfs_text_put(cached);
    gfs_text_put(t);
    fh->text = NULL;
    malloc_trim(0); /* see tok_text */
}

int gfs_tok_init(struct gfs *fs) {
    fs->tok = calloc(1, sizeof *fs->tok);
    return fs->tok ? 0 : ENOMEM;
}

/* The model's close (no lock: nothing runs): the texts and fs->tok. */
static void file_fini(struct gfs *fs) {
    for (int f = 0; fs->tok && f < VOC_N_FILES; f++)
        gfs_text_put(fs->tok->file[f]);
    free(fs->tok);
    fs->tok = NULL;
}

/* The two directories' rows: the same hooks, their own kind and name;
 * their attributes do not follow the edits (their listings do). */
#define DIR_ROW(KIND, INO, NAME)                                               \
    {                                                                          \
        .kind = KIND, .ino_lo = INO, .ino_hi = INO + 1, .root_name = NAME,     \
        .root_mode = S_IFDIR, .stat = gfs_kind_dir_stat, .lookup = dir_lookup, \
        .n_entries = dir_n, .dirent = dir_entry,                               \
    }
const struct gfs_kind_ops gfs_kind_dir_tok =
    DIR_ROW(GFS_DIR_TOK, GFS_INO_DIR_TOK, "tokenizer");
const struct gfs_kind_ops gfs_kind_dir_hf =
    DIR_ROW(GFS_DIR_HF, GFS_INO_DIR_HF, "hf");

const struct gfs_kind_ops gfs_kind_tokfile = {
    .kind = GFS_TOKFILE,
    .ino_lo = GFS_INO_TOKFILE,
    .ino_hi = GFS_INO_TOKFILE + VOC_N_FILES,
    .changes = 1,
    .stat = file_stat,
    .open = file_open,
    .read = gfs_read_text,
    .release = file_release,
    .fini = file_fini,
};
