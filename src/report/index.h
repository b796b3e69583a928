#include <stddef.h>
int tr_runs_index_write(const char *runs_dir, char *err, size_t errsize);
