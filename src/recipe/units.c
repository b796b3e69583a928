/* Memory sizes, durations and the edit distance behind "did you mean". */
#include "recipe/units.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"

/* Reads [digits][.digits][e[+-]digits] at *p; no signs, hex, inf or nan. */
static int scan_number(const char **p, double *value)
{
    const char *s = *p, *q = s;
    int digits = 0;
    while (isdigit((unsigned char)*q))
        q++, digits++;
    if (*q == '.') {
        q++;
        while (isdigit((unsigned char)*q))
            q++, digits++;
    }
    if (!digits)
        return TR_EINVAL;
    if (*q == 'e' || *q == 'E') {
        const char *e = q + 1;
        if (*e == '+' || *e == '-')
            e++;
        if (!isdigit((unsigned char)*e))
            return TR_EINVAL;
        while (isdigit((unsigned char)*e))
            e++;
        q = e;
    }
    char buf[64];
    if ((size_t)(q - s) >= sizeof buf)
        return TR_EINVAL;
    memcpy(buf, s, (size_t)(q - s));
    buf[q - s] = '\0';
    *value = strtod(buf, NULL);
    *p = q;
    return isfinite(*value) ? 0 : TR_EINVAL;
}

static const struct { const char *name; double factor; } size_units[] = {
    {"B", 1},          {"kB", 1e3},          {"KB", 1e3},          {"MB", 1e6},
    {"GB", 1e9},       {"TB", 1e12},         {"KiB", 1024.0},      {"MiB", 1048576.0},
    {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
};

int tr_parse_size(const char *text, uint64_t *bytes)
{
    const char *p = text;
    double value;
    if (scan_number(&p, &value))
        return TR_EINVAL;
    while (*p == ' ')
        p++;
    double factor = *p ? 0 : 1;
    for (size_t i = 0; *p && i < sizeof size_units / sizeof size_units[0]; i++)
        if (strcasecmp(p, size_units[i].name) == 0)
            factor = size_units[i].factor;
    if (factor == 0)
        return TR_EINVAL;
    double b = value * factor;
    /* Whole bytes only, and below 2^63 so every later sum stays exact in int64. */
    if (b != floor(b) || b >= 9223372036854775808.0)
        return TR_EINVAL;
    *bytes = (uint64_t)b;
    return 0;
}

static double duration_unit(const char **p)
{
    static const struct { const char *name; double seconds; } units[] = {
        {"min", 60}, {"ms", 0.001}, {"s", 1}, {"m", 60}, {"h", 3600}, {"d", 86400},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        size_t n = strlen(units[i].name);
        if (strncmp(*p, units[i].name, n) == 0 && !isalpha((unsigned char)(*p)[n])) {
            *p += n;
            return units[i].seconds;
        }
    }
    return 0;
}

int tr_parse_duration(const char *text, double *seconds)
{
    const char *p = text;
    double total = 0, value;
    if (scan_number(&p, &value))
        return TR_EINVAL;
    if (!*p) {               /* a bare number is seconds */
        *seconds = value;
        return 0;
    }
    for (;;) {
        double unit = duration_unit(&p);
        if (unit == 0)
            return TR_EINVAL;
        total += value * unit;
        if (!*p)
            break;
        if (scan_number(&p, &value))
            return TR_EINVAL;
    }
    if (!isfinite(total))
        return TR_EINVAL;
    *seconds = total;
    return 0;
}

void tr_format_size(uint64_t bytes, char out[32])
{
    static const struct { const char *name; uint64_t factor; } units[] = {
        {"TiB", 1ull << 40}, {"GiB", 1ull << 30}, {"MiB", 1ull << 20}, {"KiB", 1ull << 10},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (bytes && bytes % units[i].factor == 0) {
            snprintf(out, 32, "%llu%s", (unsigned long long)(bytes / units[i].factor), units[i].name);
            return;
        }
    snprintf(out, 32, "%llu", (unsigned long long)bytes);
}

void tr_format_duration(double seconds, char out[32])
{
    if (seconds == floor(seconds) && seconds >= 3600 && fmod(seconds, 3600) == 0)
        snprintf(out, 32, "%.0fh", seconds / 3600);
    else if (seconds == floor(seconds) && seconds >= 60 && fmod(seconds, 60) == 0)
        snprintf(out, 32, "%.0fm", seconds / 60);
    else if (seconds == floor(seconds) && seconds < 1e15)   /* 10s, not %g's 1e+01s */
        snprintf(out, 32, "%.0fs", seconds);
    else   /* the shortest text that reads back the same: 0.1s, not 0.10000000000000001s */
        for (int precision = 1; precision <= 17; precision++) {
            char text[32];
            snprintf(text, sizeof text, "%.*gs", precision, seconds);
            memcpy(out, text, sizeof text);
            if (strtod(text, NULL) == seconds)
                break;
        }
}

int tr_edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 128 || m > 128)   /* names are short; anything longer is not a near miss */
        return 1000;
    int d[129][129];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int cost = a[i - 1] != b[j - 1];
            int best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < best)
                best = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}
