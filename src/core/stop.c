/* The stop flag (stop.h) and the handlers that set it. */
#include "core/stop.h"

#include <stdbool.h>
#include <stddef.h>

static volatile sig_atomic_t stop_signal;

static const int stop_signals[3] = {SIGINT, SIGTERM, SIGHUP};

void tr_stop_request(int sig)
{
    stop_signal = sig;
}

int tr_stop_requested(void)
{
    return stop_signal;
}

/* Installs the handler for each stop signal, the old actions into c; a signal that was ignored
 * stays ignored where ignored says so. */
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
