/* The one map from the library's error codes (core/error.h) to trainrun's exit statuses
 * (exit.h, trainrun(1)): library code never chooses a status. */
#include "cli/exit.h"

#include "core/error.h"

int tr_exit_status(int err)
{
    switch ((enum tr_err)err) {
    case TR_OK: return TR_EXIT_OK;
    case TR_EINVAL: return TR_EXIT_USAGE;
    case TR_EIO: return TR_EXIT_FAILURE;
    case TR_ENOMEM: return TR_EXIT_FAILURE;
    case TR_ENOFIT: return TR_EXIT_NO_FIT;
    case TR_EDATA: return TR_EXIT_DATA;
    case TR_EDIVERGED: return TR_EXIT_DIVERGED;
    case TR_EREGRESSION: return TR_EXIT_REGRESSION;
    case TR_EUNCHANGED: return TR_EXIT_UNCHANGED;
    case TR_ELOCKED: return TR_EXIT_LOCKED;
    case TR_EINTERRUPTED: return TR_EXIT_INTERRUPTED;
    case TR_EFAIL: return TR_EXIT_FAILURE;
    case TR_ETIMEUP: return TR_EXIT_TIME_LIMIT;
    }
    return TR_EXIT_FAILURE;
}
