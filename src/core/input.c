/* Opening input files, regular files only (input.h): the recipe and conf loaders, the data
 * readers, the tokenizers and the saved-plan reader all open what they read through here. */
#include "core/input.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *tr_file_kind(unsigned mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    }
    return "not a file";
}

/* Closes fd (when open) and fails at path with why (strerror(err) when NULL), leaving errno at
 * err for a caller that tells a missing file from others. */
static int give_up(int fd, const char *path, int code, int err, const char *why, struct tr_diag *d)
{
    if (fd >= 0)
        close(fd);
    tr_fail_file(d, code, path, 0, 0, "%s", why ? why : strerror(err));
    errno = err;
    return code;
}

int tr_open_regular(const char *path, int flags, struct tr_diag *d)
{
    /* O_NONBLOCK: opening a FIFO for reading waits for a writer otherwise. */
    int fd = open(path, flags | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        return give_up(fd, path, TR_EIO, errno, NULL, d);
    if (!S_ISREG(st.st_mode)) {
        char why[64];
        snprintf(why, sizeof why, "not a regular file (%s)", tr_file_kind(st.st_mode));
        return give_up(fd, path, TR_EINVAL, EINVAL, why, d);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
        return give_up(fd, path, TR_EIO, errno, NULL, d);
    return fd;
}

FILE *tr_fopen_regular(const char *path, struct tr_diag *d)
{
    int fd = tr_open_regular(path, O_RDONLY, d);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "rb");
    if (fd >= 0 && !f)
        give_up(fd, path, TR_ENOMEM, errno, NULL, d);
    return f;
}
