/* The stop flag (stop.h) and the handlers that set it: read by every long phase. */
#include "core/stop.h"

#include <stdbool.h>
#include <stddef.h>

/* The signal that asked the run to stop; 0 while none did. The one mutable global a signal
 * needs (STYLE.md): a handler can do nothing safer than set it. */
static volatile sig_atomic_t stop_signal;

static const int stop_signals[3] = {SIGINT, SIGTERM, SIGHUP};

/* What tr_stop_install replaced, for tr_stop_uninstall: set and read only outside handlers. */
static struct tr_stop_catch installed;

void tr_stop_request(int sig)
{
    if (!stop_signal)
        stop_signal = sig;
}

int tr_stop_requested(void)
{
    return stop_signal;
}

/* Installs the handler for each stop signal, the old actions into c; a signal that was ignored
 * stays ignored where the flags say so. */
static void catch_signals(struct tr_stop_catch *c, bool keep_ignored_hup, bool keep_ignored)
{
    struct sigaction sa = {.sa_handler = tr_stop_request};
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; i++) {
        sigaction(stop_signals[i], NULL, &c->old[i]);
        bool ignored = c->old[i].sa_handler == SIG_IGN && !(c->old[i].sa_flags & SA_SIGINFO);
        if (ignored && (keep_ignored || (keep_ignored_hup && stop_signals[i] == SIGHUP)))
            continue;
        sigaction(stop_signals[i], &sa, NULL);
    }
}

void tr_stop_install(void)
{
    stop_signal = 0;
    catch_signals(&installed, true, false);
}

void tr_stop_uninstall(void)
{
    for (int i = 0; i < 3; i++)
        sigaction(stop_signals[i], &installed.old[i], NULL);
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
    int sig = stop_signal;
    for (int i = 0; i < 3; i++) {
        sigaction(stop_signals[i], &c->old[i], NULL);
        if (sig == stop_signals[i] && c->old[i].sa_handler == SIG_DFL && !(c->old[i].sa_flags & SA_SIGINFO))
            raise(sig);
    }
}

const char *tr_stop_signal_name(int sig)
{
    switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    }
    return "a signal";   /* none this module installs */
}

int tr_stop_check(struct tr_diag *d, const char *what)
{
    int sig = stop_signal;
    return sig ? tr_fail(d, TR_EINTERRUPTED, "stopped by %s during %s", tr_stop_signal_name(sig), what) : 0;
}
