/* Inline SVG line plots for report.html (run_report.c): axes with ticks and labels, a legend,
 * no external assets and no JavaScript, so one HTML file shows them anywhere; and the small
 * trends of the runs index (index.c). Also the one HTML escaper every text put into the
 * report goes through. */
#ifndef TR_SVG_H
#define TR_SVG_H

#include <stdio.h>

/* One line of a plot: n points (x[i], y[i]); non-finite y values are gaps. */
struct tr_svg_line {
    const char *label;
    const double *x, *y;
    int n;
};

/* Writes text with &, <, >, " and ' escaped for HTML text and attribute values. */
void tr_html_escape(FILE *out, const char *text);

/* Writes one <svg> plot titled title with x axis "step", y axis ylabel, the lines in fixed
 * colours and a legend; a plot whose lines hold no finite point writes nothing and returns 0.
 * Returns the number of points drawn. */
int tr_svg_plot(FILE *out, const char *title, const char *ylabel, const struct tr_svg_line *lines, int nlines);
/* The same with the x axis named xlabel. */
int tr_svg_plot_x(FILE *out, const char *title, const char *xlabel, const char *ylabel,
                  const struct tr_svg_line *lines, int nlines);

/* One horizontal bar split into n shares (shares under 0.05 % left out), each labelled with its
 * percentage in a key beneath: where a whole went. Writes nothing when the values sum to 0. */
void tr_svg_shares(FILE *out, const char *title, const char *const *labels, const double *values, int n);

/* Writes a trend without axes, <svg class="trend">, for the runs index: n values from left to
 * right (non-finite ones skipped) in a 120 × 24 box, a grey line through dots coloured
 * point_colours[i] (NULL: all dark grey); title is its tooltip. With fewer than 2 finite
 * values writes nothing. Returns the number of points drawn. */
int tr_svg_sparkline(FILE *out, const char *title, const double *y, const char *const *point_colours, int n);

#endif
