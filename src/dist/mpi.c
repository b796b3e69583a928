/* trainrun-mpi.so: MPI's calls behind struct tr_mpi_ops (mpi.h), on MPI_COMM_WORLD. */
#include "dist/mpi.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>

static int init(int *rank, int *world, int *serialized)
{
    int provided = 0, err = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
    if (err != MPI_SUCCESS)
        return err;
    *serialized = provided >= MPI_THREAD_SERIALIZED;
    /* a failed collective returns its error, for a sentence, instead of aborting the job */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
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

static int allgather_ints(const int *mine, int *all)
{
    return MPI_Allgather(mine, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
}

static int allgather_u64(const uint64_t *mine, uint64_t *all)
{
    return MPI_Allgather(mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
}

static int allgather_doubles(const double *mine, int n, double *all)
{
    return MPI_Allgather(mine, n, MPI_DOUBLE, all, n, MPI_DOUBLE, MPI_COMM_WORLD);
}

static int broadcast(void *buf, int bytes)
{
    return MPI_Bcast(buf, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
}

static int sum(void *buf, int n, enum tr_mpi_type type)
{
    return MPI_Allreduce(MPI_IN_PLACE, buf, n, type == TR_MPI_DOUBLE ? MPI_DOUBLE : MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

static int reduce_scatter(float *buf, const int *counts, const int *displs)
{
    int rank = 0, err = MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!err)   /* in place: the input is all of buf, this rank's sum left at buf's start */
        err = MPI_Reduce_scatter(MPI_IN_PLACE, buf, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (!err && displs[rank])
        memmove(buf + displs[rank], buf, (size_t)counts[rank] * sizeof *buf);
    return err;
}

static int allgather_floats(float *buf, const int *counts, const int *displs)
{
    return MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, MPI_FLOAT, MPI_COMM_WORLD);
}

static int gather_floats(const float *mine, float *all, const int *counts, const int *displs)
{
    int rank = 0, err = MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return err ? err : MPI_Gatherv(mine, counts[rank], MPI_FLOAT, all, counts, displs, MPI_FLOAT, 0, MPI_COMM_WORLD);
}

const struct tr_mpi_ops tr_mpi_ops = {
    .version = TR_MPI_OPS_VERSION, .init = init, .finalize = finalize, .library_version = library_version, .error_string = error_string,
    .allgather_ints = allgather_ints, .allgather_u64 = allgather_u64, .allgather_doubles = allgather_doubles,
    .broadcast = broadcast, .sum = sum, .reduce_scatter = reduce_scatter, .allgather_floats = allgather_floats,
    .gather_floats = gather_floats,
};
