/* Writing, verifying and loading checkpoints (checkpoint.h). */
#include "train/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomic.h"
#include "core/safetensors.h"
#include "data/sha256.h"
#include "recipe/optimizers.h"

/* The tensors of a checkpoint, in a fixed order: parameters and state as the graph lists them,
 * then each parameter's optimizer state, "optimizer.<state>.<name>" for each state tensor the
 * optimizer's descriptor keeps (recipe/optimizers.h: AdamW's m and v, SGD's momentum). */
struct entries {
    struct tr_st_tensor *t;
    char **names;
    int *value, *state;   /* each one's value, and its optimizer state tensor (−1: the value's own) */
    int n;
};

/* Tensor parallel: a sliced value's entry is its whole tensor's (whole.h gathers it). */
static void add(struct entries *e, const char *name, int v, int k, const struct tr_graph *g, enum tr_dtype dtype,
                void *data)
{
    struct tr_st_tensor *t = &e->t[e->n];
    struct tr_shape shape = tr_value_whole_shape(g, v);
    e->value[e->n] = v, e->state[e->n] = k;
    e->names[e->n] = tr_strdup(name);
    *t = (struct tr_st_tensor){.name = e->names[e->n], .dtype = dtype, .rank = shape.rank, .data = data};
    for (int d = 0; d < shape.rank; d++)
        t->shape[d] = shape.dim[d].k;
    t->bytes = (size_t)tr_dim_eval(tr_shape_numel(&shape), 1, 1) * tr_dtype_size(dtype);
    e->n++;
}

/* The tensors l names; their data the host's views of x and state (tr_exec_host,
 * tr_optim_host_state) when given, else NULL (a reader that only verifies). */
static void list_entries(struct entries *e, const struct tr_checkpoint_layout *l, struct tr_exec *x, float *state)
{
    const struct tr_graph *g = l->g;
    const struct tr_optimizer_desc *desc = &tr_optimizers[l->optimizer];
    size_t most = (size_t)g->nvalues * (1 + TR_OPT_MAX_STATES) + 1;
    e->t = tr_xcalloc(most, sizeof *e->t);
    e->names = tr_xcalloc(most, sizeof *e->names);
    e->value = tr_xcalloc(most, sizeof *e->value);
    e->state = tr_xcalloc(most, sizeof *e->state);
    e->n = 0;
    int64_t total = 0, offset = 0;
    for (int v = 0; v < g->nvalues; v++) {
        if (g->values[v].kind == TR_PARAM || g->values[v].kind == TR_STATE)
            add(e, g->values[v].name, v, -1, g, TR_F32, x ? tr_exec_host(x, v) : NULL);
        if (g->values[v].kind == TR_PARAM)
            total += tr_dim_eval(tr_shape_numel(&g->values[v].shape), 1, 1);
    }
    for (int v = 0; v < g->nvalues; v++) {
        if (g->values[v].kind != TR_PARAM)
            continue;
        for (int k = 0; k < l->nstate; k++) {
            char *name = tr_strdup_printf("optimizer.%s.%s", desc->state[k].name, g->values[v].name);
            add(e, name, v, k, g, desc->state[k].dtype, state ? state + k * total + offset : NULL);
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
    free(e->names), free(e->t), free(e->value), free(e->state);
}

/* Format 2's checksum: SHA-256 over every tensor in name order — its name, dtype and shape as
 * text, each ended by a NUL, then its bytes — and then every metadata pair but the checksum's
 * own in key order, key and value each ended by a NUL. It covers the whole header, so a step
 * or trainer state rewritten by hand is caught as surely as a flipped bit in a weight, and it
 * needs no layout: any reader can check any checkpoint. */
struct checked {
    const struct tr_st_tensor *const *t;   /* by name */
    int n;
    const char *const *kv;                 /* key, value, …, NULL */
};

static int tensor_by_name(const void *a, const void *b)
{
    return strcmp((*(const struct tr_st_tensor *const *)a)->name, (*(const struct tr_st_tensor *const *)b)->name);
}

static int pair_by_key(const void *a, const void *b)
{
    return strcmp(**(const char *const *const *)a, **(const char *const *const *)b);
}

static void hash_text(struct tr_sha256 *s, const char *text)
{
    tr_sha256_update(s, text, strlen(text) + 1);
}

/* One tensor's part of the checksum: its name, dtype and shape as text, then its bytes. */
static void checksum_names(struct tr_sha256 *s, const struct tr_st_tensor *t)
{
    char shape[32 * TR_MAX_RANK] = "";
    for (int k = 0; k < t->rank; k++)
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%" PRId64, k ? "," : "", t->shape[k]);
    hash_text(s, t->name);
    hash_text(s, tr_st_dtype_name(t->dtype));
    hash_text(s, shape);
}

static void checksum_tensor(struct tr_sha256 *s, const struct tr_st_tensor *t, const void *data)
{
    checksum_names(s, t);
    tr_sha256_update(s, data, t->bytes);
}

/* The metadata's part (every pair but the checksum's own, in key order), and the hex digest. */
static void checksum_end(struct tr_sha256 *s, const char *const *kv, char hex[65])
{
    int npairs = 0;
    while (kv[2 * npairs])
        npairs++;
    const char *const **pairs = tr_xcalloc((size_t)npairs + 1, sizeof *pairs);
    for (int i = 0; i < npairs; i++)
        pairs[i] = &kv[2 * i];
    qsort(pairs, (size_t)npairs, sizeof *pairs, pair_by_key);
    for (int i = 0; i < npairs; i++)
        if (strcmp(pairs[i][0], "trainrun.sha256")) {
            hash_text(s, pairs[i][0]);
            hash_text(s, pairs[i][1]);
        }
    unsigned char digest[32];
    tr_sha256_final(s, digest);
    tr_sha256_hex(digest, hex);
    free(pairs);
}

static void checksum(const struct tr_st_tensor *t, int n, const char *const *kv, char hex[65])
{
    const struct tr_st_tensor **order = tr_xcalloc((size_t)n + 1, sizeof *order);
    for (int i = 0; i < n; i++)
        order[i] = &t[i];
    qsort(order, (size_t)n, sizeof *order, tensor_by_name);
    struct tr_sha256 s;
    tr_sha256_init(&s);
    for (int i = 0; i < n; i++)
        checksum_tensor(&s, order[i], order[i]->data);
    checksum_end(&s, kv, hex);
    free(order);
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
    snprintf(steps, sizeof steps, "%" PRId64, step);
    snprintf(ostep, sizeof ostep, "%" PRId64, o->step);
    const char *meta[] = {"format", "pt", "trainrun.format_version", TR_CHECKPOINT_VERSION,
                          "trainrun.step", steps, "trainrun.optimizer_step", ostep,
                          "trainrun.recipe", recipe_name, "trainrun.trainer_state", trainer_state ? trainer_state : "",
                          "trainrun.sha256", hex, NULL};
    meta[12] = NULL;   /* the checksum covers every pair before its own */
    checksum(e.t, e.n, meta, hex);
    meta[12] = "trainrun.sha256";
    rc = tr_st_write(path.s, e.t, e.n, meta, d);
    free_entries(&e);
    return rc;
}

/* ---- a tensor at a time ---------------------------------------------------------------------- */

int tr_checkpoint_tensors(const struct tr_checkpoint_layout *l, struct tr_checkpoint_tensor **out)
{
    struct entries e;
    list_entries(&e, l, NULL, NULL);
    const struct tr_st_tensor **order = tr_xcalloc((size_t)e.n + 1, sizeof *order);
    for (int i = 0; i < e.n; i++)
        order[i] = &e.t[i];
    qsort(order, (size_t)e.n, sizeof *order, tensor_by_name);
    *out = tr_xcalloc((size_t)e.n + 1, sizeof **out);
    for (int i = 0; i < e.n; i++) {
        int at = (int)(order[i] - e.t);
        (*out)[i] = (struct tr_checkpoint_tensor){.t = *order[i], .value = e.value[at], .state = e.state[at]};
        (*out)[i].t.name = e.names[at];   /* kept: tr_checkpoint_tensors_free frees them */
        e.names[at] = NULL;
    }
    int n = e.n;
    free(order);
    free_entries(&e);
    return n;
}

void tr_checkpoint_tensors_free(struct tr_checkpoint_tensor *t, int n)
{
    for (int i = 0; i < n; i++)
        free((char *)t[i].t.name);
    free(t);
}

struct streamed {
    const struct tr_checkpoint_tensor *t;
    tr_checkpoint_fill_fn fill;
    void *ctx;
    struct tr_sha256 sha;
    const char **meta;
    char hex[65];
};

static int fill_one(void *ctx, int i, size_t from, void *buf, size_t bytes, struct tr_diag *d)
{
    struct streamed *s = ctx;
    int rc = s->fill(s->ctx, &s->t[i], from, buf, bytes, d);
    if (!rc && from == 0)
        checksum_names(&s->sha, &s->t[i].t);
    if (!rc)
        tr_sha256_update(&s->sha, buf, bytes);
    return rc;
}

static const char *const *finish_one(void *ctx)
{
    struct streamed *s = ctx;
    checksum_end(&s->sha, s->meta, s->hex);
    return s->meta;
}

int tr_checkpoint_write_each(const char *dir, const struct tr_checkpoint_layout *l, int64_t step, int64_t optimizer_step,
                             const char *recipe_name, const char *trainer_state, tr_checkpoint_fill_fn fill, void *ctx,
                             struct tr_diag *d)
{
    struct tr_path path;
    int rc = tr_path_set(&path, d, "%s/step-%" PRId64 ".safetensors", dir, step);
    if (rc)
        return rc;
    struct tr_checkpoint_tensor *t;
    int n = tr_checkpoint_tensors(l, &t);
    struct tr_st_tensor *list = tr_xcalloc((size_t)n + 1, sizeof *list);
    for (int i = 0; i < n; i++)
        list[i] = t[i].t;
    char steps[32], ostep[32];
    snprintf(steps, sizeof steps, "%" PRId64, step);
    snprintf(ostep, sizeof ostep, "%" PRId64, optimizer_step);
    struct streamed s = {.t = t, .fill = fill, .ctx = ctx};
    memset(s.hex, '0', 64);   /* the checksum's place, filled once every tensor has passed */
    const char *meta[] = {"format", "pt", "trainrun.format_version", TR_CHECKPOINT_VERSION,
                          "trainrun.step", steps, "trainrun.optimizer_step", ostep,
                          "trainrun.recipe", recipe_name, "trainrun.trainer_state", trainer_state ? trainer_state : "",
                          "trainrun.sha256", s.hex, NULL};
    s.meta = meta;
    tr_sha256_init(&s.sha);
    rc = tr_st_write_each(path.s, list, n, meta, fill_one, &s, finish_one, d);
    free(list);
    tr_checkpoint_tensors_free(t, n);
    return rc;
}

/* ---- verifying ------------------------------------------------------------------------------- */

/* A step as trainrun writes it: decimal digits, no sign, no leading zero, within int64. */
static bool parse_step(const char *s, size_t len, int64_t *out)
{
    if (len == 0 || len > 18 || (s[0] == '0' && len > 1))
        return false;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

/* The step a checkpoint's file name says: "step-N.safetensors" exactly. */
static bool step_of_name(const char *name, int64_t *step)
{
    static const char head[] = "step-", tail[] = ".safetensors";
    size_t n = strlen(name), h = sizeof head - 1, t = sizeof tail - 1;
    return n > h + t && !strncmp(name, head, h) && !strcmp(name + n - t, tail) && parse_step(name + h, n - h - t, step);
}

/* Quoted for a message, cut to a few characters: a damaged field may hold anything. */
static const char *shown(const char *s, char out[40])
{
    if (!s)
        return "missing";
    out[0] = '\'';
    size_t i = 0;
    for (; s[i] && i < 30; i++)
        out[1 + i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    snprintf(out + 1 + i, 40 - 1 - i, "%s'", s[i] ? "…" : "");
    return out;
}

/* Format 2's fields: the step the file's name says, an optimizer step no further than it, a
 * checksum of 64 hex digits. TR_EDATA (damaged) with "path: why". */
static int check_fields(const struct tr_safetensors *st, int64_t name_step, const char *path, struct tr_diag *d)
{
    char q[40];
    const char *step = tr_st_metadata(st, "trainrun.step"), *ostep = tr_st_metadata(st, "trainrun.optimizer_step");
    const char *sum = tr_st_metadata(st, "trainrun.sha256");
    int64_t s, o;
    if (!step || !parse_step(step, strlen(step), &s) || s != name_step)
        return tr_fail(d, TR_EDATA, "%s: trainrun.step is %s, not the step %" PRId64 " its name says: the file is "
                       "damaged", path, shown(step, q), name_step);
    if (!ostep || !parse_step(ostep, strlen(ostep), &o) || o > s)
        return tr_fail(d, TR_EDATA, "%s: trainrun.optimizer_step is %s, not a step from 0 to %" PRId64 ": the file "
                       "is damaged", path, shown(ostep, q), s);
    if (!tr_st_metadata(st, "trainrun.trainer_state") || !tr_st_metadata(st, "trainrun.recipe"))
        return tr_fail(d, TR_EDATA, "%s: trainrun.trainer_state or trainrun.recipe is missing: the file is damaged",
                       path);
    if (!sum || strlen(sum) != 64 || strspn(sum, "0123456789abcdef") != 64)
        return tr_fail(d, TR_EDATA, "%s: trainrun.sha256 is %s, not a checksum: the file is damaged", path,
                       shown(sum, q));
    return 0;
}

/* Format 2 with its fields in range. A file of format 1 (trainrun before its checksum covered
 * the metadata) is TR_EINVAL: whole, perhaps, but its step and trainer state cannot be
 * trusted, so a resume refuses it rather than pass it over; any other failure is TR_EDATA
 * (damaged). "path: why" in d. */
static int check_header(const struct tr_safetensors *st, int64_t name_step, const char *path, struct tr_diag *d)
{
    const char *version = tr_st_metadata(st, "trainrun.format_version");
    char q[40];
    if (version && !strcmp(version, "1") && tr_st_metadata(st, "trainrun.sha256"))
        return tr_fail(d, TR_EINVAL, "%s: written by an older trainrun (checkpoint format 1, whose checksum does "
                       "not cover its step and trainer state): resume cannot trust it; finish this run with the "
                       "trainrun that began it, or start a new run (model.init.path still loads its weights)", path);
    if (!version || strcmp(version, TR_CHECKPOINT_VERSION))
        return tr_fail(d, TR_EDATA, "%s: trainrun.format_version is %s: not a trainrun checkpoint of format %s", path,
                       shown(version, q), TR_CHECKPOINT_VERSION);
    return check_fields(st, name_step, path, d);
}

/* The checksum over a file check_header passed. */
static int check_sum(const struct tr_safetensors *st, const char *path, struct tr_diag *d)
{
    char hex[65];
    checksum(st->tensors, st->n, st->metadata, hex);
    if (strcmp(hex, tr_st_metadata(st, "trainrun.sha256")))
        return tr_fail(d, TR_EDATA, "%s: the checksum does not match: the file is damaged", path);
    return 0;
}

static void shape_text(const int64_t *shape, int rank, char out[160])
{
    snprintf(out, 160, "[");
    for (int k = 0; k < rank; k++)
        snprintf(out + strlen(out), 160 - strlen(out), "%s%" PRId64, k ? ", " : "", shape[k]);
    snprintf(out + strlen(out), 160 - strlen(out), "]");
}

/* A whole checkpoint is of l's model: each tensor l lists there with its dtype and shape, and
 * none besides. TR_EINVAL with "path: what differs": the run's recipe or model changed since
 * the file was written, and a resume must refuse rather than call it damaged. */
static int check_layout(const struct tr_safetensors *st, const struct tr_checkpoint_layout *l, const char *path,
                        struct tr_diag *d)
{
    struct entries e;
    list_entries(&e, l, NULL, NULL);
    int rc = 0;
    for (int i = 0; i < e.n && !rc; i++) {
        const struct tr_st_tensor *t = tr_st_find(st, e.t[i].name);
        char have[160], want[160];
        shape_text(e.t[i].shape, e.t[i].rank, want);
        if (!t)
            rc = tr_fail(d, TR_EINVAL, "%s: it holds no %s, which the recipe's model has (%s): the checkpoint is of "
                         "another model or optimizer", path, e.t[i].name, want);
        else if (t->dtype != e.t[i].dtype || t->rank != e.t[i].rank ||
                 memcmp(t->shape, e.t[i].shape, sizeof t->shape[0] * (size_t)t->rank)) {
            shape_text(t->shape, t->rank, have);
            rc = tr_fail(d, TR_EINVAL, "%s: %s is %s %s in the checkpoint but %s %s in the recipe's model: the "
                         "checkpoint is of another model", path, e.t[i].name, tr_st_dtype_name(t->dtype), have,
                         tr_st_dtype_name(e.t[i].dtype), want);
        }
    }
    if (!rc && st->n != e.n)
        for (int i = 0; i < st->n && !rc; i++) {
            bool listed = false;
            for (int k = 0; k < e.n && !listed; k++)
                listed = !strcmp(st->tensors[i].name, e.t[k].name);
            if (!listed)
                rc = tr_fail(d, TR_EINVAL, "%s: it holds %s, which the recipe's model does not: the checkpoint is "
                             "of another model or optimizer", path, st->tensors[i].name);
        }
    free_entries(&e);
    return rc;
}

/* A warm start's check, for a checkpoint of another run (whose graph this one need not share):
 * whole, or of format 1 (its metadata is not used; its tensors' names and shapes are checked
 * as it loads). */
static int warm_startable(const struct tr_safetensors *st, int64_t name_step, const char *path, struct tr_diag *d)
{
    struct tr_diag why = {0};
    int rc = check_header(st, name_step, path, &why);
    if (rc == TR_EINVAL)   /* format 1 */
        rc = 0;
    else if (!rc)
        rc = check_sum(st, path, &why);
    else if (rc)
        tr_fail(d, rc, "%s", tr_diag_last(&why));
    tr_diag_free(&why);
    return rc;
}

static int by_step_descending(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

/* The steps of dir's checkpoints, newest first, every one the folder holds (*steps, freed by
 * the caller); with tidy, the temporary files of writes a crash cut short are removed. The
 * count, or −1 with errno when dir cannot be read. */
static int list_steps(const char *dir, int64_t **steps, int tidy)
{
    *steps = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0, cap = 0;
    struct dirent *de;
    struct tr_diag unreachable = {0};   /* a name too long to join to dir cannot be ours */
    while ((de = readdir(d))) {
        int64_t s;
        struct tr_path path;
        if (step_of_name(de->d_name, &s)) {
            if (n == cap)
                *steps = tr_xrealloc(*steps, (size_t)(cap = cap ? 2 * cap : 64) * sizeof **steps);
            (*steps)[n++] = s;
        } else if (tidy && strstr(de->d_name, ".tmp.") && !tr_path_set(&path, &unreachable, "%s/%s", dir, de->d_name)) {
            unlink(path.s);
        }
    }
    closedir(d);
    tr_diag_free(&unreachable);
    qsort(*steps, (size_t)n, sizeof **steps, by_step_descending);
    return n;
}

/* How the reader goes through a folder: for sample and warm starts, passing over what does not
 * fit; for a resume, refusing what is whole but does not fit, tidying, listing the damaged. */
enum reading { BROWSING, RESUMING };

/* Checks the open file at c->path, of step, for the reader: 0 (it is the one), TR_EDATA
 * (damaged: passed over) or TR_EINVAL (whole, but not of l's model or of format 1). */
static int check_file(struct tr_checkpoint *c, const struct tr_checkpoint_layout *l, int64_t step,
                      struct tr_diag *skipped)
{
    if (!l)
        return warm_startable(&c->st, step, c->path.s, skipped);
    int rc = check_header(&c->st, step, c->path.s, skipped);
    if (!rc)
        rc = check_sum(&c->st, c->path.s, skipped);
    return rc ? rc : check_layout(&c->st, l, c->path.s, skipped);
}

/* A FIFO or a device named like a checkpoint would block the reader or feed it forever: only a
 * regular file (a link to one, too) is opened; anything else is damaged, with that reason. */
static bool regular(const char *path, struct tr_diag *skipped)
{
    struct stat st;
    int failed = stat(path, &st);
    if (!failed && S_ISREG(st.st_mode))
        return true;
    tr_fail(skipped, TR_EDATA, "%s: %s", path, failed ? strerror(errno) : "not a regular file");
    return false;
}

/* The reader. Resuming, a whole file that cannot be resumed from (another model, format 1)
 * stops it with TR_EINVAL in d — a resume must refuse, not start again over the run's
 * checkpoints — and the damaged files newer than the one found are listed in c->damaged;
 * browsing, such a file is passed over like a damaged one. */
static int open_newest(const char *dir, const struct tr_checkpoint_layout *l, enum reading how,
                       struct tr_checkpoint *c, struct tr_diag *skipped, struct tr_diag *d)
{
    int64_t *steps;
    bool resuming = how == RESUMING;
    *c = (struct tr_checkpoint){0};
    int n = list_steps(dir, &steps, resuming);
    if (n < 0)
        return tr_fail(d, TR_EIO, "cannot read %s: %s", dir, strerror(errno));
    c->files = n;
    c->damaged = resuming ? tr_xcalloc((size_t)n + 1, sizeof *c->damaged) : NULL;
    int rc = 0;
    for (int i = 0; i < n && !c->found && !rc; i++) {   /* each one passed over is said in skipped */
        if (tr_path_set(&c->path, skipped, "%s/step-%" PRId64 ".safetensors", dir, steps[i]))
            continue;
        int why = !regular(c->path.s, skipped) || tr_st_open(&c->st, c->path.s, skipped)
                      ? TR_EDATA : check_file(c, l, steps[i], skipped);
        if (why == 0)
            c->found = true;
        else
            tr_st_close(&c->st);
        if (why == TR_EINVAL && resuming)
            rc = tr_fail(d, TR_EINVAL, "%s; no checkpoint was moved or overwritten", tr_diag_last(skipped));
        else if (why && resuming)
            c->damaged[c->ndamaged++] = steps[i];
    }
    free(steps);
    return rc;
}

int tr_checkpoint_open_newest(const char *dir, const struct tr_checkpoint_layout *l, struct tr_checkpoint *c,
                              struct tr_diag *skipped, struct tr_diag *d)
{
    return open_newest(dir, l, BROWSING, c, skipped, d);
}

void tr_checkpoint_close(struct tr_checkpoint *c)
{
    if (c->found)
        tr_st_close(&c->st);
    c->found = false;
    free(c->damaged);
    c->damaged = NULL;
    c->ndamaged = 0;
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

/* A resume goes on from an older checkpoint than these damaged ones, and will write their
 * steps again: each is first renamed to step-N.safetensors.damaged (or .damaged.2, …: link
 * and unlink, so no file is ever replaced), kept for whoever wants to look, never overwritten.
 * What was done is added to warn. */
static void move_damaged_aside(const char *dir, const struct tr_checkpoint *c, char *warn, size_t warnsize)
{
    for (int i = 0; i < c->ndamaged; i++) {
        struct tr_path from, to;
        struct tr_diag unused = {0};
        int moved = -1;
        if (!tr_path_set(&from, &unused, "%s/step-%" PRId64 ".safetensors", dir, c->damaged[i]))
            for (int k = 1; k <= 100 && moved < 0; k++) {
                if (tr_path_set(&to, &unused, "%s.damaged%s%.0d", from.s, k > 1 ? "." : "", k > 1 ? k : 0))
                    break;
                moved = link(from.s, to.s);
                if (moved < 0 && errno != EEXIST)
                    break;
            }
        tr_diag_free(&unused);
        size_t used = warn && warnsize ? strlen(warn) : 0;
        const char *name = moved == 0 ? strrchr(to.s, '/') + 1 : NULL;
        if (moved == 0 && unlink(from.s) == 0 && used + strlen(name) + 40 < warnsize)
            snprintf(warn + used, warnsize - used, "%skept as %s", used ? "; " : "", name);
    }
    if (c->ndamaged) {
        struct tr_diag unused = {0};
        tr_sync_folder_of(c->path.s, &unused);
        tr_diag_free(&unused);
    }
}

/* The verified file's tensors into the host's views, pushed to the device, with its step,
 * the optimizer's step and the trainer's state (fields the reader checked). */
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
        rc = tr_fail(d, TR_EFAIL, "%s: %s", c->path.s, tr_diag_last(&why));
    tr_diag_free(&why);
    o->step = strtoll(tr_st_metadata(&c->st, "trainrun.optimizer_step"), NULL, 10);
    *step = strtoll(tr_st_metadata(&c->st, "trainrun.step"), NULL, 10);
    snprintf(state, statesize, "%s", tr_st_metadata(&c->st, "trainrun.trainer_state"));
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
    int rc = open_newest(dir, &l, RESUMING, &c, &skipped, d);
    join_skipped(&skipped, warn, warnsize);
    tr_diag_free(&skipped);
    if (!rc)
        move_damaged_aside(dir, &c, warn, warnsize);
    if (!rc && c.found)
        rc = load(&c, x, o, step, state, statesize, d);
    tr_checkpoint_close(&c);
    return rc;
}

int tr_checkpoint_resume_open(const char *dir, const struct tr_checkpoint_layout *l, struct tr_checkpoint *c,
                              int64_t *step, int64_t *optimizer_step, char *state, size_t statesize, char *warn,
                              size_t warnsize, struct tr_diag *d)
{
    *step = *optimizer_step = 0;
    if (statesize)
        state[0] = '\0';
    struct tr_diag skipped = {0};
    int rc = open_newest(dir, l, RESUMING, c, &skipped, d);
    join_skipped(&skipped, warn, warnsize);
    tr_diag_free(&skipped);
    if (!rc)
        move_damaged_aside(dir, c, warn, warnsize);
    if (!rc && c->found) {
        *optimizer_step = strtoll(tr_st_metadata(&c->st, "trainrun.optimizer_step"), NULL, 10);
        *step = strtoll(tr_st_metadata(&c->st, "trainrun.step"), NULL, 10);
        snprintf(state, statesize, "%s", tr_st_metadata(&c->st, "trainrun.trainer_state"));
    }
    if (rc)
        tr_checkpoint_close(c);
    return rc;
}

int tr_checkpoint_newest(const char *dir, char *path, size_t pathsize, char *warn, size_t warnsize,
                         struct tr_diag *d)
{
    struct tr_checkpoint c;
    struct tr_diag skipped = {0}, unread = {0};
    open_newest(dir, NULL, BROWSING, &c, &skipped, &unread);   /* a folder that cannot be read holds none */
    join_skipped(&skipped, warn, warnsize);
    tr_diag_free(&skipped), tr_diag_free(&unread);
    int found = c.found;
    if (found)
        snprintf(path, pathsize, "%s", c.path.s);
    tr_checkpoint_close(&c);
    return found ? 0 : tr_fail(d, TR_EDATA, "%s holds no checkpoint%s", dir, c.files > 0 ? " that opens" : "");
}
