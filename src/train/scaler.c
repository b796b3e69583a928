/* The fp16 loss scaler (scaler.h). */
#include "train/scaler.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void tr_scaler_init(struct tr_scaler *s, const struct tr_recipe *r, bool on)
{
    *s = (struct tr_scaler){.on = on, .scale = on ? r->optimize.loss_scale.init : 1,
                            .growth = r->optimize.loss_scale.growth, .backoff = r->optimize.loss_scale.backoff,
                            .min = r->optimize.loss_scale.min, .interval = r->optimize.loss_scale.interval,
                            .hysteresis = r->optimize.loss_scale.hysteresis};
}

enum tr_scaler_verdict tr_scaler_update(struct tr_scaler *s, bool overflow)
{
    if (!s->on)
        return TR_SCALER_STEP;
    if (!overflow) {
        s->overflows = 0;
        if (++s->clean >= s->interval) {
            s->scale *= s->growth;
            s->clean = 0;
        }
        return TR_SCALER_STEP;
    }
    s->skipped++;
    s->clean = 0;
    if (++s->overflows < s->hysteresis)
        return TR_SCALER_SKIP;
    s->overflows = 0;
    s->scale *= s->backoff;
    return s->scale < s->min ? TR_SCALER_COLLAPSED : TR_SCALER_SKIP;
}

void tr_scaler_format(const struct tr_scaler *s, char *buf, size_t size)
{
    snprintf(buf, size, "scaler scale=%.17g clean=%" PRId64 " overflows=%" PRId64 " skipped=%" PRId64, s->scale,
             s->clean, s->overflows, s->skipped);
}

int tr_scaler_parse(struct tr_scaler *s, const char *text)
{
    const char *at = text ? strstr(text, "scaler ") : NULL;
    struct tr_scaler t = *s;
    if (!at || sscanf(at, "scaler scale=%lf clean=%" SCNd64 " overflows=%" SCNd64 " skipped=%" SCNd64, &t.scale,
                      &t.clean, &t.overflows, &t.skipped) != 4 || !(t.scale > 0))
        return -1;
    *s = t;
    return 0;
}
