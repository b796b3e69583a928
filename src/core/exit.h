/* Exit statuses of trainrun: their values, the one place they are defined. man/trainrun.1
 * (EXIT STATUS) documents each; cron jobs and scripts branch on them, so a value never changes
 * meaning. Only src/cli/ chooses one (tr_exit_status, cli/exit.h, maps the library's enum
 * tr_err to it); the report stage reads them back from run.json and a run's notification. */
#ifndef TR_CORE_EXIT_H
#define TR_CORE_EXIT_H

enum tr_exit {
    TR_EXIT_OK          = 0,   /* the run (or check, plan, …) succeeded */
    TR_EXIT_FAILURE     = 1,   /* an internal or system failure: I/O, out of memory, a bug */
    TR_EXIT_USAGE       = 2,   /* bad command line or invalid recipe / conf file */
    TR_EXIT_NO_FIT      = 3,   /* the budget cannot fit the job with any plan */
    TR_EXIT_DATA        = 4,   /* data could not be fetched, verified or read */
    TR_EXIT_DIVERGED    = 5,   /* NaN/Inf in loss or gradients, or the loss scale collapsed */
    TR_EXIT_REGRESSION  = 6,   /* finished, but worse than the promoted run */
    TR_EXIT_UNCHANGED   = 7,   /* skipped: --if-data-changed and no source changed */
    TR_EXIT_TIME_LIMIT  = 8,   /* stopped by budget.time after checkpointing, evaluating, reporting */
    TR_EXIT_UNSETTLED   = 9,   /* calibrate: the measurement did not settle (a busy machine); not cached */
    TR_EXIT_RANKS       = 10,  /* across ranks: the others stopped answering (distributed.timeout) */
    TR_EXIT_LOCKED      = 75,  /* another run of this recipe holds the lock (EX_TEMPFAIL) */
    TR_EXIT_INTERRUPTED = 130, /* stopped by SIGINT, SIGTERM or SIGHUP, checkpointed */
};

#endif
