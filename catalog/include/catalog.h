/*
 * catalog.h - the models a store holds (issue 23): which files make each
 * model and what it is called, found from a store's layout on disk
 * (ollama, the Hugging Face cache, LM Studio, any folder of GGUFs) or from
 * a Hub repo's file listing.  No FUSE, and no GGUF bytes are read here:
 * names and layouts only (the shard-name rule is the library's,
 * gguf_split_name).  fs/ (the daemon) turns each model into a model
 * directory and opens its files when first looked into.
 *
 * Hostile stores: everything under the store directory is untrusted.
 * Manifests are JSON parsed with libjansson; a manifest that does not
 * parse, a digest not "sha256:" + 64 lowercase hex digits, a path that
 * leaves the store (absolute, "..", a symlink resolving outside it: checked
 * with openat2(RESOLVE_BENEATH), or by hand where the kernel has none), a
 * blob whose size differs from the manifest's: that model is skipped with
 * one log line naming the file and why.  Every count and length a store
 * can drive is bounded (CAT_MAX_*).
 *
 * Names.  A model's name is '/'-separated; each component is a valid file
 * name (not empty, not "." or "..", no NUL, at most 255 bytes: names that
 * cannot be are escaped as meta/ names are, gguf_fname_escape).  No name
 * is a prefix directory of another model's name: such a model is listed
 * as NAME@model instead (documented in ggufs(1), STORES).
 */
#ifndef GGUFS_CATALOG_H
#define GGUFS_CATALOG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

enum cat_kind {
    CAT_NONE,
    CAT_OLLAMA,
    CAT_HF,
    CAT_LMSTUDIO,
    CAT_DIR,
    CAT_HUB,
    CAT_S3
};

/* Bounds: models in one store, files of one model (a shard set), bytes of
 * one manifest, depth of a folder walk, entries read per directory, bytes
 * of the paths of one listing. */
#define CAT_MAX_MODELS 100000
#define CAT_MAX_FILES 4096
#define CAT_MAX_MANIFEST (4u << 20)
#define CAT_MAX_DEPTH 16
#define CAT_MAX_DIRENTS 1000000
/* Bytes of the paths one listing keeps (each GGUF's path in the store
 * and its file's path or URL): a hostile Hub listing of 100 000 entries
 * of 4000-byte paths would be 800 MB of names before the daemon's copies
 * of them; past the bound the rest is left out (one log line).  The
 * Hub's and the stores' real listings are a few MB. */
#define CAT_MAX_LIST_BYTES (16u << 20)

/* One file of a model.  Local stores: path is relative to the store
 * directory, every symlink resolved (it names the file itself, beneath
 * the store: for the HF cache the blob, for ollama blobs/sha256-HEX), and
 * dev/ino are what the check saw: the opener compares them with the file
 * it opens, so that a swap between scan and open is refused.  The Hub:
 * path is the hf:// URL of the file at the listed revision
 * ("hf://OWNER/REPO/PATH@REV", PATH's segments percent-encoded: hub.c),
 * dev/ino 0.  name: the file name the model's
 * tools know it by (the snapshot's name, "x-00002-of-00003.gguf"): a shard
 * set's files are in shard order and named as the set. */
struct cat_file {
    char *path;
    char *name;
    uint64_t size; /* as the store says: manifest, stat, or the API */
    dev_t dev;
    ino_t ino;
};

/* ollama's other layers, shown in the model's directory under ollama/,
 * read-only, as the blob's bytes: the text layers as template, system,
 * params, license, messages; the GGUF layers as projector.gguf,
 * adapter.gguf (a second one of a kind: adapter-2.gguf, ...). */
struct cat_layer {
    char *name; /* the file name under ollama/ */
    struct cat_file file;
};

struct cat_model {
    char *name;
    struct cat_file *files; /* one, or a shard set in order */
    size_t n_files;
    struct cat_layer *layers; /* ollama's other layers */
    size_t n_layers;
    /* Named by their hash (ollama blobs, HF cache blobs): never written;
     * a read-write mount keeps its edits in an overlay. */
    int content_addressed;
    uint64_t size; /* sum of the files' sizes */
};

struct cat_list {
    enum cat_kind kind;
    struct cat_model *models; /* sorted by name (strcmp) */
    size_t n;
};

/* One line for the daemon's log (no newline). */
typedef void (*cat_log_fn)(void *u, const char *line);

/* The kind of store the directory dirfd holds, from its layout: ollama
 * (manifests/ and blobs/), the HF cache (models--OWNER--REPO/snapshots),
 * else CAT_DIR (LM Studio's tree is a folder of GGUFs: CAT_LMSTUDIO only
 * when forced, the same walk).  Never fails: CAT_DIR when unsure. */
enum cat_kind cat_detect(int dirfd);
/* The store a tool's home directory holds, when dirfd is one and no store
 * itself (CAT_DIR): ollama's ~/.ollama holds models/ (an ollama store),
 * huggingface_hub's ~/.cache/huggingface holds hub/ (an HF cache).  Its
 * kind, its name below dirfd into *sub (static); CAT_NONE when neither.
 * Real directories only (no symbolic link followed). */
enum cat_kind cat_detect_below(int dirfd, const char **sub);
/* "ollama", "hf", "lmstudio", "dir", "hub", "s3" <-> the kind; CAT_NONE if none. */
enum cat_kind cat_kind_named(const char *s);
const char *cat_kind_name(enum cat_kind k);

/* Lists the models of the local store dirfd of the given kind into out
 * (out->models sorted by name).  Entries that are wrong are skipped, each
 * with one log line; 0, or -1 with msg (one line) when the store itself
 * cannot be read (out of memory, dirfd unreadable). */
int cat_scan(int dirfd, enum cat_kind kind, struct cat_list *out,
             cat_log_fn log, void *log_u, char *msg, size_t n);

/* A number that changes when the store's models may have changed (a
 * model pulled, removed, a download finished), cheap to compute (a few
 * stats: the directories the scan reads).  0 when it cannot tell. */
uint64_t cat_stamp(int dirfd, enum cat_kind kind);

void cat_list_free(struct cat_list *l);

/* Opens a file of a store that ggufs did not create, rel beneath dirfd
 * (no symlink on the way), with flags (O_RDONLY, O_RDWR): the one way
 * every such file is opened (the catalog's manifests and refs, fs/'s
 * models.tsv headers and ollama layers).  O_NONBLOCK, O_NOFOLLOW and
 * O_CLOEXEC are added, so that a FIFO or device planted in the store
 * cannot hang the open; anything but a regular file is refused (-1,
 * errno EINVAL), and O_NONBLOCK is cleared again for the reads.  *st is
 * the file's fstat.  The descriptor, or -1 with errno (cat_strerror
 * says it). */
int cat_open_regular(int dirfd, const char *rel, int flags, struct stat *st);
/* The directory that holds a store's file rel, beneath dirfd as
 * cat_open_regular opens the file (no symlink on the way): a descriptor
 * (O_RDONLY, O_DIRECTORY), dirfd's duplicate when rel is at the top; -1
 * with errno (ELOOP, ENOTDIR, EXDEV: a component is now a symlink). */
int cat_open_dir_of(int dirfd, const char *rel);
/* errno of cat_open_regular or cat_open_file as text: EINVAL is "not a
 * regular file", others strerror's. */
const char *cat_strerror(int e);

/* Opens a local store's file f as cat_open_regular does (its path beneath
 * dirfd, no symlink left in it, a regular file), and checks that it is
 * the file the scan saw (dev/ino): -1 with errno ESTALE if the store
 * changed since, EINVAL if it is not a regular file, another (ELOOP,
 * ENOTDIR, EXDEV) if the path now holds a symlink. */
int cat_open_file(int dirfd, const struct cat_file *f, int flags);

/* The Hub: the GGUF files of hf://OWNER/REPO[@REV] (catalog/hub.c), from
 * $HF_ENDPOINT/api/models/OWNER/REPO/tree/REV?recursive=true, following
 * the Link header's rel="next" pages, with hf://'s credential rules.
 * opts is remote/'s struct rmt_opts (timeouts, headers, the log).  0, or
 * -1 with msg naming the URL and what is wrong. */
struct rmt_opts;
int cat_hub_list(const char *url, const struct rmt_opts *opts,
                 struct cat_list *out, char *msg, size_t n);
/* True if url is hf://OWNER/REPO or hf://OWNER/REPO@REV (no file path). */
int cat_hub_is_repo(const char *url);

/* An S3 bucket prefix: the GGUF objects under s3://BUCKET/PREFIX/
 * (catalog/s3.c), by ListObjectsV2 pages (continuation tokens), signed
 * and sent as s3:// objects are (remote/s3.c).  Files are s3://BUCKET/KEY
 * URLs.  0, or -1 with msg naming s3://BUCKET/PREFIX/ and what is wrong
 * (what S3 said). */
int cat_s3_list(const char *url, const struct rmt_opts *opts,
                struct cat_list *out, char *msg, size_t n);
/* True if url is s3://BUCKET/ or s3://BUCKET/PREFIX/ (ending in '/'). */
int cat_s3_is_store(const char *url);

#endif
