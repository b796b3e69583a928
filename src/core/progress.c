/* Progress lines (progress.h). */
#include "core/progress.h"

#include <time.h>
#include <unistd.h>

/* --quiet, for the whole process: the one setting this module keeps, as a log level is. */
static bool quiet_everywhere;

void tr_progress_quiet(bool quiet)
{
    quiet_everywhere = quiet;
}

static double monotonic(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void tr_progress_begin(struct tr_progress *p, const char *what, int64_t total, const char *unit)
{
    *p = (struct tr_progress){.unit = unit, .total = total > 0 ? total : 0, .out = stderr, .began = monotonic()};
    p->mode = quiet_everywhere ? TR_PROGRESS_OFF : isatty(STDERR_FILENO) ? TR_PROGRESS_TERMINAL : TR_PROGRESS_LINES;
    snprintf(p->what, sizeof p->what, "%s", what);
    p->shown = p->began;
}

/* "1200/5000 samples (24%)" or "1200 samples" when the total is not known. */
static void amount(const struct tr_progress *p, char *out, size_t size)
{
    if (p->total)
        snprintf(out, size, "%lld/%lld %s (%d%%)", (long long)p->done, (long long)p->total, p->unit,
                 (int)(100 * p->done / p->total));
    else
        snprintf(out, size, "%lld %s", (long long)p->done, p->unit);
}

void tr_progress_update(struct tr_progress *p, int64_t done)
{
    p->done = done;
    if (p->mode == TR_PROGRESS_OFF)
        return;
    double now = monotonic(), spent = now - p->began;
    char text[96];
    if (p->mode == TR_PROGRESS_TERMINAL) {
        if (spent < TR_PROGRESS_FIRST_SECONDS || now - p->shown < TR_PROGRESS_DRAW_SECONDS)
            return;
        amount(p, text, sizeof text);
        double left = p->total && done > 0 ? spent * (double)(p->total - done) / (double)done : -1;
        if (left >= 0)
            fprintf(p->out, "\r\033[K%s: %s, %.0f s, ETA %d:%02d", p->what, text, spent, (int)(left / 60),
                    (int)left % 60);
        else
            fprintf(p->out, "\r\033[K%s: %s, %.0f s", p->what, text, spent);
        p->drawn = true;
    } else {
        if (now - p->shown < TR_PROGRESS_LINE_SECONDS)
            return;
        amount(p, text, sizeof text);
        fprintf(p->out, "%s: %s, %.0f s\n", p->what, text, spent);
        p->said = true;
    }
    fflush(p->out);
    p->shown = now;
}

void tr_progress_end(struct tr_progress *p)
{
    if (p->drawn)
        fputs("\r\033[K", p->out);
    else if (p->said)
        fprintf(p->out, "%s: %lld %s in %.0f s\n", p->what, (long long)p->done, p->unit, monotonic() - p->began);
    if (p->drawn || p->said)
        fflush(p->out);
    p->drawn = p->said = false;
}
