/* model.init (weights.h): drawn, loaded from model.init.path, or a warm start from a run of
 * this recipe (model.init.from_run). */
#include "train/weights.h"

#include <stdio.h>
#include <string.h>

#include "train/checkpoint.h"
#include "train/init.h"
#include "train/runs.h"

/* The run folder before run_dir in its recipe folder (what `latest` named when it started), or "". */
static int previous_run(const char *run_dir, char *out, size_t size, struct tr_diag *d)
{
    struct tr_path dir;
    const char *me = strrchr(run_dir, '/') ? strrchr(run_dir, '/') + 1 : run_dir;
    int rc = tr_runs_parent(run_dir, &dir, d);
    if (rc)
        return rc;
    char **names = tr_runs_list(dir.s);
    *out = '\0';
    for (int i = 0; names && names[i] && strcmp(names[i], me); i++)
        snprintf(out, size, "%s", names[i]);
    tr_runs_free_list(names);
    return 0;
}

/* The warm start a resumed run's first part recorded in its run.json into path: 1, or 0 when it
 * recorded none (or an error code). */
static int recorded_warm_start(const char *resume_dir, struct tr_path *path, struct tr_diag *d)
{
    struct tr_path file;
    if (tr_path_set(&file, d, "%s/run.json", resume_dir))
        return TR_EINVAL;
    json_t *record = json_load_file(file.s, 0, NULL);
    const char *recorded = json_string_value(json_object_get(json_object_get(record, "warm_start"), "checkpoint"));
    int found = recorded ? 1 : 0;
    if (recorded && tr_path_set(path, d, "%s", recorded))
        found = TR_EINVAL;
    json_decref(record);
    return found;
}

/* model.init.from_run: the newest whole checkpoint of this recipe's promoted or latest run. A
 * resumed run takes the file its first part recorded in run.json (the links may have moved
 * since); said gets what to log. */
static int warm_start_source(const struct tr_recipe *r, const char *resume_dir, struct tr_path *path,
                             struct tr_weights *w, struct tr_diag *d)
{
    const char *link = r->model.init.from_run == TR_FROM_RUN_PROMOTED ? "promoted" : "latest";
    int recorded = resume_dir ? recorded_warm_start(resume_dir, path, d) : 0;
    if (recorded < 0)
        return recorded;
    if (recorded) {
        snprintf(w->summary, sizeof w->summary, "model.init: the warm start this run began from, %.900s\n", path->s);
        return 0;
    }
    struct tr_path dir, checkpoints;
    char target[256], warn[1024];
    int rc = resume_dir ? tr_runs_parent(resume_dir, &dir, d) : tr_path_set(&dir, d, "%s/%s", r->report.dir, r->name);
    if (!rc && resume_dir && r->model.init.from_run == TR_FROM_RUN_LATEST)
        rc = previous_run(resume_dir, target, sizeof target, d);   /* killed before run.json said */
    else if (!rc && tr_runs_link_target(dir.s, link, target, sizeof target))
        *target = '\0';
    if (rc)
        return rc;
    if (!*target)
        return tr_fail(d, TR_EDATA, "model.init.from_run: %s/%s does not point to a run folder: this recipe "
                       "has no %s run yet; train it once without model.init.from_run", dir.s, link, link);
    if (tr_path_set(&checkpoints, d, "%s/%s/checkpoints", dir.s, target))
        return TR_EINVAL;
    struct tr_diag why = {0};
    if (tr_checkpoint_newest(checkpoints.s, path->s, sizeof path->s, warn, sizeof warn, &why))
        return tr_fail_because(d, TR_EDATA, &why, "model.init.from_run: the %s run %s", link, target);
    snprintf(w->summary, sizeof w->summary, "model.init: warm start from the %s run %s%s%.500s\n", link, target,
             *warn ? "; passed over damaged checkpoints: " : "", *warn ? warn : "");
    w->warm_start = json_pack("{ss ss ss}", "from_run", link, "run", target, "checkpoint", path->s);
    return 0;
}

int tr_weights_init(struct tr_session *s, const struct tr_recipe *r, const struct tr_data *data,
                    const char *resume_dir, struct tr_weights *w, struct tr_diag *d)
{
    int text = data->kind != TR_DATA_FEATURES;
    struct tr_init_target t = {.g = &s->train.b.g, .x = &s->train.x, .seed = (uint64_t)r->seed,
                               .vocab = text ? data->vocab : 0, .vocab_file = data->tokenizer_files[0],
                               .max_len = text ? r->model.max_len : 0};
    const char *path = r->model.init.path;
    struct tr_path source;
    if (r->model.init.from_run != TR_FROM_RUN_NONE) {
        int rc = warm_start_source(r, resume_dir, &source, w, d);
        if (rc)
            return rc;
        path = source.s;
    }
    struct tr_diag why = {0};   /* the initialiser's or the loader's sentence, in our words */
    if (!path)
        return tr_init_random(&t, &why) ? tr_fail_because(d, TR_EFAIL, &why, "initialising the weights") : 0;
    struct tr_init_info info;
    int rc = tr_init_load(&t, path, &info, &why) ? tr_fail(d, TR_EDATA, "model.init: %s", tr_diag_last(&why)) : 0;
    tr_diag_free(&why);
    if (rc)
        return rc;
    size_t n = strlen(w->summary);
    if (n < sizeof w->summary)
        tr_init_summary(&info, path, w->summary + n, sizeof w->summary - n);
    return 0;
}

void tr_weights_free(struct tr_weights *w)
{
    json_decref(w->warm_start);
    w->warm_start = NULL;
}
