/* The stop flag (stop.h) and the handlers that set it. */
#include "core/stop.h"

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

void tr_stop_catch_always(void)
{
    struct tr_stop_catch forever;   /* the old handlers are not wanted back */
    tr_stop_catch_begin(&forever);
}

void tr_stop_catch_begin(struct tr_stop_catch *c)
{
    struct sigaction sa = {.sa_handler = tr_stop_request};
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; i++)
        sigaction(stop_signals[i], &sa, &c->old[i]);
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
