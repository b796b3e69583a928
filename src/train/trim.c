/* Cutting a resumed run's appended files back to its checkpoint (trim.h). */
#include "train/trim.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The bytes in metrics.jsonl, flushed: its size (ftell may say 0 for a file opened to append
 * before the first write, which would cut it to nothing). */
static json_t *metrics_size(FILE *metrics)
{
    struct stat st;
    return metrics && !fflush(metrics) && !fstat(fileno(metrics), &st) ? json_integer((json_int_t)st.st_size)
                                                                        : json_null();
}

json_t *tr_trim_mark(const struct tr_run_folder *f, int64_t step)
{
    int64_t events = tr_events_written(&f->events);
    const char *name = strrchr(f->events.path.s, '/');
    return json_pack("{sI so so so}", "step", (json_int_t)step, "metrics_bytes", metrics_size(f->metrics),
                     "events_file", events >= 0 && name ? json_string(name + 1) : json_null(),
                     "events_bytes", events >= 0 ? json_integer(events) : json_null());
}

/* The mark run.json keeps for the checkpoint of step, or NULL when its last one is another's
 * (written just before a checkpoint that never made it, or one since found damaged). */
static json_t *mark_of(const char *dir, int64_t step)
{
    struct tr_path path;
    if (tr_path_set(&path, NULL, "%s/run.json", dir))
        return NULL;
    json_t *record = json_load_file(path.s, 0, NULL);
    json_t *mark = json_object_get(record, "checkpointed");
    if (json_integer_value(json_object_get(mark, "step")) != step || !json_is_integer(json_object_get(mark, "step")))
        mark = NULL;
    json_incref(mark);
    json_decref(record);
    return mark;
}

/* How many bytes of metrics.jsonl to keep: whole lines, up to keep bytes (-1: any), each a JSON
 * object whose step is at most last_step. */
static long metrics_wanted(FILE *in, long keep, int64_t last_step)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    long at = 0;
    while ((n = getline(&line, &cap, in)) > 0 && line[n - 1] == '\n' && (keep < 0 || at + n <= keep)) {
        json_t *j = json_loads(line, 0, NULL);
        json_t *step = json_object_get(j, "step");
        bool wanted = json_is_integer(step) && json_integer_value(step) <= last_step;
        json_decref(j);
        if (!wanted)
            break;
        at += (long)n;
    }
    free(line);
    return at;
}

static int trim_metrics(struct tr_run_folder *f, long keep, int64_t last_step, struct tr_diag *d)
{
    struct tr_path path;
    if (!f->metrics || tr_path_set(&path, d, "%s/metrics.jsonl", f->dir.s))
        return f->metrics ? TR_EINVAL : 0;
    FILE *in = fopen(path.s, "r");
    if (!in)
        return tr_fail(d, TR_EIO, "cannot read %s: %s", path.s, strerror(errno));
    long cut = metrics_wanted(in, keep, last_step);
    fseek(in, 0, SEEK_END);
    long size = ftell(in);
    fclose(in);
    fflush(f->metrics);   /* appended to: each write goes to the new end */
    if (cut < size && (ftruncate(fileno(f->metrics), cut) || fsync(fileno(f->metrics))))
        return tr_fail(d, TR_EIO, "cannot cut back %s: %s", path.s, strerror(errno));
    return 0;
}

static int trim_events(const char *dir, const json_t *mark, int64_t last_step, struct tr_diag *d)
{
    DIR *folder = opendir(dir);
    if (!folder)
        return tr_fail(d, TR_EIO, "cannot read %s: %s", dir, strerror(errno));
    const char *marked = json_string_value(json_object_get(mark, "events_file"));
    json_t *bytes = json_object_get(mark, "events_bytes");
    int rc = 0;
    struct dirent *e;
    while (!rc && (e = readdir(folder))) {
        struct tr_path path;
        if (strncmp(e->d_name, "events.out.tfevents.", 20) || (rc = tr_path_set(&path, d, "%s/%s", dir, e->d_name)))
            continue;
        int64_t keep = marked && !strcmp(marked, e->d_name) && json_is_integer(bytes) ? json_integer_value(bytes) : -1;
        rc = tr_events_trim(path.s, keep, last_step, d);
    }
    closedir(folder);
    return rc;
}

int tr_trim_after(struct tr_run_folder *f, int64_t step, struct tr_diag *d)
{
    json_t *mark = mark_of(f->dir.s, step);
    json_t *metrics = json_object_get(mark, "metrics_bytes");
    int rc = trim_metrics(f, json_is_integer(metrics) ? (long)json_integer_value(metrics) : -1, step, d);
    if (!rc)
        rc = trim_events(f->dir.s, mark, step, d);
    json_decref(mark);
    return rc;
}
