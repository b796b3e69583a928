/* trainrun-mpi.so: MPI's calls behind struct tr_mpi_ops (mpi.h), on MPI_COMM_WORLD (the watchdog's
 * questions on a copy of it). */
#include "dist/mpi.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The communicators the table's calls name by number: 0 is MPI_COMM_WORLD, the others split
 * from one (split). */
enum { MAX_COMMS = 64 };
static MPI_Comm comms[MAX_COMMS];
static int ncomms;

static int init(int *rank, int *world, int *threads)
{
    int provided = 0, err = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    if (err != MPI_SUCCESS)
        return err;
    *threads = provided >= MPI_THREAD_MULTIPLE ? 2 : provided >= MPI_THREAD_SERIALIZED ? 1 : 0;
    /* a failed collective returns its error, for a sentence, instead of aborting the job */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    comms[0] = MPI_COMM_WORLD, ncomms = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    return MPI_Comm_size(MPI_COMM_WORLD, world);
}

static int finalize(void)
{
    return MPI_Finalize();
}

static void library_version(char *out, size_t size)
{
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int n = 0;
    MPI_Get_library_version(version, &n);   /* callable before MPI starts */
    char *end = strpbrk(version, ",\n");
    if (end)
        *end = '\0';
    snprintf(out, size, "%s", version);
}

static void error_string(int err, char *out, size_t size)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int n = 0;
    MPI_Error_string(err, text, &n);
    snprintf(out, size, "%s", text);
}

static int allgather_ints(int comm, const int *mine, int *all)
{
    return MPI_Allgather(mine, 1, MPI_INT, all, 1, MPI_INT, comms[comm]);
}

static int allgather_u64(int comm, const uint64_t *mine, uint64_t *all)
{
    return MPI_Allgather(mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, comms[comm]);
}

static int allgather_doubles(int comm, const double *mine, int n, double *all)
{
    return MPI_Allgather(mine, n, MPI_DOUBLE, all, n, MPI_DOUBLE, comms[comm]);
}

static int broadcast(int comm, void *buf, int bytes)
{
    return MPI_Bcast(buf, bytes, MPI_BYTE, 0, comms[comm]);
}

static int sum(int comm, void *buf, int n, enum tr_mpi_type type)
{
    return MPI_Allreduce(MPI_IN_PLACE, buf, n, type == TR_MPI_DOUBLE ? MPI_DOUBLE : MPI_FLOAT, MPI_SUM, comms[comm]);
}

static int reduce_scatter(int comm, float *buf, const int *counts, const int *displs)
{
    int rank = 0, err = MPI_Comm_rank(comms[comm], &rank);
    if (!err)   /* in place: the input is all of buf, this rank's sum left at buf's start */
        err = MPI_Reduce_scatter(MPI_IN_PLACE, buf, counts, MPI_FLOAT, MPI_SUM, comms[comm]);
    if (!err && displs[rank])
        memmove(buf + displs[rank], buf, (size_t)counts[rank] * sizeof *buf);
    return err;
}

static int allgather_floats(int comm, float *buf, const int *counts, const int *displs)
{
    return MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, MPI_FLOAT, comms[comm]);
}

static int reduce_scatter_block(int comm, const float *in, float *out, int n)
{
    return MPI_Reduce_scatter_block(in, out, n, MPI_FLOAT, MPI_SUM, comms[comm]);
}

static int allgather_bytes(int comm, const void *mine, void *all, int bytes)
{
    return MPI_Allgather(mine, bytes, MPI_BYTE, all, bytes, MPI_BYTE, comms[comm]);
}

static int gather_floats(int comm, const float *mine, float *all, const int *counts, const int *displs)
{
    int rank = 0, err = MPI_Comm_rank(comms[comm], &rank);
    return err ? err : MPI_Gatherv(mine, counts[rank], MPI_FLOAT, all, counts, displs, MPI_FLOAT, 0, comms[comm]);
}

/* ---- communicators within one, and point to point ------------------------------------------ */

static int split(int comm, int color, int key, int *out, int *rank, int *size)
{
    if (ncomms == MAX_COMMS)
        return MPI_ERR_NO_MEM;
    MPI_Comm made = MPI_COMM_NULL;
    int err = MPI_Comm_split(comms[comm], color, key, &made);
    if (!err)
        err = MPI_Comm_set_errhandler(made, MPI_ERRORS_RETURN);
    if (!err)
        err = MPI_Comm_rank(made, rank);
    if (!err)
        err = MPI_Comm_size(made, size);
    if (!err)
        comms[*out = ncomms++] = made;
    return err;
}

static int isend(int comm, const void *buf, int bytes, int to, int tag, void **request)
{
    MPI_Request *r = malloc(sizeof *r);
    if (!r)
        return MPI_ERR_NO_MEM;
    int err = MPI_Isend(buf, bytes, MPI_BYTE, to, tag, comms[comm], r);
    if (err)
        free(r);
    else
        *request = r;
    return err;
}

static int wait(void *request)
{
    int err = MPI_Wait(request, MPI_STATUS_IGNORE);
    free(request);
    return err;
}

static int recv(int comm, void *buf, int bytes, int from, int tag, int *got)
{
    MPI_Status st;
    int err = MPI_Recv(buf, bytes, MPI_BYTE, from, tag, comms[comm], &st);
    return err ? err : MPI_Get_count(&st, MPI_BYTE, got);
}

/* ---- the watchdog's questions ---------------------------------------------------------------- */

static MPI_Comm watched = MPI_COMM_NULL;
static MPI_Request question = MPI_REQUEST_NULL;   /* a rank other than 0: rank 0's, when it asks */
static int asked_for;
enum { ASK = 1, TELL = 2 };

static int watch_open(void)
{
    int rank = 0, err = MPI_Comm_dup(MPI_COMM_WORLD, &watched);
    if (!err)
        err = MPI_Comm_set_errhandler(watched, MPI_ERRORS_RETURN);
    if (!err)
        err = MPI_Comm_rank(watched, &rank);
    return err || !rank ? err : MPI_Irecv(&asked_for, 1, MPI_INT, 0, ASK, watched, &question);
}

static int watch_answer(double state, int *asked)
{
    int flag = 0, err = question == MPI_REQUEST_NULL ? MPI_SUCCESS : MPI_Test(&question, &flag, MPI_STATUS_IGNORE);
    *asked = flag;
    if (err || !flag)
        return err;
    err = MPI_Send(&state, 1, MPI_DOUBLE, 0, TELL, watched);   /* a few bytes: sent at once */
    return err ? err : MPI_Irecv(&asked_for, 1, MPI_INT, 0, ASK, watched, &question);
}

static int watch_ask(double seconds, double *state)
{
    int world = 1, err = MPI_Comm_size(watched, &world), one = 1, left = world - 1;
    MPI_Request *sent = calloc((size_t)world, sizeof *sent);
    if (!sent)
        return MPI_ERR_NO_MEM;
    for (int k = 1; k < world && !err; k++) {
        state[k] = NAN;
        err = MPI_Isend(&one, 1, MPI_INT, k, ASK, watched, &sent[k]);
    }
    for (double until = MPI_Wtime() + seconds; !err && left > 0 && MPI_Wtime() < until;) {
        int flag = 0;
        MPI_Status st;
        err = MPI_Iprobe(MPI_ANY_SOURCE, TELL, watched, &flag, &st);
        double told = 0;
        if (!err && flag && !(err = MPI_Recv(&told, 1, MPI_DOUBLE, st.MPI_SOURCE, TELL, watched, MPI_STATUS_IGNORE))) {
            left -= isnan(state[st.MPI_SOURCE]) ? 1 : 0;
            state[st.MPI_SOURCE] = told;
        } else if (!err) {
            usleep(2000);
        }
    }
    for (int k = 1; k < world; k++)   /* a rank that never took its question: the process ends soon */
        if (sent[k] != MPI_REQUEST_NULL)
            MPI_Request_free(&sent[k]);
    free(sent);
    return err;
}

static int watch_close(void)
{
    if (question != MPI_REQUEST_NULL) {
        MPI_Cancel(&question);
        MPI_Wait(&question, MPI_STATUS_IGNORE);
    }
    return watched == MPI_COMM_NULL ? MPI_SUCCESS : MPI_Comm_free(&watched);
}

/* ---- ZeRO 3's copies -------------------------------------------------------------------------- */

static MPI_Comm copies = MPI_COMM_NULL;

static int copies_open(void)
{
    int err = MPI_Comm_dup(MPI_COMM_WORLD, &copies);
    return err ? err : MPI_Comm_set_errhandler(copies, MPI_ERRORS_RETURN);
}

static int allgather_copy(float *buf, const int *counts, const int *displs)
{
    return MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, MPI_FLOAT, copies);
}

static int copies_close(void)
{
    return copies == MPI_COMM_NULL ? MPI_SUCCESS : MPI_Comm_free(&copies);
}

const struct tr_mpi_ops tr_mpi_ops = {
    .version = TR_MPI_OPS_VERSION, .init = init, .finalize = finalize, .library_version = library_version, .error_string = error_string,
    .allgather_ints = allgather_ints, .allgather_u64 = allgather_u64, .allgather_doubles = allgather_doubles,
    .broadcast = broadcast, .sum = sum, .reduce_scatter = reduce_scatter, .allgather_floats = allgather_floats,
    .gather_floats = gather_floats, .watch_open = watch_open, .watch_answer = watch_answer, .watch_ask = watch_ask,
    .watch_close = watch_close, .copies_open = copies_open, .allgather_copy = allgather_copy,
    .copies_close = copies_close, .split = split, .isend = isend, .wait = wait, .recv = recv,
    .reduce_scatter_block = reduce_scatter_block, .allgather_bytes = allgather_bytes,
};
