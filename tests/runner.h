/* The end of a Check test program's main: run the suite, report, and exit with the failures. */
#ifndef TR_TESTS_RUNNER_H
#define TR_TESTS_RUNNER_H

#include <check.h>
#include <stdlib.h>

static inline int unit_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
