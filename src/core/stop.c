/* The stop flag (stop.h): set by the handlers, read by every long phase. */
#include "core/stop.h"

#include <signal.h>

/* The signal that asked the run to stop; 0 while none did. The one mutable global a signal
 * needs (STYLE.md): a handler can do nothing safer than set it. */
static volatile sig_atomic_t stop_signal;

static const int handled[] = {SIGINT, SIGTERM, SIGHUP};
enum { NHANDLED = sizeof handled / sizeof handled[0] };
static struct sigaction previous[NHANDLED];

static void on_signal(int sig)
{
    if (!stop_signal)
        stop_signal = sig;
}

void tr_stop_install(void)
{
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    stop_signal = 0;
    for (int i = 0; i < NHANDLED; i++)
        sigaction(handled[i], &sa, &previous[i]);
}

void tr_stop_uninstall(void)
{
    for (int i = 0; i < NHANDLED; i++)
        sigaction(handled[i], &previous[i], NULL);
}

int tr_stop_requested(void)
{
    return stop_signal;
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
