/* A run, start to report (DESIGN.md §2): the stages — data, plan, programs, first weights, run
 * folder, training loop, test evaluation, finish and report — called in turn on plain data, in
 * one screen (train, below), and the recipe's lock. `trainrun RECIPE` (run.c) and `trainrun
 * resume` (resume.c) both end here; the exit status is chosen here, from how the run ended. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/exit.h"
#include "core/progress.h"
#include "core/stop.h"
#include "dist/comm.h"
#include "recipe/recipe.h"
#include "report/notify.h"
#include "train/finish.h"
#include "train/loop.h"
#include "train/run_folder.h"
#include "train/runs.h"
#include "train/session.h"
#include "train/weights.h"

int tr_cli_lock(const char *dir, struct tr_runs_lock *lock)
{
    struct tr_diag diag = {0};
    int rc = tr_runs_lock(dir, lock, &diag);
    if (rc == TR_ELOCKED)
        fprintf(stderr, "trainrun: another run of this recipe is in progress: %s; nothing was run\n",
                tr_diag_last(&diag));
    else if (rc)
        fprintf(stderr, "trainrun: %s\n", tr_diag_last(&diag));
    tr_diag_free(&diag);
    return tr_exit_status(rc);
}

/* ---- the run, stage by stage ------------------------------------------------------------------- */

/* The data stage: the recipe's data loaded (fetched, verified, tokenized). A resumed run reads
 * the data it began with, or it would not end as an uninterrupted one. */
static int load_data(const struct tr_recipe *r, const char *resume_dir, bool quiet, struct tr_data *data,
                     struct tr_diag *d)
{
    int rc = tr_data_load_showing(r, tr_cli_datasets_dir(), quiet ? NULL : stderr, data, d);
    if (rc == TR_ENOMEM)   /* out of memory is the host's failure (1), not the data's (4): trainrun(1) */
        return TR_ENOMEM;
    if (rc)   /* a stop signal seen during a download, a prepare script or tokenising stays one */
        return rc == TR_EINTERRUPTED || d->code == TR_EINTERRUPTED ? TR_EINTERRUPTED : TR_EDATA;
    char what[1024];
    if (resume_dir && tr_data_changed_since(data, resume_dir, what, sizeof what))
        return tr_fail(d, TR_EDATA, "resume: the data changed since this run began (%.900s differs from "
                       "%.2000s/data-sources.json); a resumed run must read the data it began with: start a new "
                       "run instead", what, resume_dir);
    tr_data_print_warnings(data, stderr);   /* before the run folder and its log exist */
    return 0;
}

/* ---- across ranks (dist/comm.h): each stage on every rank, then agreed ---------------------------- */

int tr_cli_rank_share(int world, const struct tr_recipe *r, struct tr_recipe *share, struct tr_diag *d)
{
    *share = *r;
    if (r->train.batch_size % world)
        return tr_fail(d, TR_EINVAL, "train.batch_size %lld does not split evenly over %d ranks: make it a "
                       "multiple of %d", (long long)r->train.batch_size, world, world);
    share->train.batch_size = r->train.batch_size / world;
    return 0;
}

/* The data, rank 0 first: it fetches, prepares and tokenises into the cache, the others then
 * read what it made instead of making it again beside it. */
static int load_data_ranked(const struct tr_comm *comm, const struct tr_recipe *r, const char *resume_dir,
                            bool quiet, struct tr_data *data, struct tr_diag *d)
{
    int rc = comm->rank == 0 ? load_data(r, resume_dir, quiet, data, d) : 0;
    rc = tr_comm_agree(comm, rc, "loading the data", d);
    if (!rc && comm->rank != 0)   /* whether the data changed since a resumed run began: rank 0 saw */
        rc = load_data(r, NULL, true, data, d);
    return comm->world == 1 ? rc : tr_comm_agree(comm, rc, "loading the data", d);
}

/* The plan: rank 0's, searched (calibrating this host if it must) and given to the others,
 * which replay it: one cut of each step into micro-batches on every rank. */
static int plan_ranked(const struct tr_comm *comm, struct tr_session *s, const struct tr_recipe *share,
                       const struct tr_data *data, const char *plan_file, const char *resume_dir, struct tr_diag *d)
{
    /* the rate the ranks sum at, for the plan's forecast; kept for `trainrun plan --ranks` */
    int rc = tr_comm_bus_rate(comm, &s->bus_rate, &s->bus_latency, d);
    if (rc)
        return tr_comm_agree(comm, rc, "measuring the collectives", d);
    if (comm->rank == 0)
        tr_plan_bus_rate_save(comm->world, s->bus_rate, s->bus_latency);
    rc = comm->rank == 0 ? tr_session_plan(s, share, data, plan_file, resume_dir, NULL, d) : 0;
    rc = tr_comm_agree(comm, rc, "planning", d);
    if (rc)
        return rc;
    if (comm->world == 1)   /* alone: laid out by the plan */
        return tr_session_lay_out(s, share, s->layout.pipeline, s->layout.tensor, d);
    struct tr_knobs k = s->k;
    rc = tr_comm_broadcast(comm, &k, sizeof k, d);
    if (!rc)   /* every rank: the communicators of rank 0's layout */
        rc = tr_session_lay_out(s, share, k.pipeline > 1 ? k.pipeline : 1, k.tensor > 1 ? k.tensor : 1, d);
    rc = tr_comm_agree(comm, rc, "laying out the ranks", d);
    if (!rc && comm->rank != 0)
        rc = tr_session_plan(s, share, data, NULL, NULL, &k, d);
    return tr_comm_agree(comm, rc, "taking rank 0's plan", d);
}

/* The run folder: rank 0 opens it, the others learn where it is (their traces go there). */
static int open_folder_ranked(const struct tr_comm *comm, struct tr_run_folder *f, const struct tr_recipe *r,
                              const char *resume_dir, struct tr_diag *d)
{
    int rc = comm->rank == 0 ? tr_run_folder_open(f, r, resume_dir, d) : 0;
    rc = tr_comm_agree(comm, rc, "opening the run folder", d);
    if (rc || comm->world == 1)
        return rc;
    struct tr_path dir = f->dir;
    rc = tr_comm_broadcast(comm, dir.s, sizeof dir.s, d);
    return rc || comm->rank == 0 ? rc : tr_run_folder_follow(f, dir.s, d);
}

/* The run folder's first files, before the first step: a fresh run keeps its data's files and
 * its plan; a resumed one restores its newest checkpoint into *start. Then the event file, the
 * record and the opening lines. */
static int start_run_folder(struct tr_run_folder *f, struct tr_session *s, struct tr_loop *l,
                            const struct tr_recipe *r, const struct tr_data *data, bool resumed,
                            struct tr_weights *w, int64_t *start, struct tr_diag *d)
{
    int rc = resumed ? tr_loop_resume(l, s, f, start, d) : tr_run_folder_keep_data(f, data, d);
    if (!rc && !resumed)
        rc = tr_run_folder_write_plan(f, tr_run_folder_plan_json(s, r, data), json_array(), 0, d);
    bool tensorboard_plan = !rc && *start == 0 && r->report.tensorboard;
    char *plan = tensorboard_plan ? tr_plan_markdown(&s->plan, &s->job, s->train.b.remat_nodes) : NULL;
    if (!rc)
        rc = tr_run_folder_open_events(f, r, *start, plan, &s->train.b.g, &s->k, d);
    free(plan);
    if (rc)
        return rc;
    tr_run_folder_draw(f, &s->train.b, r->name);   /* graph.svg, for report.html */
    rc = tr_run_folder_begin_record(f, r, *start, w->warm_start, d);
    w->warm_start = NULL;   /* the record took it */
    if (!rc)
        tr_loop_say_start(l, s, f, r, data, w->summary);
    return rc;
}

/* The test split's evaluation, after the last checkpoint (a signal during it leaves the run
 * resumable at its end): returns its failure, else how the loop ended (rc). */
static int test(struct tr_loop *l, struct tr_session *s, const struct tr_recipe *r, const struct tr_data *data,
                struct tr_train_result *res, int rc, struct tr_diag *d)
{
    int failed = tr_loop_evaluate(l, s, r, data, &data->test, &res->test, d);
    return failed ? failed : rc;
}

/* Rank 0's run folder while the ranks train, for the watchdog to record a timeout in (NULL: none);
 * what the run's end needs beside it. */
static struct {
    struct tr_run_folder *folder;
    const struct tr_recipe *r;
    double started;
} watched;

/* The run, start to report: each call one stage on plain data, on every rank (comm; rank 0
 * writes and speaks). Returns how it ended (0 or an enum tr_err), with the run folder left in
 * *folder for the caller's result line. */
static int train(const struct tr_comm *comm, const struct tr_recipe *r, const char *resume_dir, const char *plan_file,
                 struct tr_run_folder *folder, struct tr_train_result *res, struct tr_diag *d)
{
    double started = tr_now();
    struct tr_data data = {0};
    struct tr_recipe share;   /* one rank's share of the batch: what it plans for */
    struct tr_session s = {.comm = comm};
    struct tr_weights w = {0};
    struct tr_loop loop = {0};
    int64_t start = 0;
    /* the batch is the data ranks' to share: a pipeline's stages and a block's tensor ranks run the
     * same samples */
    int64_t P = (r->optimize.parallel.pipeline > 1 ? r->optimize.parallel.pipeline : 1) *
                (r->optimize.parallel.tensor > 1 ? r->optimize.parallel.tensor : 1);
    int rc = tr_cli_rank_share(comm->world % P ? comm->world : comm->world / (int)P, r, &share, d);
    if (rc && comm->rank > 0)   /* every rank found it: rank 0 says it */
        tr_diag_free(d);
    if (!rc)
        rc = load_data_ranked(comm, r, resume_dir, folder->quiet, &data, d);   /* data */
    if (!rc)
        rc = tr_ranks_same_job(comm, r, &data, d);                       /* one job on every rank */
    tr_loop_init(&loop, r, &data, started, comm);
    if (!rc && !(rc = tr_stop_check(d, "the data's loading")))
        rc = plan_ranked(comm, &s, &share, &data, plan_file, resume_dir, d);   /* plan */
    if (!rc && !(rc = tr_stop_check(d, "planning")))
        rc = tr_session_build(&s, s.job.r, d);                           /* programs, regions */
    if (!rc)
        rc = tr_weights_init(&s, r, &data, resume_dir, &w, d);           /* first weights */
    if (comm->world > 1 && !(rc = tr_comm_agree(comm, rc, "building its program", d)))
        rc = tr_ranks_same_params(&s.data_comm, &s.train.x, 0, d);       /* one model on every rank (of a stage) */
    tr_optim_release(&s.optim);   /* ZeRO 3: the whole weights' view, each rank's part kept */
    if (!rc)
        rc = open_folder_ranked(comm, folder, r, resume_dir, d);         /* run folder */
    if (!rc && !folder->silent)
        rc = start_run_folder(folder, &s, &loop, r, &data, resume_dir != NULL, &w, &start, d);   /* or resume */
    if (comm->world > 1)
        rc = tr_comm_agree(comm, rc, "starting the run folder", d);
    if (!rc && resume_dir)   /* the others take what rank 0 resumed */
        rc = tr_loop_share_resume(&loop, &s, &start, d);
    if (!rc)
        res->run_dir = folder->dir.s;
    if (!rc && !folder->silent && comm->world > 1)   /* a timeout is recorded in it */
        watched.folder = folder, watched.r = r, watched.started = started;
    tr_comm_watch_arm(comm, true);   /* distributed.timeout: from here every rank works alike */
    if (!rc)
        rc = tr_loop_run(&loop, &s, folder, r, &data, start, res, d);   /* training loop */
    if (!rc)
        rc = tr_loop_last_checkpoint(&loop, &s, folder, r, res->steps, d);   /* the last checkpoint */
    tr_comm_watch_arm(comm, false);
    watched.folder = NULL;
    /* evaluation, on the clock's stop too: rank 0's (ZeRO 3: every rank's, whose parts it gathers;
     * pipelined or tensor parallel: every rank of data rank 0's, which work on it together) */
    bool spread = s.eval.b.pipelined || s.layout.tensor > 1;
    if ((!rc || rc == TR_ETIMEUP) && data.test.n &&
        (!folder->silent || s.eval.x.shard.fill || (spread && s.layout.data_rank == 0)))
        rc = test(&loop, &s, r, &data, res, rc, d);
    tr_finish_say_done(folder, &data, res, rc, d);                       /* finish */
    int measured = folder->silent ? 0 : tr_finish_measured_plan(folder, &s, r, &data, res, d);
    rc = rc ? rc : measured;
    if (!rc && !folder->silent)
        rc = tr_finish_promote(folder, r, d);                            /* nightly: the gate */
    if (rc != TR_EINTERRUPTED && !folder->silent)
        tr_finish_retain(folder, r);                                     /* and report.keep */
    json_t *leak = tr_loop_end(&loop, folder, res->steps);               /* report */
    tr_run_folder_end(folder, r->report.dir, &(struct tr_run_end){.err = rc, .exit_status = tr_exit_status(rc),
                                                                  .seconds = tr_now() - started,
                                                                  .steps = res->steps, .leak = leak,
                                                                  .name = r->name, .prometheus = r->report.prometheus,
                                                                  .signal = rc == TR_EINTERRUPTED
                                                                                ? tr_stop_requested() : 0});
    tr_weights_free(&w);
    tr_session_free(&s);
    tr_data_free(&data);
    return rc;
}

/* distributed.timeout ran out in a collective (the watchdog's thread, dist/comm.h): this rank
 * ends at once, the main thread being stuck in MPI; its launcher ends the others. Rank 0 first
 * says in its run folder which ranks did not answer (log.txt, run.json's failure, the report). */
static void ranks_timed_out(const struct tr_comm *c, const struct tr_comm_timeout *t)
{
    char who[1024];
    bool several = strchr(t->silent, ',') != NULL;
    if (*t->silent)
        snprintf(who, sizeof who, "rank%s %s did not answer (stopped, or %s host went away)%s%s", several ? "s" : "",
                 t->silent, several ? "their" : "its", *t->said ? "; " : "", t->said);
    else
        snprintf(who, sizeof who, "a rank stopped or its host went away%s%s", *t->said ? "; " : "", t->said);
    char sentence[1600];
    snprintf(sentence, sizeof sentence, "rank %d of %d: no answer from the other ranks for %.0f s while %s in step "
             "%lld (distributed.timeout): %s", c->rank, c->world, t->waited, t->what, (long long)t->step, who);
    fprintf(stderr, "trainrun: %s; ending with status %d, and %s ends the other ranks\n", sentence, TR_EXIT_RANKS,
            c->launcher);
    fflush(stderr);
    struct tr_run_folder *f = c->rank == 0 ? watched.folder : NULL;
    if (f) {   /* the main thread waits in MPI: the folder is this thread's to close */
        tr_run_folder_say(f, "failed: %s\n", sentence);
        json_t *failure = json_pack("{ss si sf ss sI ss}", "kind", "ranks", "rank", c->rank, "waited_seconds",
                                    t->waited, "while", t->what, "step", (json_int_t)t->step, "sentence", sentence);
        if (*t->silent)
            json_object_set_new(failure, "silent_ranks", json_string(t->silent));
        tr_run_folder_note(f, "failure", failure);
        tr_run_folder_end(f, watched.r->report.dir, &(struct tr_run_end){.err = TR_EFAIL, .exit_status = TR_EXIT_RANKS,
                                                                    .seconds = tr_now() - watched.started,
                                                                    .steps = t->step > 0 ? t->step - 1 : 0,
                                                                    .name = watched.r->name,
                                                                    .prometheus = watched.r->report.prometheus});
    }
    usleep(200000);   /* mpirun forwards a rank's output through a pipe: let it take the line */
    _exit(TR_EXIT_RANKS);
}

void tr_cli_watch_ranks(struct tr_comm *comm, const struct tr_recipe *r)
{
    tr_comm_watch(comm, r->distributed.timeout, ranks_timed_out);
}

int tr_cli_open_ranks(struct tr_comm *comm)
{
    struct tr_diag diag = {0};
    int rc = tr_comm_open(comm, &diag);
    if (rc)
        fprintf(stderr, "trainrun: %s\n", tr_diag_last(&diag));
    tr_diag_free(&diag);
    return tr_exit_status(rc);
}

int tr_cli_train(const struct tr_comm *comm, const struct tr_recipe *r, const struct tr_args *a,
                 const char *resume_dir, struct tr_diag *diag)
{
    bool quiet = tr_args_has(a, "--quiet") || tr_args_has(a, "-q") || comm->rank > 0;
    struct tr_run_folder folder;
    struct tr_train_result res = {0};
    tr_run_folder_init(&folder, quiet);
    tr_progress_quiet(quiet);
    tr_stop_install();   /* from the data's loading to the notification: every stage stops cleanly */
    int status = tr_exit_status(train(comm, r, resume_dir, tr_args_value(a, "--plan"), &folder, &res, diag));
    tr_cli_print_diag(diag);
    const char *dir = res.run_dir ? res.run_dir : "";
    if (folder.silent) {   /* rank 0 says how it ended, and notifies */
        tr_stop_uninstall();
        tr_run_folder_close(&folder);
        return status;
    }
    if (status == TR_EXIT_OK && quiet && isnan(res.test.accuracy))
        printf("%s: no test split, run folder %s\n", r->name, dir);
    else if (status == TR_EXIT_OK && quiet)
        printf("%s: test accuracy %.4f, run folder %s\n", r->name, res.test.accuracy, dir);
    fflush(stdout);   /* the result line first, then the webhook's wait */
    if (tr_notify_run_end(r, *dir ? dir : resume_dir, status) == TR_EINTERRUPTED) {
        status = TR_EXIT_INTERRUPTED;   /* run.json says so too, or it would claim the end it had */
        struct tr_diag why = {0};
        if (tr_run_folder_notification_cut(&folder, status, tr_stop_requested(), &why))
            tr_cli_print_diag(&why);
    }
    tr_stop_uninstall();
    tr_run_folder_close(&folder);
    return status;
}
