/* The stop flag (stop.h) and the one thread that takes the stop signals: read by every long
 * phase. */
#include "core/stop.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>
#include <unistd.h>

/* What a stop signal does when it comes. */
enum action { END, IGNORE, STOP };

/* The signal state: the module's own (STYLE.md allows it here alone: a signal belongs to the
 * process). The flag, the actions and the count are the watcher's to write and anyone's to
 * read; the rest is set before the watcher starts. */
static atomic_int stop_signal;   /* the signal that asked the run to stop; 0 while none did */
static atomic_int actions[3];    /* SIGINT's, SIGTERM's, SIGHUP's */
static atomic_uint taken;
static pid_t watched;            /* the process whose watcher runs (a fork's child has none) */
static struct tr_stop_catch installed;   /* what tr_stop_install replaced, for tr_stop_uninstall */

static const int stop_signals[3] = {SIGINT, SIGTERM, SIGHUP};

static sigset_t stop_set(void)
{
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < 3; i++)
        sigaddset(&set, stop_signals[i]);
    return set;
}

static int slot_of(int sig)
{
    return sig == SIGINT ? 0 : sig == SIGTERM ? 1 : 2;
}

/* Ends the process by sig as its default action does (the status a shell reads as 128 + sig),
 * from the calling thread. */
static void end_by(int sig)
{
    signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    raise(sig);
}

static void *watch(void *unused)
{
    (void)unused;
    sigset_t set = stop_set();
    for (;;) {
        int sig = sigwaitinfo(&set, NULL);
        if (sig < 0)
            continue;   /* EINTR: a signal this thread does not take */
        enum action a = (enum action)atomic_load(&actions[slot_of(sig)]);
        if (a == STOP)
            tr_stop_request(sig);
        atomic_fetch_add(&taken, 1);
        if (a == END)
            end_by(sig);
    }
    return NULL;
}

void tr_stop_init(void)
{
    if (watched == getpid())
        return;
    sigset_t set = stop_set();
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    for (int i = 0; i < 3; i++) {   /* a signal the process was started ignoring stays ignored */
        struct sigaction old;
        sigaction(stop_signals[i], NULL, &old);
        bool ignored = old.sa_handler == SIG_IGN && !(old.sa_flags & SA_SIGINFO);
        atomic_store(&actions[i], ignored ? IGNORE : END);
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);   /* it calls little (ASan refuses 64 KiB) */
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    if (pthread_create(&t, &attr, watch, NULL) == 0) {
        watched = getpid();
        pthread_setname_np(t, "trainrun-stop");   /* tests/signals.sh tells it from the others */
    }
    else   /* no thread to take them: they act as they did (a stop then ends the process) */
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    pthread_attr_destroy(&attr);
}

void tr_stop_request(int sig)
{
    int none = 0;
    atomic_compare_exchange_strong(&stop_signal, &none, sig);
}

int tr_stop_requested(void)
{
    return atomic_load_explicit(&stop_signal, memory_order_relaxed);
}

int tr_stop_threads(void)
{
    return watched == getpid();
}

unsigned tr_stop_taken(void)
{
    return atomic_load(&taken);
}

/* Makes each stop signal stop, the old actions into c; one that was ignored stays ignored
 * where the flags say so. */
static void catch_signals(struct tr_stop_catch *c, bool keep_ignored_hup, bool keep_ignored)
{
    tr_stop_init();
    for (int i = 0; i < 3; i++) {
        c->old[i] = atomic_load(&actions[i]);
        if (c->old[i] == IGNORE && (keep_ignored || (keep_ignored_hup && stop_signals[i] == SIGHUP)))
            continue;
        atomic_store(&actions[i], STOP);
    }
}

void tr_stop_install(void)
{
    atomic_store(&stop_signal, 0);
    catch_signals(&installed, true, false);
}

void tr_stop_uninstall(void)
{
    for (int i = 0; i < 3; i++)
        atomic_store(&actions[i], installed.old[i]);
}

void tr_stop_catch_always(void)
{
    struct tr_stop_catch forever;   /* the old actions are not wanted back */
    catch_signals(&forever, true, false);
}

void tr_stop_catch_begin(struct tr_stop_catch *c)
{
    catch_signals(c, true, true);
}

void tr_stop_catch_end(struct tr_stop_catch *c)
{
    int sig = tr_stop_requested();
    for (int i = 0; i < 3; i++) {
        atomic_store(&actions[i], c->old[i]);
        if (sig == stop_signals[i] && c->old[i] == END)
            end_by(sig);
    }
}

bool tr_stop_sleep(double seconds)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    double end = (double)until.tv_sec + (double)until.tv_nsec * 1e-9 + seconds;
    while (!tr_stop_requested()) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double left = end - ((double)now.tv_sec + (double)now.tv_nsec * 1e-9);
        if (left <= 0)
            return false;
        double s = left < TR_STOP_SLICE ? left : TR_STOP_SLICE;
        struct timespec slice = {.tv_sec = 0, .tv_nsec = (long)(s * 1e9)};
        while (nanosleep(&slice, &slice) && errno == EINTR && !tr_stop_requested()) {
        }
    }
    return true;
}

const char *tr_stop_signal_name(int sig)
{
    switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    }
    return "a signal";   /* none this module takes */
}

int tr_stop_check(struct tr_diag *d, const char *what)
{
    int sig = tr_stop_requested();
    return sig ? tr_fail(d, TR_EINTERRUPTED, "stopped by %s during %s", tr_stop_signal_name(sig), what) : 0;
}
