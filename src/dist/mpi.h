/* MPI behind a table (comm.c loads it): the few calls trainrun makes, built into trainrun-mpi.so,
 * which links libmpi; the binary loads it with dlopen only when more than one rank runs. Linked
 * into the binary instead, Open MPI's libraries would have to be installed for any run and would
 * grow every one-process run's resident set past what the planner measured (tests/plan-matrix.sh
 * failed by up to 380 KB). Every entry returns 0 or MPI's error code, which error_string words. */
#ifndef TR_DIST_MPI_H
#define TR_DIST_MPI_H

#include <stddef.h>
#include <stdint.h>

/* Raised whenever the table changes: a plugin of another build is refused, not called wrongly. */
#define TR_MPI_OPS_VERSION 7

enum tr_mpi_type { TR_MPI_FLOAT, TR_MPI_DOUBLE };   /* what sum adds */

struct tr_mpi_ops {
    int version;                          /* TR_MPI_OPS_VERSION of the build that made it */
    /* threads: what MPI lets threads other than the main one do — 0 nothing; 1 call it one at a
     * time, as the gradients' communication thread does (dist/gradients.h); 2 call it at any
     * time, as the watchdog's questions below do; errors returned, not fatal */
    int (*init)(int *rank, int *world, int *threads);
    int (*finalize)(void);
    void (*library_version)(char *out, size_t size);
    void (*error_string)(int err, char *out, size_t size);
    int (*allgather_ints)(int comm, const int *mine, int *all);
    int (*allgather_u64)(int comm, const uint64_t *mine, uint64_t *all);
    int (*allgather_doubles)(int comm, const double *mine, int n, double *all);
    int (*broadcast)(int comm, void *buf, int bytes);           /* from rank 0 */
    int (*sum)(int comm, void *buf, int n, enum tr_mpi_type type);   /* in place */
    /* Floats over the ranks, each rank's part at displs[rank] of counts[rank] floats: summed, each
     * rank's part left at its place in buf (the rest of buf is then undefined); gathered from
     * each rank's place in buf into every rank's buf; gathered into rank 0's all (mine: this
     * rank's part, elsewhere than all). */
    int (*reduce_scatter)(int comm, float *buf, const int *counts, const int *displs);
    int (*allgather_floats)(int comm, float *buf, const int *counts, const int *displs);
    int (*gather_floats)(int comm, const float *mine, float *all, const int *counts, const int *displs);
    /* The watchdog's questions (dist/comm.c), on a communicator of their own, from its thread
     * while the main one may be stuck in a collective (threads 2). watch_open and watch_close:
     * every rank, once. watch_answer (a rank other than 0): whether rank 0 has asked, and if so
     * the answer, state (the seconds this rank has waited in a collective; −1: in none).
     * watch_ask (rank 0): every other rank asked, state[k] what rank k answered within seconds
     * (NaN: nothing). */
    int (*watch_open)(void);
    int (*watch_answer)(double state, int *asked);
    int (*watch_ask)(double seconds, double *state);
    int (*watch_close)(void);
    /* ZeRO 3's copies gathered a block ahead, from a thread of their own (threads 2): on a
     * communicator of their own (copies_open, copies_close: every rank, once), so that they
     * never cross the main thread's collectives; allgather_copy as allgather_floats. */
    int (*copies_open)(void);
    int (*allgather_copy)(float *buf, const int *counts, const int *displs);
    int (*copies_close)(void);
    /* comm: which communicator the collectives above run on — 0 every rank's (MPI_COMM_WORLD),
     * others made by split: the ranks of comm with the same color, ordered by key (this rank's
     * place and their count in rank and size). Point to point on one, bytes at a time: isend
     * begins a send (*request: what wait ends), recv waits for one (*got: its bytes). */
    int (*split)(int comm, int color, int key, int *out, int *rank, int *size);
    int (*isend)(int comm, const void *buf, int bytes, int to, int tag, void **request);
    int (*wait)(void *request);
    int (*recv)(int comm, void *buf, int bytes, int from, int tag, int *got);
    /* Sequence parallelism's: each rank's n floats summed over the ranks, rank k left with part k
     * of the sum in out (in holds world parts of n, one after the other); each rank's `bytes`
     * bytes put together into every rank's all, rank k's at k·bytes. */
    int (*reduce_scatter_block)(int comm, const float *in, float *out, int n);
    int (*allgather_bytes)(int comm, const void *mine, void *all, int bytes);
};

/* The symbol comm.c looks up in trainrun-mpi.so. */
#define TR_MPI_OPS_SYMBOL "tr_mpi_ops"

#endif
