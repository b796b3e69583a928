/* What a load read, and from where (sources.h, dataset.h): URL sources fetched into the
 * download cache, every file's identity (source, sha256, a URL's validators), and that identity
 * as data-sources.json in a run folder, which `--if-data-changed` compares with the next
 * refresh's. */
#include "data/sources.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/atomic.h"
#include "core/url.h"
#include "data/fetch.h"
#include "data/files.h"
#include "recipe/schema.h"
#include "recipe/units.h"

#define SOURCES_VERSION 1

/* The splits' files in the definition's order: each split's files, then its IDX labels. */
typedef int file_fn(struct tr_data_file *f, const struct tr_data_def *def, const struct tr_data_refresh_options *o,
                    struct tr_data *out, struct tr_diag *diag);

static int each_file(const struct tr_data_def *def, file_fn *fn, const struct tr_data_refresh_options *o,
                     struct tr_data *out, struct tr_diag *diag)
{
    const struct tr_data_source *src[4] = {&def->all, &def->train, &def->valid, &def->test};
    int rc = 0;
    for (int s = 0; s < 4 && !rc; s++) {
        for (int i = 0; i < src[s]->nfiles && !rc; i++)
            rc = fn(&src[s]->files[i], def, o, out, diag);
        if (!rc && (src[s]->labels.path || src[s]->labels.url))
            rc = fn((struct tr_data_file *)&src[s]->labels, def, o, out, diag);
    }
    return rc;
}

static const struct tr_data_origin *find_origin(const struct tr_data *d, const char *source)
{
    for (int i = 0; i < d->norigins; i++)
        if (!strcmp(d->origins[i].source, source))
            return &d->origins[i];
    return NULL;
}

static struct tr_data_origin *add_origin(struct tr_data *d, const char *source, const char *path)
{
    d->origins = tr_xrealloc(d->origins, ((size_t)d->norigins + 1) * sizeof *d->origins);
    struct tr_data_origin *o = &d->origins[d->norigins++];
    memset(o, 0, sizeof *o);
    o->source = tr_strdup(source);
    o->path = tr_strdup(path);
    return o;
}

void tr_data_refresh_options_of(const struct tr_recipe *r, struct tr_data_refresh_options *o)
{
    *o = (struct tr_data_refresh_options){.progress = stderr};
    if (r) {
        o->max_download = (int64_t)r->data.max_download;
        o->prepare_timeout = r->data.prepare_timeout;
        return;
    }
    uint64_t bytes = 0;
    tr_parse_size(tr_keys[tr_key_find("data.max_download")].def, &bytes);
    o->max_download = (int64_t)bytes;
    tr_parse_duration(tr_keys[tr_key_find("data.prepare_timeout")].def, &o->prepare_timeout);
}

static int fetch_one(struct tr_data_file *f, const struct tr_data_def *def, const struct tr_data_refresh_options *ro,
                     struct tr_data *out, struct tr_diag *diag)
{
    (void)def;
    if (!f->url)
        return 0;
    const struct tr_data_origin *seen = find_origin(out, f->url);
    if (seen) {   /* two splits name one file: fetched once */
        f->path = tr_strdup(seen->path);
        return 0;
    }
    struct tr_fetch_options o;
    struct tr_fetch_result res = {0};
    struct tr_diag why = {0};
    int rc = tr_fetch_options_from_env(&o, ro->max_download, "data.max_download", &why);
    o.progress = ro->progress;
    if (!rc)
        rc = tr_fetch(f->url, f->sha256, f->pinned_by, NULL, &o, &res, &why, &out->warnings);
    for (int i = 0; i < why.n; i++)   /* placed at the source: that names the URL */
        tr_diag_add(diag, f->source_at, "%s", why.items[i].message);
    tr_diag_free(&why);
    if (rc)
        return rc;
    f->path = tr_strdup(res.path);
    struct tr_data_origin *origin = add_origin(out, f->url, res.path);
    memcpy(origin->sha256, res.meta.sha256, sizeof origin->sha256);
    origin->etag = res.meta.etag ? tr_strdup(res.meta.etag) : NULL;
    origin->last_modified = res.meta.last_modified ? tr_strdup(res.meta.last_modified) : NULL;
    origin->downloaded = res.downloaded;
    tr_fetch_result_free(&res);
    return 0;
}

int tr_data_fetch_sources(struct tr_data_def *def, const struct tr_data_refresh_options *o, struct tr_data *out,
                          struct tr_diag *diag)
{
    return each_file(def, fetch_one, o, out, diag);
}

static int record_one(struct tr_data_file *f, const struct tr_data_def *def, const struct tr_data_refresh_options *o,
                      struct tr_data *out, struct tr_diag *diag)
{
    (void)o;
    if (f->url || find_origin(out, f->path))
        return 0;
    char sha256[65];
    /* A pinned file is checked as it is read; an unpinned one is hashed here, once more. */
    int rc = f->sha256[0] ? 0 : tr_data_check(f, def->prepare ? NULL : def->package, sha256, diag);
    if (!rc)
        memcpy(add_origin(out, f->path, f->path)->sha256, f->sha256[0] ? f->sha256 : sha256, 65);
    return rc;
}

int tr_data_record_origins(const struct tr_data_def *def, struct tr_data *out, struct tr_diag *diag)
{
    return each_file(def, record_one, NULL, out, diag);
}

void tr_data_origins_free(struct tr_data *d)
{
    for (int i = 0; i < d->norigins; i++) {
        free(d->origins[i].source);
        free(d->origins[i].path);
        free(d->origins[i].etag);
        free(d->origins[i].last_modified);
    }
    free(d->origins);
    d->origins = NULL;
    d->norigins = 0;
}

/* ---- data-sources.json ------------------------------------------------------------------------ */

static json_t *string_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

json_t *tr_data_sources_json(const struct tr_data *d)
{
    json_t *list = json_array();
    for (int i = 0; i < d->norigins; i++) {
        const struct tr_data_origin *o = &d->origins[i];
        json_t *j = json_object();
        char *shown = tr_url_redact(o->source, TR_URL_CREDENTIALS);   /* a path is kept as it is */
        json_object_set_new(j, "source", json_string(shown));
        free(shown);
        json_object_set_new(j, "path", json_string(o->path));
        json_object_set_new(j, "sha256", json_string(o->sha256));
        json_object_set_new(j, "etag", string_or_null(o->etag));
        json_object_set_new(j, "last_modified", string_or_null(o->last_modified));
        json_array_append_new(list, j);
    }
    json_t *doc = json_object();
    json_object_set_new(doc, "version", json_integer(SOURCES_VERSION));
    json_object_set_new(doc, "dataset", json_string(d->name));
    json_object_set_new(doc, "sources", list);
    return doc;
}

int tr_data_sources_write(const struct tr_data *d, const char *dir, struct tr_diag *diag)
{
    char *path = tr_strdup_printf("%s/data-sources.json", dir);
    json_t *doc = tr_data_sources_json(d);
    struct tr_diag said = {0};   /* worded below, from errno */
    int rc = 0;
    if (tr_atomic_write_json(path, doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER, &said)) {
        tr_diag_add(diag, (struct tr_where){.file = path}, "cannot write: %s", strerror(errno ? errno : EIO));
        rc = TR_EIO;
    }
    tr_diag_free(&said);
    json_decref(doc);
    free(path);
    return rc;
}

static bool same_text(const json_t *x, const json_t *y, const char *key)
{
    const char *a = json_string_value(json_object_get(x, key)), *b = json_string_value(json_object_get(y, key));
    return a && b && !strcmp(a, b);
}

/* Whether every source of a has a namesake in b with the same sha256. */
static bool covered(const json_t *a, const json_t *b)
{
    size_t i, k;
    json_t *x, *y;
    json_array_foreach(a, i, x) {
        bool found = false;
        json_array_foreach(b, k, y)
            found = found || (same_text(x, y, "source") && same_text(x, y, "sha256"));
        if (!found)
            return false;
    }
    return true;
}

bool tr_data_sources_same(const json_t *a, const json_t *b)
{
    const json_t *la = json_object_get(a, "sources"), *lb = json_object_get(b, "sources");
    return json_is_array(la) && json_is_array(lb) && json_array_size(la) > 0 && covered(la, lb) && covered(lb, la);
}

/* The first of now's sources whose sha256 is not then's at the same place, or "the number of
 * files"; NULL when they match. */
static const char *changed_file(const json_t *now, const json_t *then)
{
    const json_t *la = json_object_get(now, "sources"), *lb = json_object_get(then, "sources");
    if (!json_is_array(la) || !json_is_array(lb) || json_array_size(la) != json_array_size(lb))
        return "the number of files";
    size_t i;
    json_t *x;
    json_array_foreach(la, i, x) {
        if (!same_text(x, json_array_get(lb, i), "sha256")) {
            const char *name = json_string_value(json_object_get(x, "source"));
            return name ? name : "a file";
        }
    }
    return NULL;
}

const char *tr_data_changed_since(const struct tr_data *d, const char *dir, char *what, size_t size)
{
    char *path = tr_strdup_printf("%s/data-sources.json", dir);
    json_t *then = json_load_file(path, 0, NULL), *now = then ? tr_data_sources_json(d) : NULL;
    const char *changed = then ? changed_file(now, then) : NULL;
    if (changed)
        snprintf(what, size, "%s", changed);
    json_decref(now), json_decref(then);
    free(path);
    return changed ? what : NULL;
}
