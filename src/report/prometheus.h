/* The run's end as metrics for alerting: a Prometheus text-format file for node_exporter's
 * textfile collector (--collector.textfile.directory), one per recipe, rewritten whole
 * (atomically) when a run ends, from the report.json just written: status, exit code, key
 * metric, duration, throughput, memory, step time, each labelled with the recipe's name. By
 * default report.dir/NAME/trainrun.prom, or where report.prometheus says. */
#ifndef TR_REPORT_PROMETHEUS_H
#define TR_REPORT_PROMETHEUS_H

#include <jansson.h>

#include "core/error.h"

/* The text for report (report.json's object) of recipe, ended at unix time `ended`; the caller
 * frees it. */
char *tr_prometheus_text(const json_t *report, const char *recipe, double ended);
/* tr_prometheus_text into path, atomically. 0, or TR_EIO with the reason in d. */
int tr_prometheus_write(const char *path, const json_t *report, const char *recipe, double ended,
                        struct tr_diag *d);

#endif
