#include "report/environment.h"
#include "report/index.h"
json_t *tr_environment(const char *h) { return json_pack("{ss}", "recipe_sha256", h); }
int tr_runs_index_write(const char *d, char *e, size_t n) { (void)d; (void)e; (void)n; return 0; }
