/*
 * test_overlay.c - the overlay library (gguf/overlay.c): identity, write,
 * load, apply, remove, trust checks and crash safety, on real files.
 *
 * Expectations never come from the code under test: the edited context is
 * made with the editing API (gguf_set_payload, gguf_remove_key), and after
 * a write and a load, an overlay applied to a fresh open of the source
 * must give exactly that context's keys (order, types, payloads).  For
 * every fault point a child writes the overlay with GGUFS_FAULT=N and dies
 * by SIGKILL just before step N; the overlay must then load whole, old or
 * new.
 */
#include "gguf.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Wformat-truncation"

/* Fault points of one overlay write (overlay.c's header comment). */
#define STEPS_OVERLAY 5

static char g_dir[PATH_MAX], g_model[PATH_MAX], g_ov[PATH_MAX];

static int rm_one(const char *p, const struct stat *sb, int flag,
                  struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static bool link_file_ok(const char *from, const char *to) {
    return link(from, to) == 0;
}

static void set_str(gguf_ctx *c, const char *k, const char *v) {
    uint8_t p[512];
    uint64_t n = strlen(v);
    memcpy(p, &n, 8); /* little-endian host (x86, arm64) */
    memcpy(p + 8, v, n);
    struct gguf_error e = {0};
    ck_assert_msg(gguf_set_payload(c, k, strlen(k), GGUF_TYPE_STRING, p, 8 + n,
                                   &e) == GGUF_OK,
                  "%s", e.msg);
}

static void set_u32(gguf_ctx *c, const char *k, uint32_t v) {
    struct gguf_error e = {0};
    ck_assert_msg(gguf_set_payload(c, k, strlen(k), GGUF_TYPE_UINT32,
                                   (const uint8_t *)&v, 4, &e) == GGUF_OK,
                  "%s", e.msg);
}

/* A small model: a few keys, two tensors. */
static void setup(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/ggufs-overlay-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
    snprintf(g_model, sizeof g_model, "%s/m.gguf", g_dir);
    snprintf(g_ov, sizeof g_ov, "%s/m.overlay.gguf", g_dir);
    gguf_ctx *c = gguf_new(3);
    struct gguf_error e = {0};
    set_str(c, "general.architecture", "llama");
    set_str(c, "general.name", "original");
    set_u32(c, "llama.context_length", 4096);
    set_str(c, "general.url", "https://example.invalid/");
    int64_t ne[2] = {64, 4};
    ck_assert(gguf_add_tensor(c, "a", 1, 0, 2, ne, &e) == GGUF_OK);
    ck_assert(gguf_add_tensor(c, "b", 1, 0, 2, ne, &e) == GGUF_OK);
    ck_assert_msg(gguf_write_file(c, g_model, NULL, NULL, &e) == GGUF_OK, "%s",
                  e.msg);
    gguf_close(c);
}

static void teardown(void) {
    nftw(g_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static gguf_ctx *open_model(void) {
    gguf_ctx *c = NULL;
    struct gguf_error e = {0};
    ck_assert_msg(gguf_open(&c, g_model, 0, &e) == GGUF_OK, "%s", e.msg);
    return c;
}

static void identify(gguf_ctx *c, struct gguf_overlay_id *id) {
    struct gguf_error e = {0};
    ck_assert_msg(gguf_overlay_identify(&c, 1, g_model, false, NULL, id, &e) ==
                      GGUF_OK,
                  "%s", e.msg);
}

/* The edits every test makes: a value, a type change, a new key, a
 * removal. */
static void edit(gguf_ctx *c, const char *name) {
    struct gguf_error e = {0};
    set_str(c, "general.name", name);
    set_str(c, "llama.context_length", "not a number any more");
    set_u32(c, "mytool.count", 3);
    int64_t i = gguf_find_key(c, "general.url", 11);
    ck_assert(i >= 0 && gguf_remove_key(c, i, &e) == GGUF_OK);
}

/* a and b have the same keys in the same order with the same values. */
static void same_keys(const gguf_ctx *a, const gguf_ctx *b) {
    ck_assert_int_eq(gguf_n_kv(a), gguf_n_kv(b));
    for (int64_t i = 0; i < gguf_n_kv(a); i++) {
        size_t al, bl, ap, bp;
        const char *ka = gguf_kv_key(a, i, &al), *kb = gguf_kv_key(b, i, &bl);
        ck_assert_msg(al == bl && memcmp(ka, kb, al) == 0, "key %lld: %s vs %s",
                      (long long)i, ka, kb);
        ck_assert_int_eq(gguf_kv_type(a, i), gguf_kv_type(b, i));
        const uint8_t *pa = gguf_kv_payload(a, i, &ap);
        const uint8_t *pb = gguf_kv_payload(b, i, &bp);
        ck_assert_msg(ap == bp && memcmp(pa, pb, ap) == 0, "value of %s", ka);
    }
}

static void write_ov(const gguf_ctx *edited, const gguf_ctx *disk,
                     const struct gguf_overlay_id *id) {
    struct gguf_error e = {0};
    ck_assert_msg(gguf_overlay_write(g_ov, edited, disk, id, NULL, 0, &e) ==
                      GGUF_OK,
                  "%s", e.msg);
}

static enum gguf_status load(gguf_ctx **ov, struct gguf_overlay_id *made,
                             bool *found, struct gguf_error *e) {
    return gguf_overlay_load(g_ov, g_model, ov, made, found, e);
}

START_TEST(roundtrip) {
    gguf_ctx *disk = open_model(), *edited = open_model(), *fresh;
    struct gguf_overlay_id id, made;
    struct gguf_error e = {0};
    gguf_ctx *ov = NULL;
    bool found;
    identify(disk, &id);
    edit(edited, "edited");
    /* The header as opened, parsed again from the edited context's bytes:
     * the unedited keys. */
    gguf_ctx *orig = NULL;
    ck_assert_msg(gguf_open_original(&orig, edited, 0, &e) == GGUF_OK, "%s",
                  e.msg);
    same_keys(orig, disk);
    ck_assert_int_eq(gguf_n_tensors(orig), 2);
    ck_assert_uint_eq(gguf_data_offset(orig), gguf_data_offset(disk));
    gguf_close(orig);
    write_ov(edited, disk, &id);
    struct stat sb;
    ck_assert(stat(g_ov, &sb) == 0 && (sb.st_mode & 0777) == 0600);
    ck_assert_msg(load(&ov, &made, &found, &e) == GGUF_OK && found, "%s",
                  e.msg);
    char why[512];
    ck_assert_msg(gguf_overlay_matches(&made, &id, why, sizeof why), "%s", why);
    ck_assert_str_eq(made.source, g_model);
    ck_assert_uint_eq(made.size, id.size);
    /* Only the edits: 5 own keys, the bases, the removal list, 3 keys
     * set. */
    ck_assert_int_eq(gguf_n_kv(ov), 5 + 1 + 1 + 3);
    ck_assert(gguf_find_key(ov, "general.architecture", 20) < 0);
    fresh = open_model();
    int64_t set, removed;
    ck_assert_msg(gguf_overlay_apply(fresh, ov, &set, &removed, &e) == GGUF_OK,
                  "%s", e.msg);
    ck_assert_int_eq(set, 3);
    ck_assert_int_eq(removed, 1);
    same_keys(fresh, edited);
    /* Applying twice changes nothing more. */
    ck_assert(gguf_overlay_apply(fresh, ov, &set, &removed, &e) == GGUF_OK);
    ck_assert_int_eq(set + removed, 0);
    same_keys(fresh, edited);
    gguf_close(ov);
    gguf_close(fresh);
    gguf_close(edited);
    gguf_close(disk);
}
END_TEST

/* The keys of ov that conflict with src: their names and count. */
static int64_t conflicts(const gguf_ctx *ov, const gguf_ctx *src, bool *based,
                         char *names, size_t n) {
    struct gguf_buf b = {0};
    struct gguf_error e = {0};
    int64_t nc = -1;
    ck_assert_msg(gguf_overlay_conflicts(ov, src, &b, &nc, based, &e) ==
                      GGUF_OK,
                  "%s", e.msg);
    snprintf(names, n, "%.*s", (int)b.len, b.p ? (const char *)b.p : "");
    gguf_buf_free(&b);
    return nc;
}

/* Rebase: the bases an overlay records tell which of its keys upstream
 * changed too; an overlay without them (older ggufs) counts every key
 * upstream does not hold as the overlay does. */
START_TEST(rebase_conflicts) {
    gguf_ctx *disk = open_model(), *edited = open_model(), *up = open_model();
    struct gguf_overlay_id id, made;
    struct gguf_error e = {0};
    gguf_ctx *ov = NULL;
    bool found, based;
    char names[256];
    identify(disk, &id);
    edit(edited, "edited");
    write_ov(edited, disk, &id);
    ck_assert_msg(load(&ov, &made, &found, &e) == GGUF_OK && found, "%s",
                  e.msg);
    /* Unchanged upstream: nothing conflicts. */
    ck_assert_int_eq(conflicts(ov, up, &based, names, sizeof names), 0);
    ck_assert(based);
    /* Both changed general.name and general.url (removed in the overlay);
     * upstream alone the architecture; the same value as the overlay's is
     * no conflict. */
    set_str(up, "general.name", "upstream");
    set_str(up, "general.url", "https://example.invalid/new");
    set_str(up, "general.architecture", "llama2");
    set_u32(up, "mytool.count", 3);
    ck_assert_int_eq(conflicts(ov, up, &based, names, sizeof names), 2);
    ck_assert_str_eq(names, "general.name, general.url");
    /* Without bases: every key upstream does not hold as the overlay. */
    gguf_close(up);
    up = open_model();
    int64_t bi = gguf_find_key(ov, "ggufs.overlay.base", 18);
    ck_assert(bi >= 0 && gguf_remove_key(ov, bi, &e) == GGUF_OK);
    ck_assert_int_eq(conflicts(ov, up, &based, names, sizeof names), 4);
    ck_assert(!based);
    ck_assert_str_eq(
        names, "general.name, llama.context_length, mytool.count, general.url");
    gguf_close(ov);
    gguf_close(up);
    gguf_close(edited);
    gguf_close(disk);
}
END_TEST

START_TEST(identity_differs) {
    gguf_ctx *c = open_model();
    struct gguf_overlay_id id, other;
    char why[1024];
    identify(c, &id);
    other = id;
    ck_assert(gguf_overlay_matches(&other, &id, why, sizeof why));
    other.size++;
    ck_assert(!gguf_overlay_matches(&other, &id, why, sizeof why));
    ck_assert_msg(strstr(why, "bytes") != NULL, "%s", why);
    other = id;
    other.hash[20] = other.hash[20] == '0' ? '1' : '0';
    ck_assert(!gguf_overlay_matches(&other, &id, why, sizeof why));
    ck_assert_msg(strstr(why, "header") != NULL, "%s", why);
    other = id;
    other.shards = 3;
    ck_assert(!gguf_overlay_matches(&other, &id, why, sizeof why));
    ck_assert_msg(strstr(why, "set of 3") != NULL, "%s", why);
    /* Remote: URL and ETag count too; a local path does not. */
    struct gguf_overlay_id r1, r2;
    struct gguf_error e = {0};
    ck_assert(gguf_overlay_identify(&c, 1, "https://h/m.gguf", true, "\"abc\"",
                                    &r1, &e) == GGUF_OK);
    r2 = r1;
    snprintf(r2.etag, sizeof r2.etag, "\"abd\"");
    ck_assert(!gguf_overlay_matches(&r2, &r1, why, sizeof why));
    ck_assert_msg(strstr(why, "server's version (\"abd\"), it now has "
                              "\"abc\"") != NULL,
                  "%s", why);
    ck_assert(!gguf_overlay_matches(&r1, &id, why, sizeof why));
    other = id;
    snprintf(other.source, sizeof other.source, "/elsewhere/m.gguf");
    ck_assert(gguf_overlay_matches(&other, &id, why, sizeof why));
    /* A model with a key of the overlay's namespace cannot have one. */
    set_str(c, "ggufs.overlay.source", "mine");
    ck_assert(gguf_overlay_identify(&c, 1, g_model, false, NULL, &other, &e) ==
              GGUF_E_PERM);
    ck_assert_msg(strstr(e.msg, "namespace"), "%s", e.msg);
    gguf_close(c);
}
END_TEST

/* A remote source's identity goes into the file and comes back. */
START_TEST(remote_keys) {
    gguf_ctx *disk = open_model(), *edited = open_model(), *ov = NULL;
    struct gguf_overlay_id id, made;
    struct gguf_error e = {0};
    bool found;
    ck_assert(gguf_overlay_identify(&disk, 1, "https://h/m.gguf", true,
                                    "\"etag-1\"", &id, &e) == GGUF_OK);
    edit(edited, "remote");
    write_ov(edited, disk, &id);
    ck_assert_msg(load(&ov, &made, &found, &e) == GGUF_OK, "%s", e.msg);
    ck_assert(made.remote);
    ck_assert_str_eq(made.etag, "\"etag-1\"");
    ck_assert_str_eq(made.source, "https://h/m.gguf");
    gguf_close(ov);
    gguf_close(edited);
    gguf_close(disk);
}
END_TEST

START_TEST(trust) {
    gguf_ctx *disk = open_model(), *edited = open_model(), *ov = NULL;
    struct gguf_overlay_id id, made;
    struct gguf_error e = {0};
    bool found = true;
    identify(disk, &id);
    ck_assert(load(&ov, &made, &found, &e) == GGUF_OK && !found);
    edit(edited, "x");
    write_ov(edited, disk, &id);
    char link[PATH_MAX + 8];
    /* writable by others */
    ck_assert(chmod(g_ov, 0622) == 0);
    ck_assert(load(&ov, &made, &found, &e) == GGUF_E_PERM);
    ck_assert_msg(strstr(e.msg, "writable by others"), "%s", e.msg);
    ck_assert(chmod(g_ov, 0600) == 0);
    /* two links */
    snprintf(link, sizeof link, "%s.2", g_ov);
    ck_assert(link_file_ok(g_ov, link));
    ck_assert(load(&ov, &made, &found, &e) == GGUF_E_PERM);
    ck_assert_msg(strstr(e.msg, "links"), "%s", e.msg);
    unlink(link);
    /* a symlink */
    snprintf(link, sizeof link, "%s/l.gguf", g_dir);
    ck_assert(symlink(g_ov, link) == 0);
    ck_assert(gguf_overlay_load(link, g_model, &ov, &made, &found, &e) ==
              GGUF_E_PERM);
    ck_assert_msg(strstr(e.msg, "symbolic link"), "%s", e.msg);
    bool gone;
    ck_assert(gguf_overlay_remove(link, g_model, &gone, &e) == GGUF_E_PERM);
    ck_assert(access(g_ov, F_OK) == 0);
    /* another owner (root only) */
    if (geteuid() == 0) {
        ck_assert(chown(g_ov, 65534, 65534) == 0);
        ck_assert(load(&ov, &made, &found, &e) == GGUF_E_PERM);
        ck_assert_msg(strstr(e.msg, "owned by uid 65534"), "%s", e.msg);
        /* never replaced, never removed */
        ck_assert(gguf_overlay_write(g_ov, edited, disk, &id, NULL, 0, &e) ==
                  GGUF_E_PERM);
        ck_assert(gguf_overlay_remove(g_ov, g_model, &gone, &e) == GGUF_E_PERM);
        struct stat sb;
        ck_assert(stat(g_ov, &sb) == 0 && sb.st_uid == 65534);
        ck_assert(chown(g_ov, 0, 0) == 0);
    }
    /* not a GGUF */
    int fd = open(g_ov, O_WRONLY | O_TRUNC);
    ck_assert(fd >= 0 && write(fd, "GGUF\3\0\0\0junk", 12) == 12);
    close(fd);
    ck_assert(load(&ov, &made, &found, &e) == GGUF_E_FORMAT);
    ck_assert_msg(strstr(e.msg, "not a valid GGUF"), "%s", e.msg);
    /* removed once, then there is none */
    ck_assert(gguf_overlay_remove(g_ov, g_model, &gone, &e) == GGUF_OK && gone);
    ck_assert(gguf_overlay_remove(g_ov, g_model, &gone, &e) == GGUF_OK &&
              !gone);
    /* a GGUF that is no overlay */
    gguf_ctx *plain = gguf_new(3);
    set_str(plain, "general.name", "plain");
    ck_assert(gguf_write_file(plain, g_ov, NULL, NULL, &e) == GGUF_OK);
    gguf_close(plain);
    ck_assert(chmod(g_ov, 0600) == 0);
    ck_assert(load(&ov, &made, &found, &e) == GGUF_E_FORMAT);
    ck_assert_msg(strstr(e.msg, "not a ggufs overlay"), "%s", e.msg);
    gguf_close(edited);
    gguf_close(disk);
}
END_TEST

/* GGUFS_FAULT=N kills a write just before its step N: the overlay loads
 * whole, old before the rename (step 4), new after. */
START_TEST(faults) {
    gguf_ctx *disk = open_model(), *edited = open_model();
    struct gguf_overlay_id id;
    identify(disk, &id);
    edit(edited, "old");
    write_ov(edited, disk, &id);
    char stored[32] = "old"; /* what the overlay holds */
    for (int n = 1; n <= STEPS_OVERLAY + 1; n++) {
        char name[32];
        snprintf(name, sizeof name, "new %d", n);
        set_str(edited, "general.name", name);
        pid_t pid = fork();
        ck_assert(pid >= 0);
        if (pid == 0) {
            char v[16];
            snprintf(v, sizeof v, "%d", n);
            setenv("GGUFS_FAULT", v, 1);
            struct gguf_error e = {0};
            _exit(gguf_overlay_write(g_ov, edited, disk, &id, NULL, 0, &e) ==
                          GGUF_OK
                      ? 0
                      : 1);
        }
        int status;
        ck_assert(waitpid(pid, &status, 0) == pid);
        if (n <= STEPS_OVERLAY)
            ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                          "step %d: not killed", n);
        else
            ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                          "an overlay write has more than %d fault points",
                          STEPS_OVERLAY);
        /* Killed before the rename (steps 1-4): the last whole version;
         * from step 5 on (the directory's fsync) the new one. */
        if (n >= 5)
            snprintf(stored, sizeof stored, "%s", name);
        gguf_ctx *ov = NULL, *fresh = open_model();
        struct gguf_overlay_id made;
        struct gguf_error e = {0};
        bool found;
        int64_t set, removed;
        ck_assert_msg(gguf_overlay_load(g_ov, g_model, &ov, &made, &found,
                                        &e) == GGUF_OK &&
                          found,
                      "step %d: %s", n, e.msg);
        ck_assert(gguf_overlay_apply(fresh, ov, &set, &removed, &e) == GGUF_OK);
        int64_t i = gguf_find_key(fresh, "general.name", 12);
        const char *s;
        size_t len;
        ck_assert(gguf_kv_get_str(fresh, i, &s, &len));
        ck_assert_msg(len == strlen(stored) && memcmp(s, stored, len) == 0,
                      "step %d: general.name '%.*s', expected '%s'", n,
                      (int)len, s, stored);
        gguf_close(ov);
        gguf_close(fresh);
    }
    /* The temporary files the kills left are gone after the last write. */
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "ls %s | grep -q ggufs-tmp", g_dir);
    ck_assert_msg(system(cmd) != 0, "temporary overlay files left");
    gguf_close(edited);
    gguf_close(disk);
}
END_TEST

/* One writer per overlay: the lock is exclusive between two descriptors
 * (flock locks open files, so two opens in one process conflict as two
 * processes would), the first holder's text is read back by the second,
 * control bytes replaced; it is free once closed; a symlink or a file of
 * another user in its place is refused and left alone. */
START_TEST(lock) {
    struct gguf_error e = {0};
    char held[64], lock[PATH_MAX + 16];
    int fd1 = -1, fd2 = -1;
    snprintf(lock, sizeof lock, "%s.ggufs-lock", g_ov);
    ck_assert_msg(gguf_overlay_lock(g_ov, g_model, "first\n/m\x1b\n", &fd1,
                                    held, sizeof held, &e) == GGUF_OK,
                  "%s", e.msg);
    struct stat sb;
    ck_assert(stat(lock, &sb) == 0 && (sb.st_mode & 07777) == 0600);
    ck_assert(gguf_overlay_lock(g_ov, g_model, "second\n", &fd2, held,
                                sizeof held, &e) == GGUF_E_BUSY);
    ck_assert_int_eq(fd2, -1);
    ck_assert_str_eq(held, "first\n/m?\n");
    ck_assert_msg(strstr(e.msg, "in use") && strstr(e.msg, lock), "%s", e.msg);
    close(fd1);
    ck_assert(gguf_overlay_lock(g_ov, g_model, "second\n", &fd2, held,
                                sizeof held, &e) == GGUF_OK);
    close(fd2);
    /* a symlink where the lock goes */
    ck_assert(unlink(lock) == 0 && symlink(g_model, lock) == 0);
    ck_assert(gguf_overlay_lock(g_ov, g_model, "x\n", &fd1, held, sizeof held,
                                &e) == GGUF_E_PERM);
    ck_assert_msg(strstr(e.msg, "symbolic link"), "%s", e.msg);
    ck_assert(lstat(lock, &sb) == 0 && S_ISLNK(sb.st_mode));
    /* another user's file, writable by others */
    ck_assert(unlink(lock) == 0);
    int fd = open(lock, O_CREAT | O_WRONLY, 0600);
    ck_assert(fd >= 0 && fchmod(fd, 0666) == 0);
    close(fd);
    ck_assert(gguf_overlay_lock(g_ov, g_model, "x\n", &fd1, held, sizeof held,
                                &e) == GGUF_E_PERM);
    ck_assert_msg(strstr(e.msg, "writable by others"), "%s", e.msg);
    if (geteuid() == 0) {
        ck_assert(chmod(lock, 0600) == 0 && chown(lock, 65534, 65534) == 0);
        ck_assert(gguf_overlay_lock(g_ov, g_model, "x\n", &fd1, held,
                                    sizeof held, &e) == GGUF_E_PERM);
        ck_assert_msg(strstr(e.msg, "owned by uid 65534"), "%s", e.msg);
    }
    ck_assert_int_eq(fd1, -1);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("overlay");
    TCase *tc = tcase_create("overlay");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, roundtrip);
    tcase_add_test(tc, identity_differs);
    tcase_add_test(tc, rebase_conflicts);
    tcase_add_test(tc, remote_keys);
    tcase_add_test(tc, trust);
    tcase_add_test(tc, faults);
    tcase_add_test(tc, lock);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *r = srunner_create(suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
