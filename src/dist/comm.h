/* Ranks and their collectives (DESIGN.md §10): who this process is among the processes a
 * cluster's launcher started — mpirun (Open MPI), srun (Slurm), or the variables torchrun sets —
 * and the few collectives data parallelism needs, over MPI. Alone (world 1) nothing of MPI is
 * loaded (dist/mpi.h: MPI lives in trainrun-mpi.so) and every collective is the identity.
 * Below the trainer (src/train/), beside the backends: it moves host memory only. */
#ifndef TR_DIST_COMM_H
#define TR_DIST_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

struct tr_comm;
struct tr_comm_watch;
struct tr_mpi_ops;

/* A collective that waited past distributed.timeout: what it was, how long, in which step, and
 * on rank 0 (where MPI lets its watchdog ask the others, tr_comm's multiple) which ranks did not
 * answer — stopped, or their host gone — and what the others said. */
struct tr_comm_timeout {
    const char *what;         /* the collective it waited in */
    double waited;            /* seconds */
    int64_t step;             /* the training step it was in (tr_comm_watch_step), 0 before one */
    char silent[256];         /* the ranks that did not answer, "1" or "1, 3"; "" when none or not asked */
    char said[512];           /* a sentence on the ranks that answered (or why none was asked), or "" */
};
/* What a rank does then (tr_comm_watch): says so and ends the process (the launcher then ends
 * every rank); rank 0 records the failure in its run folder first. */
typedef void (*tr_comm_timeout_fn)(const struct tr_comm *c, const struct tr_comm_timeout *t);

struct tr_comm {
    int rank, world;          /* this process among them, from 0; world 1: alone */
    int local_rank;           /* among those on this host: the GPU it takes (device: auto) */
    int local_world;          /* ranks on this host (the launcher's count; all of them when it
                               * gives none) */
    bool threads;             /* collectives may be called from another thread than the main one,
                               * one thread at a time (MPI_THREAD_SERIALIZED) */
    bool multiple;            /* any thread may call MPI at any time (MPI_THREAD_MULTIPLE): the
                               * watchdog may ask the other ranks where they are while a
                               * collective waits, and ZeRO 3's copies travel on a thread of
                               * their own (tr_comm_allgather_copy) */
    char launcher[48];        /* who started the ranks, for sentences: "mpirun", "srun", … */
    const struct tr_mpi_ops *mpi;  /* MPI's calls (dist/mpi.h), once started: tr_comm_close finishes it */
    void *plugin;             /* trainrun-mpi.so, loaded when more than one rank runs */
    int *agreed;              /* tr_comm_agree's gathered codes, world of them */
    struct tr_comm_watch *watch;   /* the watchdog (tr_comm_watch), NULL until started */
    int handle;               /* which of MPI's communicators (dist/mpi.h): 0 every rank's */
    const struct tr_comm *whole;   /* made by tr_comm_split: some of whole's ranks (rank, world:
                                    * among them), watched by its watchdog; NULL: c is whole */
};

/* A send begun (tr_comm_send), until tr_comm_sent. */
struct tr_comm_request {
    void *mpi;
};

/* Who this process is, from its launcher's variables (Open MPI's OMPI_COMM_WORLD_*, PMI_*,
 * Slurm's SLURM_STEP_NUM_TASKS/SLURM_PROCID/SLURM_LOCALID, torchrun's WORLD_SIZE/RANK/LOCAL_RANK);
 * with more than one rank, MPI started and asked. 0, or TR_EINVAL with a sentence: more than
 * one rank where this build has no MPI, or MPI and the variables disagree (torchrun started the
 * processes: they share no MPI world). */
int tr_comm_open(struct tr_comm *c, struct tr_diag *d);
void tr_comm_close(struct tr_comm *c);
/* A watchdog thread: while armed, a collective that waits more than timeout seconds for the
 * other ranks calls on_timeout from it — a rank stopped (SIGSTOP, a hung device) or its host went
 * away, and nothing else would end the wait. timeout 0: none. Armed for the training steps,
 * where every rank works alike; not for the start, where rank 0 may prepare the data alone for
 * long. */
void tr_comm_watch(struct tr_comm *c, double timeout, tr_comm_timeout_fn on_timeout);
void tr_comm_watch_arm(const struct tr_comm *c, bool armed);
/* The training step the ranks are in, for what the watchdog says. */
void tr_comm_watch_step(const struct tr_comm *c, int64_t step);
/* What ranks this build can run, for --version: "MPI (Open MPI v4.1.4, …)", or why one process. */
void tr_comm_describe(char *out, size_t size);

/* The ranks of c with the same color, ordered by key, as a communicator of their own in part (its
 * rank and world theirs; the watchdog c's): every rank of c calls it. Alone: part is c. */
int tr_comm_split(const struct tr_comm *c, int color, int key, struct tr_comm *part, struct tr_diag *d);
/* Point to point, bytes at a time, in order between two ranks for one tag: tr_comm_send begins a
 * send (buf must stay as it is until tr_comm_sent), tr_comm_recv waits for the one that rank
 * `from` sent with tag — exactly bytes long, else TR_EFAIL: the ranks disagree on its shape. */
int tr_comm_send(const struct tr_comm *c, const void *buf, size_t bytes, int to, int tag, struct tr_comm_request *r,
                 struct tr_diag *d);
int tr_comm_sent(const struct tr_comm *c, struct tr_comm_request *r, struct tr_diag *d);
int tr_comm_recv(const struct tr_comm *c, void *buf, size_t bytes, int from, int tag, const char *what,
                 struct tr_diag *d);

/* Whether every rank's rc is 0: 0 if so, else the lowest failing rank's code; a rank that did
 * not fail gets a sentence in d naming the one that did and what it was doing (`what`: "loading
 * the data"); that rank's own output says why. Every rank calls it at the same point. */
int tr_comm_agree(const struct tr_comm *c, int rc, const char *what, struct tr_diag *d);
/* bytes at buf from rank 0 to every rank. */
int tr_comm_broadcast(const struct tr_comm *c, void *buf, size_t bytes, struct tr_diag *d);
/* Element-wise sums over the ranks, in place; every rank gets the same bits. */
int tr_comm_sum_floats(const struct tr_comm *c, float *buf, size_t n, struct tr_diag *d);
int tr_comm_sum_doubles(const struct tr_comm *c, double *buf, size_t n, struct tr_diag *d);
/* ZeRO's collectives over buf's floats, rank k's part [displs[k], displs[k] + counts[k]) (the
 * parts one after the other, together all of buf): summed, each rank left with the sum of its
 * own part in place (the rest of buf undefined after); each rank's part gathered into every
 * rank's buf; into rank 0's all (mine: this rank's part, counts[rank] floats). Reduce-scatter
 * then all-gather over the same parts is the ranks' sum (tr_grad_reduce's). */
int tr_comm_reduce_scatter(const struct tr_comm *c, float *buf, const int *counts, const int *displs,
                           struct tr_diag *d);
int tr_comm_allgather(const struct tr_comm *c, float *buf, const int *counts, const int *displs, struct tr_diag *d);
/* Sequence parallelism's, over equal parts: in holds world parts of n floats, rank k left with
 * the ranks' sum of part k in out; each rank's `bytes` bytes into every rank's all, rank k's at
 * k·bytes. */
int tr_comm_reduce_scatter_block(const struct tr_comm *c, const float *in, float *out, size_t n, struct tr_diag *d);
int tr_comm_allgather_bytes(const struct tr_comm *c, const void *mine, void *all, size_t bytes, struct tr_diag *d);
/* The same on a communicator of ZeRO 3's copies alone (multiple): from their own thread, while the
 * main thread makes the others. */
int tr_comm_allgather_copy(const struct tr_comm *c, float *buf, const int *counts, const int *displs,
                           struct tr_diag *d);
/* Around the main thread's wait for what a collective on another thread ends (ZeRO 3's copies):
 * the watchdog times it as a collective. */
void tr_comm_waiting(const struct tr_comm *c, const char *what);
void tr_comm_answered(const struct tr_comm *c);
int tr_comm_gather_floats(const struct tr_comm *c, const float *mine, float *all, const int *counts,
                          const int *displs, struct tr_diag *d);
/* The rate the ranks sum floats at, as the gradients are (a reduce-scatter then an all-gather
 * over equal parts): bus bytes a second — 2 (world − 1) / world of the bytes summed, over the
 * fastest of a few sums of 8 MiB — measured here, every rank taking part; 0 alone. A ring moves
 * that many bytes in and out of each rank, so a sum of B bytes takes 2 (world − 1) / world · B
 * over it. *latency: the seconds one small sum (1 KiB) takes, its messages' cost whatever their
 * size — the fastest of a few, the slowest rank's: what each of tensor parallelism's many sums
 * pays beside its bytes. */
int tr_comm_bus_rate(const struct tr_comm *c, double *bytes_per_second, double *latency, struct tr_diag *d);
/* Every rank's value, into all[0 … world − 1] on every rank. */
int tr_comm_gather(const struct tr_comm *c, uint64_t mine, uint64_t *all, struct tr_diag *d);
/* Every rank's n doubles, rank by rank, into all[0 … world·n − 1] on every rank. */
int tr_comm_gather_doubles(const struct tr_comm *c, const double *mine, int n, double *all, struct tr_diag *d);

#endif
