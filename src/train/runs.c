/* A recipe's runs folder: the lock, the run folders, the links, retention (runs.h). */
#include "train/runs.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/exit.h"   /* the statuses run.json records, read back */
#include "data/cache.h"

/* ---- the lock -------------------------------------------------------------------------------- */

/* What the lock file says about its holder, on one line; "" when it says nothing yet (the
 * holder has the lock but has not written it: a few microseconds). */
static void read_holder(int fd, char *out, size_t size)
{
    ssize_t n = pread(fd, out, size - 1, 0);
    out[n > 0 ? n : 0] = '\0';
    out[strcspn(out, "\n")] = '\0';
}

/* The highest folder of path that does not exist yet, into out; "" when path exists (path
 * fits in out: the caller's tr_path_set said so). */
static void first_missing(const char *path, struct tr_path *out)
{
    struct stat st;
    out->s[0] = '\0';
    if (stat(path, &st) == 0)
        return;
    size_t n = strlen(path);
    for (size_t i = 1; i <= n; i++)
        if (i == n || path[i] == '/') {
            snprintf(out->s, sizeof out->s, "%.*s", (int)i, path);
            if (stat(out->s, &st))
                return;
        }
    out->s[0] = '\0';
}

/* Opens and locks path; the lock counts only while path still names the file locked (an
 * unlock that removed it in between: try again on the new one). */
static int lock_file(const char *path, int *fd_out)
{
    for (int attempt = 0; attempt < 100; attempt++) {
        /* never through a link (its target would be truncated and written) nor into a FIFO */
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0666);
        if (fd < 0)
            return -1;
        struct stat mine, now;
        if (fstat(fd, &mine) || !S_ISREG(mine.st_mode)) {
            close(fd);
            errno = EINVAL;
            return -1;
        }
        if (flock(fd, LOCK_EX | LOCK_NB)) {
            *fd_out = fd;
            return 1;
        }
        if (stat(path, &now) == 0 && mine.st_ino == now.st_ino && mine.st_dev == now.st_dev) {
            *fd_out = fd;
            return 0;
        }
        close(fd);
    }
    errno = EAGAIN;
    return -1;
}

int tr_runs_lock(const char *dir, struct tr_runs_lock *lock, struct tr_diag *d)
{
    lock->fd = -1;
    struct tr_path path;
    int rc = tr_path_set(&lock->dir, d, "%s", dir);
    if (rc || (rc = tr_path_set(&path, d, "%s/.lock", dir)))
        return rc;
    first_missing(dir, &lock->created);
    int e = tr_make_folders(dir);
    if (e)
        return tr_fail(d, TR_EIO, "cannot create %s: %s", dir, strerror(e));
    int fd, held = lock_file(path.s, &fd);
    if (held < 0 && (errno == ELOOP || errno == EINVAL))
        return tr_fail(d, TR_EIO, "cannot lock %s: it is %s, not a regular file; refused, and left as it is", path.s,
                       errno == ELOOP ? "a symbolic link" : "something else");
    if (held < 0)
        return tr_fail(d, TR_EIO, "cannot lock %s: %s", path.s, strerror(errno));
    if (held) {
        e = errno;
        char holder[512];
        read_holder(fd, holder, sizeof holder);
        close(fd);
        if (e != EWOULDBLOCK)
            return tr_fail(d, TR_EIO, "cannot lock %s: %s", path.s, strerror(e));
        return tr_fail(d, TR_ELOCKED, "%s holds %s", *holder ? holder : "another process (still starting)", path.s);
    }
    char line[400], started[32], host[256] = "";
    time_t now = time(NULL);
    strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    gethostname(host, sizeof host - 1);
    int len = snprintf(line, sizeof line, "pid %ld, started %s on %s\n", (long)getpid(), started,
                       *host ? host : "this host");
    if (ftruncate(fd, 0) || pwrite(fd, line, (size_t)len, 0) != len) {
        rc = tr_fail(d, TR_EIO, "cannot write %s: %s", path.s, strerror(errno));
        close(fd);
        return rc;
    }
    lock->fd = fd;
    return 0;
}

/* Does dir hold anything but its .lock? */
static int holds_more(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int more = !d;
    while (d && !more && (de = readdir(d)))
        more = strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strcmp(de->d_name, ".lock");
    if (d)
        closedir(d);
    return more;
}

void tr_runs_unlock(struct tr_runs_lock *lock)
{
    if (lock->fd < 0)
        return;
    if (*lock->created.s && !holds_more(lock->dir.s)) {   /* removed while still held: see lock_file */
        char *path = tr_strdup_printf("%s/.lock", lock->dir.s);
        unlink(path);
        free(path);
        struct tr_path folder = lock->dir;
        while (strlen(folder.s) >= strlen(lock->created.s) && rmdir(folder.s) == 0) {
            char *slash = strrchr(folder.s, '/');
            if (!slash)
                break;
            *slash = '\0';
        }
    }
    close(lock->fd);   /* otherwise the file stays, for the next run */
    lock->fd = -1;
}

/* ---- run folders and links ----------------------------------------------------------------- */

int tr_runs_parent(const char *run_dir, struct tr_path *out, struct tr_diag *d)
{
    size_t n = strlen(run_dir);
    while (n > 1 && run_dir[n - 1] == '/')
        n--;
    while (n > 0 && run_dir[n - 1] != '/')
        n--;
    while (n > 1 && run_dir[n - 1] == '/')
        n--;
    return n == 0 ? tr_path_set(out, d, ".") : tr_path_set(out, d, "%.*s", (int)n, run_dir);
}

int tr_runs_is_run_name(const char *name)
{
    for (int i = 0; i < 15; i++)
        if (i == 8 ? name[i] != '-' : !isdigit((unsigned char)name[i]))
            return 0;
    if (name[15] == '\0')
        return 1;
    if (name[15] != '-' || !name[16])
        return 0;
    for (const char *p = name + 16; *p; p++)
        if (!isdigit((unsigned char)*p))
            return 0;
    return 1;
}

/* Oldest first: by time, then "-2" after the plain name, "-10" after "-9". */
static int by_age(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    int c = strncmp(x, y, 15);
    if (c)
        return c;
    long nx = x[15] ? strtol(x + 16, NULL, 10) : 1, ny = y[15] ? strtol(y + 16, NULL, 10) : 1;
    return (nx > ny) - (nx < ny);
}

char **tr_runs_list(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    size_t n = 0, cap = 16;
    char **names = tr_xmalloc(cap * sizeof *names);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!tr_runs_is_run_name(de->d_name))
            continue;
        char *path = tr_strdup_printf("%s/%s", dir, de->d_name);
        struct stat st;
        int folder = lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
        free(path);
        if (!folder)
            continue;
        if (n + 2 > cap)
            names = tr_xrealloc(names, (cap *= 2) * sizeof *names);
        names[n++] = tr_strdup(de->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_age);
    names[n] = NULL;
    return names;
}

void tr_runs_free_list(char **names)
{
    for (int i = 0; names && names[i]; i++)
        free(names[i]);
    free(names);
}

int tr_runs_link_target(const char *dir, const char *link, char *out, size_t size)
{
    struct tr_path target;
    char *path = tr_strdup_printf("%s/%s", dir, link);
    ssize_t n = readlink(path, target.s, sizeof target.s - 1);
    free(path);
    if (n <= 0)
        return -1;
    target.s[n] = '\0';
    const char *base = strrchr(target.s, '/') ? strrchr(target.s, '/') + 1 : target.s;
    struct stat st;
    path = tr_strdup_printf("%s/%s", dir, base);
    int folder = *base && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    free(path);
    if (!folder)
        return -1;
    snprintf(out, size, "%s", base);
    return 0;
}

int tr_runs_link_set(const char *dir, const char *link, const char *target)
{
    char *path = tr_strdup_printf("%s/%s", dir, link);
    char *tmp = tr_strdup_printf("%s/.%s.tmp.%ld", dir, link, (long)getpid());
    unlink(tmp);   /* one a crash of a process with our pid left */
    int rc = symlink(target, tmp);
    if (!rc && (rc = rename(tmp, path))) {
        int e = errno;
        unlink(tmp);
        errno = e;
    }
    free(path), free(tmp);
    return rc ? -1 : 0;
}


enum tr_run_state tr_runs_state(const char *run_dir)
{
    char *path = tr_strdup_printf("%s/run.json", run_dir);
    json_t *record = json_load_file(path, 0, NULL);
    struct stat st;
    bool absent = !record && lstat(path, &st) && errno == ENOENT;
    free(path);
    if (!record)   /* absent: its record was never opened, it never got going */
        return absent ? TR_RUN_NEVER_STARTED : TR_RUN_INTERRUPTED;
    json_t *segments = json_object_get(record, "segments");
    json_t *last = json_array_get(segments, json_array_size(segments) - 1);
    json_t *code = json_object_get(last, "exit_code");
    enum tr_run_state state = TR_RUN_FAILED;
    if (!last || !code || json_is_null(code) || json_integer_value(code) == TR_EXIT_INTERRUPTED ||
        json_integer_value(code) == TR_EXIT_TIME_LIMIT)
        state = TR_RUN_INTERRUPTED;
    else if (json_integer_value(code) == TR_EXIT_OK || json_integer_value(code) == TR_EXIT_REGRESSION)
        state = TR_RUN_FINISHED;
    json_decref(record);
    return state;
}

/* ---- retention ------------------------------------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* rm -rf of a folder, never following links out of it. */
static int remove_tree(const char *path)
{
    return nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Folders a crash left halfway through their deletion. */
static void finish_deletions(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (strncmp(de->d_name, ".deleting-", 10))
            continue;
        char *path = tr_strdup_printf("%s/%s", dir, de->d_name);
        remove_tree(path);
        free(path);
    }
    if (d)
        closedir(d);
}

int tr_runs_retain(const char *dir, long long keep, const char *current, char *deleted, size_t size)
{
    if (size)
        deleted[0] = '\0';
    if (keep <= 0)
        return 0;
    finish_deletions(dir);
    char latest[256] = "", promoted[256] = "";
    tr_runs_link_target(dir, "latest", latest, sizeof latest);
    tr_runs_link_target(dir, "promoted", promoted, sizeof promoted);
    char **names = tr_runs_list(dir);
    if (!names)
        return -1;
    long long n = 0, count = 0;
    while (names[n])
        n++;
    /* the newest keep stay; of the older ones, the protected stay too */
    for (long long i = 0; i < n - keep; i++) {
        const char *name = names[i];
        if (!strcmp(name, current) || !strcmp(name, latest) || !strcmp(name, promoted))
            continue;
        char *path = tr_strdup_printf("%s/%s", dir, name), *doomed = tr_strdup_printf("%s/.deleting-%s", dir, name);
        int gone = rename(path, doomed) == 0 && remove_tree(doomed) == 0;
        free(path), free(doomed);
        if (!gone)
            continue;
        size_t used = strlen(deleted);
        if (used + strlen(name) + 3 < size)
            snprintf(deleted + used, size - used, "%s%s", used ? ", " : "", name);
        count++;
    }
    tr_runs_free_list(names);
    return (int)count;
}
