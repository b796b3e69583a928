/* Running a prepare script (prepare.h): `/bin/sh SCRIPT PREPARED_DIR` spawned as the leader of
 * its own process group, its stderr's last words kept, watched in short slices so that its end,
 * the time limit and a stop are each seen within a fraction of a second. Whatever way it ends,
 * no process of its group outlives it: the script's own children (a `sleep &`, a downloader it
 * started) are ended with it, SIGTERM first, SIGKILL after TR_PREPARE_GRACE seconds. While it
 * runs trainrun is the "child subreaper" of what it starts (Linux), so that what the script
 * orphans comes back to be reaped here, not left a zombie for a PID 1 that may never reap. */
#include "data/prepare.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/stop.h"
#include "data/cache.h"
#include "data/files.h"

extern char **environ;

#define STDERR_KEPT 1000   /* bytes of a failing script's stderr quoted: its last words */
#define SLICE_MS 100       /* how often the end, the limit and a stop are looked at */

static double monotonic(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- the script's stderr ------------------------------------------------------------------- */

/* The last STDERR_KEPT bytes (or fewer) of what the script wrote on stderr. */
struct tail {
    char buf[2 * STDERR_KEPT + 1];
    size_t n;
    bool cut;      /* older bytes were dropped */
};

/* What fd has now, without waiting: false at its end (or an error). */
static bool tail_read(struct tail *t, int fd)
{
    for (;;) {
        if (t->n == sizeof t->buf - 1) {   /* keep the newer half */
            memmove(t->buf, t->buf + STDERR_KEPT, STDERR_KEPT);
            t->n = STDERR_KEPT;
            t->cut = true;
        }
        ssize_t got = read(fd, t->buf + t->n, sizeof t->buf - 1 - t->n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && errno == EAGAIN)
            return true;
        if (got <= 0)
            return false;
        t->n += (size_t)got;
    }
}

/* The tail on one line (a diagnostic is one line), owned by the caller. */
static char *tail_text(struct tail *t)
{
    size_t n = t->n;
    while (n && strchr(" \t\r\n", t->buf[n - 1]))
        n--;
    size_t from = n > STDERR_KEPT ? n - STDERR_KEPT : 0;
    for (size_t i = from; i < n; i++)
        if (t->buf[i] == '\n' || t->buf[i] == '\r' || t->buf[i] == '\t')
            t->buf[i] = ' ';
    t->buf[n] = '\0';
    return tr_strdup_printf("%s%s", from || t->cut ? "…" : "", t->buf + from);
}

/* ---- the process group ----------------------------------------------------------------------- */

/* Reaps the leader when it has ended: true once it has (its status in *status). */
static bool reaped(pid_t pid, bool *done, int *status)
{
    if (!*done && waitpid(pid, status, WNOHANG) == pid)
        *done = true;
    return *done;
}

/* Whether any process of group pgid is left, once the ended ones that came to us (the leader,
 * the orphans we are the subreaper of) are reaped. */
static bool group_alive(pid_t pgid, bool *done, int *status)
{
    reaped(pgid, done, status);
    while (waitpid(-pgid, NULL, WNOHANG) > 0) {
    }
    return kill(-pgid, 0) == 0 || errno == EPERM;
}

/* Ends every process of the group: SIGTERM, then SIGKILL for what is left after the grace. The
 * leader is reaped on the way. */
static void end_group(pid_t pgid, bool *done, int *status)
{
    kill(-pgid, SIGTERM);
    kill(-pgid, SIGCONT);   /* a stopped process acts on SIGTERM only once it runs again */
    double give_up = monotonic() + TR_PREPARE_GRACE;
    while (monotonic() < give_up) {
        if (!group_alive(pgid, done, status))
            return;
        poll(NULL, 0, 20);
    }
    kill(-pgid, SIGKILL);
    for (int i = 0; i < 100 && group_alive(pgid, done, status); i++)   /* SIGKILL takes a moment */
        poll(NULL, 0, 10);
    while (!*done && waitpid(pgid, status, 0) < 0 && errno == EINTR) {
    }
    *done = true;
}

/* How the script ended. */
enum ending { FINISHED, TIMED_OUT, STOPPED };

struct watch {
    pid_t pid;
    int status;
    bool done;
    double deadline;       /* monotonic; 0: none */
    struct tail err;
};

/* Waits for the script while reading its stderr; ends the group on a stop, at the deadline, and
 * when the script has ended but left processes behind. */
static enum ending watch_script(struct watch *w, int fd)
{
    bool open_fd = true;
    enum ending how = FINISHED;
    for (;;) {
        if (tr_stop_requested()) {
            how = STOPPED;
            break;
        }
        if (w->deadline && monotonic() >= w->deadline) {
            how = TIMED_OUT;
            break;
        }
        if (reaped(w->pid, &w->done, &w->status) && !open_fd)
            break;
        if (reaped(w->pid, &w->done, &w->status) && open_fd) {
            /* the script is gone; what it wrote last is still in the pipe */
            struct pollfd p = {.fd = fd, .events = POLLIN};
            if (poll(&p, 1, 0) <= 0 || !tail_read(&w->err, fd))
                break;   /* nothing more now: a child of its may hold the pipe open forever */
            continue;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ready = open_fd ? poll(&p, 1, SLICE_MS) : poll(NULL, 0, SLICE_MS);
        if (ready > 0 && !tail_read(&w->err, fd))
            open_fd = false;
    }
    end_group(w->pid, &w->done, &w->status);   /* what is left of the group: none survives */
    if (open_fd)
        tail_read(&w->err, fd);
    return how;
}

static int spawn_script(const struct tr_data_def *def, int err_fd, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
    posix_spawnattr_init(&attr);
    /* its own group, to end it whole; the signals trainrun catches back to their defaults and
     * none blocked, so that the group's SIGTERM works */
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGHUP);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    char *argv[] = {"/bin/sh", def->prepare, def->prepared_dir, NULL};
    int err = posix_spawn(pid, "/bin/sh", &fa, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    return err;
}

/* "30 s", "2 min", "1.5 h": a limit in words. */
static void say_seconds(double s, char *out, size_t size)
{
    if (s >= 3600 && fmod(s, 360) == 0)
        snprintf(out, size, "%g h", s / 3600);
    else if (s >= 60 && fmod(s, 6) == 0)
        snprintf(out, size, "%g min", s / 60);
    else
        snprintf(out, size, "%g s", s);
}

static int script_failed(const struct tr_data_def *def, enum ending how, const struct watch *w, const char *said,
                         double timeout, struct tr_diag *diag)
{
    if (how == STOPPED) {
        int sig = tr_stop_requested();
        return tr_fail_at(diag, TR_EINTERRUPTED, def->prepare_at, "prepare: sh %s %s was stopped by signal %d "
                          "(%s) with every process it started", def->prepare, def->prepared_dir, sig, strsignal(sig));
    }
    if (how == TIMED_OUT) {
        char limit[32];
        say_seconds(timeout, limit, sizeof limit);
        return tr_fail_at(diag, TR_EINVAL, def->prepare_at, "prepare: sh %s %s did not finish within %s "
                          "(data.prepare_timeout); it and every process it started were ended%s%s", def->prepare,
                          def->prepared_dir, limit, *said ? ": " : "", said);
    }
    if (WIFEXITED(w->status) && WEXITSTATUS(w->status) == 0)
        return 0;
    char why[64];
    if (WIFEXITED(w->status))
        snprintf(why, sizeof why, "exit status %d", WEXITSTATUS(w->status));
    else
        snprintf(why, sizeof why, "killed by signal %d, %s", WTERMSIG(w->status), strsignal(WTERMSIG(w->status)));
    return tr_fail_at(diag, TR_EINVAL, def->prepare_at, "prepare: sh %s %s failed (%s)%s%s", def->prepare,
                      def->prepared_dir, why, *said ? ": " : " and wrote nothing on stderr", said);
}

/* Runs `/bin/sh <prepare> <prepared_dir>` and waits for it. Its stdout is dropped (the data
 * stage prints nothing); its stderr is quoted when it fails. */
static int run_prepare(const struct tr_data_def *def, double timeout, struct tr_diag *diag)
{
    int err = tr_make_folders(def->prepared_dir), fds[2] = {-1, -1};
    if (err || pipe2(fds, O_CLOEXEC) != 0)
        return tr_fail_at(diag, TR_EIO, def->prepare_at, "prepare: cannot %s %s: %s", err ? "create" : "run",
                          err ? def->prepared_dir : def->prepare, strerror(err ? err : errno));
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    struct tr_stop_catch caught;
    tr_stop_catch_begin(&caught);   /* a signal now ends the script's group, not trainrun alone */
    int subreaper = 0;
    prctl(PR_GET_CHILD_SUBREAPER, &subreaper);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    struct watch w = {.deadline = timeout > 0 ? monotonic() + timeout : 0};
    err = spawn_script(def, fds[1], &w.pid);
    close(fds[1]);
    int rc;
    if (err) {
        rc = tr_fail_at(diag, TR_EIO, def->prepare_at, "prepare: cannot run /bin/sh %s: %s", def->prepare,
                        strerror(err));
    } else {
        enum ending how = watch_script(&w, fds[0]);
        char *said = tail_text(&w.err);
        rc = script_failed(def, how, &w, said, timeout, diag);
        free(said);
    }
    close(fds[0]);
    prctl(PR_SET_CHILD_SUBREAPER, subreaper);
    tr_stop_catch_end(&caught);
    return rc;
}

/* Whether every file of every split is there and matches its sha256; the first that is not
 * goes to diag. */
static bool files_ready(const struct tr_data_def *def, struct tr_diag *diag)
{
    const struct tr_data_source *src[4] = {&def->all, &def->train, &def->valid, &def->test};
    for (int s = 0; s < 4; s++) {
        for (int i = 0; i < src[s]->nfiles; i++)
            if (tr_data_check(&src[s]->files[i], NULL, NULL, diag))
                return false;
        if (src[s]->labels.path && tr_data_check(&src[s]->labels, NULL, NULL, diag))
            return false;
    }
    return true;
}

int tr_data_ensure_prepared(const struct tr_data_def *def, double timeout, struct tr_diag *diag)
{
    if (!def->prepare)
        return 0;
    struct tr_diag first = {0};
    bool ready = files_ready(def, &first);
    tr_diag_free(&first);   /* a missing or stale file is what prepare is for: not an error yet */
    if (ready)
        return 0;
    int rc = run_prepare(def, timeout, diag);
    if (rc)
        return rc;
    if (files_ready(def, diag))
        return 0;
    return tr_fail_at(diag, TR_EINVAL, def->prepare_at, "prepare: sh %s %s ran, but the file above is still "
                      "missing or unlike its sha256", def->prepare, def->prepared_dir);
}
