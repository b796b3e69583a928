/* trainrun graph RECIPE [key=value ...] [--format dot|svg] [--full] [--output FILE]: the program
 * the planner chooses, drawn (report/graph_dot.h): DOT as it is, or SVG through Graphviz's dot.
 * Exit 0; 2 for a bad argument or recipe; 3 when no plan fits; 4 when the data cannot be read;
 * 1 when the picture cannot be written or dot is missing or fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/exit.h"
#include "data/dataset.h"
#include "plan/plan.h"
#include "report/graph_dot.h"

enum { FULL_WARN = 500 };      /* --full on more nodes: dot takes minutes (BERT-base, 1,157: over one), say so */

static const char usage[] =
    "usage: trainrun graph RECIPE [key=value | ~key ...] [--format dot|svg] [--full] [--output FILE]\n";

/* The chosen candidate of r built; 0 or the exit status, with the sentence in diag. */
static int chosen_program(const struct tr_recipe *r, struct tr_data *data, bool *loaded, struct tr_built *b,
                          struct tr_diag *diag)
{
    int err = tr_data_load(r, tr_cli_datasets_dir(), data, diag);
    if (err)
        return err == TR_ENOMEM ? TR_EXIT_FAILURE : TR_EXIT_DATA;
    *loaded = true;
    tr_data_print_warnings(data, stderr);
    struct tr_device dev;
    struct tr_plan_job job;
    struct tr_plan plan = {0};
    int rc = 0;
    if (tr_plan_device_named(&dev, r->device, diag))
        rc = TR_EXIT_FAILURE;
    else if (tr_plan_job_init(&job, r, data, &dev, diag) || tr_plan_search(&plan, &job, diag))
        rc = TR_EXIT_USAGE;
    else if (plan.chosen < 0)
        rc = (tr_diag_add(diag, (struct tr_where){0}, "%s", plan.reason), TR_EXIT_NO_FIT);
    else if (tr_build(b, &job, &plan.cand[plan.chosen].k, true, diag))
        rc = TR_EXIT_FAILURE;
    tr_plan_free(&plan);
    return rc;
}

/* The DOT text of b into path. */
static int write_dot(const char *path, const struct tr_built *b, const char *title, bool full, struct tr_diag *d)
{
    const struct tr_memplan *mp = &b->p.plans[b->p.nbuckets - 1];   /* the largest bucket's */
    return tr_graph_dot_file(path, &b->g, b->p.schedule, b->p.n, mp, full, title, d);
}

static int draw(const struct tr_recipe *r, const struct tr_args *a, struct tr_diag *diag)
{
    const char *format = tr_args_value(a, "--format"), *output = tr_args_value(a, "--output");
    bool svg = format && !strcmp(format, "svg");
    if (format && !svg && strcmp(format, "dot")) {
        tr_diag_add(diag, (struct tr_where){0}, "--format: dot or svg, not '%s'", format);
        return TR_EXIT_USAGE;
    }
    struct tr_data data;
    struct tr_built b = {0};
    bool loaded = false;
    int rc = chosen_program(r, &data, &loaded, &b, diag);
    char title[256];
    snprintf(title, sizeof title, "%s: the chosen program, %d nodes", r->name, b.p.n);
    struct tr_path dot = {""};
    char scratch[] = "/tmp/trainrun-graph.XXXXXX";
    bool made = false;
    if (!rc && svg) {   /* dot reads a file: ours, in a folder of its own */
        made = mkdtemp(scratch) != NULL;
        if (!made || tr_path_set(&dot, diag, "%s/graph.dot", scratch))
            rc = (tr_diag_add(diag, (struct tr_where){0}, "cannot make a scratch folder in /tmp"), TR_EXIT_FAILURE);
    } else if (!rc && output)
        rc = tr_path_set(&dot, diag, "%s", output) ? TR_EXIT_USAGE : 0;
    bool full = tr_args_has(a, "--full");
    if (!rc && full && b.p.n > FULL_WARN)
        fprintf(stderr, "trainrun graph: --full draws all %d nodes: Graphviz's dot can take minutes on so many "
                        "(without --full, one block is drawn in full and the others as a box each)\n", b.p.n);
    if (!rc && *dot.s && write_dot(dot.s, &b, title, full, diag))
        rc = TR_EXIT_FAILURE;
    else if (!rc && !*dot.s && tr_graph_dot(stdout, &b.g, b.p.schedule, b.p.n, &b.p.plans[b.p.nbuckets - 1],
                                            full, title))
        rc = TR_EXIT_FAILURE;
    if (!rc && svg && tr_graph_svg(dot.s, output, diag))
        rc = TR_EXIT_FAILURE;
    if (made) {
        unlink(dot.s);
        rmdir(scratch);
    }
    tr_built_free(&b);
    if (loaded)
        tr_data_free(&data);
    return rc;
}

int tr_cmd_graph(int argc, char **argv)
{
    static const char *const flags[] = {"--full", "--help", "-h", NULL};
    static const char *const valued[] = {"--format", "--output", NULL};
    struct tr_args args;
    int rc = tr_args_start_valued(argc, argv, flags, valued, usage, &args);
    if (rc)
        return rc < 0 ? TR_EXIT_OK : rc;
    return tr_cli_on_recipe(&args, draw);
}
