/* trainrun's entry point: dispatches to one file per subcommand (src/cli/<name>.c). A first
 * argument that names an existing file is a recipe for the default subcommand, run. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <omp.h>

#include "backend/cpu/cpu.h"
#include "cli/cli.h"
#include "config.h"
#include "cli/exit.h"
#include "core/blas.h"
#include "core/stop.h"
#include "data/fetch.h"
#include "dist/comm.h"
#ifdef HAVE_CUDA
#include "backend/cuda/probe.h"
#endif

struct subcommand {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;   /* for --help */
    int computes;          /* runs the engine, or plans for it (the same process, the same footprint): worth
                            * the BLAS kernels' re-execution (blas.c) */
};

/* Subcommands land with their issues; only those that work are here. */
static const struct subcommand subcommands[] = {
    {"check", tr_cmd_check, "validate a recipe and print it resolved, each value's origin beside it", 0},
    {"plan", tr_cmd_plan, "show how the job fits the memory budget: the candidates, their memory and time, the choice", 1},
    {"graph", tr_cmd_graph, "draw the program the planner chooses: DOT, or SVG through Graphviz", 1},
    {"calibrate", tr_cmd_calibrate, "measure this host for the planner (GEMM rate, bandwidth, threads' memory), cached", 1},
    {"run", tr_cmd_run, "train: the default, so 'trainrun RECIPE' is 'trainrun run RECIPE'", 1},
    {"resume", tr_cmd_resume, "continue an interrupted run from its newest good checkpoint", 1},
    {"report", tr_cmd_report, "write a run's reports again, every run's and the runs index, or compare two runs", 0},
    {"sample", tr_cmd_sample, "generate text from a trained GPT run, continuing a prompt", 1},
};

static void usage(FILE *out)
{
    fputs("usage: trainrun SUBCOMMAND RECIPE [key=value | ~key ...] [options]\n"
          "       trainrun --version | --help\n\nsubcommands:\n", out);
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        fprintf(out, "  %-10s %s\n", subcommands[i].name, subcommands[i].summary);
    fputs("\noverrides: dotted.key=value (a YAML scalar or flow collection, such as\n"
          "  train.batch_size=64 or train.optimizer.betas=[0.9,0.95]); ~dotted.key resets a key\n"
          "  to its default. See trainrun(1) and trainrun-recipe(5).\n", out);
}

static void version(void)
{
    printf("trainrun %s (git %s)\n", PACKAGE_VERSION, TR_GIT_REVISION);
    printf("CPU backend: OpenBLAS %s kernels, OpenMP %d threads\n",
           tr_blas_loaded() ? tr_cpu_blas_core() : "(not loaded: no room under the address-space limit)",
           omp_get_max_threads());
    char onednn[160];
    tr_onednn_describe(onednn, sizeof onednn);
    printf("CPU backend: %s\n", onednn);
#ifdef HAVE_CUDA
    struct tr_cuda_info info;
    tr_cuda_probe(&info);
    printf("CUDA backend: built (runtime %d.%d, cuDNN %ld, cuBLASLt %d); driver %s; GPUs seen: %d",
           info.runtime_version / 1000, info.runtime_version % 1000 / 10, info.cudnn_version,
           info.cublaslt_version, info.driver_version ? "present" : "absent", info.devices);
    if (info.devices > 0)
        printf(" (%s, %.1f GiB)", info.first_name, info.first_memory / 1073741824.0);
    putchar('\n');
#else
    puts("CUDA backend: not built (configure found no CUDA toolkit, or --without-cuda)");
#endif
    char ranks[200];
    tr_comm_describe(ranks, sizeof ranks);
    printf("Ranks: %s\n", ranks);
}

/* Before the engine: the address-space limits checked (limits.c), then OpenBLAS loaded — not
 * linked, as its start-up code would reserve its buffers before any check — and its kernels
 * picked (blas.c). A limit that leaves no room keeps it unloaded, for the planner to say so. */
static int start_engine(const char *subcommand, char **argv)
{
    int rc = tr_cli_limits_start(subcommand);
    if (rc)
        return rc;
    struct tr_diag d = {0};
    rc = tr_blas_load(&d);
    if (rc && rc != TR_ENOFIT) {
        fprintf(stderr, "trainrun: %s\n", tr_diag_last(&d));
        tr_diag_free(&d);
        return TR_EXIT_FAILURE;
    }
    tr_diag_free(&d);
    if (rc == 0)
        tr_cpu_blas_pick_core(argv);
    return TR_EXIT_OK;
}

/* Help and version go to stdout; a failed write (a full disk, a closed pipe) is a failure. */
static int flushed(int status)
{
    if (fflush(stdout) || ferror(stdout)) {
        perror("trainrun: writing the output");
        return TR_EXIT_FAILURE;
    }
    return status;
}

/* A TRAINRUN_FETCH_* variable that says nothing trainrun can use is refused before anything
 * runs, as an invalid recipe is: never remapped to a default in silence. */
static bool fetch_environment_invalid(void)
{
    struct tr_fetch_options o;
    struct tr_diag d = {0};
    bool invalid = tr_fetch_options_from_env(&o, 0, NULL, &d) != 0;
    if (invalid)
        tr_cli_print_diag(&d);
    tr_diag_free(&d);
    return invalid;
}

int main(int argc, char **argv)
{
    /* A file grown past RLIMIT_FSIZE (ulimit -f; a quota does the same with EDQUOT) then fails
     * its write with EFBIG, which the writer reports and recovers from (a checkpoint leaves
     * the previous one in place), instead of the signal killing the process mid-write. */
    signal(SIGXFSZ, SIG_IGN);
    tr_stop_init();   /* while this is the only thread: no thread takes a stop signal but its own */
    if (argc < 2) {
        usage(stderr);
        return TR_EXIT_USAGE;
    }
    if (fetch_environment_invalid())
        return TR_EXIT_USAGE;
    const char *first = argv[1];
    struct stat st;
    if (stat(first, &st) == 0 && !S_ISDIR(st.st_mode)) {
        int rc = start_engine("run", argv);
        return rc ? rc : tr_cmd_run(argc - 1, argv + 1);
    }
    if (!strcmp(first, "--help") || !strcmp(first, "-h")) {
        usage(stdout);
        return flushed(TR_EXIT_OK);
    }
    if (!strcmp(first, "--version") || !strcmp(first, "-V")) {
        int rc = start_engine("--version", argv);
        if (rc)
            return rc;
        version();
        return flushed(TR_EXIT_OK);
    }
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (!strcmp(first, subcommands[i].name)) {
            int rc = subcommands[i].computes ? start_engine(first, argv) : TR_EXIT_OK;
            return rc ? rc : subcommands[i].fn(argc - 2, argv + 2);
        }
    if (first[0] == '-')
        fprintf(stderr, "trainrun: unknown option '%s'\n", first);
    else if (strchr(first, '/') || strstr(first, ".yaml") || strstr(first, ".yml"))
        fprintf(stderr, "trainrun: cannot read the recipe %s: no such file\n", first);
    else
        fprintf(stderr, "trainrun: unknown subcommand '%s'\n", first);
    fputs("Try 'trainrun --help'.\n", stderr);
    return TR_EXIT_USAGE;
}
