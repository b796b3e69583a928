/* Writing, verifying and loading checkpoints (checkpoint.h). */
#include "train/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/safetensors.h"
#include "data/sha256.h"

/* The tensors of a checkpoint, in a fixed order: parameters and state as the graph lists them,
 * then the optimizer's buffers ("optimizer.m.<name>", "optimizer.v.<name>" for AdamW,
 * "optimizer.momentum.<name>" for SGD). */
struct entries {
    struct tr_st_tensor *t;
    char **names;
    int n;
};

static void add(struct entries *e, const char *name, const struct tr_value *val, void *data)
{
    struct tr_st_tensor *t = &e->t[e->n];
    e->names[e->n] = tr_strdup(name);
    *t = (struct tr_st_tensor){.name = e->names[e->n], .dtype = TR_F32, .rank = val->shape.rank, .data = data};
    for (int d = 0; d < val->shape.rank; d++)
        t->shape[d] = val->shape.dim[d].k;
    t->bytes = (size_t)tr_dim_eval(tr_shape_numel(&val->shape), 1, 1) * sizeof(float);
    e->n++;
}

/* The entries' data are the host's views (tr_exec_host, tr_optim_host_state). */
static void list_entries(struct entries *e, struct tr_exec *x, struct tr_optim *o)
{
    float *state = tr_optim_host_state(o);
    const struct tr_graph *g = x->g;
    e->t = tr_xcalloc((size_t)g->nvalues * 3 + 1, sizeof *e->t);
    e->names = tr_xcalloc((size_t)g->nvalues * 3 + 1, sizeof *e->names);
    e->n = 0;
    int64_t total = 0, offset = 0;
    for (int v = 0; v < g->nvalues; v++) {
        if (g->values[v].kind == TR_PARAM || g->values[v].kind == TR_STATE)
            add(e, g->values[v].name, &g->values[v], tr_exec_host(x, v));
        if (g->values[v].kind == TR_PARAM)
            total += tr_dim_eval(tr_shape_numel(&g->values[v].shape), 1, 1);
    }
    for (int v = 0; v < g->nvalues && o->state_bytes; v++) {
        if (g->values[v].kind != TR_PARAM)
            continue;
        char name[128];
        if (o->kind == TR_OPT_ADAMW) {
            snprintf(name, sizeof name, "optimizer.m.%s", g->values[v].name);
            add(e, name, &g->values[v], state + offset);
            snprintf(name, sizeof name, "optimizer.v.%s", g->values[v].name);
            add(e, name, &g->values[v], state + total + offset);
        } else {
            snprintf(name, sizeof name, "optimizer.momentum.%s", g->values[v].name);
            add(e, name, &g->values[v], state + offset);
        }
        offset += tr_dim_eval(tr_shape_numel(&g->values[v].shape), 1, 1);
    }
}

static void free_entries(struct entries *e)
{
    for (int i = 0; i < e->n; i++)
        free(e->names[i]);
    free(e->names), free(e->t);
}

/* SHA-256 over each tensor's name (with its NUL) and bytes, in list order. */
static void checksum(const struct tr_st_tensor *t, int n, const void *const *data, char hex[65])
{
    struct tr_sha256 s;
    unsigned char digest[32];
    tr_sha256_init(&s);
    for (int i = 0; i < n; i++) {
        tr_sha256_update(&s, t[i].name, strlen(t[i].name) + 1);
        tr_sha256_update(&s, data ? data[i] : t[i].data, t[i].bytes);
    }
    tr_sha256_final(&s, digest);
    tr_sha256_hex(digest, hex);
}

int tr_checkpoint_write(const char *dir, struct tr_exec *x, struct tr_optim *o, int64_t step,
                        const char *recipe_name, const char *trainer_state, char *err, size_t errsize)
{
    if (tr_exec_pull(x, TR_PARAM))
        return snprintf(err, errsize, "%s", x->error), TR_EINVAL;
    if (tr_optim_pull(o))
        return snprintf(err, errsize, "%s", o->error), TR_EINVAL;
    struct entries e;
    list_entries(&e, x, o);
    char hex[65], steps[32], ostep[32], path[4200];
    checksum(e.t, e.n, NULL, hex);
    snprintf(steps, sizeof steps, "%" PRId64, step);
    snprintf(ostep, sizeof ostep, "%" PRId64, o->step);
    snprintf(path, sizeof path, "%s/step-%" PRId64 ".safetensors", dir, step);
    const char *meta[] = {"format", "pt", "trainrun.format_version", TR_CHECKPOINT_VERSION,
                          "trainrun.step", steps, "trainrun.optimizer_step", ostep,
                          "trainrun.recipe", recipe_name, "trainrun.sha256", hex,
                          "trainrun.trainer_state", trainer_state ? trainer_state : "", NULL};
    struct tr_diag d = {0};
    int rc = tr_st_write(path, e.t, e.n, meta, &d);
    if (rc)
        snprintf(err, errsize, "%s", tr_diag_last(&d));
    tr_diag_free(&d);
    free_entries(&e);
    return rc;
}

/* Verifies the file at path against what this run expects and, when load, copies it in. */
static int read_checkpoint(const char *path, struct tr_exec *x, struct tr_optim *o, int load, int64_t *step,
                           char *state, size_t statesize, char *err, size_t errsize)
{
    struct tr_safetensors st;
    struct tr_diag d = {0};
    int opened = tr_st_open(&st, path, &d);
    if (opened)
        snprintf(err, errsize, "%s", tr_diag_last(&d));
    tr_diag_free(&d);
    if (opened)
        return TR_EINVAL;
    struct entries e;
    list_entries(&e, x, o);
    const void **data = tr_xcalloc((size_t)e.n + 1, sizeof *data);
    int rc = 0;
    const char *version = tr_st_metadata(&st, "trainrun.format_version");
    if (!version || strcmp(version, TR_CHECKPOINT_VERSION)) {
        snprintf(err, errsize, "%s: not a trainrun checkpoint of format %s", path, TR_CHECKPOINT_VERSION);
        rc = TR_EINVAL;
    }
    for (int i = 0; i < e.n && !rc; i++) {
        const struct tr_st_tensor *t = tr_st_find(&st, e.t[i].name);
        if (!t || t->dtype != TR_F32 || t->bytes != e.t[i].bytes) {
            snprintf(err, errsize, "%s: %s is missing or has another shape", path, e.t[i].name);
            rc = TR_EINVAL;
        }
        data[i] = t ? t->data : NULL;
    }
    char hex[65];
    const char *want = tr_st_metadata(&st, "trainrun.sha256"), *steps = tr_st_metadata(&st, "trainrun.step");
    const char *ostep = tr_st_metadata(&st, "trainrun.optimizer_step");
    if (!rc) {
        checksum(e.t, e.n, data, hex);
        if (!want || strcmp(want, hex) || !steps || !ostep) {
            snprintf(err, errsize, "%s: the checksum does not match: the file is damaged", path);
            rc = TR_EINVAL;
        }
    }
    if (!rc && load) {
        for (int i = 0; i < e.n; i++)
            memcpy((void *)e.t[i].data, data[i], e.t[i].bytes);
        if (tr_exec_push(x, TR_PARAM))
            rc = (snprintf(err, errsize, "%s: %s", path, x->error), TR_EINVAL);
        else if (tr_optim_push(o))
            rc = (snprintf(err, errsize, "%s: %s", path, o->error), TR_EINVAL);
        o->step = strtoll(ostep, NULL, 10);
        *step = strtoll(steps, NULL, 10);
        const char *trainer = tr_st_metadata(&st, "trainrun.trainer_state");
        snprintf(state, statesize, "%s", trainer ? trainer : "");
    }
    free(data);
    free_entries(&e);
    tr_st_close(&st);
    return rc;
}

static int by_step_descending(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

/* The steps of dir's checkpoints, newest first, at most max; with tidy, the temporary files of
 * writes a crash cut short are removed. −1 with errno when dir cannot be read. */
static int list_steps(const char *dir, int64_t *steps, int max, int tidy)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < max) {
        int64_t s;
        char tail[32];
        if (sscanf(de->d_name, "step-%" SCNd64 ".%31s", &s, tail) == 2 && !strcmp(tail, "safetensors"))
            steps[n++] = s;
        else if (tidy && strstr(de->d_name, ".tmp.")) {
            char path[4200];
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            unlink(path);
        }
    }
    closedir(d);
    qsort(steps, (size_t)n, sizeof *steps, by_step_descending);
    return n;
}

int tr_checkpoint_resume(const char *dir, struct tr_exec *x, struct tr_optim *o, int64_t *step,
                         char *state, size_t statesize, char *warn, size_t warnsize, char *err,
                         size_t errsize)
{
    int64_t steps[4096];
    int n = list_steps(dir, steps, 4096, 1);
    if (n < 0) {
        snprintf(err, errsize, "cannot read %s: %s", dir, strerror(errno));
        return TR_EIO;
    }
    *step = 0;
    if (statesize)
        state[0] = '\0';
    if (warn && warnsize)
        warn[0] = '\0';
    for (int i = 0; i < n; i++) {
        char path[4200], why[512];
        snprintf(path, sizeof path, "%s/step-%" PRId64 ".safetensors", dir, steps[i]);
        if (read_checkpoint(path, x, o, 0, step, state, statesize, why, sizeof why) == 0)
            return read_checkpoint(path, x, o, 1, step, state, statesize, err, errsize);
        if (warn && strlen(warn) + strlen(why) + 3 < warnsize)
            snprintf(warn + strlen(warn), warnsize - strlen(warn), "%s%s", *warn ? "; " : "", why);
    }
    return 0;
}

int tr_checkpoint_newest(const char *dir, char *path, size_t pathsize, char *warn, size_t warnsize, char *err,
                         size_t errsize)
{
    int64_t steps[4096];
    int n = list_steps(dir, steps, 4096, 0);
    if (warn && warnsize)
        warn[0] = '\0';
    for (int i = 0; i < n; i++) {
        char why[512];
        struct tr_safetensors st;
        struct tr_diag d = {0};
        snprintf(path, pathsize, "%s/step-%" PRId64 ".safetensors", dir, steps[i]);
        int opened = tr_st_open(&st, path, &d);
        snprintf(why, sizeof why, "%s", tr_diag_last(&d));
        tr_diag_free(&d);
        if (opened == 0) {
            int ours = tr_st_metadata(&st, "trainrun.sha256") != NULL;
            tr_st_close(&st);
            if (ours)
                return 0;
            snprintf(why, sizeof why, "%s: not a trainrun checkpoint", path);
        }
        if (warn && strlen(warn) + strlen(why) + 3 < warnsize)
            snprintf(warn + strlen(warn), warnsize - strlen(warn), "%s%s", *warn ? "; " : "", why);
    }
    snprintf(err, errsize, "%s holds no checkpoint%s", dir, n > 0 ? " that opens" : "");
    return -1;
}
