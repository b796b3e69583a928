/* The fp16 loss scaler (DESIGN.md §3): fp16 holds magnitudes from 6e-8 to 65504, so the loss is
 * multiplied by a scale before the backward, keeping small gradients representable, and the
 * gradients divided by it afterwards. The scale is dynamic, as PyTorch's GradScaler and
 * DeepSpeed's loss scaler keep it: an overflow (a NaN or Inf gradient) skips the optimizer step
 * and, after `hysteresis` overflows in a row, multiplies the scale by `backoff`; `interval`
 * clean steps in a row multiply it by `growth`. A scale pushed below `min` means the model's
 * values outgrow fp16: the run ends as diverged. bf16 has f32's range and needs none of this. */
#ifndef TR_SCALER_H
#define TR_SCALER_H

#include <stdbool.h>
#include <stdint.h>

#include "recipe/recipe.h"

struct tr_scaler {
    bool on;                     /* fp16 only; off, the scale is 1 and nothing is skipped */
    double scale, growth, backoff, min;
    int64_t interval, hysteresis;
    int64_t clean;               /* clean steps since the last overflow or growth */
    int64_t overflows;           /* overflows in a row, not yet backed off for */
    int64_t skipped;             /* steps skipped in the whole run */
};

enum tr_scaler_verdict { TR_SCALER_STEP, TR_SCALER_SKIP, TR_SCALER_COLLAPSED };

/* optimize.loss_scale.* of the recipe; on for fp16. */
void tr_scaler_init(struct tr_scaler *s, const struct tr_recipe *r, bool on);
/* After a step's backward: whether it overflowed decides between taking the step, skipping it,
 * and (the scale below min) giving up. Updates the scale for the next step. */
enum tr_scaler_verdict tr_scaler_update(struct tr_scaler *s, bool overflow);
/* The state a checkpoint keeps, as one line, and reading it back (0, or -1 if malformed). */
void tr_scaler_format(const struct tr_scaler *s, char *buf, size_t size);
int tr_scaler_parse(struct tr_scaler *s, const char *text);

#endif
