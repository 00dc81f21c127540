/*
 * helpers - small measuring tools for bench/run.
 *
 *   helpers mmap_touch FILE OFFSET LENGTH
 *       maps [OFFSET, OFFSET+LENGTH) of FILE read-only (OFFSET is rounded
 *       down to a page, LENGTH grown to match), reads one byte of every
 *       page, unmaps; prints the seconds taken by map + touch + unmap.
 *   helpers resident FILE
 *       prints how many bytes of FILE are in the page cache (mincore).
 *   helpers collapse FILE LENGTH
 *       removes the first LENGTH bytes of FILE in place (fallocate
 *       FALLOC_FL_COLLAPSE_RANGE; LENGTH a multiple of the block size):
 *       undoes blocks a commit inserted, so every edit run starts alike.
 *   helpers read FILE[@OFFSET:LENGTH] ...
 *       reads each FILE (or LENGTH bytes of it from OFFSET) to its end
 *       with read(2) of 1 MiB into one buffer, in one process; prints the
 *       seconds the reads took and the CPU seconds this process spent in
 *       them.  The buffer is locked and touched before the clock starts,
 *       so the first read pays no page fault of the reader's own
 *       (bench/run's first-read rows; dd, a new process per file with a
 *       fresh buffer, adds its start-up and faults to every file).
 */
#define _GNU_SOURCE /* fallocate(2) */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* User + system seconds of this process. */
static double cpu_self(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static int die(const char *what, const char *file)
{
    fprintf(stderr, "helpers: %s: %s: %s\n", what, file, strerror(errno));
    return 1;
}

static int mmap_touch(const char *file, uint64_t off, uint64_t len)
{
    long pg = sysconf(_SC_PAGESIZE);
    uint64_t start = off & ~(uint64_t)(pg - 1);
    len += off - start;
    int fd = open(file, O_RDONLY);
    if (fd < 0)
        return die("open", file);
    double t0 = now();
    volatile unsigned char *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, (off_t)start);
    if (p == MAP_FAILED)
        return die("mmap", file);
    unsigned sum = 0;
    for (uint64_t i = 0; i < len; i += (uint64_t)pg)
        sum += p[i];
    munmap((void *)p, len);
    double t1 = now();
    close(fd);
    printf("%.6f %u\n", t1 - t0, sum & 1);
    return 0;
}

/* One FILE[@OFFSET:LENGTH] argument read into buf; 0 or 1 (printed). */
static int read_one(const char *arg, char *buf, size_t bs)
{
    char path[4096];
    unsigned long long off = 0, len = ~0ULL;
    const char *at = strrchr(arg, '@');
    size_t pn = at ? (size_t)(at - arg) : strlen(arg);
    if (pn >= sizeof path || (at && sscanf(at + 1, "%llu:%llu", &off, &len) != 2)) {
        fprintf(stderr, "helpers: bad FILE[@OFFSET:LENGTH]: %s\n", arg);
        return 1;
    }
    memcpy(path, arg, pn);
    path[pn] = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return die("open", path);
    while (len) {
        size_t want = len < bs ? (size_t)len : bs;
        ssize_t r = pread(fd, buf, want, (off_t)off);
        if (r < 0)
            return die("read", path);
        if (r == 0)
            break;
        off += (unsigned long long)r;
        len -= (unsigned long long)r;
    }
    close(fd);
    return 0;
}

static int read_files(int n, char **args)
{
    const size_t bs = (size_t)1 << 20;
    char *buf = aligned_alloc(4096, bs);
    if (!buf)
        return die("malloc", "buffer");
    memset(buf, 1, bs);           /* every page faulted in now */
    (void)mlock(buf, bs);         /* and kept (best effort) */
    double c0 = cpu_self(), t0 = now();
    for (int i = 0; i < n; i++)
        if (read_one(args[i], buf, bs))
            return 1;
    double t1 = now(), c1 = cpu_self();
    printf("%.6f %.6f\n", t1 - t0, c1 - c0);
    return 0;
}

static int resident(const char *file)
{
    long pg = sysconf(_SC_PAGESIZE);
    int fd = open(file, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        return die("open", file);
    uint64_t total = 0;
    /* In 1 GiB windows, so any file size works. */
    const uint64_t win = UINT64_C(1) << 30;
    unsigned char *vec = malloc(win / (uint64_t)pg);
    for (uint64_t o = 0; o < (uint64_t)st.st_size; o += win) {
        uint64_t n = (uint64_t)st.st_size - o < win ? (uint64_t)st.st_size - o : win;
        void *p = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, (off_t)o);
        if (p == MAP_FAILED)
            return die("mmap", file);
        if (mincore(p, n, vec) != 0)
            return die("mincore", file);
        for (uint64_t i = 0; i < (n + (uint64_t)pg - 1) / (uint64_t)pg; i++)
            if (vec[i] & 1)
                total += (uint64_t)pg;
        munmap(p, n);
    }
    free(vec);
    close(fd);
    printf("%llu\n", (unsigned long long)total);
    return 0;
}

static int collapse(const char *file, uint64_t len)
{
    int fd = open(file, O_RDWR);
    if (fd < 0)
        return die("open", file);
    if (fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 0, (off_t)len) != 0)
        return die("fallocate(COLLAPSE_RANGE)", file);
    if (fsync(fd) != 0)
        return die("fsync", file);
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "mmap_touch"))
        return mmap_touch(argv[2], strtoull(argv[3], NULL, 10),
                          strtoull(argv[4], NULL, 10));
    if (argc == 3 && !strcmp(argv[1], "resident"))
        return resident(argv[2]);
    if (argc == 4 && !strcmp(argv[1], "collapse"))
        return collapse(argv[2], strtoull(argv[3], NULL, 10));
    if (argc >= 3 && !strcmp(argv[1], "read"))
        return read_files(argc - 2, argv + 2);
    fprintf(stderr, "usage: helpers mmap_touch FILE OFFSET LENGTH | "
                    "helpers resident FILE | helpers collapse FILE LENGTH | "
                    "helpers read FILE[@OFFSET:LENGTH] ...\n");
    return 2;
}
