/* The command line: one file per subcommand behind one dispatch table (main.c). Each
 * subcommand gets argv after its name and returns an exit status (cli/exit.h). */
#ifndef TR_CLI_H
#define TR_CLI_H

struct tr_comm;

int tr_cmd_check(int argc, char **argv);
int tr_cmd_run(int argc, char **argv);
int tr_cmd_resume(int argc, char **argv);
int tr_cmd_sample(int argc, char **argv);
int tr_cmd_plan(int argc, char **argv);
int tr_cmd_graph(int argc, char **argv);
int tr_cmd_calibrate(int argc, char **argv);
int tr_cmd_report(int argc, char **argv);

/* Before OpenBLAS loads and any thread starts (limits.c): under a finite RLIMIT_AS or
 * RLIMIT_DATA, whether what the subcommand will reserve fits — when not, OpenBLAS is kept from
 * loading and the planner names the limit that would do. calibrate lifts its soft limits.
 * TR_EXIT_OK, or the exit status to end with (the sentence said). */
int tr_cli_limits_start(const char *subcommand);

/* Splits argv into the recipe, its key=value / ~key overrides and the options listed in
 * flags (each "--name"); unknown options and stray words are usage errors (message printed). */
struct tr_args {
    const char *recipe;
    char **overrides;
    int noverrides;
    const char *flags_seen[8];
    int nflags;
    const char *value_names[8], *values[8];   /* options with a value: each name once, its last value */
    int nvalues;
};
int tr_args_parse(int argc, char **argv, const char *const *flags, const char *usage, struct tr_args *a);
/* tr_args_parse, and --help/-h answered: returns 0 to go on, −1 when the usage was printed
 * (exit 0), or the usage error's status; a ≠ 0 return has already freed a. */
int tr_args_start(int argc, char **argv, const char *const *flags, const char *usage, struct tr_args *a);
/* tr_args_start for a subcommand whose options also include some that take a value, listed
 * in valued: "--name VALUE" (the next word, whatever it begins with) or "--name=VALUE". A
 * valued option last in argv is a usage error. */
int tr_args_start_valued(int argc, char **argv, const char *const *flags, const char *const *valued,
                         const char *usage, struct tr_args *a);
int tr_args_has(const struct tr_args *a, const char *flag);
/* The value of the valued option name (its last one when repeated), or NULL when not given. */
const char *tr_args_value(const struct tr_args *a, const char *name);
void tr_args_free(struct tr_args *a);

struct tr_recipe;
struct tr_diag;
/* Loads args' recipe over the conf files with args' overrides. On errors prints each and a
 * summary to stderr and returns TR_EXIT_USAGE; the diagnostics stay in diag for callers. */
int tr_cli_load_recipe(const struct tr_args *a, struct tr_recipe *r, struct tr_diag *diag);

/* Each problem of diag on stderr, "trainrun: file:line:col: message" a line. */
void tr_cli_print_diag(const struct tr_diag *diag);
/* A subcommand on one recipe: loads it from the parsed arguments, runs fn, prints the diagnostics,
 * frees the arguments, and fails (1) when standard output could not be written (what was not
 * written was not shown). fn's exit status otherwise. */
int tr_cli_on_recipe(struct tr_args *a, int (*fn)(const struct tr_recipe *r, const struct tr_args *a,
                                                  struct tr_diag *diag));

/* Data set definitions: $TRAINRUN_DATASETS, else ./datasets (a checkout), else the installed ones. */
const char *tr_cli_datasets_dir(void);
/* Who this process is among the ranks its launcher started (dist/comm.h): 0, or the exit
 * status with the sentence printed (a multi-rank launch this build or launcher cannot serve). */
int tr_cli_open_ranks(struct tr_comm *comm);
/* What one of world ranks plans for (train.c): r with its share of train.batch_size, the
 * recipe's batch being the step's over all ranks. TR_EINVAL with the sentence when it does not
 * split evenly. */
struct tr_recipe;
int tr_cli_rank_share(int world, const struct tr_recipe *r, struct tr_recipe *share, struct tr_diag *d);
/* The watchdog of r's distributed.timeout (dist/comm.h), armed for the training steps (train.c):
 * a rank that waits longer for the others ends with TR_EXIT_RANKS, saying what it waited in. */
void tr_cli_watch_ranks(struct tr_comm *comm, const struct tr_recipe *r);
/* The run of r (continuing resume_dir when not NULL) on every rank of comm, stage by stage
 * (train.c): its failure on stderr, and with --quiet/-q in a the one result line; then notifies
 * (report.notify). Rank 0 alone writes the run folder and speaks. Returns the exit status of how
 * it ended. */
int tr_cli_train(const struct tr_comm *comm, const struct tr_recipe *r, const struct tr_args *a,
                 const char *resume_dir, struct tr_diag *diag);

/* One run per recipe at a time: takes the lock of the recipe folder dir (report.dir/NAME) for
 * this process (run.c). 0, or TR_EXIT_LOCKED (another process holds it: its pid and start said
 * on stderr) or TR_EXIT_FAILURE. */
struct tr_runs_lock;
int tr_cli_lock(const char *dir, struct tr_runs_lock *lock);
/* Continues the run folder dir with the recipe it recorded (resume.c): the caller holds the lock. */
int tr_cli_resume_dir(struct tr_comm *comm, const char *dir, const struct tr_args *a, struct tr_diag *diag);
/* --if-data-changed: refreshes r's data and compares it with the newest successful run's
 * (data_changed.c). TR_EXIT_UNCHANGED (said on stdout) when no source changed, TR_EXIT_DATA
 * (said on stderr) when the refresh failed, TR_EXIT_OK to train. */
int tr_cli_data_unchanged(const struct tr_recipe *r, struct tr_diag *diag);
/* --resume auto: refreshes r's data and compares it, file by file, with what the run in dir
 * began with (its data-sources.json). What changed (in what, size bytes), or NULL: the same, no
 * record to compare with, or a refresh that failed (the resume then meets the failure itself). */
const char *tr_cli_data_moved_on(const struct tr_recipe *r, const char *dir, char *what, size_t size);

#endif
