/*
 * replay.c - runs a fuzz target's LLVMFuzzerTestOneInput without libFuzzer
 * on every file named on the command line and on every regular file in the
 * directories named (not recursive, in name order).  Linked with one
 * target (fuzz_header.c or fuzz_text.c) by tests/meson.build, so that the
 * regression inputs in tests/fuzz/regress/TARGET/ run in every build.
 *
 *   fuzz_replay_header DIR_OR_FILE...
 *
 * A target that finds a broken property aborts: the process dies and the
 * last "replay: FILE" line on stderr names the input.  Exit 0 when every
 * input ran (an empty directory is 0 inputs, and says so), 1 when an
 * argument could not be read.  Files named README are skipped.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path, unsigned long *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return 1;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                fprintf(stderr, "replay: %s: out of memory\n", path);
                free(buf);
                fclose(f);
                return 1;
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "replay: %s: read error\n", path);
        free(buf);
        return 1;
    }
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
    /* An exact-size copy, so that ASan sees reads past the input. */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact) {
        free(buf);
        return 1;
    }
    if (len)
        memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    (*n)++;
    return 0;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir, unsigned long *n)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    char **names = NULL;
    size_t k = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (k == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, cap * sizeof *names);
            if (!nn)
                return 1;
            names = nn;
        }
        names[k++] = strdup(e->d_name);
    }
    closedir(d);
    if (k)
        qsort(names, k, sizeof *names, cmp);
    int rc = 0;
    for (size_t i = 0; i < k; i++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
            strcmp(names[i], "README") != 0)
            rc |= run_file(path, n);
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    unsigned long n = 0;
    int rc = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR_OR_FILE...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            rc = 1;
        } else if (S_ISDIR(st.st_mode)) {
            rc |= run_dir(argv[i], &n);
        } else {
            rc |= run_file(argv[i], &n);
        }
    }
    printf("replay: %lu inputs ran, %s\n", n, rc ? "some could not be read" : "no property violated");
    return rc;
}
