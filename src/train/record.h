/* The run's record for its report (DESIGN.md §2, reporter): where the time went — waiting for
 * data, forward, backward, recomputation, the optimizer, evaluation, checkpointing — and whether
 * memory held still from one step to the next (the leak check). The trainer logs the time in
 * metrics.jsonl, one interval a line; the leak check's verdict goes into run.json. */
#ifndef TR_RECORD_H
#define TR_RECORD_H

#include <jansson.h>
#include <stdint.h>

#include "core/error.h"

enum tr_time {
    TR_TIME_DATA,          /* the loop waited for the loader */
    TR_TIME_FORWARD,       /* the training program's forward nodes */
    TR_TIME_BACKWARD,      /* its backward nodes */
    TR_TIME_RECOMPUTE,     /* checkpointing's recomputed forward nodes */
    TR_TIME_OPTIMIZER,     /* unscaling, clipping and the update */
    TR_TIME_EVAL,          /* evaluation and test passes */
    TR_TIME_CHECKPOINT,    /* writing checkpoints */
    TR_NTIME
};

/* metrics.jsonl's key for each: "time/data", "time/forward", … */
const char *tr_time_key(int i);

/* Seconds spent since the last logged line, by cause. The executor adds its nodes' time into
 * phase (by enum tr_phase: forward, backward, recompute, optimizer); the trainer the rest. */
struct tr_timer {
    double spent[TR_NTIME];
    double phase[4];
    double wait_seen;      /* the loader's wait total at the last line */
    double since;          /* when the last line was logged */
};

void tr_timer_start(struct tr_timer *t, double now, double wait_total);
/* Adds the interval's "time/wall" and each "time/…" to line and starts a new interval. */
void tr_timer_line(struct tr_timer *t, json_t *line, double now, double wait_total);

/* The training steps' own times (the loader's batch and the step, not evaluation or
 * checkpoints), the first of a process left out as its warm-up: the last TR_STEP_TIMES kept,
 * for the measured step time set against the plan's prediction. */
enum { TR_STEP_TIMES = 4096 };
struct tr_step_times {
    double seconds[TR_STEP_TIMES];
    int64_t seen;          /* steps offered, the warm-up included */
};
void tr_step_times_add(struct tr_step_times *t, double seconds);
/* The median of those kept, and how many (0 and NAN before the second step). */
double tr_step_times_median(const struct tr_step_times *t, int64_t *count);

/* The leak check: at the start of every step the allocator's bytes, the process's heap in use
 * (mallinfo2) and its resident set are sampled; after warm-up (the first logged line,
 * evaluation and checkpoint have all happened once, and at least TR_LEAK_MIN_WARMUP steps) the
 * first sample is the baseline, and a later one above it by more than a tolerance is growth. */
enum tr_gauge { TR_GAUGE_ALLOCATED, TR_GAUGE_HEAP, TR_GAUGE_RSS, TR_NGAUGES };
enum { TR_LEAK_MIN_WARMUP = 10 };

struct tr_leak {
    int64_t warmup;        /* the last warm-up step; the baseline is taken at the next */
    int64_t baseline_step; /* 0 until taken */
    int64_t last_step;
    struct {
        int64_t baseline, last, max, tolerance;
        int64_t first_grew;   /* the first step that started above baseline + tolerance; 0: none */
        int64_t first_value;  /* its value */
    } g[TR_NGAUGES];
};

const char *tr_gauge_name(int i);   /* "allocated", "heap", "rss" */
void tr_leak_init(struct tr_leak *l, int64_t warmup);
/* Samples the process now (allocated: the caller's allocator's current bytes) at the start of
 * step; returns the values it read into now_values (may be NULL). */
void tr_leak_sample(struct tr_leak *l, int64_t step, int64_t allocated, int64_t now_values[TR_NGAUGES]);
/* {"checked": bool, "warmup_steps", "baseline_step", "last_step", "allocated": {baseline, last,
 * max, tolerance, first_grew_step}, "heap": …, "rss": …, "verdict": "constant" | "grew" |
 * "too short"} */
json_t *tr_leak_json(const struct tr_leak *l);

/* run.json, the run's record beside its reports: {"started", "environment", "segments":
 * [{"started", "ended", "seconds", "exit_code", "outcome", "signal", "from_step", "to_step"}, …]
 * (one a process: a resumed run has several), "exit_code", "outcome" and "signal" (the last's)
 * and "seconds" (their sum), "leak"}. "outcome" is the exit status in a word, as report.json's
 * status (report/run_report.h: finished, regression, interrupted, time-limit, failed);
 * "signal" names the one that interrupted it ("SIGTERM"), null otherwise.
 * tr_run_record_begin loads dir's run.json (or starts one when fresh; environment is taken) and
 * opens a segment; tr_run_record_end closes it (leak is taken); both write the file whole,
 * renamed over the old one (core/atomic.h). Return 0, or TR_EIO (TR_EINVAL: a path too long)
 * with the sentence in d. */
int tr_run_record_begin(json_t **record, const char *dir, json_t *environment, int64_t from_step,
                        struct tr_diag *d);
struct tr_record_end {
    int exit_code;             /* the process's exit status */
    double seconds;            /* this process's part */
    int64_t to_step;
    int signal;                /* 130: the signal that stopped it; 0 otherwise */
};
int tr_run_record_end(json_t *record, const char *dir, const struct tr_record_end *end, json_t *leak,
                      struct tr_diag *d);
/* The run's end amended when a signal cut its notification (the webhook, after the record was
 * closed): its exit status (130: cli/exit.c chooses), "interrupted" and the signal, as the process ends, and
 * "notification": "cut by SIGTERM"; `--resume auto` then goes on from the last checkpoint,
 * evaluates and notifies again. */
int tr_run_record_cut(json_t *record, const char *dir, int exit_code, int signal, struct tr_diag *d);
/* Sets record's key to value (taken) and writes the file at once: what a nightly run decided
 * ("warm_start": where its first weights came from; "promotion": the gate's decision). */
int tr_run_record_note(json_t *record, const char *dir, const char *key, json_t *value, struct tr_diag *d);

#endif
