/* Units people write in recipes: memory sizes (14GiB, 512MiB, 14GB, 1.5e9) and durations
 * (90m, 2h, 1h30m). Parsing is strict: a size must come to a whole number of bytes. */
#ifndef TR_UNITS_H
#define TR_UNITS_H

#include <stdint.h>

int tr_parse_size(const char *text, uint64_t *bytes);        /* 0 or TR_EINVAL */
int tr_parse_duration(const char *text, double *seconds);    /* 0 or TR_EINVAL */
void tr_format_size(uint64_t bytes, char out[32]);          /* "14GiB", "1500000000" */
void tr_format_duration(double seconds, char out[32]);      /* "90m", "2h", "45s" */
/* Edit distance with adjacent transpositions (optimal string alignment). */
int tr_edit_distance(const char *a, const char *b);

#endif
