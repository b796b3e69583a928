/* Monitoring as DCGM does it: a low-rate sampler thread that reads, every interval, the host's CPU
 * utilisation and frequency and the process's resident set, and every GPU's utilisation, memory
 * used, power, temperature, SM clock and throttle reasons through NVML. NVML lives in the
 * driver, not the toolkit (which has only a stub): libnvidia-ml.so.1 is loaded at run time, and
 * where it is absent GPU monitoring is skipped with a note. The trainer takes the samples since
 * its last metrics line as their means (tr_monitor_take) and, at the end, a summary for run.json
 * whose throttling and heat the report warns about. */
#ifndef TR_REPORT_MONITOR_H
#define TR_REPORT_MONITOR_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define TR_MONITOR_GPUS 8

struct tr_monitor_gpu {
    double utilization;       /* percent of the interval a kernel ran */
    double memory_used;       /* bytes */
    double power;             /* watts */
    double temperature;       /* °C */
    double sm_clock;          /* MHz */
    uint64_t throttle;        /* NVML's clock event reasons, or-ed over the samples */
};

/* Means over the samples taken (n of them); a field not readable on this host is NAN. */
struct tr_monitor_means {
    int n;
    double cpu_utilization;   /* percent of all cores busy, the host's (/proc/stat) */
    double process_cores;     /* cores' worth of CPU time this process used (/proc/self/stat) */
    double cpu_mhz;           /* the cores' mean frequency (cpufreq, else /proc/cpuinfo) */
    double rss;               /* bytes */
    int gpus;
    struct tr_monitor_gpu gpu[TR_MONITOR_GPUS];
};

struct tr_monitor;

/* Starts the sampler at one sample every interval seconds (> 0). NULL when the thread cannot
 * start (then nothing is monitored). */
struct tr_monitor *tr_monitor_start(double interval);
/* The means of the samples since the last take (n 0 when none). */
void tr_monitor_take(struct tr_monitor *m, struct tr_monitor_means *out);
/* Stops the sampler and returns run.json's "monitor" object: the interval, the samples, what
 * one sample cost, the means over the run, the GPUs' peaks and throttle reasons in words, and
 * NVML's note. NULL for a NULL m. */
json_t *tr_monitor_stop(struct tr_monitor *m);
/* The words for NVML clock event reasons ("thermal slowdown (hardware), power cap"), into out. */
void tr_monitor_throttle_words(uint64_t reasons, char *out, size_t size);
/* Whether these reasons mean the GPU was held back by heat or its hardware (not by idling or
 * by the application's own clock setting): what the report warns about. */
bool tr_monitor_throttled(uint64_t reasons);

#endif
