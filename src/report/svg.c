/* Inline SVG line plots for report.html (reporter, DESIGN.md §2). A fixed 480 × 290 viewBox
 * scaled by CSS to the page's width (narrow enough that its 13-unit text stays legible at a
 * phone's 360 pixels, or two plots abreast on a desktop); ticks at 1, 2 or 5 × 10^k, the steps
 * Heckbert's "nice numbers" (Graphics Gems, 1990) pick. Also the time's shares in one bar, and
 * the runs index's sparklines: a trend in a line of text, no axes. */
#include "report/svg.h"

#include <math.h>
#include <string.h>

enum { W = 480, H = 290, LEFT = 60, RIGHT = 12, TOP = 46, BOTTOM = 40 };

static const char *const colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                                      "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

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

/* A tick's label in at most 4 significant digits, with k, M, G past 10^4: 35000 samples/s
 * read "3.5e+04", a label so wide it ran into the rotated axis title. */
static void tick_label(double v, double step, char out[32])
{
    static const struct { double unit; const char *suffix; } si[] = {{1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
    if (fabs(v) < step * 1e-9)
        v = 0;   /* not 1.4e-17 where the sum of steps misses zero */
    for (size_t i = 0; fabs(v) >= 1e4 && i < sizeof si / sizeof si[0]; i++)
        if (fabs(v) >= si[i].unit) {
            snprintf(out, 32, "%.4g%s", v / si[i].unit, si[i].suffix);
            return;
        }
    snprintf(out, 32, "%.4g", v);
}

static void axes(FILE *out, const char *xlabel, const char *ylabel, double x0, double x1, double y0, double y1,
                 double ys, double top)
{
    double pw = W - LEFT - RIGHT, ph = H - top - BOTTOM;
    char label[32];
    fprintf(out, "<rect x=\"%d\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"#888\"/>\n",
            LEFT, top, pw, ph);
    for (double v = ceil(y0 / ys - 1e-9) * ys; v <= y1 + ys * 1e-9; v += ys) {
        double y = top + ph * (1 - (v - y0) / (y1 - y0));
        tick_label(v, ys, label);
        fprintf(out, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                LEFT, y, LEFT + pw, y, LEFT - 4, y + 4, label);
    }
    double xs = nice_step(x1 - x0, 6);
    for (double v = ceil(x0 / xs) * xs; v <= x1 + xs * 1e-9; v += xs) {
        double x = LEFT + pw * (v - x0) / (x1 - x0);
        tick_label(v, xs, label);
        fprintf(out, "<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\" stroke=\"#888\"/>"
                "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%s</text>\n",
                x, top + ph, x, top + ph + 4, x, top + ph + 16, label);
    }
    fprintf(out, "<text x=\"%g\" y=\"%d\" text-anchor=\"middle\">", LEFT + pw / 2, H - 6);
    tr_html_escape(out, xlabel);
    fputs("</text>\n", out);
    fprintf(out, "<text x=\"12\" y=\"%g\" text-anchor=\"middle\" transform=\"rotate(-90 12 %g)\">",
            top + ph / 2, top + ph / 2);
    tr_html_escape(out, ylabel);
    fputs("</text>\n", out);
}

int tr_svg_plot(FILE *out, const char *title, const char *ylabel, const struct tr_svg_line *lines, int nlines)
{
    return tr_svg_plot_x(out, title, "step", ylabel, lines, nlines);
}

/* The legend: a swatch and the label per line, each as wide as its label (about 7 units a
 * character, cut to the plot's width), in rows under the title that wrap before the right
 * edge; x, y: each entry's swatch. The plot's frame starts below the last row: the top. */
enum { LEGEND_Y = 26, LEGEND_ROW = 16, CHAR_W = 7, SWATCH = 16, GAP = 12 };
static double legend_layout(const struct tr_svg_line *lines, int nlines, double *x, double *y, int *chars)
{
    double at = LEFT, row = LEGEND_Y, room = W - RIGHT - LEFT - SWATCH;
    for (int l = 0; l < nlines; l++) {
        size_t n = strlen(lines[l].label ? lines[l].label : "");
        chars[l] = n * CHAR_W > room ? (int)(room / CHAR_W) : (int)n;
        double width = SWATCH + CHAR_W * chars[l];
        if (at > LEFT && at + width > W - RIGHT)
            at = LEFT, row += LEGEND_ROW;
        x[l] = at, y[l] = row;
        at += width + GAP;
    }
    return TOP + (row - LEGEND_Y);
}

int tr_svg_plot_x(FILE *out, const char *title, const char *xlabel, const char *ylabel,
                  const struct tr_svg_line *lines, int nlines)
{
    double x0, x1, y0, y1;
    int points = extent(lines, nlines, &x0, &x1, &y0, &y1);
    if (!points)
        return 0;
    /* The y axis ends on ticks: its top and bottom are labelled, and the highest and lowest
     * points seldom lie on the frame, hidden in its line. */
    double ys = nice_step(y1 - y0, 5);
    y0 = floor(y0 / ys) * ys, y1 = ceil(y1 / ys) * ys;
    double lx[nlines], ly[nlines];
    int chars[nlines];
    double top = legend_layout(lines, nlines, lx, ly, chars);
    double pw = W - LEFT - RIGHT, ph = H - top - BOTTOM;
    fprintf(out, "<svg class=\"plot\" viewBox=\"0 0 %d %d\" role=\"img\" "
            "font-size=\"13\" font-family=\"sans-serif\">\n<title>", W, H);
    tr_html_escape(out, title);
    fprintf(out, "</title>\n<text x=\"%d\" y=\"16\" font-weight=\"bold\">", LEFT);
    tr_html_escape(out, title);
    fputs("</text>\n", out);
    axes(out, xlabel, ylabel, x0, x1, y0, y1, ys, top);
    for (int l = 0; l < nlines; l++) {
        const char *colour = colours[l % (int)(sizeof colours / sizeof colours[0])];
        fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", colour);
        for (int i = 0; i < lines[l].n; i++)
            if (isfinite(lines[l].y[i]) && isfinite(lines[l].x[i]))
                fprintf(out, "%.1f,%.1f ", LEFT + pw * (lines[l].x[i] - x0) / (x1 - x0),
                        top + ph * (1 - (lines[l].y[i] - y0) / (y1 - y0)));
        fputs("\"/>\n", out);
        fprintf(out, "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"8\" fill=\"%s\"/><text x=\"%.0f\" y=\"%.0f\">",
                lx[l], ly[l], colour, lx[l] + SWATCH, ly[l] + 8);
        char label[96];
        snprintf(label, sizeof label, "%.*s", chars[l], lines[l].label ? lines[l].label : "");
        tr_html_escape(out, label);
        fputs("</text>\n", out);
    }
    fputs("</svg>\n", out);
    return points;
}

void tr_svg_shares(FILE *out, const char *title, const char *const *labels, const double *values, int n)
{
    double total = 0;
    for (int i = 0; i < n; i++)
        total += values[i] > 0 ? values[i] : 0;
    if (!(total > 0))
        return;
    enum { BAR_TOP = 26, BAR_H = 28, KEY_H = 20 };
    int rows = (n + 2) / 3, height = BAR_TOP + BAR_H + 10 + KEY_H * rows;
    fprintf(out, "<svg class=\"shares\" viewBox=\"0 0 %d %d\" role=\"img\" font-size=\"13\" "
            "font-family=\"sans-serif\">\n<title>", W, height);
    tr_html_escape(out, title);
    fputs("</title>\n<text x=\"0\" y=\"16\" font-weight=\"bold\">", out);
    tr_html_escape(out, title);
    fputs("</text>\n", out);
    double x = 0;
    for (int i = 0, shown = 0; i < n; i++) {
        if (!(values[i] >= 0.0005 * total))   /* under 0.05 %: nothing a person could act on */
            continue;
        const char *colour = colours[i % (int)(sizeof colours / sizeof colours[0])];   /* a share keeps its colour */
        double w = W * values[i] / total;
        fprintf(out, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>", x, BAR_TOP, w,
                BAR_H, colour);
        tr_html_escape(out, labels[i]);
        fprintf(out, " %.1f%%</title></rect>\n", 100 * values[i] / total);
        x += w;
        /* The key: three to a row under the bar. */
        int kx = (shown % 3) * (W / 3), ky = BAR_TOP + BAR_H + 10 + KEY_H * (shown / 3);
        fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"10\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">",
                kx, ky + 2, colour, kx + 16, ky + 12);
        tr_html_escape(out, labels[i]);
        fprintf(out, " %.1f%%</text>\n", 100 * values[i] / total);
        shown++;
    }
    fputs("</svg>\n", out);
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
