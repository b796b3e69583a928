#include <jansson.h>
json_t *tr_environment(const char *recipe_sha256);
