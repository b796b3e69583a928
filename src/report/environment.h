/* Where a run ran (DESIGN.md §2, reporter): the host, its CPUs, memory and GPUs, and the
 * versions of every library trainrun is linked with, as one JSON object for the run report.
 * Each probe reads what the system offers; a file that is missing or says nothing gives null. */
#ifndef TR_ENVIRONMENT_H
#define TR_ENVIRONMENT_H

#include <jansson.h>

/* {"host", "os", "distribution", "cpu", "cpus", "threads", "memory_bytes", "gpus": [{"name",
 * "memory_bytes"}], "driver", "libraries": {name: version}, "trainrun", "recipe_sha256"};
 * recipe_sha256 NULL gives null there. A new reference, or NULL when out of memory. */
json_t *tr_environment(const char *recipe_sha256);

/* The value of the first line of the text file path that reads `key: value` or `key=value`
 * (blanks around the separator, quotes around the value dropped), as a malloc'd string; NULL
 * when the file cannot be read or has no such line. /proc/cpuinfo, /etc/os-release, … */
char *tr_environment_file_value(const char *path, const char *key);

#endif
