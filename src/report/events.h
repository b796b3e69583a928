/* TensorBoard event files, written natively (../shared/reference/tensorboard-format.md):
 * TFRecord framing with masked CRC-32C around hand-encoded Event protos. One writer makes one
 * new file in a run folder (a resumed run gets a second file beside the first, never an
 * append) that opens with the brain.Event:2 record and a SessionLog START at the first step it
 * will log, so TensorBoard drops what a crashed session logged past its last checkpoint.
 *
 * Records collect in memory and reach the file whole, in one write(), when tr_events_flush
 * runs: at most every flush_secs from tr_events_tick, at checkpoints and at the end. A crash
 * loses at most the unflushed records and never damages those before them (a torn last record
 * is read as "not yet written"). A write error is kept, not fatal: training goes on, the
 * writer stops, and tr_events_error says why. */
#ifndef TR_EVENTS_H
#define TR_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "report/protobuf.h"

struct tr_events {
    int fd;                      /* -1 when closed or failed */
    struct tr_path path;
    struct tr_pb pending;        /* framed records not yet written */
    double flush_secs, flushed_at;
    char error[4400];            /* the first write error, or "" */
    double fixed_time;           /* set before tr_events_open: every record's wall time (tests) */
};

/* Creates dir/events.out.tfevents.<10-digit seconds>.<host>.<pid>.<n> (never an existing
 * file), writes the version record and SessionLog START at first_step, and flushes. Returns 0,
 * or TR_EIO (TR_EINVAL: dir's path too long) with the reason in d. */
int tr_events_open(struct tr_events *ev, const char *dir, int64_t first_step, double flush_secs,
                   struct tr_diag *d);

void tr_events_scalar(struct tr_events *ev, const char *tag, int64_t step, double value);
/* Markdown, shown by the Text dashboard. */
void tr_events_text(struct tr_events *ev, const char *tag, int64_t step, const char *markdown);
/* 30 equal buckets from the smallest to the largest finite value (TF2's histogram form). */
void tr_events_histogram(struct tr_events *ev, const char *tag, int64_t step, const float *v, int64_t n);

/* One hyper-parameter for the HParams dashboard: a number, a string or a bool. */
struct tr_hparam {
    const char *name;
    enum { TR_HP_NUMBER, TR_HP_STRING, TR_HP_BOOL } kind;
    double number;
    const char *string;
    int flag;
};

enum tr_session_status { TR_SESSION_SUCCESS = 1, TR_SESSION_FAILURE = 2, TR_SESSION_RUNNING = 3 };

void tr_events_session_start(struct tr_events *ev, const struct tr_hparam *hp, int n, double start_secs);
void tr_events_session_end(struct tr_events *ev, enum tr_session_status status, double end_secs);
/* A serialized GraphDef (report/graphdef.h), for the Graphs dashboard. */
void tr_events_graph(struct tr_events *ev, const struct tr_pb *graph_def);

/* Writes what is pending (and fsyncs when sync); flushes when flush_secs have passed. */
int tr_events_flush(struct tr_events *ev, int sync);
void tr_events_tick(struct tr_events *ev);
/* Flushes with fsync and closes; returns 0 or -1 (tr_events_error). */
int tr_events_close(struct tr_events *ev);
/* The first write error, or NULL. */
const char *tr_events_error(const struct tr_events *ev);
/* The bytes on disk after a flush (what a checkpoint may note); -1 when closed, failed or with
 * records pending. */
int64_t tr_events_written(const struct tr_events *ev);

/* A resumed run: the event file at path cut back to its first keep bytes (-1: no such bound)
 * and to the records up to last_step (those without a step — the version, texts, graph,
 * HParams — count as step 0), and a torn last record dropped; so a step the resumed run logs
 * again is in no file twice. 0, or TR_EIO with the reason in d. */
int tr_events_trim(const char *path, int64_t keep, int64_t last_step, struct tr_diag *d);

/* One TFRecord around data: length, masked CRC of the length, data, masked CRC of the data. */
void tr_events_frame(struct tr_pb *out, const void *data, size_t n);

#endif
