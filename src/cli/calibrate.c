/* trainrun calibrate [--force] [--json] [--tolerance PCT] [--rounds N]: this host's numbers for
 * the planner — every kernel class's time against its work, the optimizer's passes, GEMM rate,
 * bandwidth, what BLAS and OpenMP threads take — measured in rounds until they settle and
 * cached (plan/device_host.c); a measurement that does not settle is refused (exit 9), nothing
 * written. --force measures again. The planner runs `calibrate --json --no-cache` in a process
 * of its own when the cache has nothing for this host; the rule travels in its environment. */
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/exit.h"
#include "plan/device.h"
#include "plan/plan.h"

static const char usage[] = "usage: trainrun calibrate [--force] [--json] [--tolerance PCT] [--rounds N]\n";

/* --tolerance PCT (above 0) and --rounds N (at least the rule's window) into the environment
 * the measuring child reads (device.h: tr_calibration_rule_from_env). 0, or −1 when malformed. */
static int rule_option(const char *name, const char *value)
{
    char *end;
    double v = value ? strtod(value, &end) : 0;
    if (!value || end == value || *end || !(v > 0) || v > 1e6)
        return -1;
    struct tr_calibration_rule def = TR_CALIBRATION_RULE_DEFAULT;
    bool rounds = !strcmp(name, "--rounds");
    if (rounds && (v != (int)v || v < def.window))
        return -1;
    setenv(rounds ? "TRAINRUN_CALIBRATE_ROUNDS" : "TRAINRUN_CALIBRATE_TOLERANCE", value, 1);
    return 0;
}

static void print_words(const struct tr_device *d)
{
    char size[32];
    tr_format_bytes(d->thread_bytes, size);
    printf("%s\n  sgemm %.1f GFLOP/s + %.1f µs a call, bandwidth %.1f GB/s, a small kernel %.1f µs, an erf %.2f ns, "
           "threads take %s\n", d->description, d->gemm_flops[0] * 1e-9, d->gemm_seconds * 1e6, d->bandwidth * 1e-9,
           d->node_seconds * 1e6, d->special_seconds * 1e9, size);
    const struct tr_kernel_costs *k = &d->kernels;
    if (k->measured)
        printf("  kernels: %d classes measured; the executor %.1f µs a node; AdamW %.2f ns and the gradients' "
               "norm %.2f ns a parameter byte; rounds settled within %.1f%%\n", tr_kernel_classes_measured(k),
               k->exec_node_seconds * 1e6, k->optimizer_byte_seconds[1] * 1e9, k->sumsq_byte_seconds * 1e9,
               d->spread * 100);
    printf("  %s\n", d->source);
    if (*d->path.s)
        printf("  cached in %s\n", d->path.s);
}

int tr_cmd_calibrate(int argc, char **argv)
{
    bool force = false, as_json = false, measure_here = false;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return TR_EXIT_OK;
        }
        if (!strcmp(argv[i], "--tolerance") || !strcmp(argv[i], "--rounds")) {
            if (rule_option(argv[i], i + 1 < argc ? argv[i + 1] : NULL)) {
                fprintf(stderr, "trainrun: calibrate: %s needs %s\n%s", argv[i],
                        argv[i][2] == 't' ? "a percentage above 0" : "a whole number of at least 3", usage);
                return TR_EXIT_USAGE;
            }
            i++;
            continue;
        }
        bool *flag = !strcmp(argv[i], "--force") ? &force : !strcmp(argv[i], "--json") ? &as_json
                   : !strcmp(argv[i], "--no-cache") ? &measure_here : NULL;
        if (!flag) {
            fprintf(stderr, "trainrun: calibrate: unknown argument '%s'\n%s", argv[i], usage);
            return TR_EXIT_USAGE;
        }
        *flag = true;
    }
    if (!measure_here && !getenv("TRAINRUN_CALIBRATE_ROUNDS")) {   /* asked for: worth the wait */
        char rounds[16];
        snprintf(rounds, sizeof rounds, "%d", TR_CALIBRATE_ROUNDS);
        setenv("TRAINRUN_CALIBRATE_ROUNDS", rounds, 1);
    }
    int rc;
    struct tr_device d;
    struct tr_diag err = {0};
    struct tr_calibration_rule rule = tr_calibration_rule_from_env();
    if (measure_here)   /* the measurement itself, in this fresh process */
        rc = tr_device_measure(&d, &rule, &err);
    else
        rc = tr_plan_device(&d, NULL, force, &err);
    if (rc) {
        fprintf(stderr, "trainrun: %s\n", tr_diag_last(&err));
        tr_diag_free(&err);
        return TR_EXIT_FAILURE;
    }
    if (d.unsettled) {   /* nothing written: the last good calibration, if any, stays */
        fprintf(stderr, "trainrun: calibrate: not cached: %s; run it again when the machine is quieter, or "
                "allow more with --tolerance PCT (now %.0f%%) or --rounds N (now %d)\n", d.unsaved,
                rule.tolerance * 100, rule.max_rounds);
        return TR_EXIT_UNSETTLED;
    }
    if (*d.unsaved) {   /* calibrate's whole job is the cache: measured but not kept is a failure */
        fprintf(stderr, "trainrun: calibrate: the calibration could not be cached: %s\n", d.unsaved);
        return TR_EXIT_FAILURE;
    }
    if (as_json) {
        char *json = tr_device_calibration_json(&d);
        printf("%s\n", json);
        free(json);
    } else {
        print_words(&d);
    }
    return TR_EXIT_OK;
}
