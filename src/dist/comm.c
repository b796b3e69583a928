/* Ranks and their collectives over MPI (comm.h), MPI's calls in trainrun-mpi.so (mpi.h), loaded
 * when more than one rank runs. */
#include "dist/comm.h"

#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "dist/mpi.h"

/* The variables each launcher sets, in the order they are believed: MPI's own first. Slurm's
 * SLURM_NTASKS is the allocation's, set in a batch script's one process too; srun's steps
 * have SLURM_STEP_NUM_TASKS. */
static const struct launcher {
    const char *name, *world, *rank, *local, *local_world;
} launchers[] = {
    {"mpirun", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"mpirun (PMI)", "PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"srun", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_LOCALID", NULL},
    {"torchrun", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
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
    _Atomic int64_t step;
    atomic_bool armed;
    const char *_Atomic what;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stop;
};

/* Rank 0 asks for ASK_SECONDS; a rank that timed out answers for ANSWER_SECONDS before it ends
 * (until rank 0 has asked and had ASK_SECONDS more to write its run folder), so that its ending
 * (the launcher then ends the others) does not cut rank 0's record short. */
#define ASK_SECONDS 2.0
#define ANSWER_SECONDS 3.5

/* A rank other than 0: rank 0's question answered, if it asked — the seconds this rank has waited
 * in a collective, or −1. Whether it asked. */
static bool answer(struct tr_comm_watch *w)
{
    double since = atomic_load(&w->since);
    int asked = 0;
    w->comm->mpi->watch_answer(since > 0 ? tr_now() - since : -1, &asked);
    return asked != 0;
}

/* "1, 3": the ranks k > 0 of state that did not answer (silent: NaN), or that answered from
 * outside a collective (−1); n counts them. */
static void list_ranks(const double *state, int world, bool silent, char *out, size_t size, int *n)
{
    size_t used = 0;
    *n = 0, *out = '\0';
    for (int k = 1; k < world && used < size; k++)
        if ((isnan(state[k]) != 0) == silent && (silent || state[k] < 0)) {
            int wrote = snprintf(out + used, size - used, "%s%d", *n ? ", " : "", k);
            used += wrote > 0 ? (size_t)wrote : 0;
            (*n)++;
        }
}

/* Rank 0: every other rank asked where it is; t says who did not answer and who was not waiting. */
static void ask(const struct tr_comm *c, struct tr_comm_timeout *t)
{
    double *state = tr_xcalloc((size_t)c->world, sizeof *state);
    int err = c->mpi->watch_ask(ASK_SECONDS, state), silent = 0, busy = 0;
    char busy_ranks[256];
    if (err) {
        snprintf(t->said, sizeof t->said, "the other ranks could not be asked where they are");
    } else {
        list_ranks(state, c->world, true, t->silent, sizeof t->silent, &silent);
        list_ranks(state, c->world, false, busy_ranks, sizeof busy_ranks, &busy);
        if (busy)
            snprintf(t->said, sizeof t->said, "rank%s %s answered outside any collective (still computing: a slow "
                     "or hung device)", busy > 1 ? "s" : "", busy_ranks);
        else if (!silent)
            snprintf(t->said, sizeof t->said, "every rank answered, waiting in a collective (the ranks called "
                     "different ones)");
    }
    free(state);
}

static void timed_out(struct tr_comm_watch *w, double waited)
{
    const struct tr_comm *c = w->comm;
    struct tr_comm_timeout t = {.what = atomic_load(&w->what), .waited = waited, .step = atomic_load(&w->step)};
    if (c->multiple && c->rank == 0) {
        ask(c, &t);
    } else if (c->multiple) {
        double until = tr_now() + ANSWER_SECONDS;
        for (; tr_now() < until; usleep(20000))
            if (answer(w))
                until = tr_now() + ASK_SECONDS + 1;
    }
    w->on_timeout(c, &t);
}

/* Looks at the collective in progress a few times a timeout (at least once a second), and answers
 * rank 0's questions. */
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
        if (!w->stop && w->comm->multiple && w->comm->rank)
            answer(w);
        double since = atomic_load(&w->since);
        if (!w->stop && since > 0 && tr_now() - since > w->timeout)
            timed_out(w, tr_now() - since);
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

void tr_comm_watch_step(const struct tr_comm *c, int64_t step)
{
    if (c->watch)
        atomic_store(&c->watch->step, step);
}

/* Around each collective: the watchdog times what is between, while armed. */
static void waiting(const struct tr_comm *c, const char *what)
{
    struct tr_comm_watch *w = c->whole ? c->whole->watch : c->watch;
    if (w && atomic_load(&w->armed)) {
        atomic_store(&w->what, what);
        atomic_store(&w->since, tr_now());
    }
}

static void answered(const struct tr_comm *c)
{
    struct tr_comm_watch *w = c->whole ? c->whole->watch : c->watch;
    if (w)
        atomic_store(&w->since, 0.0);
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

/* ---- MPI, loaded ----------------------------------------------------------------------------- */

/* trainrun-mpi.so beside the binary (a build tree), else where `make install` put it. */
static const struct tr_mpi_ops *load_mpi(void **handle, char *why, size_t size)
{
    char self[PATH_MAX], path[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    const char *places[2] = {NULL, PKGLIBEXECDIR "/trainrun-mpi.so"};
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        snprintf(path, sizeof path, "%s/trainrun-mpi.so", self);
        places[0] = path;
    }
    snprintf(why, size, "trainrun-mpi.so is not built, configure having found no libopenmpi-dev");
    for (int i = 0; i < 2; i++) {
        if (!places[i] || access(places[i], F_OK))
            continue;
        *handle = dlopen(places[i], RTLD_NOW | RTLD_LOCAL);
        const struct tr_mpi_ops *ops = *handle ? dlsym(*handle, TR_MPI_OPS_SYMBOL) : NULL;
        if (ops && ops->version == TR_MPI_OPS_VERSION)
            return ops;
        if (ops)
            snprintf(why, size, "%s is from another build of trainrun (its table is version %d, not %d)", places[i],
                     ops->version, TR_MPI_OPS_VERSION);
        else
            snprintf(why, size, "%s cannot be loaded: %s", places[i], dlerror());
        if (*handle)
            dlclose(*handle);
        *handle = NULL;
    }
    return NULL;
}

static int mpi_failed(const struct tr_comm *c, struct tr_diag *d, int err, const char *what)
{
    char text[256] = "";
    c->mpi->error_string(err, text, sizeof text);
    return tr_fail(d, TR_EFAIL, "%s: %s", what, text);
}

/* ---- ranks ------------------------------------------------------------------------------------ */

static int open_ranks(struct tr_comm *c, struct tr_diag *d);

int tr_comm_open(struct tr_comm *c, struct tr_diag *d)
{
    int rc = open_ranks(c, d);
    if (rc)   /* refused: alone from here, whatever the variables said (MPI stays to be finished) */
        c->rank = 0, c->world = 1, c->local_world = 1;
    return rc;
}

static int open_ranks(struct tr_comm *c, struct tr_diag *d)
{
    *c = (struct tr_comm){.world = 1, .local_world = 1};
    for (size_t i = 0; i < sizeof launchers / sizeof launchers[0]; i++) {
        int world = env_number(launchers[i].world), rank = env_number(launchers[i].rank);
        if (world < 1 || rank < 0)
            continue;
        if (rank >= world)
            return tr_fail(d, TR_EINVAL, "%s=%d is not below %s=%d", launchers[i].rank, rank, launchers[i].world,
                           world);
        int local = env_number(launchers[i].local), here = env_number(launchers[i].local_world);
        *c = (struct tr_comm){.rank = rank, .world = world, .local_rank = local < 0 ? 0 : local,
                              .local_world = here < 1 ? world : here};
        snprintf(c->launcher, sizeof c->launcher, "%s", launchers[i].name);
        break;
    }
    if (c->world == 1)
        return 0;
    char why[PATH_MAX + 128];
    const struct tr_mpi_ops *mpi = load_mpi(&c->plugin, why, sizeof why);
    if (!mpi)
        return tr_fail(d, TR_EINVAL, "started as rank %d of %d by %s, but %s: install libopenmpi-dev and run "
                       "./configure again (it says \"MPI: yes\"), or run one process", c->rank, c->world,
                       c->launcher, why);
    int rank = 0, world = 1, threads = 0, err = mpi->init(&rank, &world, &threads);
    c->threads = threads >= 1;
    c->mpi = mpi;
    c->agreed = tr_xcalloc((size_t)c->world, sizeof *c->agreed);
    if (err)
        return mpi_failed(c, d, err, "MPI_Init_thread");
    if (world != c->world || rank != c->rank)
        return tr_fail(d, TR_EINVAL, "%s says rank %d of %d, but MPI sees rank %d of %d: trainrun's ranks talk "
                       "over MPI, so launch them with mpirun -np %d or srun, not %s", c->launcher, c->rank, c->world,
                       rank, world, c->world, c->launcher);
    /* the watchdog's questions and ZeRO 3's copies (every rank: communicators of their own, where
     * MPI lets any thread call it) */
    if (threads >= 2 && ((err = mpi->watch_open()) || (err = mpi->copies_open())))
        return mpi_failed(c, d, err, "MPI_Comm_dup");
    c->multiple = threads >= 2;
    return 0;
}

void tr_comm_describe(char *out, size_t size)
{
    void *handle = NULL;
    char why[PATH_MAX + 128], version[160] = "";
    const struct tr_mpi_ops *mpi = load_mpi(&handle, why, sizeof why);
    if (!mpi) {
        snprintf(out, size, "one process (%s)", why);
        return;
    }
    mpi->library_version(version, sizeof version);
    snprintf(out, size, "across processes over MPI (%s): mpirun -np N or srun", version);
    dlclose(handle);
}

void tr_comm_close(struct tr_comm *c)
{
    if (c->whole) {   /* MPI's communicator goes with MPI_Finalize */
        if (c->agreed != NULL)
            free(c->agreed);
        c->agreed = NULL, c->mpi = NULL;
        return;
    }
    watch_stop(c);
    if (c->multiple)
        c->mpi->watch_close(), c->mpi->copies_close();
    c->multiple = false;
    if (c->mpi)
        c->mpi->finalize();
    c->mpi = NULL;
    free(c->agreed);
    c->agreed = NULL;
    /* trainrun-mpi.so stays loaded: MPI's libraries keep threads and handlers past MPI_Finalize */
}

int tr_comm_split(const struct tr_comm *c, int color, int key, struct tr_comm *part, struct tr_diag *d)
{
    *part = *c;
    part->whole = c, part->agreed = NULL, part->watch = NULL;
    if (c->world == 1)
        return 0;
    int err = c->mpi->split(c->handle, color, key, &part->handle, &part->rank, &part->world);
    if (err)
        return mpi_failed(c, d, err, "MPI_Comm_split");
    part->agreed = tr_xcalloc((size_t)part->world, sizeof *part->agreed);
    return 0;
}

int tr_comm_send(const struct tr_comm *c, const void *buf, size_t bytes, int to, int tag, struct tr_comm_request *r,
                 struct tr_diag *d)
{
    r->mpi = NULL;
    if (bytes > INT_MAX)
        return tr_fail(d, TR_EFAIL, "sending %zu bytes: more than one message holds", bytes);
    int err = c->mpi->isend(c->handle, buf, (int)bytes, to, tag, &r->mpi);
    return err ? mpi_failed(c, d, err, "MPI_Isend") : 0;
}

int tr_comm_sent(const struct tr_comm *c, struct tr_comm_request *r, struct tr_diag *d)
{
    if (!r->mpi)
        return 0;
    waiting(c, "sending to the next stage");
    int err = c->mpi->wait(r->mpi);
    answered(c);
    r->mpi = NULL;
    return err ? mpi_failed(c, d, err, "MPI_Wait") : 0;
}

int tr_comm_recv(const struct tr_comm *c, void *buf, size_t bytes, int from, int tag, const char *what,
                 struct tr_diag *d)
{
    if (bytes > INT_MAX)
        return tr_fail(d, TR_EFAIL, "receiving %zu bytes: more than one message holds", bytes);
    int got = 0;
    waiting(c, what);
    int err = c->mpi->recv(c->handle, buf, (int)bytes, from, tag, &got);
    answered(c);
    if (err)
        return mpi_failed(c, d, err, "MPI_Recv");
    if ((size_t)got != bytes)
        return tr_fail(d, TR_EFAIL, "%s: %d bytes came from rank %d, %zu were expected (the ranks disagree on the "
                       "micro-batch's shape)", what, got, from, bytes);
    return 0;
}

/* ---- collectives ------------------------------------------------------------------------------ */

int tr_comm_agree(const struct tr_comm *c, int rc, const char *what, struct tr_diag *d)
{
    if (c->world == 1)
        return rc;
    int *all = c->agreed, mine = rc;   /* made once at the start: agreeing runs twice a step */
    waiting(c, what);
    int err = c->mpi->allgather_ints(c->handle, &mine, all);
    answered(c);
    if (err)
        return rc ? rc : mpi_failed(c, d, err, what);
    for (int r = 0; r < c->world && !rc; r++)
        if (all[r])
            rc = tr_fail(d, all[r], "rank %d of %d failed %s (its own output says why)", r, c->world, what);
    return rc;
}

int tr_comm_broadcast(const struct tr_comm *c, void *buf, size_t bytes, struct tr_diag *d)
{
    for (size_t at = 0; c->world > 1 && at < bytes; at += INT_MAX / 2) {
        size_t n = bytes - at < INT_MAX / 2 ? bytes - at : INT_MAX / 2;
        waiting(c, "receiving rank 0's");
        int err = c->mpi->broadcast(c->handle, (char *)buf + at, (int)n);
        answered(c);
        if (err)
            return mpi_failed(c, d, err, "MPI_Bcast");
    }
    return 0;
}

/* MPI_Allreduce SUM in place, in pieces an int counts. */
static int sum(const struct tr_comm *c, void *buf, size_t n, size_t size, enum tr_mpi_type type, struct tr_diag *d)
{
    for (size_t at = 0; c->world > 1 && at < n; at += INT_MAX / 8) {
        size_t k = n - at < INT_MAX / 8 ? n - at : INT_MAX / 8;
        waiting(c, "summing over the ranks");
        int err = c->mpi->sum(c->handle, (char *)buf + at * size, (int)k, type);
        answered(c);
        if (err)
            return mpi_failed(c, d, err, "MPI_Allreduce");
    }
    return 0;
}

int tr_comm_sum_floats(const struct tr_comm *c, float *buf, size_t n, struct tr_diag *d)
{
    return sum(c, buf, n, sizeof *buf, TR_MPI_FLOAT, d);
}

int tr_comm_sum_doubles(const struct tr_comm *c, double *buf, size_t n, struct tr_diag *d)
{
    return sum(c, buf, n, sizeof *buf, TR_MPI_DOUBLE, d);
}

int tr_comm_gather(const struct tr_comm *c, uint64_t mine, uint64_t *all, struct tr_diag *d)
{
    all[0] = mine;
    if (c->world == 1)
        return 0;
    waiting(c, "gathering the parameters' hashes");
    int err = c->mpi->allgather_u64(c->handle, &mine, all);
    answered(c);
    return err ? mpi_failed(c, d, err, "MPI_Allgather") : 0;
}

int tr_comm_gather_doubles(const struct tr_comm *c, const double *mine, int n, double *all, struct tr_diag *d)
{
    memcpy(all, mine, (size_t)n * sizeof *all);
    if (c->world == 1)
        return 0;
    waiting(c, "gathering the ranks' times");
    int err = c->mpi->allgather_doubles(c->handle, mine, n, all);
    answered(c);
    return err ? mpi_failed(c, d, err, "MPI_Allgather") : 0;
}

int tr_comm_reduce_scatter(const struct tr_comm *c, float *buf, const int *counts, const int *displs,
                           struct tr_diag *d)
{
    if (c->world == 1)
        return 0;
    waiting(c, "summing over the ranks");
    int err = c->mpi->reduce_scatter(c->handle, buf, counts, displs);
    answered(c);
    return err ? mpi_failed(c, d, err, "MPI_Reduce_scatter") : 0;
}

int tr_comm_allgather(const struct tr_comm *c, float *buf, const int *counts, const int *displs, struct tr_diag *d)
{
    if (c->world == 1)
        return 0;
    waiting(c, "gathering the ranks' shards");
    int err = c->mpi->allgather_floats(c->handle, buf, counts, displs);
    answered(c);
    return err ? mpi_failed(c, d, err, "MPI_Allgatherv") : 0;
}

int tr_comm_reduce_scatter_block(const struct tr_comm *c, const float *in, float *out, size_t n, struct tr_diag *d)
{
    if (c->world == 1) {
        memmove(out, in, n * sizeof *out);
        return 0;
    }
    waiting(c, "summing a part of the sequence");
    int err = c->mpi->reduce_scatter_block(c->handle, in, out, (int)n);
    answered(c);
    return err ? mpi_failed(c, d, err, "MPI_Reduce_scatter_block") : 0;
}

int tr_comm_allgather_bytes(const struct tr_comm *c, const void *mine, void *all, size_t bytes, struct tr_diag *d)
{
    if (c->world == 1) {
        memmove(all, mine, bytes);
        return 0;
    }
    waiting(c, "gathering the sequence's parts");
    int err = c->mpi->allgather_bytes(c->handle, mine, all, (int)bytes);
    answered(c);
    return err ? mpi_failed(c, d, err, "MPI_Allgather") : 0;
}

int tr_comm_allgather_copy(const struct tr_comm *c, float *buf, const int *counts, const int *displs,
                           struct tr_diag *d)
{
    int err = c->world == 1 ? 0 : c->mpi->allgather_copy(buf, counts, displs);   /* timed by its waiter */
    return err ? mpi_failed(c, d, err, "MPI_Allgatherv") : 0;
}

void tr_comm_waiting(const struct tr_comm *c, const char *what)
{
    waiting(c, what);
}

void tr_comm_answered(const struct tr_comm *c)
{
    answered(c);
}

int tr_comm_gather_floats(const struct tr_comm *c, const float *mine, float *all, const int *counts,
                          const int *displs, struct tr_diag *d)
{
    if (c->world == 1) {
        memmove(all, mine, (size_t)counts[0] * sizeof *all);
        return 0;
    }
    waiting(c, "gathering the ranks' optimizer state");
    int err = c->mpi->gather_floats(c->handle, mine, all, counts, displs);
    answered(c);
    return err ? mpi_failed(c, d, err, "MPI_Gatherv") : 0;
}

int tr_comm_bus_rate(const struct tr_comm *c, double *bytes_per_second, double *latency, struct tr_diag *d)
{
    *bytes_per_second = *latency = 0;
    if (c->world == 1)
        return 0;
    enum { FLOATS = 2 << 20, TRIES = 5 };
    float *buf = tr_xcalloc(FLOATS, sizeof *buf);
    int *counts = tr_xmalloc((size_t)c->world * 2 * sizeof *counts), *displs = counts + c->world;
    for (int k = 0; k < c->world; k++)
        displs[k] = (int)((int64_t)FLOATS * k / c->world), counts[k] = (int)((int64_t)FLOATS * (k + 1) / c->world) - displs[k];
    double best = 0;
    int rc = 0;
    for (int i = 0; i < TRIES && !rc; i++) {
        double began = tr_now();
        rc = tr_comm_reduce_scatter(c, buf, counts, displs, d);
        if (!rc)
            rc = tr_comm_allgather(c, buf, counts, displs, d);
        double took = tr_now() - began;
        best = i == 0 || took < best ? took : best;
    }
    enum { SMALL = 256, SUMS = 16 };
    double small = 0;
    for (int i = 0; i < TRIES && !rc; i++) {   /* a small sum's cost: its messages' latency */
        double began = tr_now();
        for (int k = 0; k < SUMS && !rc; k++)
            rc = tr_comm_sum_floats(c, buf, SMALL, d);
        double took = (tr_now() - began) / SUMS;
        small = i == 0 || took < small ? took : small;
    }
    double mine[2] = {best, small}, *all = tr_xcalloc((size_t)c->world * 2, sizeof *all);
    if (!rc)   /* the slowest rank's best: the sum waits for it */
        rc = tr_comm_gather_doubles(c, mine, 2, all, d);
    for (int k = 0; !rc && k < c->world; k++) {
        best = all[2 * k] > best ? all[2 * k] : best;
        small = all[2 * k + 1] > small ? all[2 * k + 1] : small;
    }
    if (!rc && best > 0)
        *bytes_per_second = 2.0 * (c->world - 1) / c->world * (double)FLOATS * sizeof(float) / best;
    if (!rc)
        *latency = small;
    free(buf), free(counts), free(all);
    return rc;
}
