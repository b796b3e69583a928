/* The CPU kernels' one way to fail (cpu.h, tr_cpu_fail): a bad input that shows only at run
 * time, said in the caller's diag. Below every kernel file and the table: they all use it, it
 * uses none of them. */
#include "backend/cpu/cpu.h"

int tr_cpu_fail(const struct tr_kernel_args *a, const char *fmt, ...)
{
    if (!a->diag)
        return TR_EINVAL;
    va_list ap;
    va_start(ap, fmt);
    int rc = tr_vfail(a->diag, TR_EINVAL, (struct tr_where){0}, fmt, ap);
    va_end(ap);
    return rc;
}
