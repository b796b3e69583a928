/* Named device profiles (DESIGN.md §4): a machine one does not have, read from etc/devices.yaml
 * for `trainrun plan --device-profile NAME`. Every key of a profile is required and checked, so
 * a typo in the data file is a sentence with file:line, never a zero in a plan. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "core/error.h"
#include "core/input.h"
#include "plan/device.h"
#include "recipe/yaml_load.h"
#include "recipe/units.h"

/* One profile being read: where it is, and where a problem goes. */
struct profile_reader {
    const char *path, *name;
    yaml_document_t *doc;
    yaml_node_t *profile;       /* the profile's mapping */
    struct tr_diag *diag;
};

#define MAX_PROFILES_BYTES (1 << 20)   /* a page of profiles; a megabyte is a mistake */

static const char *const precision_keys[TR_NPRECISIONS] = {"fp32", "bf16", "fp16"};

/* ---- the file -------------------------------------------------------------------------- */
/* Parses path into doc. 0, TR_EIO (cannot open) or TR_EINVAL (not YAML, or not a mapping). */
static int load_document(const char *path, yaml_document_t *doc, struct tr_diag *diag)
{
    struct tr_diag why = {0};
    FILE *f = tr_fopen_regular(path, &why);   /* a FIFO would block, /dev/zero never end */
    if (!f)
        return tr_fail_because(diag, TR_EIO, &why, "cannot read %s", path);
    char *text = tr_xmalloc(MAX_PROFILES_BYTES + 1);   /* read whole: tr_yaml_load checks it first */
    size_t len = fread(text, 1, MAX_PROFILES_BYTES + 1, f);
    bool unread = ferror(f) || len > MAX_PROFILES_BYTES;
    fclose(f);
    if (unread) {
        free(text);
        return tr_fail(diag, TR_EIO, "cannot read %s: %s", path,
                       len > MAX_PROFILES_BYTES ? "larger than 1 MiB" : "read error");
    }
    yaml_parser_t parser;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    int ok = tr_yaml_load(&parser, text, len, doc);   /* within the depth and alias limits */
    int rc = 0;
    if (!ok)
        rc = tr_fail(diag, parser.error == YAML_READER_ERROR ? TR_EIO : TR_EINVAL,
                     "%s:%zu:%zu: %s", path, parser.problem_mark.line + 1,
                     parser.problem_mark.column + 1, parser.problem ? parser.problem : "invalid YAML");
    yaml_parser_delete(&parser);
    free(text);
    if (rc)
        return rc;
    yaml_node_t *root = yaml_document_get_root_node(doc);
    if (!root || root->type != YAML_MAPPING_NODE) {
        rc = tr_fail(diag, TR_EINVAL, "%s:%zu: device profiles must be a mapping of names to "
                     "profiles", path, root ? root->start_mark.line + 1 : 1);
        yaml_document_delete(doc);
    }
    return rc;
}

static const char *scalar_text(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* The value of key in mapping map, or NULL. */
static yaml_node_t *lookup(yaml_document_t *doc, yaml_node_t *map, const char *key)
{
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const char *k = scalar_text(yaml_document_get_node(doc, p->key));
        if (k && strcmp(k, key) == 0)
            return yaml_document_get_node(doc, p->value);
    }
    return NULL;
}

/* The names of the profiles in doc, ", "-separated, into out. 0, or TR_EINVAL when they do not
 * fit (out then holds those that did, ended by "…"). */
static int list_names(yaml_document_t *doc, char *out, size_t size)
{
    yaml_node_t *root = yaml_document_get_root_node(doc);
    size_t used = 0;
    if (size)
        out[0] = '\0';
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        const char *name = scalar_text(yaml_document_get_node(doc, p->key));
        if (!name)
            continue;
        int n = snprintf(out + used, size - used, "%s%s", used ? ", " : "", name);
        if (n < 0 || (size_t)n >= size - used) {
            if (size >= 4)
                snprintf(out + (used < size - 4 ? used : size - 4), 4, "%s", "…");
            return TR_EINVAL;
        }
        used += (size_t)n;
    }
    return 0;
}

/* ---- one key of a profile -------------------------------------------------------------- */
static int key_error(const struct profile_reader *rd, const yaml_node_t *at, const char *key,
                     const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* "PATH:LINE: device profile 'NAME': key 'KEY' " followed by the sentence's end. */
static int key_error(const struct profile_reader *rd, const yaml_node_t *at, const char *key,
                     const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return tr_fail(rd->diag, TR_EINVAL, "%s:%zu: device profile '%s': key '%s' %s",
                   rd->path, at->start_mark.line + 1, rd->name, key, why);
}

/* The scalar text of key (dotted "gemm_tflops.bf16" for one level down), or NULL with the sentence in rd->diag. */
static const char *need_scalar(const struct profile_reader *rd, const char *key)
{
    yaml_node_t *map = rd->profile;
    const char *dot = strchr(key, '.');
    if (dot) {
        char section[32];
        snprintf(section, sizeof section, "%.*s", (int)(dot - key), key);
        map = lookup(rd->doc, rd->profile, section);
        if (!map || map->type != YAML_MAPPING_NODE) {
            key_error(rd, map ? map : rd->profile, section, map ? "must be a mapping of fp32, bf16 "
                      "and fp16" : "is missing");
            return NULL;
        }
    }
    yaml_node_t *value = lookup(rd->doc, map, dot ? dot + 1 : key);
    if (!value)
        key_error(rd, map, key, "is missing");
    else if (value->type != YAML_SCALAR_NODE)
        key_error(rd, value, key, "must be a single value, not a %s",
                  value->type == YAML_MAPPING_NODE ? "mapping" : "list");
    else
        return scalar_text(value);
    return NULL;
}

/* The node of key, for a place in a message once the text is known to be wrong. */
static yaml_node_t *node_of(const struct profile_reader *rd, const char *key)
{
    const char *dot = strchr(key, '.');
    if (!dot)
        return lookup(rd->doc, rd->profile, key);
    char section[32];
    snprintf(section, sizeof section, "%.*s", (int)(dot - key), key);
    return lookup(rd->doc, lookup(rd->doc, rd->profile, section), dot + 1);
}

static int read_number(const struct profile_reader *rd, const char *key, double *out)
{
    const char *text = need_scalar(rd, key);
    if (!text)
        return TR_EINVAL;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || errno || !isfinite(v) || v < 0)
        return key_error(rd, node_of(rd, key), key, "must be a number ≥ 0, not '%s'", text);
    *out = v;
    return 0;
}

static int read_bool(const struct profile_reader *rd, const char *key, bool *out)
{
    const char *text = need_scalar(rd, key);
    if (!text)
        return TR_EINVAL;
    if (strcmp(text, "true") && strcmp(text, "false"))
        return key_error(rd, node_of(rd, key), key, "must be true or false, not '%s'", text);
    *out = text[0] == 't';
    return 0;
}

static int read_size(const struct profile_reader *rd, const char *key, uint64_t *out)
{
    const char *text = need_scalar(rd, key);
    if (!text)
        return TR_EINVAL;
    if (tr_parse_size(text, out))
        return key_error(rd, node_of(rd, key), key, "must be a size such as 24GiB or a number of "
                         "bytes, not '%s'", text);
    return 0;
}

static int read_string(const struct profile_reader *rd, const char *key, char *out, size_t size)
{
    const char *text = need_scalar(rd, key);
    if (!text)
        return TR_EINVAL;
    if (!*text || strlen(text) >= size)
        return key_error(rd, node_of(rd, key), key, "must be a non-empty string of at most %zu "
                         "bytes", size - 1);
    memcpy(out, text, strlen(text) + 1);
    return 0;
}

static int read_threads(const struct profile_reader *rd, int *out)
{
    double v;
    int rc = read_number(rd, "threads", &v);
    if (rc)
        return rc;
    if (v < 1 || v > 4096 || v != floor(v))
        return key_error(rd, node_of(rd, "threads"), "threads", "must be a whole number from 1 to "
                         "4096, not %g", v);
    *out = (int)v;
    return 0;
}

/* ---- the profile ----------------------------------------------------------------------- */
static int read_kind(const struct profile_reader *rd, int *kind)
{
    const char *text = need_scalar(rd, "kind");
    if (!text)
        return TR_EINVAL;
    if (strcmp(text, "cuda") == 0)
        *kind = TR_DEVICE_CUDA;
    else if (strcmp(text, "cpu") == 0)
        *kind = TR_DEVICE_CPU;
    else
        return key_error(rd, node_of(rd, "kind"), "kind", "must be cuda or cpu, not '%s'", text);
    return 0;
}

/* supports.* and gemm_tflops.*, and that they agree: fp32 always, a rate for what is supported. */
static int read_precisions(const struct profile_reader *rd, struct tr_device *d)
{
    for (int p = 0; p < TR_NPRECISIONS; p++) {
        char supports[32], rate[32];
        snprintf(supports, sizeof supports, "supports.%s", precision_keys[p]);
        snprintf(rate, sizeof rate, "gemm_tflops.%s", precision_keys[p]);
        double tflops;
        int rc = read_bool(rd, supports, &d->supports[p]);
        if (!rc)
            rc = read_number(rd, rate, &tflops);
        if (rc)
            return rc;
        if (p == 0 && !d->supports[p])
            return key_error(rd, node_of(rd, supports), supports, "must be true: every device "
                             "computes in fp32");
        if (d->supports[p] && tflops <= 0)
            return key_error(rd, node_of(rd, rate), rate, "must be above 0 when %s is true",
                             supports);
        d->gemm_flops[p] = tflops * 1e12;
    }
    return 0;
}

/* The rates and fixed costs: bandwidth, the host link (optional: tr_device_host_link's
 * default where a profile has none), per-kernel cost, widening. */
static int read_rates(const struct profile_reader *rd, struct tr_device *d)
{
    double gbs = 0, node_us = 0, link = 0;
    int rc = read_number(rd, "bandwidth_gbs", &gbs);
    if (!rc && gbs <= 0)
        rc = key_error(rd, node_of(rd, "bandwidth_gbs"), "bandwidth_gbs", "must be above 0");
    const yaml_node_t *given = node_of(rd, "host_link_gbs");
    if (!rc && given)
        rc = read_number(rd, "host_link_gbs", &link);
    if (!rc && given && link <= 0)
        rc = key_error(rd, given, "host_link_gbs", "must be above 0");
    d->host_link = link * 1e9;
    if (!rc)
        rc = read_number(rd, "node_us", &node_us);
    if (!rc)
        rc = read_number(rd, "widen_16bit", &d->widen_16bit);
    if (!rc && d->widen_16bit != 0 && d->widen_16bit != 1)
        rc = key_error(rd, node_of(rd, "widen_16bit"), "widen_16bit", "must be 0 or 1");
    d->bandwidth = gbs * 1e9;
    d->node_seconds = node_us * 1e-6;
    return rc;
}

/* What lives outside the regions; threads and what they take for a cpu profile. */
static int read_resident(const struct profile_reader *rd, struct tr_device *d)
{
    int rc = read_size(rd, "memory", &d->memory);
    if (!rc && d->memory == 0)
        rc = key_error(rd, node_of(rd, "memory"), "memory", "must be above 0");
    if (!rc)
        rc = read_size(rd, "context", &d->context_bytes);
    if (!rc)
        rc = read_size(rd, "library_workspace", &d->library_workspace);
    if (!rc && d->kind == TR_DEVICE_CPU)
        rc = read_threads(rd, &d->threads);
    if (!rc && d->kind == TR_DEVICE_CPU)
        rc = read_size(rd, "thread_bytes", &d->thread_bytes);
    return rc;
}

static int read_profile(const struct profile_reader *rd, struct tr_device *d)
{
    if (rd->profile->type != YAML_MAPPING_NODE)
        return tr_fail(rd->diag, TR_EINVAL, "%s:%zu: device profile '%s' must be a "
                       "mapping of keys", rd->path, rd->profile->start_mark.line + 1, rd->name);
    int rc = read_kind(rd, &d->kind);
    if (!rc)
        rc = read_string(rd, "description", d->description, sizeof d->description);
    if (!rc)
        rc = read_precisions(rd, d);
    if (!rc)
        rc = read_rates(rd, d);
    if (!rc)
        rc = read_resident(rd, d);
    if (!rc)
        rc = read_string(rd, "source", d->source, sizeof d->source);
    return rc;
}

static int unknown_profile(yaml_document_t *doc, const char *path, const char *name, struct tr_diag *diag)
{
    char names[1024];
    list_names(doc, names, sizeof names);
    return tr_fail(diag, TR_EINVAL, "no device profile '%s' in %s; there are: %s", name, path,
                   names);
}

int tr_device_profile(const char *path, const char *name, struct tr_device *d, struct tr_diag *diag)
{
    if (strlen(name) >= sizeof d->name || strlen(path) >= sizeof d->path.s)
        return tr_fail(diag, TR_EINVAL, "device profile name or path too long: '%s'", name);
    yaml_document_t doc;
    int rc = load_document(path, &doc, diag);
    if (rc)
        return rc;
    struct profile_reader rd = {path, name, &doc, lookup(&doc, yaml_document_get_root_node(&doc), name),
                                diag};
    struct tr_device got = {0};
    if (!rd.profile)
        rc = unknown_profile(&doc, path, name, diag);
    else
        rc = read_profile(&rd, &got);
    yaml_document_delete(&doc);
    if (rc)
        return rc;
    snprintf(got.name, sizeof got.name, "%s", name);
    snprintf(got.path.s, sizeof got.path.s, "%s", path);
    *d = got;
    return 0;
}

int tr_device_profile_names(const char *path, char *out, size_t size)
{
    if (size)
        out[0] = '\0';
    yaml_document_t doc;
    int rc = load_document(path, &doc, NULL);
    if (rc)
        return rc;
    rc = list_names(&doc, out, size);
    yaml_document_delete(&doc);
    return rc;
}
