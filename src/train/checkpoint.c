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
#include "recipe/optimizers.h"

/* The tensors of a checkpoint, in a fixed order: parameters and state as the graph lists them,
 * then each parameter's optimizer state, "optimizer.<state>.<name>" for each state tensor the
 * optimizer's descriptor keeps (recipe/optimizers.h: AdamW's m and v, SGD's momentum). */
struct entries {
    struct tr_st_tensor *t;
    char **names;
    int n;
};

static void add(struct entries *e, const char *name, const struct tr_value *val, enum tr_dtype dtype, void *data)
{
    struct tr_st_tensor *t = &e->t[e->n];
    e->names[e->n] = tr_strdup(name);
    *t = (struct tr_st_tensor){.name = e->names[e->n], .dtype = dtype, .rank = val->shape.rank, .data = data};
    for (int d = 0; d < val->shape.rank; d++)
        t->shape[d] = val->shape.dim[d].k;
    t->bytes = (size_t)tr_dim_eval(tr_shape_numel(&val->shape), 1, 1) * tr_dtype_size(dtype);
    e->n++;
}

/* The tensors l names; their data the host's views of x and state (tr_exec_host,
 * tr_optim_host_state) when given, else NULL (a reader that only verifies). */
static void list_entries(struct entries *e, const struct tr_checkpoint_layout *l, struct tr_exec *x, float *state)
{
    const struct tr_graph *g = l->g;
    const struct tr_optimizer_desc *desc = &tr_optimizers[l->optimizer];
    e->t = tr_xcalloc((size_t)g->nvalues * (1 + TR_OPT_MAX_STATES) + 1, sizeof *e->t);
    e->names = tr_xcalloc((size_t)g->nvalues * (1 + TR_OPT_MAX_STATES) + 1, sizeof *e->names);
    e->n = 0;
    int64_t total = 0, offset = 0;
    for (int v = 0; v < g->nvalues; v++) {
        if (g->values[v].kind == TR_PARAM || g->values[v].kind == TR_STATE)
            add(e, g->values[v].name, &g->values[v], TR_F32, x ? tr_exec_host(x, v) : NULL);
        if (g->values[v].kind == TR_PARAM)
            total += tr_dim_eval(tr_shape_numel(&g->values[v].shape), 1, 1);
    }
    for (int v = 0; v < g->nvalues; v++) {
        if (g->values[v].kind != TR_PARAM)
            continue;
        for (int k = 0; k < l->nstate; k++) {
            char *name = tr_strdup_printf("optimizer.%s.%s", desc->state[k].name, g->values[v].name);
            add(e, name, &g->values[v], desc->state[k].dtype, state ? state + k * total + offset : NULL);
            free(name);
        }
        offset += tr_dim_eval(tr_shape_numel(&g->values[v].shape), 1, 1);
    }
}

static struct tr_checkpoint_layout layout_of(struct tr_exec *x, struct tr_optim *o)
{
    return (struct tr_checkpoint_layout){.g = x->g, .optimizer = o->kind, .nstate = o->nstate};
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
                        const char *recipe_name, const char *trainer_state, struct tr_diag *d)
{
    struct tr_diag why = {0};
    if (tr_exec_pull(x, TR_PARAM, &why) || tr_optim_pull(o, &why)) {
        int rc = tr_fail(d, TR_EINVAL, "%s", tr_diag_last(&why));
        tr_diag_free(&why);
        return rc;
    }
    struct tr_path path;
    int rc = tr_path_set(&path, d, "%s/step-%" PRId64 ".safetensors", dir, step);
    if (rc)
        return rc;
    struct entries e;
    struct tr_checkpoint_layout l = layout_of(x, o);
    list_entries(&e, &l, x, tr_optim_host_state(o));
    char hex[65], steps[32], ostep[32];
    checksum(e.t, e.n, NULL, hex);
    snprintf(steps, sizeof steps, "%" PRId64, step);
    snprintf(ostep, sizeof ostep, "%" PRId64, o->step);
    const char *meta[] = {"format", "pt", "trainrun.format_version", TR_CHECKPOINT_VERSION,
                          "trainrun.step", steps, "trainrun.optimizer_step", ostep,
                          "trainrun.recipe", recipe_name, "trainrun.sha256", hex,
                          "trainrun.trainer_state", trainer_state ? trainer_state : "", NULL};
    rc = tr_st_write(path.s, e.t, e.n, meta, d);
    free_entries(&e);
    return rc;
}

/* Whether the open st is a checkpoint of l: the format, each tensor there with its size, and
 * the checksum over them in l's order. 0, or TR_EDATA with "path: why" in d. */
static int verify(const struct tr_safetensors *st, const struct tr_checkpoint_layout *l, const char *path,
                  struct tr_diag *d)
{
    const char *version = tr_st_metadata(st, "trainrun.format_version");
    if (!version || strcmp(version, TR_CHECKPOINT_VERSION))
        return tr_fail(d, TR_EDATA, "%s: not a trainrun checkpoint of format %s", path, TR_CHECKPOINT_VERSION);
    struct entries e;
    list_entries(&e, l, NULL, NULL);
    const void **data = tr_xcalloc((size_t)e.n + 1, sizeof *data);
    int rc = 0;
    for (int i = 0; i < e.n && !rc; i++) {
        const struct tr_st_tensor *t = tr_st_find(st, e.t[i].name);
        if (!t || t->dtype != e.t[i].dtype || t->bytes != e.t[i].bytes)
            rc = tr_fail(d, TR_EDATA, "%s: %s is missing or has another shape than the recipe's model", path,
                         e.t[i].name);
        else
            data[i] = t->data;
    }
    char hex[65];
    const char *want = tr_st_metadata(st, "trainrun.sha256");
    if (!rc)
        checksum(e.t, e.n, data, hex);
    if (!rc && (!want || strcmp(want, hex) || !tr_st_metadata(st, "trainrun.step") ||
                !tr_st_metadata(st, "trainrun.optimizer_step")))
        rc = tr_fail(d, TR_EDATA, "%s: the checksum does not match: the file is damaged", path);
    free(data);
    free_entries(&e);
    return rc;
}

/* A warm start's check, for a checkpoint of another run: it opened, and trainrun wrote it. */
static int ours(const struct tr_safetensors *st, const char *path, struct tr_diag *d)
{
    if (tr_st_metadata(st, "trainrun.sha256"))
        return 0;
    return tr_fail(d, TR_EDATA, "%s: not a trainrun checkpoint", path);
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
    struct tr_diag unreachable = {0};   /* a name too long to join to dir cannot be ours */
    while ((de = readdir(d)) && n < max) {
        int64_t s;
        char tail[32];
        struct tr_path path;
        if (sscanf(de->d_name, "step-%" SCNd64 ".%31s", &s, tail) == 2 && !strcmp(tail, "safetensors"))
            steps[n++] = s;
        else if (tidy && strstr(de->d_name, ".tmp.") && !tr_path_set(&path, &unreachable, "%s/%s", dir, de->d_name))
            unlink(path.s);
    }
    closedir(d);
    tr_diag_free(&unreachable);
    qsort(steps, (size_t)n, sizeof *steps, by_step_descending);
    return n;
}

/* The reader, tidying dir first when asked (resume, the one reader that also writes there). */
static int open_newest(const char *dir, const struct tr_checkpoint_layout *l, int tidy, struct tr_checkpoint *c,
                       struct tr_diag *skipped, struct tr_diag *d)
{
    int64_t steps[4096];
    *c = (struct tr_checkpoint){0};
    int n = list_steps(dir, steps, 4096, tidy);
    if (n < 0)
        return tr_fail(d, TR_EIO, "cannot read %s: %s", dir, strerror(errno));
    c->files = n;
    for (int i = 0; i < n && !c->found; i++) {   /* each one passed over is said in skipped */
        if (tr_path_set(&c->path, skipped, "%s/step-%" PRId64 ".safetensors", dir, steps[i]))
            continue;
        if (tr_st_open(&c->st, c->path.s, skipped))   /* its sentence names the file */
            continue;
        if ((l ? verify(&c->st, l, c->path.s, skipped) : ours(&c->st, c->path.s, skipped)) == 0) {
            c->found = true;
            break;
        }
        tr_st_close(&c->st);
    }
    return 0;
}

int tr_checkpoint_open_newest(const char *dir, const struct tr_checkpoint_layout *l, struct tr_checkpoint *c,
                              struct tr_diag *skipped, struct tr_diag *d)
{
    return open_newest(dir, l, 0, c, skipped, d);
}

void tr_checkpoint_close(struct tr_checkpoint *c)
{
    if (c->found)
        tr_st_close(&c->st);
    c->found = false;
}

/* The files passed over, "; "-joined into warn as far as they fit whole. */
static void join_skipped(const struct tr_diag *skipped, char *warn, size_t warnsize)
{
    if (!warn || !warnsize)
        return;
    warn[0] = '\0';
    for (int i = 0; i < skipped->n; i++) {
        const char *why = skipped->items[i].message;
        if (strlen(warn) + strlen(why) + 3 < warnsize)
            snprintf(warn + strlen(warn), warnsize - strlen(warn), "%s%s", *warn ? "; " : "", why);
    }
}

/* The verified file's tensors into the host's views, pushed to the device, with its step,
 * the optimizer's step and the trainer's state. */
static int load(struct tr_checkpoint *c, struct tr_exec *x, struct tr_optim *o, int64_t *step, char *state,
                size_t statesize, struct tr_diag *d)
{
    struct entries e;
    struct tr_checkpoint_layout l = layout_of(x, o);
    list_entries(&e, &l, x, tr_optim_host_state(o));
    for (int i = 0; i < e.n; i++)
        memcpy((void *)e.t[i].data, tr_st_find(&c->st, e.t[i].name)->data, e.t[i].bytes);
    free_entries(&e);
    int rc = 0;
    struct tr_diag why = {0};
    if (tr_exec_push(x, TR_PARAM, &why) || tr_optim_push(o, &why))
        rc = tr_fail(d, TR_EINVAL, "%s: %s", c->path.s, tr_diag_last(&why));
    tr_diag_free(&why);
    o->step = strtoll(tr_st_metadata(&c->st, "trainrun.optimizer_step"), NULL, 10);
    *step = strtoll(tr_st_metadata(&c->st, "trainrun.step"), NULL, 10);
    const char *trainer = tr_st_metadata(&c->st, "trainrun.trainer_state");
    snprintf(state, statesize, "%s", trainer ? trainer : "");
    return rc;
}

int tr_checkpoint_resume(const char *dir, struct tr_exec *x, struct tr_optim *o, int64_t *step,
                         char *state, size_t statesize, char *warn, size_t warnsize, struct tr_diag *d)
{
    *step = 0;
    if (statesize)
        state[0] = '\0';
    struct tr_checkpoint c;
    struct tr_diag skipped = {0};
    struct tr_checkpoint_layout l = layout_of(x, o);
    int rc = open_newest(dir, &l, 1, &c, &skipped, d);
    join_skipped(&skipped, warn, warnsize);
    tr_diag_free(&skipped);
    if (!rc && c.found)
        rc = load(&c, x, o, step, state, statesize, d);
    tr_checkpoint_close(&c);
    return rc;
}

int tr_checkpoint_newest(const char *dir, char *path, size_t pathsize, char *warn, size_t warnsize,
                         struct tr_diag *d)
{
    struct tr_checkpoint c;
    struct tr_diag skipped = {0}, unread = {0};
    open_newest(dir, NULL, 0, &c, &skipped, &unread);   /* a folder that cannot be read holds none */
    join_skipped(&skipped, warn, warnsize);
    tr_diag_free(&skipped), tr_diag_free(&unread);
    int found = c.found;
    if (found)
        snprintf(path, pathsize, "%s", c.path.s);
    tr_checkpoint_close(&c);
    return found ? 0 : tr_fail(d, TR_EDATA, "%s holds no checkpoint%s", dir, c.files > 0 ? " that opens" : "");
}
