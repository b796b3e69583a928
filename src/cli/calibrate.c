/* trainrun calibrate [--force] [--json]: this host's numbers for the planner — GEMM rate,
 * bandwidth, the cost of a kernel, what BLAS and OpenMP threads take — measured once and
 * cached (plan/device_host.c); --force measures again. The planner runs `calibrate --json
 * --no-cache` in a process of its own when the cache has nothing for this host. */
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/exit.h"
#include "plan/device.h"
#include "plan/plan.h"

static const char usage[] = "usage: trainrun calibrate [--force] [--json]\n";

int tr_cmd_calibrate(int argc, char **argv)
{
    bool force = false, as_json = false, measure_here = false;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return TR_EXIT_OK;
        }
        bool *flag = !strcmp(argv[i], "--force") ? &force : !strcmp(argv[i], "--json") ? &as_json
                   : !strcmp(argv[i], "--no-cache") ? &measure_here : NULL;
        if (!flag) {
            fprintf(stderr, "trainrun: calibrate: unknown argument '%s'\n%s", argv[i], usage);
            return TR_EXIT_USAGE;
        }
        *flag = true;
    }
    int rc;
    struct tr_device d;
    struct tr_diag err = {0};
    if (measure_here)   /* the measurement itself, in this fresh process */
        rc = tr_device_measure(&d, &err);
    else
        rc = tr_plan_device(&d, NULL, force, &err);
    if (rc) {
        fprintf(stderr, "trainrun: %s\n", tr_diag_last(&err));
        tr_diag_free(&err);
        return TR_EXIT_FAILURE;
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
        char size[32];
        tr_format_bytes(d.thread_bytes, size);
        printf("%s\n  sgemm %.1f GFLOP/s + %.1f µs a call, bandwidth %.1f GB/s, a small kernel %.1f µs, "
               "an erf %.2f ns, threads take %s\n  %s\n", d.description, d.gemm_flops[0] * 1e-9, d.gemm_seconds * 1e6,
               d.bandwidth * 1e-9, d.node_seconds * 1e6, d.special_seconds * 1e9, size, d.source);
        if (*d.path.s)
            printf("  cached in %s\n", d.path.s);
    }
    return TR_EXIT_OK;
}
