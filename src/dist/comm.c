/* Ranks and their collectives over MPI (comm.h). */
#include "config.h"

#include "dist/comm.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef HAVE_MPI
#include <mpi.h>
#endif

#include "core/alloc.h"

/* The variables each launcher sets, in the order they are believed: MPI's own first. Slurm's
 * SLURM_NTASKS is the allocation's, set in a batch script's one process too; srun's steps
 * have SLURM_STEP_NUM_TASKS. */
static const struct launcher {
    const char *name, *world, *rank, *local;
} launchers[] = {
    {"mpirun", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"mpirun (PMI)", "PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID"},
    {"srun", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_LOCALID"},
    {"torchrun", "WORLD_SIZE", "RANK", "LOCAL_RANK"},
};

/* A variable's whole number ≥ 0, or −1 when unset or not one. */
static int env_number(const char *name)
{
    const char *s = name ? getenv(name) : NULL;
    if (!s || !*s)
        return -1;
    char *end;
    long v = strtol(s, &end, 10);
    return *end || v < 0 || v > INT_MAX ? -1 : (int)v;
}

/* ---- the watchdog --------------------------------------------------------------------------- */

struct tr_comm_watch {
    const struct tr_comm *comm;
    double timeout;
    tr_comm_timeout_fn on_timeout;
    _Atomic double since;            /* when the collective in progress began; 0: none */
    atomic_bool armed;
    const char *_Atomic what;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stop;
};

static double monotonic(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Looks at the collective in progress a few times a timeout (at least once a second). */
static void *watch(void *arg)
{
    struct tr_comm_watch *w = arg;
    double every = w->timeout / 4 < 1 ? w->timeout / 4 : 1;
    pthread_mutex_lock(&w->lock);
    while (!w->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        double at = (double)until.tv_nsec * 1e-9 + every;
        until.tv_sec += (time_t)at;
        until.tv_nsec = (long)((at - (double)(time_t)at) * 1e9);
        pthread_cond_timedwait(&w->wake, &w->lock, &until);
        double since = atomic_load(&w->since);
        if (!w->stop && since > 0 && monotonic() - since > w->timeout)
            w->on_timeout(w->comm, atomic_load(&w->what), monotonic() - since);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

void tr_comm_watch(struct tr_comm *c, double timeout, tr_comm_timeout_fn on_timeout)
{
    if (c->world == 1 || timeout <= 0 || c->watch)
        return;
    struct tr_comm_watch *w = tr_xcalloc(1, sizeof *w);
    *w = (struct tr_comm_watch){.comm = c, .timeout = timeout, .on_timeout = on_timeout};
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
    if (pthread_create(&w->thread, NULL, watch, w)) {   /* no watchdog: waits are as MPI's */
        free(w);
        return;
    }
    c->watch = w;
}

void tr_comm_watch_arm(const struct tr_comm *c, bool armed)
{
    if (c->watch)
        atomic_store(&c->watch->armed, armed);
}

/* Around each collective: the watchdog times what is between, while armed. */
static void waiting(const struct tr_comm *c, const char *what)
{
    if (c->watch && atomic_load(&c->watch->armed)) {
        atomic_store(&c->watch->what, what);
        atomic_store(&c->watch->since, monotonic());
    }
}

static void answered(const struct tr_comm *c)
{
    if (c->watch)
        atomic_store(&c->watch->since, 0.0);
}

static void watch_stop(struct tr_comm *c)
{
    struct tr_comm_watch *w = c->watch;
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stop = true;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->wake);
    free(w);
    c->watch = NULL;
}

#ifdef HAVE_MPI
static int mpi_failed(struct tr_diag *d, int err, const char *what)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int n = 0;
    MPI_Error_string(err, text, &n);
    return tr_fail(d, TR_EFAIL, "%s: %s", what, text);
}
#endif

static int open_ranks(struct tr_comm *c, struct tr_diag *d);

int tr_comm_open(struct tr_comm *c, struct tr_diag *d)
{
    int rc = open_ranks(c, d);
    if (rc)   /* refused: alone from here, whatever the variables said (MPI stays to be finished) */
        c->rank = 0, c->world = 1;
    return rc;
}

static int open_ranks(struct tr_comm *c, struct tr_diag *d)
{
    *c = (struct tr_comm){.world = 1};
    for (size_t i = 0; i < sizeof launchers / sizeof launchers[0]; i++) {
        int world = env_number(launchers[i].world), rank = env_number(launchers[i].rank);
        if (world < 1 || rank < 0)
            continue;
        if (rank >= world)
            return tr_fail(d, TR_EINVAL, "%s=%d is not below %s=%d", launchers[i].rank, rank, launchers[i].world,
                           world);
        int local = env_number(launchers[i].local);
        *c = (struct tr_comm){.rank = rank, .world = world, .local_rank = local < 0 ? 0 : local};
        snprintf(c->launcher, sizeof c->launcher, "%s", launchers[i].name);
        break;
    }
    if (c->world == 1)
        return 0;
#ifndef HAVE_MPI
    return tr_fail(d, TR_EINVAL, "started as rank %d of %d by %s, but this trainrun was built without MPI: "
                   "install libopenmpi-dev and run ./configure again (it says \"MPI: yes\"), or run one process",
                   c->rank, c->world, c->launcher);
#else
    int provided = 0, err = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (err != MPI_SUCCESS)
        return mpi_failed(d, err, "MPI_Init_thread");
    c->mpi = true;
    /* a failed collective returns its error, for a sentence, instead of aborting the job */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank = 0, world = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world != c->world || rank != c->rank)
        return tr_fail(d, TR_EINVAL, "%s says rank %d of %d, but MPI sees rank %d of %d: trainrun's ranks talk "
                       "over MPI, so launch them with mpirun -np %d or srun, not %s", c->launcher, c->rank, c->world,
                       rank, world, c->world, c->launcher);
    return 0;
#endif
}

void tr_comm_describe(char *out, size_t size)
{
#ifdef HAVE_MPI
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int n = 0;
    MPI_Get_library_version(version, &n);   /* callable before MPI starts */
    char *end = strpbrk(version, ",\n");
    if (end)
        *end = '\0';
    snprintf(out, size, "across processes over MPI (%s): mpirun -np N or srun", version);
#else
    snprintf(out, size, "one process (built without MPI: configure found no libopenmpi-dev)");
#endif
}

void tr_comm_close(struct tr_comm *c)
{
    watch_stop(c);
#ifdef HAVE_MPI
    if (c->mpi)
        MPI_Finalize();
#endif
    c->mpi = false;
}

int tr_comm_agree(const struct tr_comm *c, int rc, const char *what, struct tr_diag *d)
{
    if (c->world == 1)
        return rc;
#ifdef HAVE_MPI
    int *all = tr_xcalloc((size_t)c->world, sizeof *all), mine = rc, err;
    waiting(c, what);
    err = MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    answered(c);
    if (err != MPI_SUCCESS) {
        free(all);
        return rc ? rc : mpi_failed(d, err, what);
    }
    for (int r = 0; r < c->world && !rc; r++)
        if (all[r])
            rc = tr_fail(d, all[r], "rank %d of %d failed %s (its own output says why)", r, c->world, what);
    free(all);
#endif
    return rc;
}

int tr_comm_broadcast(const struct tr_comm *c, void *buf, size_t bytes, struct tr_diag *d)
{
#ifdef HAVE_MPI
    for (size_t at = 0; c->world > 1 && at < bytes; at += INT_MAX / 2) {
        size_t n = bytes - at < INT_MAX / 2 ? bytes - at : INT_MAX / 2;
        waiting(c, "receiving rank 0's");
        int err = MPI_Bcast((char *)buf + at, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
        answered(c);
        if (err != MPI_SUCCESS)
            return mpi_failed(d, err, "MPI_Bcast");
    }
#endif
    return 0;
}

#ifdef HAVE_MPI
/* MPI_Allreduce SUM in place, in pieces an int counts. */
static int sum(const struct tr_comm *c, void *buf, size_t n, size_t size, MPI_Datatype type, struct tr_diag *d)
{
    for (size_t at = 0; c->world > 1 && at < n; at += INT_MAX / 8) {
        size_t k = n - at < INT_MAX / 8 ? n - at : INT_MAX / 8;
        waiting(c, "summing over the ranks");
        int err = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + at * size, (int)k, type, MPI_SUM, MPI_COMM_WORLD);
        answered(c);
        if (err != MPI_SUCCESS)
            return mpi_failed(d, err, "MPI_Allreduce");
    }
    return 0;
}
#endif

int tr_comm_sum_floats(const struct tr_comm *c, float *buf, size_t n, struct tr_diag *d)
{
#ifdef HAVE_MPI
    return sum(c, buf, n, sizeof *buf, MPI_FLOAT, d);
#else
    return 0;
#endif
}

int tr_comm_sum_doubles(const struct tr_comm *c, double *buf, size_t n, struct tr_diag *d)
{
#ifdef HAVE_MPI
    return sum(c, buf, n, sizeof *buf, MPI_DOUBLE, d);
#else
    return 0;
#endif
}

int tr_comm_gather(const struct tr_comm *c, uint64_t mine, uint64_t *all, struct tr_diag *d)
{
    all[0] = mine;
#ifdef HAVE_MPI
    if (c->world > 1) {
        waiting(c, "gathering the parameters' hashes");
        int err = MPI_Allgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
        answered(c);
        if (err != MPI_SUCCESS)
            return mpi_failed(d, err, "MPI_Allgather");
    }
#endif
    return 0;
}

void tr_comm_abort(const struct tr_comm *c, int status)
{
#ifdef HAVE_MPI
    if (c->mpi && c->world > 1)
        MPI_Abort(MPI_COMM_WORLD, status);
#endif
}
