/* The address-space limits (RLIMIT_AS, RLIMIT_DATA), checked at the start of main, before
 * OpenBLAS loads and before any thread starts: OpenBLAS's start-up code reserves a buffer per
 * thread and spins where the limit refuses it, so the check must come first. What a run
 * reserves beyond the process as it is was measured by `trainrun calibrate` (VmSize and VmData
 * deltas, plan/device_host.c); the planner then adds the plan's own peak (plan/job.c). */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "cli/cli.h"
#include "cli/exit.h"
#include "core/blas.h"
#include "plan/plan.h"

/* The limits that count address space, as the planner reads them too (plan.h). */
static const struct {
    int resource;
    const char *name;
} space_limits[] = {{RLIMIT_AS, "RLIMIT_AS"}, {RLIMIT_DATA, "RLIMIT_DATA"}};

static bool any_limit(void)
{
    for (size_t i = 0; i < sizeof space_limits / sizeof space_limits[0]; i++) {
        struct rlimit l;
        if (getrlimit(space_limits[i].resource, &l) == 0 && l.rlim_cur != RLIM_INFINITY)
            return true;
    }
    return false;
}

/* calibrate measures what a process reserves unhindered: its soft limits go up to the hard
 * ones. TR_EXIT_OK when nothing limits it then, else TR_EXIT_NO_FIT saying why. */
static int lift_for_calibration(void)
{
    for (size_t i = 0; i < sizeof space_limits / sizeof space_limits[0]; i++) {
        struct rlimit l;
        if (getrlimit(space_limits[i].resource, &l) || l.rlim_cur == l.rlim_max)
            continue;
        l.rlim_cur = l.rlim_max;
        setrlimit(space_limits[i].resource, &l);
    }
    for (size_t i = 0; i < sizeof space_limits / sizeof space_limits[0]; i++) {
        struct rlimit l;
        if (getrlimit(space_limits[i].resource, &l) == 0 && l.rlim_max != RLIM_INFINITY) {
            fprintf(stderr, "trainrun: calibrate: %s is %llu MB: calibration measures the address space OpenBLAS "
                    "and the threads reserve, which it cannot under a limit (OpenBLAS spins where its buffers do "
                    "not fit); run `trainrun calibrate` once without it (ulimit -v unlimited): runs under the "
                    "limit then use the measurement it caches\n", space_limits[i].name,
                    (unsigned long long)(l.rlim_max / 1000000));
            return TR_EXIT_NO_FIT;
        }
    }
    return TR_EXIT_OK;
}

/* Whether this process, with OpenBLAS loaded and the threads started, stays within every
 * address-space limit; when not, OpenBLAS is kept from loading (blas.h) with the sentence that
 * says so, and the planner, which adds the plan's peak, refuses the run naming the limit that
 * would do. Commands that never compute are not affected. */
static int check_fixed_part(void)
{
    struct tr_device dev;
    struct tr_diag diag = {0};
    int rc = tr_plan_device(&dev, NULL, false, &diag);
    if (rc) {
        struct tr_limit l = tr_plan_space_limits();
        fprintf(stderr, "trainrun: %s is %llu MB, and what OpenBLAS and the threads reserve on this host is not "
                "measured (%s): run `trainrun calibrate` once without the limit; runs under it then use the "
                "measurement it caches\n", l.name, (unsigned long long)(l.bytes / 1000000), tr_diag_last(&diag));
        tr_diag_free(&diag);
        return TR_EXIT_NO_FIT;
    }
    struct tr_space pending = tr_plan_space_pending(&dev);
    char why[512];
    if (tr_plan_space_refusal(pending, (struct tr_space){0, 0}, why, sizeof why))
        tr_blas_forbid(why);
    return TR_EXIT_OK;
}

int tr_cli_limits_start(const char *subcommand)
{
    if (!any_limit())
        return TR_EXIT_OK;
    if (!strcmp(subcommand, "calibrate"))
        return lift_for_calibration();
    return check_fixed_part();
}
