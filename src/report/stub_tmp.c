#include "report/index.h"
int tr_runs_index_write(const char *d, char *e, size_t n) { (void)d; (void)e; (void)n; return 0; }
