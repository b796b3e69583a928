/* Which OpenBLAS kernels run. Debian's OpenBLAS is built for every x86 core and picks one when
 * it loads, from the CPU's family and model; a model it does not know gets the generic Prescott
 * (SSE3) kernels. OpenBLAS 0.3.21 does not know Emerald Rapids (family 6, model 207) and runs
 * its GEMMs there at a fifth of the speed (18 against 97 GFLOP/s on one core, sgemm 256³).
 * OPENBLAS_CORETYPE names the kernels instead, but only before the library loads, so when the
 * kernels chosen lack AVX2 on a CPU that has it, trainrun sets it and executes itself again. */
#include "core/blas.h"
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "backend/cpu/cpu.h"

/* OpenBLAS's x86 cores whose kernels use AVX2 and FMA or more. */
static int core_is_modern(const char *core)
{
    static const char *const modern[] = {"Haswell", "SkylakeX", "Cooperlake", "SapphireRapids",
                                         "Zen", "Excavator"};
    for (size_t i = 0; i < sizeof modern / sizeof modern[0]; i++)
        if (!strcasecmp(core, modern[i]))
            return 1;
    return 0;
}

/* The kernels this CPU can run best among those OpenBLAS 0.3.21 has, or NULL. */
static const char *core_for_this_cpu(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
#endif
    return NULL;
}

const char *tr_cpu_blas_core(void)
{
    return tr_blas.get_corename();
}

void tr_cpu_blas_pick_core(char **argv)
{
    const char *better = core_for_this_cpu();
    if (!better || getenv("OPENBLAS_CORETYPE") || core_is_modern(tr_blas.get_corename()))
        return;
    if (setenv("OPENBLAS_CORETYPE", better, 1) == 0)
        execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE");   /* no /proc: go on with the kernels OpenBLAS chose */
}
