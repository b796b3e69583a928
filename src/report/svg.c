/* Inline SVG line plots for report.html (reporter, DESIGN.md §2). A fixed 640 × 300 viewBox
 * scaled by CSS to the page's width, so a phone shows the same plot smaller; ticks at 1, 2
 * or 5 × 10^k, the steps Heckbert's "nice numbers" (Graphics Gems, 1990) pick. Also the runs
 * index's sparklines: a trend in a line of text, no axes. */
#include "report/svg.h"

#include <math.h>
#include <string.h>

enum { W = 640, H = 300, LEFT = 64, RIGHT = 16, TOP = 28, BOTTOM = 44 };

static const char *const colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

void tr_html_escape(FILE *out, const char *text)
{
    for (const char *p = text ? text : ""; *p; p++)
        switch (*p) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&#39;", out); break;
        default: fputc(*p, out);
        }
}

/* The tick spacing that splits span into about `ticks` intervals of 1, 2 or 5 × 10^k. */
static double nice_step(double span, int ticks)
{
    double raw = span / ticks, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

/* The data's range, widened when flat so the axis still has a span. */
static int extent(const struct tr_svg_line *lines, int nlines, double *x0, double *x1, double *y0, double *y1)
{
    int points = 0;
    *x0 = *y0 = INFINITY, *x1 = *y1 = -INFINITY;
    for (int l = 0; l < nlines; l++)
        for (int i = 0; i < lines[l].n; i++) {
            if (!isfinite(lines[l].y[i]) || !isfinite(lines[l].x[i]))
                continue;
            points++;
            *x0 = fmin(*x0, lines[l].x[i]), *x1 = fmax(*x1, lines[l].x[i]);
            *y0 = fmin(*y0, lines[l].y[i]), *y1 = fmax(*y1, lines[l].y[i]);
        }
    if (*x1 <= *x0)
        *x0 -= 1, *x1 += 1;
    if (*y1 <= *y0) {
        double pad = *y0 ? fabs(*y0) * 0.1 : 1;
        *y0 -= pad, *y1 += pad;
    }
    return points;
}

static void axes(FILE *out, const char *ylabel, double x0, double x1, double y0, double y1)
{
    double pw = W - LEFT - RIGHT, ph = H - TOP - BOTTOM;
    fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"#888\"/>\n",
            LEFT, TOP, pw, ph);
    double ys = nice_step(y1 - y0, 5);
    for (double v = ceil(y0 / ys) * ys; v <= y1 + ys * 1e-9; v += ys) {
        double y = TOP + ph * (1 - (v - y0) / (y1 - y0));
        fprintf(out, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n",
                LEFT, y, LEFT + pw, y, LEFT - 4, y + 4, fabs(v) < ys * 1e-9 ? 0.0 : v);
    }
    double xs = nice_step(x1 - x0, 6);
    for (double v = ceil(x0 / xs) * xs; v <= x1 + xs * 1e-9; v += xs) {
        double x = LEFT + pw * (v - x0) / (x1 - x0);
        fprintf(out, "<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\" stroke=\"#888\"/>"
                "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%.6g</text>\n",
                x, TOP + ph, x, TOP + ph + 4, x, TOP + ph + 16, v);
    }
    fprintf(out, "<text x=\"%g\" y=\"%d\" text-anchor=\"middle\">step</text>\n", LEFT + pw / 2, H - 6);
    fprintf(out, "<text x=\"12\" y=\"%g\" text-anchor=\"middle\" transform=\"rotate(-90 12 %g)\">",
            TOP + ph / 2, TOP + ph / 2);
    tr_html_escape(out, ylabel);
    fputs("</text>\n", out);
}

int tr_svg_plot(FILE *out, const char *title, const char *ylabel, const struct tr_svg_line *lines, int nlines)
{
    double x0, x1, y0, y1;
    int points = extent(lines, nlines, &x0, &x1, &y0, &y1);
    if (!points)
        return 0;
    double pw = W - LEFT - RIGHT, ph = H - TOP - BOTTOM;
    fprintf(out, "<svg class=\"plot\" viewBox=\"0 0 %d %d\" role=\"img\" "
            "font-size=\"13\" font-family=\"sans-serif\">\n<title>", W, H);
    tr_html_escape(out, title);
    fprintf(out, "</title>\n<text x=\"%d\" y=\"16\" font-weight=\"bold\">", LEFT);
    tr_html_escape(out, title);
    fputs("</text>\n", out);
    axes(out, ylabel, x0, x1, y0, y1);
    for (int l = 0; l < nlines; l++) {
        const char *colour = colours[l % (int)(sizeof colours / sizeof colours[0])];
        fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", colour);
        for (int i = 0; i < lines[l].n; i++)
            if (isfinite(lines[l].y[i]) && isfinite(lines[l].x[i]))
                fprintf(out, "%.1f,%.1f ", LEFT + pw * (lines[l].x[i] - x0) / (x1 - x0),
                        TOP + ph * (1 - (lines[l].y[i] - y0) / (y1 - y0)));
        fputs("\"/>\n", out);
        /* The legend: a swatch and the label per line, along the top right. */
        double lx = W - RIGHT - 150.0 * (nlines - l);
        fprintf(out, "<rect x=\"%.0f\" y=\"8\" width=\"12\" height=\"8\" fill=\"%s\"/><text x=\"%.0f\" y=\"16\">",
                lx, colour, lx + 16);
        tr_html_escape(out, lines[l].label);
        fputs("</text>\n", out);
    }
    fputs("</svg>\n", out);
    return points;
}

enum { SPARK_W = 120, SPARK_H = 24, SPARK_PAD = 3 };

int tr_svg_sparkline(FILE *out, const char *title, const double *y, const char *const *point_colours, int n)
{
    double lo = INFINITY, hi = -INFINITY;
    int points = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(y[i]))
            points++, lo = fmin(lo, y[i]), hi = fmax(hi, y[i]);
    if (points < 2)
        return 0;
    if (hi <= lo)   /* flat: a line across the middle */
        lo -= 1, hi += 1;
    double pw = SPARK_W - 2 * SPARK_PAD, ph = SPARK_H - 2 * SPARK_PAD, step = pw / (points - 1);
    fprintf(out, "<svg class=\"trend\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\"><title>",
            SPARK_W, SPARK_H, SPARK_W, SPARK_H);
    tr_html_escape(out, title);
    fputs("</title><polyline fill=\"none\" stroke=\"#999\" stroke-width=\"1\" points=\"", out);
    for (int i = 0, k = 0; i < n; i++) {
        if (!isfinite(y[i]))
            continue;
        fprintf(out, "%s%.1f,%.1f", k ? " " : "", SPARK_PAD + step * k, SPARK_PAD + ph * (hi - y[i]) / (hi - lo));
        k++;
    }
    fputs("\"/>", out);
    for (int i = 0, k = 0; i < n; i++) {
        if (!isfinite(y[i]))
            continue;
        const char *colour = point_colours && point_colours[i] ? point_colours[i] : "#444";
        fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2\" fill=\"%s\"/>", SPARK_PAD + step * k,
                SPARK_PAD + ph * (hi - y[i]) / (hi - lo), colour);
        k++;
    }
    fputs("</svg>", out);
    return points;
}
