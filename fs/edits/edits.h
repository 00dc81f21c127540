/*
 * edits.h - a mount's edits: the section that makes one (section.c), and
 * the edit store that keeps them (edits.c, file.c, overlay.c).
 *
 * The edit section.  Every change of a model's edits, and every keep and
 * commit of them, runs between gfs_edit_begin and one of its ends, on one
 * thread.  Calling sequence (as git's lockfile.h writes its own):
 *
 *   gfs_edit_begin(fs);          fs->lock taken for writing
 *   ... change the model (meta/'s gfs_meta_*, tensors/tensorw.c), and
 *   gfs_edit_changed(fs);        once each applied edit: fs->generation+1
 *   err = gfs_edit_end(fs);      keeps the edits (gfs_edits_keep, below),
 *                                unlocks; 0 or the keep's EIO
 *
 * or, for a section with nothing left to keep (a refusal recorded, a FILE
 * of meta/ written, a tensor applied in place, a commit, or edits kept
 * inside it by a caller that needs the keep's status first):
 *
 *   gfs_edit_begin(fs); ... gfs_edit_abort(fs);
 *
 * or, for a section whose edits are never to be kept because the model
 * is closed next without serving (`ggufs set` refused one of its edits,
 * or committed them): gfs_edit_begin(fs); ... gfs_edit_drop(fs).
 *
 * Readers take fs->lock for reading with pthread_rwlock_rdlock (ggufs.h,
 * struct gfs, says the lock order: after a handle's fh->mu, before the
 * leaves); they change nothing of the edits and call nothing here but
 * gfs_edits_uncommitted.
 *
 * Invariants (asserted in builds without NDEBUG: meson's debug and
 * debugoptimized buildtypes, which dev/build, dev/test and its sanitizer
 * build use; meson.build sets b_ndebug=if-release, so release and plain
 * builds, the Debian package's, have none of these checks):
 *
 *   1. fs->lock is taken for writing only by gfs_edit_begin and let go
 *      only by gfs_edit_end, gfs_edit_abort or gfs_edit_drop, on the
 *      thread that took it (recorded in debug builds: gfs_edit_held).
 *      Sections do not nest: begin on a thread already inside is a bug
 *      (it would deadlock), not a recursion.  meta/'s changes
 *      (gfs_meta_create, _unlink, _rename, _drop_new, _apply_text,
 *      _set_type, _truncate, _set_error) assert they run inside one.
 *   2. fs->generation changes only by gfs_edit_changed, inside a section.
 *   3. gfs_edits_keep and gfs_edits_commit (and its save-aside) run
 *      inside a section; a backend's keep and commit are called only
 *      from those (gfs_edits_uncommitted is a reader's, gfs_edits_free
 *      the model's close).
 *   4. A section that changed the edits (2) ends in gfs_edit_end, or in
 *      gfs_edit_abort after a keep or commit inside it reached the
 *      generation (kept_gen == fs->generation); gfs_edit_abort of a
 *      section that changed nothing is always right.
 *   5. Hence between sections every generation of the edits has been
 *      through a keep (EDITED lasts only inside a section, or after a
 *      keep that failed): kept_gen == fs->generation at each begin, but
 *      on a read-only mount, and never after gfs_edit_drop.
 *   6. The store's state is consistent at each step (gfs_edits_check):
 *      kept_gen, saved_generation and the section's own start at most
 *      fs->generation; a pending record only with the file store.
 *
 * The edit store: where a mount's edits go and when they become durable.
 * metaedit.c applies an edit in memory (the library context,
 * fs->generation bumped); the store makes it durable and commits it.  One
 * interface, two backends, chosen once at mount (a const table of
 * functions, struct gfs_edits_ops, as kinds.h's rows):
 *
 *   file.c     the model file: the edits kept as its pending record in
 *              the state directory (gguf/pending.c), committed into the
 *              GGUF crash-safely (gguf_commit; the rules: gguf/commit.c)
 *   overlay.c  -o overlay: the edits kept in the overlay, rewritten whole
 *              after every edit (gguf/overlay.c); the GGUF is never
 *              written, a commit makes sure the overlay holds every edit
 *
 * edits.c is what both share, written once: the dispatch, the commit's
 * report (user.ggufs.commit, the log) and the save-aside after a failed
 * commit (gguf_save_edits).  The store never calls metaedit.c: the commit
 * report's note of the FILEs in meta/ is passed in (gfs_edits_note_fn).
 *
 * The states of a mount's edits (G is fs->generation, bumped by every
 * applied edit; the store remembers which G it made durable):
 *
 *                              edit
 *        CLEAN ---------------------------------> EDITED <-----+
 *          ^  ^                                     |          |
 *          |  |                                keep |          | edit
 *          |  |             commit ok               v          |
 *          |  +--------------------------------- PENDING ------+
 *          |                                        |          |
 *          |                           commit fails |          |
 *          |    commit ok                           v          |
 *          +--------------------------------+-- FAILED         |
 *          |                                |       |          |
 *          |                                |  save aside      |
 *          |    commit ok                   |       v          |
 *          +--------------------------------+-- SAVED ---------+
 *                                                      edit
 *
 * An edit leads from any state to EDITED (from FAILED too); a keep that
 * fails leaves the edits there; a commit starts from PENDING (or EDITED
 * after a failed keep), never mid-edit: both hold fs->lock for writing.
 *
 *   CLEAN    Nothing to commit: at mount, and after a commit that
 *            succeeded.  On disk: the GGUF holds the model (file), or the
 *            overlay holds every edit (overlay; none if never edited).
 *   EDITED   An edit applied in memory, not durable yet.  Only inside
 *            an edit section: every edit handler leaves by
 *            gfs_edit_end, which keeps first (gfs_edits_keep).  If that
 *            keep fails the edits stay EDITED: logged once per G, an fsync
 *            of a meta file answers EIO, the mount goes on.  On disk: what
 *            the state before held.
 *   PENDING  The edits of G durable outside the GGUF: the pending record
 *            (file; the GGUF untouched) or the overlay (overlay).  A daemon
 *            killed now loses nothing: `ggufs --apply-pending` commits the
 *            record, the next -o overlay mount shows the overlay.  For the
 *            overlay PENDING is already committed: its commit only writes
 *            the overlay again if the last keep failed.
 *   FAILED   A commit failed (commit_failed): the edits still in memory;
 *            gguf_commit leaves the GGUF as it was or its journal for
 *            recovery; the pending record kept (file) or the overlay as
 *            last written (overlay).  Left at once for SAVED, or stays
 *            here if saving fails: the report then says where the edits
 *            still are (the backend's stranded clause).
 *   SAVED    FAILED, and the edits of G saved to a file beside the GGUF
 *            (saved_path; `ggufs --apply-saved` applies it), once per G:
 *            `ggufs -u`'s fsync and the unmount after it both commit.  The
 *            file backend's next keep drops the pending record (the saved
 *            file holds the same edits) until an edit makes a new G.
 *
 * commit_failed stays set from FAILED until a commit succeeds; the daemon
 * exits with EXIT_COMMIT if it is still set at unmount.
 *
 * Locks: every function of the store is called inside an edit section
 * (fs->lock held for writing), but gfs_edits_uncommitted (held at least
 * for reading) and gfs_edits_may_commit (no lock).  Prefix gfs_edits_;
 * the section's, gfs_edit_.
 */
#ifndef GGUFS_EDITS_H
#define GGUFS_EDITS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gguf.h"

struct gfs;
struct gfs_overlay; /* overlay.c's own state */

/* What a backend's commit did (struct gfs_edits_ops, commit). */
enum gfs_edits_done {
    GFS_EDITS_FAILED = -1, /* err says why; the backend kept its record */
    GFS_EDITS_WROTE,       /* written: what says how (the report's clause) */
    GFS_EDITS_HELD,        /* nothing to write, the durable copy holds every
                              edit: what says so (reported, not logged) */
    GFS_EDITS_CLEAN        /* nothing to commit: no report */
};

struct gfs_edits_ops {
    const char *name; /* "the model file", "the overlay" (messages) */
    /* The report's verb: "commit", "commit to the overlay" (+ " failed"). */
    const char *commit_what;
    /* Makes the edits of fs->generation durable unless they already are
     * (nothing on a read-only mount): 0, or EIO (logged once per
     * generation; repeated until the edits change). */
    int (*keep)(struct gfs *fs);
    /* True if a commit has something to do. */
    int (*uncommitted)(struct gfs *fs);
    /* The commit itself: enum gfs_edits_done; what (n bytes) gets the
     * report's clause without the path. */
    int (*commit)(struct gfs *fs, char *what, size_t n, struct gguf_error *err);
    /* After a failed commit whose save-aside failed too (why): where the
     * edits still are, one clause into where (n bytes). */
    void (*stranded)(struct gfs *fs, const char *why, char *where, size_t n);
    /* Frees the backend's own state (at unmount). */
    void (*free)(struct gfs *fs);
};

extern const struct gfs_edits_ops gfs_edits_file;    /* file.c */
extern const struct gfs_edits_ops gfs_edits_overlay; /* overlay.c */

/* The durability state of a mount's edits (struct gfs, member edits).
 * Guarded by fs->lock (changed with it held for writing). */
struct gfs_edits {
    const struct gfs_edits_ops *ops; /* chosen at mount, never changes */
    struct gfs_overlay *overlay;     /* the overlay backend's own, or NULL */
    uint64_t kept_gen;               /* the generation last kept (or tried) */
    int kept_failed; /* that keep failed (overlay: or the last commit) */
    int record;      /* file: a pending record exists (as far as known) */
    gguf_ctx *disk;  /* the model without edits, what the durable copy is
                       a diff against: the GGUF as on disk (file: opened at
                       the first keep, dropped when a commit changes it) or
                       the source as mounted (overlay) */
    uint64_t saved_generation; /* the generation last saved aside */
    char saved_path[4096];     /* where ("" if never, or saving failed) */
    char commit_msg[1024];     /* the last commit's report,
                                  user.ggufs.commit */
    int commit_failed;         /* FAILED or SAVED (above) */
    /* The generation whose attributes the kernel was last told of
     * (section.c: at each section's end, gfs_kinds_edited). */
    uint64_t told_gen;
    /* The edit section (section.c), kept by debug builds only (without
     * NDEBUG) for their asserts: the thread inside (its tid; 0: none,
     * atomic: a thread outside reads it to learn it is not the one),
     * fs->generation at its begin, and a gfs_edit_drop made. */
    atomic_int sect_owner;
    uint64_t sect_gen;
    int sect_dropped;
};

/* The edit section (the calling sequence and invariants: above). */
/* Takes fs->lock for writing: the section starts.  Not on a thread
 * already inside one of fs (invariant 1). */
void gfs_edit_begin(struct gfs *fs);
/* An edit applied: the one place fs->generation is bumped (the live
 * view's version, the texts made per generation and the keep's "already
 * durable" all follow it).  Inside a section. */
void gfs_edit_changed(struct gfs *fs);
/* Keeps the edits (gfs_edits_keep: EDITED -> PENDING; a failure leaves
 * EDITED, logged once per generation), then unlocks: the section ends;
 * a generation the kernel has not been told of is told then, with no
 * lock held (gfs_kinds_edited: the attributes it caches of rows that
 * follow the edits), before the request that edited is answered.
 * Returns the keep's status, 0 or EIO. */
int gfs_edit_end(struct gfs *fs);
/* Unlocks: the section ends with nothing to keep (invariant 4); tells
 * the kernel as gfs_edit_end does. */
void gfs_edit_abort(struct gfs *fs);
/* Unlocks, the section's edits not kept: only when the model is closed
 * next without another section (`ggufs set`, cmd/nomount.c). */
void gfs_edit_drop(struct gfs *fs);
/* For asserts: true if this thread is inside a section of fs (debug
 * builds; with NDEBUG nothing is recorded and it says 1). */
int gfs_edit_held(const struct gfs *fs);
/* This thread's id, as gfs_edit_held records it (held.c). */
int gfs_edit_thread(void);
/* For asserts, as SQLite's assert_pager_state: asserts invariants 1 and
 * 6 one by one (the failing line names the broken one) and returns 1. */
int gfs_edits_check(const struct gfs *fs);

/* A note appended to the commit report: metaedit.c's FILEs in meta/
 * (gfs_meta_files_note: appends to msg, size bytes, if msg; logs if
 * log; returns how many). */
typedef size_t (*gfs_edits_note_fn)(struct gfs *fs, char *msg, size_t size,
                                    int log);

/* Chooses the model file as the store (a mount without -o overlay; the
 * overlay is chosen by gfs_overlay_setup).  At mount. */
void gfs_edits_use_file(struct gfs *fs);
/* EDITED -> PENDING: the backend's keep, inside a section (gfs_edit_end
 * calls it; a caller that needs its status before the section ends, too:
 * 0 or EIO). */
int gfs_edits_keep(struct gfs *fs);
/* True if there are edits a commit would write. */
int gfs_edits_uncommitted(struct gfs *fs);
/* PENDING -> CLEAN, or FAILED (then SAVED): commits, writes the report
 * into commit_msg (logged, note appended); 0 or errno. */
int gfs_edits_commit(struct gfs *fs, gfs_edits_note_fn note);
/* Whether a request of user uid may make edits durable or commit them
 * (fsync of a meta file, fsyncdir): the mount's owner (fs->uid) or root.
 * With -o allow_other, another user's fsync must not publish the owner's
 * edits. */
int gfs_edits_may_commit(const struct gfs *fs, uid_t uid);
/* Frees what the store holds (at unmount; again is harmless). */
void gfs_edits_free(struct gfs *fs);

/* ---- The rest of edits/, what the other parts call (issue 34: moved here
 * from ggufs.h): the overlay's set-up, the carry notes, what earlier
 * mounts left, the status and who may commit. */
#include "../daemon.h" /* FUSE_USE_VERSION, before fuse_lowlevel.h */
#include <fuse_lowlevel.h>

/* edits/edits.c: gfs_edits_may_commit (edits.h, which says who may) for
 * the user of req. */
int gfs_may_commit(const struct gfs *fs, fuse_req_t req);
/* edits/overlay.c: -o overlay[=PATH] (issue 14).
 * gfs_overlay_setup: at mount, after the GGUF (set) is open read-only:
 * where the overlay is (a->opt, else the default in the state
 * directory), its lock taken (read-write mounts), the source's identity,
 * and the overlay applied if it belongs to it; 0, or -1 after one line on
 * stderr (an overlay that does not belong, one not to be trusted, one in
 * use by another mount); the overlay chosen as the mount's edit store
 * (edits/overlay.c).  The overlay commands and gfs_overlay_dead_note:
 * daemon.h. */
struct gfs_overlay_args {
    const char *path;      /* the source: absolute path, or its http(s) URL */
    const char *remote_id; /* a remote source's version (gfs_remote_identity),
                              NULL for a local file */
    const char *opt;       /* -o overlay=PATH, or NULL for the default */
    const char *file;      /* the source as the user named it (messages) */
    const char *mnt;       /* the mountpoint, absolute, or NULL */
    int readonly;          /* -o ro: no lock, no record, never written */
    const char *name_key;  /* a store's model: "STORE\nNAME", its edits
                              follow the name (edits/carry.c); else NULL */
};
int gfs_overlay_setup(struct gfs *fs, const struct gfs_overlay_args *a);
/* Where the overlay of an overlay mount is (user.ggufs.overlay), else
 * NULL.  No lock: set at mount. */
const char *gfs_overlay_where(const struct gfs *fs);
/* A mount without -o overlay of a file that has a default overlay: one
 * note on stderr saying so (its edits are not shown; a commit makes the
 * overlay stale). */
void gfs_overlay_note(const char *path, const char *file);
/* edits/carry.c, at a store's mount (stderr still the user's): one line
 * per model of store whose name's record names another file than the
 * name leads to now (now_of: its first file's path into buf, and *dfd
 * the directory holding it, opened beneath the store (closed here), or
 * -1 to open it by path; NULL if the store has no such name) while the
 * new file has no overlay and the old one's is there: its edits are
 * carried when it is first opened, or (asked of the two headers now) why
 * they no longer apply. */
void gfs_carry_notes(const char *store,
                     const char *(*now_of)(void *u, const char *name, char *buf,
                                           size_t n, int *dfd),
                     void *u);
/* leftover.c: what earlier mounts left, for the next command.
 * gfs_record_outcome: the daemon records the commit report (when: "after
 * unmount") as the model's status record (gfs_print_outcome and
 * gfs_pending_note: daemon.h).  gfs_wait_previous: waits (at most 60 s,
 * saying so) while an earlier daemon still holds the file's lock for its
 * last commit (mounted: the file is mounted now, nothing to wait for); 0
 * or -1. */
void gfs_record_outcome(struct gfs *fs, const char *when);
int gfs_wait_previous(const char *path, const char *file, int mounted);
/* status.c: user.ggufs.status and user.ggufs.progress, and what commands
 * show of them.  gfs_status_xattr: the root's two attributes (GFS_XATTR_OTHER
 * for other names); takes fs->lock (read) itself, for the status only.
 * gfs_progress_cb: the library's progress callback, user is fs. */
int gfs_status_xattr(fuse_req_t req, struct gfs *fs, fuse_ino_t ino,
                     const char *name, struct gguf_buf *out);
void gfs_progress_cb(void *user, uint64_t done, uint64_t total);
/* A store's status (storeops.c): "model NAME: " and the model's pending
 * edits as its own status has them, nothing when it has none; takes
 * fs->lock (read).  0 or ENOMEM. */
int gfs_status_model_edits(struct gfs *fs, const char *name,
                           struct gguf_buf *b);

#endif
