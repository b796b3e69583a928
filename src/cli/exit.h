/* The exit status a subcommand ends with (core/exit.h has the values): chosen here, in
 * src/cli/, and nowhere else — library code returns enum tr_err (core/error.h). */
#ifndef TR_CLI_EXIT_H
#define TR_CLI_EXIT_H

#include "core/exit.h"

/* The exit status for a library function's result: 0 for 0, the documented status for each
 * enum tr_err (core/error.h), 1 for anything else. */
int tr_exit_status(int err);

#endif
