/* The atomic writer (src/core/atomic.h): a file is written whole and replaces the old one; a
 * write, flush or rename that fails leaves the old file as it was and no temporary behind; a
 * path too long is refused, not truncated; a temporary path planted as a link to another file
 * is never written through. Also the appended files' sync, which says when it fails. */
#include "runner.h"
#include "unit.h"

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>

#include "core/atomic.h"

/* The whole file at path ("" when it cannot be read); caller frees. */
static char *contents(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *text = tr_xcalloc(1 << 16, 1);
    if (f) {
        size_t n = fread(text, 1, (1 << 16) - 1, f);
        text[n] = '\0';
        fclose(f);
    }
    return text;
}

static void expect_contents(const char *path, const char *want)
{
    char *got = contents(path);
    ck_assert_str_eq(got, want);
    free(got);
}

/* How many names dir holds, . and .. aside. */
static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));)
        n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    closedir(d);
    return n;
}

/* The end of a failure's test: the old contents (or folder) still there, nothing beside it. */
static void expect_untouched_alone(const char *dir, char *path, struct tr_diag *d)
{
    ck_assert_int_eq(entries(dir), 1);
    tr_diag_free(d);
    free(path);
}

START_TEST(writes_and_replaces)
{
    char *dir = unit_mkdtemp(), *path = tr_strdup_printf("%s/file.json", dir);
    struct tr_diag d = {0};
    ck_assert_int_eq(tr_atomic_write(path, "one\n", 4, &d), 0);
    expect_contents(path, "one\n");
    struct tr_atomic a;
    ck_assert_int_eq(tr_atomic_open(&a, path, &d), 0);
    fprintf(a.f, "two %d\n", 2);
    expect_contents(path, "one\n");   /* not yet: the old file until the commit */
    ck_assert_int_eq(tr_atomic_commit(&a, &d), 0);
    ck_assert_ptr_null(a.f);
    expect_contents(path, "two 2\n");
    ck_assert_int_eq(tr_atomic_write(path, "", 0, &d), 0);   /* an empty file is a file */
    expect_contents(path, "");
    ck_assert_int_eq(entries(dir), 1);   /* no temporary left */
    ck_assert_int_eq(d.n, 0);
    unit_rmtree(dir);
    free(path), free(dir);
}
END_TEST

START_TEST(abort_leaves_the_old_file)
{
    char *dir = unit_mkdtemp(), *path = unit_write_in(dir, "file", "old");
    struct tr_diag d = {0};
    struct tr_atomic a;
    ck_assert_int_eq(tr_atomic_open(&a, path, &d), 0);
    fputs("half of a new one", a.f);
    tr_atomic_abort(&a);
    tr_atomic_abort(&a);   /* twice: a no-op */
    expect_contents(path, "old");
    ck_assert_int_eq(entries(dir), 1);
    unit_rmtree(dir);
    free(path), free(dir);
}
END_TEST

/* A write cut short (the file size limit: EFBIG, what a full disk gives as ENOSPC, and what
 * root cannot get round as it can a read-only folder): the old file stays, no temporary. */
START_TEST(failed_write_leaves_no_temporary)
{
    char *dir = unit_mkdtemp(), *path = unit_write_in(dir, "file", "old");
    signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &(struct rlimit){.rlim_cur = 4096, .rlim_max = RLIM_INFINITY}), 0);
    static char big[1 << 16];
    memset(big, 'x', sizeof big);
    struct tr_diag d = {0};
    ck_assert_int_eq(tr_atomic_write(path, big, sizeof big, &d), TR_EIO);
    char *text = unit_diag_text(&d);
    ck_assert_msg(strstr(text, path) && strstr(text, "left unchanged"), "%s", text);
    free(text);
    tr_diag_free(&d);
    struct tr_atomic a;   /* the same through the FILE: its buffered bytes fail at the flush */
    ck_assert_int_eq(tr_atomic_open(&a, path, &d), 0);
    fwrite(big, 1, sizeof big, a.f);
    ck_assert_int_eq(tr_atomic_commit(&a, &d), TR_EIO);
    expect_contents(path, "old");
    expect_untouched_alone(dir, path, &d);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

/* A rename that fails (the path is a folder): the folder stays, no temporary. */
START_TEST(failed_rename_leaves_no_temporary)
{
    char *dir = unit_mkdtemp(), *path = tr_strdup_printf("%s/taken", dir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    free(unit_write_in(path, "inside", "x"));
    struct tr_diag d = {0};
    ck_assert_int_eq(tr_atomic_write(path, "new", 3, &d), TR_EIO);
    ck_assert_msg(strstr(tr_diag_last(&d), "cannot rename"), "%s", tr_diag_last(&d));
    struct stat st;
    ck_assert(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
    expect_untouched_alone(dir, path, &d);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(refuses_a_path_too_long)
{
    char *dir = unit_mkdtemp();
    char *name = tr_xcalloc(TR_PATH_MAX + 1, 1);
    memset(name, 'a', TR_PATH_MAX);
    char *path = tr_strdup_printf("%s/%s", dir, name);
    struct tr_diag d = {0};
    ck_assert_int_eq(tr_atomic_write(path, "x", 1, &d), TR_EINVAL);
    ck_assert_msg(strstr(tr_diag_last(&d), "path too long"), "%s", tr_diag_last(&d));
    tr_diag_free(&d);
    /* Short enough itself, but not with the temporary's suffix: refused too, not truncated. */
    char *near = tr_strdup_printf("%s/%.*s", dir, (int)(TR_PATH_MAX - strlen(dir) - 4), name);
    ck_assert_int_eq(tr_atomic_write(near, "x", 1, &d), TR_EINVAL);
    ck_assert_int_eq(entries(dir), 0);
    tr_diag_free(&d);
    unit_rmtree(dir);
    free(near), free(path), free(name), free(dir);
}
END_TEST

/* A link planted where the temporary goes, pointing at another file: O_EXCL refuses to open
 * through it; the link itself is replaced, and the file it pointed at is untouched. */
START_TEST(never_writes_through_a_planted_link)
{
    char *dir = unit_mkdtemp(), *victim = unit_write_in(dir, "victim", "precious");
    char *path = tr_strdup_printf("%s/file", dir), *tmp = tr_strdup_printf("%s.tmp.%ld", path, (long)getpid());
    ck_assert_int_eq(symlink(victim, tmp), 0);
    struct tr_diag d = {0};
    ck_assert_int_eq(tr_atomic_write(path, "new", 3, &d), 0);
    expect_contents(victim, "precious");
    expect_contents(path, "new");
    struct stat st;
    ck_assert(lstat(path, &st) == 0 && S_ISREG(st.st_mode));
    ck_assert_int_eq(entries(dir), 2);   /* victim and file: the link is gone */
    unit_rmtree(dir);
    free(tmp), free(path), free(victim), free(dir);
}
END_TEST

START_TEST(file_sync_says_when_it_fails)
{
    char *dir = unit_mkdtemp(), *path = tr_strdup_printf("%s/log.txt", dir);
    struct tr_diag d = {0};
    FILE *f = fopen(path, "a");
    fputs("a line\n", f);
    ck_assert_int_eq(tr_file_sync(f, path, &d), 0);
    fclose(f);
    expect_contents(path, "a line\n");
    FILE *full = fopen("/dev/full", "w");
    if (full) {   /* a full disk: the flush fails */
        fputs("a line\n", full);
        ck_assert_int_eq(tr_file_sync(full, "/dev/full", &d), TR_EIO);
        ck_assert_msg(strstr(tr_diag_last(&d), "/dev/full: cannot sync"), "%s", tr_diag_last(&d));
        fclose(full);
        /* a line whose own flush failed (the run folder flushes each line) is lost: the sync
         * after it, with nothing left to flush, must still fail */
        full = fopen("/dev/full", "w");
        fputs("a line\n", full);
        ck_assert_int_ne(fflush(full), 0);
        ck_assert_int_eq(tr_file_sync(full, "/dev/full", &d), TR_EIO);
        ck_assert_msg(strstr(tr_diag_last(&d), "a write failed since the last sync"), "%s", tr_diag_last(&d));
        fclose(full);
    }
    tr_diag_free(&d);
    ck_assert_int_eq(tr_sync_folder_of(path, &d), 0);
    ck_assert_int_eq(tr_sync_folder_of("file-in-the-working-folder", &d), 0);
    char *gone = tr_strdup_printf("%s/no-such-folder/file", dir);
    ck_assert_int_eq(tr_sync_folder_of(gone, &d), TR_EIO);
    tr_diag_free(&d);
    unit_rmtree(dir);
    free(gone), free(path), free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("atomic");
    TCase *tc = tcase_create("atomic");
    tcase_add_test(tc, writes_and_replaces);
    tcase_add_test(tc, abort_leaves_the_old_file);
    tcase_add_test(tc, failed_write_leaves_no_temporary);
    tcase_add_test(tc, failed_rename_leaves_no_temporary);
    tcase_add_test(tc, refuses_a_path_too_long);
    tcase_add_test(tc, never_writes_through_a_planted_link);
    tcase_add_test(tc, file_sync_says_when_it_fails);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
