/* A recipe's runs (DESIGN.md §6): the folder report.dir/NAME/ that holds its run folders
 * (YYYYmmdd-HHMMSS[-N]), the `latest` and `promoted` links and the `.lock` that keeps two runs
 * of one recipe from overlapping. What nightly runs need around the trainer: the lock, which
 * run `--resume auto` continues, the links moved atomically, and retention (report.keep). */
#ifndef TR_RUNS_H
#define TR_RUNS_H

#include <stddef.h>

#include "core/error.h"

/* The lock on DIR/.lock, held by an open descriptor: released when the process ends however it
 * ends (flock), so a killed run never leaves a stale lock. */
struct tr_runs_lock {
    int fd;               /* −1: not held */
    struct tr_path dir;       /* the recipe folder */
    struct tr_path created;   /* the highest folder the lock had to create; "" when dir existed */
};

/* Takes DIR/.lock (DIR created when missing) without waiting and writes this process's pid,
 * start time and host into it. Returns 0; TR_ELOCKED with the holder as the sentence ("pid
 * 123, started 2026-11-29T19:50:00Z on host holds DIR/.lock"); or TR_EIO / TR_EINVAL. */
int tr_runs_lock(const char *dir, struct tr_runs_lock *lock, struct tr_diag *d);
/* Releases it. A recipe folder that the lock created and that holds nothing else (the run was
 * refused before it made a run folder) is removed again, with the folders made for it. */
void tr_runs_unlock(struct tr_runs_lock *lock);

/* The recipe folder of a run folder: its parent ("runs/mlp" for "runs/mlp/20261129-194952").
 * 0, or TR_EINVAL when it does not fit in a path. */
int tr_runs_parent(const char *run_dir, struct tr_path *out, struct tr_diag *d);

/* A run folder's name: 8 digits, '-', 6 digits, optionally '-N' (two runs in one second). */
int tr_runs_is_run_name(const char *name);

/* The run folders in dir, oldest first (their names sort by time): a NULL-terminated array the
 * caller frees with tr_runs_free_list. NULL when dir cannot be read (none yet). */
char **tr_runs_list(const char *dir);
void tr_runs_free_list(char **names);

/* The run folder name the link dir/link ("latest", "promoted") points to, into out; 0, or −1
 * when there is no such link or its run folder is gone. */
int tr_runs_link_target(const char *dir, const char *link, char *out, size_t size);
/* Points dir/link at the run folder named target, atomically (a new link renamed over the old):
 * a reader sees the old run or the new one, never none. 0, or −1 with errno. */
int tr_runs_link_set(const char *dir, const char *link, const char *target);

/* How a run folder's last process ended, from its run.json. */
enum tr_run_state {
    TR_RUN_FINISHED,        /* exit 0, or 6 (finished but not promoted) */
    TR_RUN_INTERRUPTED,     /* killed (no exit code recorded) or stopped by a signal (130)
                             * or by budget.time (8) */
    TR_RUN_FAILED,          /* any other exit code: diverged, data, budget, I/O… */
    TR_RUN_NEVER_STARTED,   /* no run.json: setting the folder up failed (a full disk) or was cut
                             * short before training began; nothing in it to resume */
};
enum tr_run_state tr_runs_state(const char *run_dir);

/* report.keep: deletes the oldest run folders of dir beyond keep (0: none), never the folder
 * named current, nor the targets of `latest` and `promoted`. Each is first renamed to
 * .deleting-NAME, so a crash halfway leaves no half run folder that looks like a run. The names
 * deleted go into deleted ("a, b"). Returns how many were deleted, or −1 with errno. */
int tr_runs_retain(const char *dir, long long keep, const char *current, char *deleted, size_t size);

#endif
