/* The atomic writer and the appended files' sync policy (atomic.h). */
#include "core/atomic.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <string.h>
#include <unistd.h>

int tr_atomic_open(struct tr_atomic *a, const char *path, struct tr_diag *d)
{
    a->f = NULL;
    a->error = ENAMETOOLONG;
    a->path.s[0] = a->tmp.s[0] = '\0';
    int rc = tr_path_set(&a->path, d, "%s", path);
    if (!rc)
        rc = tr_path_set(&a->tmp, d, "%s.tmp.%ld", path, (long)getpid());
    if (rc)
        return rc;
    /* O_EXCL creates or fails, even on a dangling link; O_NOFOLLOW says so outright. A
     * temporary of our pid that a crash left (or a link planted there) is unlinked itself,
     * never its target. */
    const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = open(a->tmp.s, flags, 0666);
    if (fd < 0 && errno == EEXIST && unlink(a->tmp.s) == 0)
        fd = open(a->tmp.s, flags, 0666);
    if (fd < 0) {
        a->error = errno;
        return tr_fail(d, TR_EIO, "%s: cannot create %s: %s", path, a->tmp.s, strerror(a->error));
    }
    a->f = fdopen(fd, "wb");
    if (!a->f) {
        a->error = errno;
        close(fd);
        unlink(a->tmp.s);
        return tr_fail(d, TR_EIO, "%s: cannot write %s: %s", path, a->tmp.s, strerror(a->error));
    }
    a->error = 0;
    return 0;
}

int tr_atomic_commit(struct tr_atomic *a, struct tr_diag *d)
{
    const char *step = "write", *tail = "";
    int failed = ferror(a->f) || fflush(a->f) != 0;
    int e = errno;
    if (!failed && fsync(fileno(a->f)) < 0)
        step = "sync", failed = 1, e = errno;
    if (fclose(a->f) != 0 && !failed)   /* nothing left to flush, but it may report a late error */
        failed = 1, e = errno;
    a->f = NULL;
    if (!failed && rename(a->tmp.s, a->path.s) < 0)
        step = "rename", tail = " over it", failed = 1, e = errno;
    if (failed) {
        unlink(a->tmp.s);
        a->error = e ? e : EIO;
        return tr_fail(d, TR_EIO, "%s: cannot %s %s%s: %s; left unchanged", a->path.s, step, a->tmp.s,
                       tail, strerror(a->error));
    }
    int rc = tr_sync_folder_of(a->path.s, d);
    a->error = rc ? errno : 0;
    return rc;
}

void tr_atomic_abort(struct tr_atomic *a)
{
    if (!a->f)
        return;
    fclose(a->f);
    a->f = NULL;
    unlink(a->tmp.s);
}

/* A write into a.f failed with errno e: the temporary removed, the path left as it was. */
static int give_up(struct tr_atomic *a, int e, struct tr_diag *d)
{
    tr_atomic_abort(a);
    tr_fail(d, TR_EIO, "%s: cannot write %s: %s; left unchanged", a->path.s, a->tmp.s, strerror(e));
    errno = e;
    return TR_EIO;
}

int tr_atomic_write(const char *path, const void *data, size_t bytes, struct tr_diag *d)
{
    struct tr_atomic a;
    int rc = tr_atomic_open(&a, path, d);
    if (rc)
        return errno = a.error, rc;
    if (bytes && fwrite(data, 1, bytes, a.f) != bytes)
        return give_up(&a, errno, d);
    rc = tr_atomic_commit(&a, d);
    errno = a.error;
    return rc;
}

int tr_atomic_write_json(const char *path, const struct json_t *j, size_t flags, struct tr_diag *d)
{
    struct tr_atomic a;
    int rc = tr_atomic_open(&a, path, d);
    if (rc)
        return errno = a.error, rc;
    errno = 0;
    if (json_dumpf(j, a.f, flags))
        return give_up(&a, errno ? errno : EIO, d);
    rc = tr_atomic_commit(&a, d);
    errno = a.error;
    return rc;
}

int tr_file_sync(FILE *f, const char *path, struct tr_diag *d)
{
    /* ferror: a line whose flush failed earlier (a full disk) is gone, though this flush has
     * nothing left to fail on */
    if (ferror(f))
        return tr_fail(d, TR_EIO, "%s: a write failed since the last sync: lines are missing", path);
    if (fflush(f) != 0 || fsync(fileno(f)) < 0)
        return tr_fail(d, TR_EIO, "%s: cannot sync: %s", path, strerror(errno));
    return 0;
}

int tr_sync_folder_of(const char *path, struct tr_diag *d)
{
    const char *slash = strrchr(path, '/');
    struct tr_path dir;
    int rc = slash ? tr_path_set(&dir, d, "%.*s", slash == path ? 1 : (int)(slash - path), path)
                   : tr_path_set(&dir, d, ".");
    if (rc)
        return rc;
    int fd = open(dir.s, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        tr_fail(d, TR_EIO, "%s: written, but syncing its folder failed (%s): the new file may "
                "not survive a power cut", path, strerror(e));
        errno = e;   /* for tr_atomic_commit's a->error */
        return TR_EIO;
    }
    close(fd);
    return 0;
}
