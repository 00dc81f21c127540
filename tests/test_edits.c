/*
 * test_edits.c - the edit section (fs/edits/section.c, the calling
 * sequence and invariants at the top of fs/edits/edits.h), on a model
 * with a stub edit store: the section keeps once, returns the keep's
 * status, lets the lock go, bumps the generation once an edit; and in a
 * build with asserts (no NDEBUG) each misuse the invariants forbid aborts
 * (SIGABRT) at once instead of racing or losing an edit quietly.
 *
 * The expectations are the invariants' words, not the code's output: the
 * stub counts the keeps it is asked for and records the generation each
 * one saw; whether the lock is free is asked of the lock itself, from
 * another thread.
 */
#include "ggufs.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

static struct gfs *g_fs;
static int g_keeps, g_keep_err;
static uint64_t g_kept_at;

/* A store's keep as edits.h says one is: makes fs->generation durable
 * once (here: counts and notes it), kept_gen set even when it fails. */
static int stub_keep(struct gfs *fs) {
    if (fs->edits.kept_gen == fs->generation)
        return g_keep_err;
    fs->edits.kept_gen = fs->generation;
    g_keeps++;
    g_kept_at = fs->generation;
    return g_keep_err;
}

static int stub_uncommitted(struct gfs *fs) {
    return fs->edits.kept_gen != fs->generation;
}

static const struct gfs_edits_ops stub_ops = {
    .name = "the stub",
    .commit_what = "commit to the stub",
    .keep = stub_keep,
    .uncommitted = stub_uncommitted,
};

static void setup(void) {
    g_fs = calloc(1, sizeof *g_fs);
    ck_assert_ptr_nonnull(g_fs);
    ck_assert_int_eq(pthread_rwlock_init(&g_fs->lock, NULL), 0);
    g_fs->edits.ops = &stub_ops;
    g_keeps = g_keep_err = 0;
    g_kept_at = 0;
}

static void teardown(void) {
    pthread_rwlock_destroy(&g_fs->lock);
    free(g_fs);
}

/* Whether another thread could take the model's lock for writing now. */
static void *try_write(void *u) {
    int rc = pthread_rwlock_trywrlock(&((struct gfs *)u)->lock);
    if (rc == 0)
        pthread_rwlock_unlock(&((struct gfs *)u)->lock);
    return (void *)(intptr_t)rc;
}

static int lock_free(void) {
    pthread_t t;
    void *rc;
    ck_assert_int_eq(pthread_create(&t, NULL, try_write, g_fs), 0);
    ck_assert_int_eq(pthread_join(t, &rc), 0);
    return rc == 0;
}

START_TEST(edit_keeps_once) {
    gfs_edit_begin(g_fs);
    ck_assert(!lock_free());
    gfs_edit_changed(g_fs);
    gfs_edit_changed(g_fs);
    ck_assert_uint_eq(g_fs->generation, 2);
    ck_assert_int_eq(g_keeps, 0); /* kept at the end, not per bump */
    ck_assert_int_eq(gfs_edit_end(g_fs), 0);
    ck_assert_int_eq(g_keeps, 1);
    ck_assert_uint_eq(g_kept_at, 2);
    ck_assert(lock_free());
    /* the next section starts from the kept generation */
    gfs_edit_begin(g_fs);
    gfs_edit_changed(g_fs);
    ck_assert_int_eq(gfs_edit_end(g_fs), 0);
    ck_assert_int_eq(g_keeps, 2);
    ck_assert_uint_eq(g_kept_at, 3);
}
END_TEST

START_TEST(edit_end_says_keep_failed) {
    g_keep_err = EIO;
    gfs_edit_begin(g_fs);
    gfs_edit_changed(g_fs);
    ck_assert_int_eq(gfs_edit_end(g_fs), EIO);
    ck_assert(lock_free());
    /* a failed keep leaves EDITED, and the mount goes on */
    gfs_edit_begin(g_fs);
    ck_assert_int_eq(gfs_edit_end(g_fs), EIO);
    ck_assert(lock_free());
}
END_TEST

START_TEST(abort_keeps_nothing) {
    gfs_edit_begin(g_fs);
    gfs_edit_abort(g_fs);
    ck_assert_int_eq(g_keeps, 0);
    ck_assert_uint_eq(g_fs->generation, 0);
    ck_assert(lock_free());
    /* a section that kept what it changed may abort (an overlay's tensor
     * record: tensorw.c keeps it for the status) */
    gfs_edit_begin(g_fs);
    gfs_edit_changed(g_fs);
    ck_assert_int_eq(gfs_edits_keep(g_fs), 0);
    gfs_edit_abort(g_fs);
    ck_assert_int_eq(g_keeps, 1);
    ck_assert(lock_free());
}
END_TEST

/* ---- misuse: each aborts in a build with asserts -------------------- */

START_TEST(bump_outside_section) {
    gfs_edit_changed(g_fs); /* invariant 2 */
}
END_TEST

START_TEST(keep_outside_section) {
    (void)gfs_edits_keep(g_fs); /* invariant 3 */
}
END_TEST

START_TEST(keep_under_read_lock) {
    /* what ops.c's lookup did until the section was functions */
    pthread_rwlock_rdlock(&g_fs->lock);
    (void)gfs_edits_keep(g_fs); /* invariant 3 */
}
END_TEST

START_TEST(abort_after_edit) {
    gfs_edit_begin(g_fs);
    gfs_edit_changed(g_fs);
    gfs_edit_abort(g_fs); /* invariant 4: the edit would go unkept */
}
END_TEST

START_TEST(begin_twice) {
    gfs_edit_begin(g_fs);
    gfs_edit_begin(g_fs); /* invariant 1: would deadlock */
}
END_TEST

static void *bump(void *u) {
    gfs_edit_changed(u);
    return NULL;
}

START_TEST(bump_on_other_thread) {
    pthread_t t;
    gfs_edit_begin(g_fs);
    ck_assert_int_eq(pthread_create(&t, NULL, bump, g_fs), 0);
    pthread_join(t, NULL); /* invariant 1: the section is this thread's */
}
END_TEST

START_TEST(begin_after_drop) {
    gfs_edit_begin(g_fs);
    gfs_edit_changed(g_fs);
    gfs_edit_drop(g_fs);
    gfs_edit_begin(g_fs); /* invariant 5: the model was to close */
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("edits");
    TCase *tc = tcase_create("section");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, edit_keeps_once);
    tcase_add_test(tc, edit_end_says_keep_failed);
    tcase_add_test(tc, abort_keeps_nothing);
    suite_add_tcase(s, tc);
#ifndef NDEBUG
    TCase *bad = tcase_create("misuse");
    tcase_add_checked_fixture(bad, setup, teardown);
    tcase_add_test_raise_signal(bad, bump_outside_section, SIGABRT);
    tcase_add_test_raise_signal(bad, keep_outside_section, SIGABRT);
    tcase_add_test_raise_signal(bad, keep_under_read_lock, SIGABRT);
    tcase_add_test_raise_signal(bad, abort_after_edit, SIGABRT);
    tcase_add_test_raise_signal(bad, begin_twice, SIGABRT);
    tcase_add_test_raise_signal(bad, bump_on_other_thread, SIGABRT);
    tcase_add_test_raise_signal(bad, begin_after_drop, SIGABRT);
    suite_add_tcase(s, bad);
#endif
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
