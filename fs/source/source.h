/*
 * source.h - the one way the daemon reads the model's bytes (issue 22):
 * from a local file, served by its descriptor (libfuse splices it; the
 * live view goes by FUSE passthrough), or from a remote source (remote/),
 * copied through its block cache.  Which descriptor serves a file's bytes
 * is one rule (data.c, data_get); every reply of model bytes goes through
 * gfs_data_reply, every read into memory through gfs_data_read.
 *
 *   data.c         reads, replies, the calling thread's buffers
 *   fds.c          the descriptors of a set's (a mix's) files, on demand
 *   inflight.c     the writes in flight, which every read waits for
 *   passthrough.c  the live view by FUSE passthrough, its inode versions
 *   remote.c       a remote model as fs/ sees it (remote/include/remote.h)
 */
#ifndef GGUFS_SOURCE_H
#define GGUFS_SOURCE_H

#include "../ggufs.h"

/* The model's bytes (data.c).  gfs_data_read reads n bytes of shard's
 * file at pos into buf: 0, or an errno (EIO if the file ends first, said
 * once in the log: a read past the end must be EIO, never a short read,
 * which the kernel takes for EOF).  Callers hold fs->lock (read). */
int gfs_data_read(struct gfs *fs, int shard, uint64_t pos, void *buf, size_t n);
/* Whether the model's tensor data is not one file's data section as it
 * is: a shard set's, or a mix's (-o mix; the live view lays it out anew,
 * a tensor's file is named).  No lock: fixed at mount. */
int gfs_data_merged(const struct gfs *fs);
/* A buffer of the calling thread of at least n bytes, kept for its next
 * request (a fresh malloc of a megabyte per read is an mmap, page faults
 * and zeroing each time) and freed when the thread ends; its contents
 * are not kept when it grows.  One per use, so that two uses in one call
 * chain never share: the copy of a remote reply (fileops.c), a view's
 * values and the blocks they are converted from (vconv.c).  NULL: out of
 * memory.  No lock. */
enum gfs_tbuf { GFS_TBUF_REPLY, GFS_TBUF_VALUES, GFS_TBUF_BLOCKS, GFS_TBUF_N };
void *gfs_tbuf(enum gfs_tbuf which, size_t n);
/* Replies with mem_n bytes at mem (may be 0), then n bytes of shard's file
 * from pos: by descriptor for a local file (libfuse reads or
 * splices them; if drop, the file's page-cache copy of what was served is
 * evicted), else copied through gfs_data_read.  A reply past the file's
 * end is EIO, never short.  Caller holds fs->lock (read). */
void gfs_data_reply(fuse_req_t req, struct gfs *fs, int shard, const char *mem,
                    size_t mem_n, uint64_t pos, uint64_t n, int drop);
/* Replies with mem_n bytes at mem, then the pieces in order: n bytes of
 * shard's file from pos each, or n zeros (shard -1).  By descriptor when
 * every file has one and there are few pieces (libfuse splices them: no
 * copy by the daemon), else copied.  A piece past its file's end is EIO.
 * Caller holds fs->lock (read). */
struct gfs_data_piece {
    int shard;
    uint64_t pos, n;
};
void gfs_data_reply_pieces(fuse_req_t req, struct gfs *fs, const char *mem,
                           size_t mem_n, const struct gfs_data_piece *p,
                           int np);
/* The pieces' bytes into buf, in order (n zeros for shard -1), through
 * gfs_data_read: the one copy of pieces that both the reply's copy and
 * the live view's merged reads use.  0 or errno.  Caller holds fs->lock
 * (read). */
int gfs_data_read_pieces(struct gfs *fs, const struct gfs_data_piece *p, int np,
                         char *buf);
/* True if [off, off + len) of shard's file is in the page cache now
 * (cachestat, Linux 6.5+): then a read need not drop what it served.
 * True for a remote source (nothing to drop); false when unknown. */
int gfs_data_cached(struct gfs *fs, int shard, uint64_t off, uint64_t len);

/* fds.c: the descriptors of a model's files (fs->shards[i]) whose contexts
 * released theirs (gguf_release_fd: every shard of a set but the first;
 * a mix's source files), opened on demand, checked to be the file
 * validated at mount (else EIO and one log line), at most cap kept open
 * (least recently used closed), none closed while pinned (the contract
 * and the lock: its top comment).  gfs_data_read, gfs_data_reply and
 * gfs_data_cached use them; nothing else needs to. */
/* At most this many descriptors of a model's files kept open: a single
 * model's mount, and (their FD_PER_MODEL, storefs.h) a store's model. */
#define GFS_FDS_CAP 32
#define GFS_FDS_STORE_CAP 1
/* At the daemon's start: the soft RLIMIT_NOFILE raised to the hard one
 * (a user's default soft limit is 1024, or less; what the daemon holds
 * stays well under it: GFS_FDS_CAP a model, a store's bound). */
void gfs_fds_rlimit(void);
/* The cap for a single model's mount: GFS_FDS_CAP, or an eighth of the
 * soft RLIMIT_NOFILE when that is less (at least 1). */
int gfs_fds_cap(void);
/* fs->fds, empty, for at most cap descriptors.  0 or ENOMEM. */
int gfs_fds_init(struct gfs *fs, int cap);
/* File i (an index into fs->shards: a set's shards, then a mix's files)
 * is opened again as name (copied) in the directory dfd (borrowed: open
 * as long as the model is; AT_FDCWD for a name that is a path the
 * identity check makes safe), and must be the file gguf_ident says.
 * Before the model serves requests.  0, EINVAL (no identity) or ENOMEM. */
int gfs_fds_add(struct gfs *fs, int i, int dfd, const char *name);
/* Closes every descriptor; fs->fds NULL. */
void gfs_fds_free(struct gfs *fs);
/* File i's descriptor, pinned until gfs_fds_put(fs, i): 0 with *fd, or
 * EIO (another file now, or gone: logged once), EMFILE, ENFILE.  Caller
 * holds fs->lock (read); takes fds->mu (a leaf). */
int gfs_fds_get(struct gfs *fs, int i, int *fd);
void gfs_fds_put(struct gfs *fs, int i);

/* patch.c: bytes of the model replaced by its overlay's tensors (issue
 * 24; the contract is its top comment).  fs->patch is set on a read-write
 * overlay mount (gfs_patch_init: the overlay's records t[0, nt) mapped to
 * tensors; -1 with msg naming the tensor at fault).  Records change under
 * fs->lock (write) and are read under it (read).
 *   gfs_patch_any       some tensor is patched (the live view is then not
 *                       served by passthrough)
 *   gfs_patch_fd        the overlay's data file, or -1 (not yet opened)
 *   gfs_patch_find      tensor g's region (*doff), 1; or 0
 *   gfs_patch_overlaps  [pos, pos + n) of shard has patched bytes
 *   gfs_patch_read      puts the patched bytes of [pos, pos + n) into buf
 *                       (buf holds the model's): 0 or errno
 *   gfs_patch_region    a new region holding tensor g's bytes as they are
 *                       now, synced (not recorded): *doff; 0 or errno, msg
 *   gfs_patch_set       records g's region (for the overlay's next write)
 *   gfs_patch_records   the records as the overlay writes them (malloc'ed;
 *                       gguf_overlay_tensors_free): 0 or ENOMEM */
int gfs_patch_init(struct gfs *fs, const char *opath, const char *source,
                   const struct gguf_overlay_tensor *t, size_t nt, char *msg,
                   size_t mn);
void gfs_patch_free(struct gfs *fs);
int gfs_patch_any(const struct gfs *fs);
int gfs_patch_fd(const struct gfs *fs);
int gfs_patch_find(const struct gfs *fs, int64_t g, uint64_t *doff);
/* The overlay's data file's path (for user.gguf.source), or NULL. */
const char *gfs_patch_where(const struct gfs *fs);
int gfs_patch_overlaps(const struct gfs *fs, int shard, uint64_t pos,
                       uint64_t n);
int gfs_patch_read(struct gfs *fs, int shard, uint64_t pos, void *buf,
                   size_t n);
/* gfs_patch_region reads the tensor's bytes as they are now through read
 * (the caller's gfs_data_read: patch.c is below data.c, which asks it). */
typedef int (*gfs_patch_read_fn)(struct gfs *fs, int shard, uint64_t pos,
                                 void *buf, size_t n);
int gfs_patch_region(struct gfs *fs, int64_t g, uint64_t *doff, char *msg,
                     size_t mn, gfs_patch_read_fn read);
int gfs_patch_set(struct gfs *fs, int64_t g, uint64_t doff);
int gfs_patch_records(struct gfs *fs, struct gguf_overlay_tensor **t,
                      size_t *nt);

/* inflight.c: writes answered and not yet written (tensors/'s pipelined
 * writes in place; the contract and the lock: its top comment).  Every
 * read of the model's bytes in data.c waits for those overlapping it, so
 * no read path above source/ has to.
 *   gfs_inflight_init        fs->twq made, once (fs->lock held for
 *                            writing); 0 or ENOMEM
 *   gfs_inflight_free        at the model's close
 *   gfs_inflight_enter       a write of [lo, hi) of shard's file by owner
 *                            enters, once nothing overlaps it and a slot is
 *                            free; its slot (fs->twq made)
 *   gfs_inflight_leave       ... its pwrite ended: it leaves its slot
 *   gfs_inflight_wait        until nothing overlaps [pos, pos + n) of
 *                            shard's file (any lock of fs may be held)
 *   gfs_inflight_wait_owner  until owner has nothing in flight */
int gfs_inflight_init(struct gfs *fs);
void gfs_inflight_free(struct gfs *fs);
int gfs_inflight_enter(struct gfs *fs, const void *owner, int shard,
                       uint64_t lo, uint64_t hi);
void gfs_inflight_leave(struct gfs *fs, int slot);
void gfs_inflight_wait(struct gfs *fs, int shard, uint64_t pos, uint64_t n);
void gfs_inflight_wait_owner(struct gfs *fs, const void *owner);

/* passthrough.c: the live view by FUSE passthrough while it is
 * byte-identical to the GGUF, and one inode number per version of the view
 * (the contract and the kernel facts are its top comment). */
/* enum gfs_pt_mode (the option): daemon.h. */
/* Sets up fs->pt: the model's view versions, served through gfs_io(fs), the
 * session's shim (fs/base/devio.h; NULL: no session, nothing passed
 * through).  A single-file mount's model (mount.c, once the session's
 * shim is up, gfs_io(fs)) and each model a store opens (model.c) are
 * started the same way.  0, or -1 (out of memory: the view is served as
 * without passthrough). */
int gfs_pt_start(struct gfs *fs, enum gfs_pt_mode mode);
/* The model closes (unmount, once the workers have stopped; a store's
 * model let go, none of its files open): its backing ids closed, fs->pt
 * freed. */
void gfs_pt_stop(struct gfs *fs);
/* The session's passthrough option is auto (not -o passthrough=off). */
int gfs_pt_auto(const struct gfs *fs);
/* The live view (liveview.c) asks with its header (hdr) and size now.
 * The view's inode number for them.  Caller holds lock (read); takes the
 * leaf pt lock. */
fuse_ino_t gfs_pt_view_ino(struct gfs *fs, struct gfs_text *hdr, uint64_t size);
/* The size inode ino of the view shows: *size (the view's now) unless an
 * older version still open has its own.  Caller holds lock (read). */
void gfs_pt_view_size(struct gfs *fs, fuse_ino_t ino, uint64_t *size);
/* How an open of view inode fh->ino is served: passthrough (fh->pt_backing
 * set), cached (keep_cache) or direct I/O (an older version); reopened:
 * the view's header is the one of its last open (gfs_view_reopened, asked
 * only without passthrough).  Caller holds lock (read). */
void gfs_pt_view_open(struct gfs *fs, struct gfs_fh *fh,
                      struct fuse_file_info *fi, struct gfs_text *hdr,
                      uint64_t size, int reopened);
/* Bytes [data_rel, data_rel + len) of the view's data section changed on
 * disk (a tensor written: the live row's tensor_changed, liveview.c):
 * every version of the view served from the page cache has them dropped
 * (gfs_devio_inval; passthrough ones read the file).  fs->pt set.  Caller
 * holds fs->lock (read); the kernel is told after pt->mu is let go. */
void gfs_pt_inval_data(struct gfs *fs, uint64_t data_rel, uint64_t len);
/* Around fuse_reply_open of fh (same thread): the reply then carries the
 * backing id. */
void gfs_pt_arm(const struct gfs_fh *fh);
void gfs_pt_disarm(void);
/* fh goes away (release, failed reply, unmount).  No lock needed. */
void gfs_pt_release(struct gfs *fs, struct gfs_fh *fh);
/* Flags for gguf_commit: GGUF_COMMIT_NEW_FILE while passthrough opens read
 * the GGUF's current file.  Caller holds lock (write). */
unsigned gfs_pt_commit_flags(struct gfs *fs);
/* After a commit (fs->st refreshed): retires the old file's backing id if
 * the GGUF is another file now.  Caller holds lock (write). */
void gfs_pt_committed(struct gfs *fs);

/* remote.c: a model on a web server or the Hub (issue 13).  Remote
 * mounts are read-only unless they have an overlay (overlay.c: the
 * source is never written); gfs_data_read serves their bytes through
 * gfs_remote_read (with readahead along tensor boundaries) and never
 * finds them short (their size is fixed by their identity).  No lock of fs is needed: the sources lock themselves. */
/* struct gfs_remote_opts (the options): daemon.h. */
/* fs->rfiles (struct gfs_rfiles, remote.c's own): which files are remote,
 * made by the first remote file's open, at mount; NULL: every file is
 * local. */
/* The default bound on a remote file's header (each shard's, and an
 * overlay's source's): about 16 times the largest of today's models (a
 * 200k-token BPE vocabulary with its merges: about 15 MiB). */
#define GFS_MAX_HEADER ((uint64_t)256 << 20)
/* gfs_remote_is: daemon.h (the commands ask it too). */
/* The http(s) URL a source names (hf:// resolved); malloc'ed, or NULL
 * with msg. */
char *gfs_remote_resolve(const char *source, char *msg, size_t n);
/* url as every user may see it (/proc/mounts, the log): without user info
 * and query string; malloc'ed.  msg: a warning when the URL carries what
 * looks like a credential, else "".  NULL (out of memory) with msg. */
char *gfs_remote_shown(const char *url, char *msg, size_t n);
/* Opens url (and its sibling shards) into fs->shards / fs->n_shards and
 * fs->remote.  0, or -1 with err and bad (the file at fault). */
int gfs_remote_open(struct gfs *fs, const char *url,
                    const struct gfs_remote_opts *o, unsigned flags, char *bad,
                    size_t bad_len, struct gguf_error *err);
/* A mix's remote source (mix.c): source (an http(s):// or hf:// URL) and
 * its sibling shards opened into *v, *n, to be fs->shards[fs->n_files ..
 * + *n) (the caller appends them); 0, or -1 with err and bad. */
int gfs_remote_open_more(struct gfs *fs, const char *source,
                         const struct gfs_remote_opts *o, unsigned flags,
                         gguf_ctx ***v, int *n, char *bad, size_t bad_len,
                         struct gguf_error *err);
/* Whether file (an index of fs->shards) is a remote one: its bytes come
 * through gfs_remote_read, it has no descriptor.  No lock. */
int gfs_remote_file(const struct gfs *fs, int file);
/* Closes the remote sources: the model's and a mix's. */
void gfs_remote_close(struct gfs *fs);
/* A remote store's models: a Hub repo's (catalog/hub.c's cat_hub_list)
 * or an S3 bucket prefix's (catalog/s3.c's cat_s3_list), with the remote
 * options of the command line; 0, or -1 with msg. */
struct cat_list;
int gfs_remote_list(const char *url, const struct gfs_remote_opts *o,
                    void (*log)(void *u, const char *line), void *log_u,
                    struct cat_list *out, char *msg, size_t n);
/* The names of the root's remote attributes (user.ggufs.url, identity,
 * requests), NUL-terminated, added to out; 0 or ENOMEM. */
int gfs_remote_xattr_list(const struct gfs *fs, struct gguf_buf *out);
int gfs_remote_read(struct gfs *fs, int shard, uint64_t pos, void *buf,
                    size_t n);
/* As gfs_remote_read, but the bytes held in memory are not copied: v's
 * pieces (rmt_read_view: spill takes the rest); the caller calls
 * rmt_view_release(v) after a success. */
struct rmt_view;
int gfs_remote_view(struct gfs *fs, int shard, uint64_t pos, size_t n,
                    void *spill, struct rmt_view *v);
/* The times and size every file of the tree shows (fs->st). */
void gfs_remote_stat(const struct gfs *fs, struct stat *st);
/* The version of the source the mount reads, for its overlay's identity:
 * each shard's rmt_identity joined by "; " (a hash of them when that
 * does not fit in n bytes).  0 or -1. */
int gfs_remote_identity(const struct gfs *fs, char *out, size_t n);
/* The same of a source opened alone: a command that never mounts (the
 * overlay's rebase, cmd/overlaycmds.c) opens url's set with no model:
 * *v, *n its contexts (closed by the caller, gguf_close_set, before
 * gfs_remote_free), what it says on stderr; NULL with err and bad. */
struct gfs_remote *gfs_remote_open_alone(const char *url,
                                         const struct gfs_remote_opts *o,
                                         gguf_ctx ***v, int *n, char *bad,
                                         size_t bad_len,
                                         struct gguf_error *err);
int gfs_remote_identity_of(const struct gfs_remote *r, char *out, size_t n);
void gfs_remote_free(struct gfs_remote *r);
/* The root's user.ggufs.url, .identity, .requests (ranged requests sent
 * so far); ENODATA for other names or a local mount. */
int gfs_remote_xattr(const struct gfs *fs, const char *name,
                     struct gguf_buf *out);

#endif
