/*
 * data.c - the one way the FUSE layer reads bytes of the model's files
 * into memory (gfs_data_read).  Views that transform bytes (the merged
 * live view of a shard set, future converted views) go through it, so a
 * source other than a local file has one function to serve.  Reads that
 * libfuse serves straight from a file descriptor (reply_file in
 * fileops.c) check the file's end with gfs_data_short.
 */
#include "ggufs.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* The calling thread's buffers (gfs_tbuf), freed when it ends. */
struct tbufs {
    struct {
        void *p;
        size_t cap;
    } b[GFS_TBUF_N];
};
static pthread_key_t tbuf_key;
static pthread_once_t tbuf_once = PTHREAD_ONCE_INIT;

static void tbufs_free(void *arg) {
    struct tbufs *t = arg;
    for (int i = 0; i < GFS_TBUF_N; i++)
        free(t->b[i].p);
    free(t);
}

static void tbuf_key_init(void) {
    pthread_key_create(&tbuf_key, tbufs_free);
}

void *gfs_tbuf(enum gfs_tbuf which, size_t n) {
    pthread_once(&tbuf_once, tbuf_key_init);
    struct tbufs *t = pthread_getspecific(tbuf_key);
    if (!t) {
        if (!(t = calloc(1, sizeof *t)))
            return NULL;
        if (pthread_setspecific(tbuf_key, t) != 0) {
            free(t);
            return NULL;
        }
    }
    if (n > t->b[which].cap) {
        void *p = malloc(n);
        if (!p)
            return NULL;
        free(t->b[which].p);
        t->b[which].p = p;
        t->b[which].cap = n;
    }
    return t->b[which].p;
}

int gfs_data_short(struct gfs *fs, int shard, uint64_t pos, uint64_t n) {
    struct stat sb;
    if (n == 0 || fs->remote)
        return 0;
    if (fstat(gguf_fd(fs->shards[shard]), &sb) == 0 &&
        (uint64_t)sb.st_size >= pos + n)
        return 0;
    static atomic_int said;
    if (!atomic_exchange(&said, 1))
        gfs_log(fs,
                "%s: the file ends before byte %llu that a read needs (it "
                "was truncated under the mount): such reads fail with EIO",
                gguf_path(fs->shards[shard]), (unsigned long long)(pos + n));
    return 1;
}

int gfs_data_read(struct gfs *fs, int shard, uint64_t pos, void *buf,
                  size_t n) {
    if (fs->remote)
        return gfs_remote_read(fs, shard, pos, buf, n);
    int fd = gguf_fd(fs->shards[shard]);
    size_t done = 0;
    while (done < n) {
        ssize_t r =
            pread(fd, (char *)buf + done, n - done, (off_t)(pos + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return errno;
        if (r == 0) {
            gfs_data_short(fs, shard, pos, n);
            return EIO;
        }
        done += (size_t)r;
    }
    return 0;
}
