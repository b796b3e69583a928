/* The event-file writer (events.h). Field numbers and wire types are those of TensorBoard's
 * protos as the reference lists them: Event §4, Summary §5, text §6, hparams §7. */
#include "report/events.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "report/crc32c.h"

/* Event */
enum { EV_WALL_TIME = 1, EV_STEP = 2, EV_FILE_VERSION = 3, EV_GRAPH_DEF = 4, EV_SUMMARY = 5,
       EV_SESSION_LOG = 7 };
/* Summary.value, Summary.Value, SummaryMetadata, PluginData */
enum { SUMMARY_VALUE = 1, VALUE_TAG = 1, VALUE_SIMPLE = 2, VALUE_TENSOR = 8, VALUE_METADATA = 9,
       META_PLUGIN_DATA = 1, PLUGIN_NAME = 1, PLUGIN_CONTENT = 2 };
/* TensorProto, TensorShapeProto, DataType */
enum { TENSOR_DTYPE = 1, TENSOR_SHAPE = 2, TENSOR_CONTENT = 4, TENSOR_STRING_VAL = 8,
       SHAPE_DIM = 2, DIM_SIZE = 1, DT_FLOAT = 1, DT_DOUBLE = 2, DT_STRING = 7 };
/* hparams: HParamsPluginData, SessionStartInfo, SessionEndInfo, google.protobuf.Value */
enum { HP_SESSION_START = 3, HP_SESSION_END = 4, START_HPARAMS = 1, START_TIME = 5, END_STATUS = 1,
       END_TIME = 2, MAP_KEY = 1, MAP_VALUE = 2, PV_NUMBER = 2, PV_STRING = 3, PV_BOOL = 4 };

static double wall_time(const struct tr_events *ev)
{
    if (ev->fixed_time)
        return ev->fixed_time;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double monotonic(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void tr_events_frame(struct tr_pb *out, const void *data, size_t n)
{
    uint64_t len = n;
    uint32_t len_crc = tr_crc32c_mask(tr_crc32c(&len, 8)), data_crc = tr_crc32c_mask(tr_crc32c(data, n));
    tr_pb_raw(out, &len, 8);
    tr_pb_raw(out, &len_crc, 4);
    tr_pb_raw(out, data, n);
    tr_pb_raw(out, &data_crc, 4);
}

/* Frames one Event {wall_time, step, <field> = body} into the pending records; frees body. */
static void event(struct tr_events *ev, int64_t step, int field, struct tr_pb *body)
{
    struct tr_pb e = {0};
    tr_pb_double(&e, EV_WALL_TIME, wall_time(ev));
    if (step)
        tr_pb_uint(&e, EV_STEP, (uint64_t)step);
    tr_pb_take(&e, field, body);
    if (ev->fd >= 0)
        tr_events_frame(&ev->pending, e.data, e.len);
    tr_pb_free(&e);
    if (ev->pending.len > (1u << 20))   /* a megabyte waiting: write it, without fsync */
        tr_events_flush(ev, 0);
}

/* Summary {value {tag, metadata {plugin_data {plugin_name, content}}, tensor}}, as an Event */
static void summary(struct tr_events *ev, const char *tag, int64_t step, const char *plugin,
                    const struct tr_pb *content, struct tr_pb *tensor)
{
    struct tr_pb plugin_data = {0}, meta = {0}, value = {0}, sum = {0};
    tr_pb_string(&plugin_data, PLUGIN_NAME, plugin);
    if (content && content->len)
        tr_pb_message(&plugin_data, PLUGIN_CONTENT, content);
    tr_pb_take(&meta, META_PLUGIN_DATA, &plugin_data);
    tr_pb_string(&value, VALUE_TAG, tag);
    tr_pb_take(&value, VALUE_TENSOR, tensor);
    tr_pb_take(&value, VALUE_METADATA, &meta);
    tr_pb_take(&sum, SUMMARY_VALUE, &value);
    event(ev, step, EV_SUMMARY, &sum);
}

/* TensorProto {dtype, tensor_shape {dim {size}…}} */
static struct tr_pb tensor_head(int dtype, int rank, const int64_t *dims)
{
    struct tr_pb t = {0}, shape = {0};
    tr_pb_uint(&t, TENSOR_DTYPE, (uint64_t)dtype);
    for (int i = 0; i < rank; i++) {
        struct tr_pb dim = {0};
        if (dims[i])   /* proto3 leaves zeros out: [0] is "12 00", as TensorFlow writes it */
            tr_pb_uint(&dim, DIM_SIZE, (uint64_t)dims[i]);
        tr_pb_take(&shape, SHAPE_DIM, &dim);
    }
    tr_pb_take(&t, TENSOR_SHAPE, &shape);   /* empty for rank 0: "12 00" */
    return t;
}

int tr_events_open(struct tr_events *ev, const char *dir, int64_t first_step, double flush_secs,
                   struct tr_diag *d)
{
    *ev = (struct tr_events){.fd = -1, .flush_secs = flush_secs, .fixed_time = ev->fixed_time};
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    for (char *c = host; *c; c++)
        if (*c == '/')
            *c = '_';
    for (unsigned n = 0; ev->fd < 0 && n < 100; n++) {
        if (tr_path_set(&ev->path, d, "%s/events.out.tfevents.%010lld.%s.%d.%u", dir, (long long)time(NULL),
                        host, (int)getpid(), n))
            return TR_EINVAL;
        ev->fd = open(ev->path.s, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (ev->fd < 0 && errno != EEXIST)
            break;
    }
    if (ev->fd < 0)
        return tr_fail(d, TR_EIO, "cannot create %s: %s", ev->path.s, strerror(errno));
    struct tr_pb version = {0}, start = {0};
    tr_pb_raw(&version, "brain.Event:2", 13);
    event(ev, 0, EV_FILE_VERSION, &version);
    tr_pb_uint(&start, 1, 1);   /* SessionLog {status: START} */
    event(ev, first_step, EV_SESSION_LOG, &start);
    if (tr_events_flush(ev, 1))
        return tr_fail(d, TR_EIO, "%s", ev->error);
    return 0;
}

void tr_events_scalar(struct tr_events *ev, const char *tag, int64_t step, double value)
{
    struct tr_pb v = {0}, sum = {0};   /* Summary.Value {tag, simple_value}: no metadata needed */
    tr_pb_string(&v, VALUE_TAG, tag);
    tr_pb_float(&v, VALUE_SIMPLE, (float)value);
    tr_pb_take(&sum, SUMMARY_VALUE, &v);
    event(ev, step, EV_SUMMARY, &sum);
}

void tr_events_text(struct tr_events *ev, const char *tag, int64_t step, const char *markdown)
{
    struct tr_pb t = tensor_head(DT_STRING, 0, NULL);
    tr_pb_string(&t, TENSOR_STRING_VAL, markdown);
    summary(ev, tag, step, "text", NULL, &t);
}

#define HISTOGRAM_BUCKETS 30

void tr_events_histogram(struct tr_events *ev, const char *tag, int64_t step, const float *v, int64_t n)
{
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(v[i]))
            lo = v[i] < lo ? v[i] : lo, hi = v[i] > hi ? v[i] : hi;
    int k = lo < hi ? HISTOGRAM_BUCKETS : lo == hi ? 1 : 0;   /* no finite value: no bucket */
    double rows[HISTOGRAM_BUCKETS][3] = {{0}}, width = k > 1 ? (hi - lo) / k : 0;
    for (int b = 0; b < k; b++)
        rows[b][0] = lo + width * b, rows[b][1] = b == k - 1 ? hi : lo + width * (b + 1);
    if (k == 1)
        rows[0][0] = lo - 0.5, rows[0][1] = hi + 0.5;
    for (int64_t i = 0; i < n && k; i++)
        if (isfinite(v[i])) {
            int b = k > 1 ? (int)((v[i] - lo) / width) : 0;
            rows[b < k ? b : k - 1][2] += 1;
        }
    struct tr_pb t = tensor_head(DT_DOUBLE, 2, (int64_t[]){k, 3});
    tr_pb_bytes(&t, TENSOR_CONTENT, rows, sizeof(double) * 3 * (size_t)k);
    summary(ev, tag, step, "histograms", NULL, &t);
}

/* The hparams plugin's values carry an empty float tensor of shape [0] (reference §7.1). */
static void hparams_summary(struct tr_events *ev, const char *tag, struct tr_pb *content)
{
    struct tr_pb t = tensor_head(DT_FLOAT, 1, (int64_t[]){0});
    summary(ev, tag, 0, "hparams", content, &t);
    tr_pb_free(content);
}

void tr_events_session_start(struct tr_events *ev, const struct tr_hparam *hp, int n, double start_secs)
{
    struct tr_pb info = {0}, content = {0};
    for (int i = 0; i < n; i++) {
        struct tr_pb entry = {0}, value = {0};
        if (hp[i].kind == TR_HP_NUMBER)
            tr_pb_double(&value, PV_NUMBER, hp[i].number);
        else if (hp[i].kind == TR_HP_STRING)
            tr_pb_string(&value, PV_STRING, hp[i].string ? hp[i].string : "");
        else
            tr_pb_uint(&value, PV_BOOL, hp[i].flag != 0);   /* a oneof member: written even if false */
        tr_pb_string(&entry, MAP_KEY, hp[i].name);
        tr_pb_take(&entry, MAP_VALUE, &value);
        tr_pb_take(&info, START_HPARAMS, &entry);
    }
    tr_pb_double(&info, START_TIME, start_secs);
    tr_pb_take(&content, HP_SESSION_START, &info);
    hparams_summary(ev, "_hparams_/session_start_info", &content);
}

void tr_events_session_end(struct tr_events *ev, enum tr_session_status status, double end_secs)
{
    struct tr_pb info = {0}, content = {0};
    tr_pb_uint(&info, END_STATUS, (uint64_t)status);
    tr_pb_double(&info, END_TIME, end_secs);
    tr_pb_take(&content, HP_SESSION_END, &info);
    hparams_summary(ev, "_hparams_/session_end_info", &content);
}

void tr_events_graph(struct tr_events *ev, const struct tr_pb *graph_def)
{
    struct tr_pb copy = {0};
    tr_pb_raw(&copy, graph_def->data, graph_def->len);
    event(ev, 0, EV_GRAPH_DEF, &copy);
}

int tr_events_flush(struct tr_events *ev, int sync)
{
    if (ev->fd < 0)
        return *ev->error ? -1 : 0;
    size_t done = 0;
    while (done < ev->pending.len) {
        ssize_t w = write(ev->fd, ev->pending.data + done, ev->pending.len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            snprintf(ev->error, sizeof ev->error, "writing %s: %s", ev->path.s,
                     w < 0 ? strerror(errno) : "no progress");
            close(ev->fd);
            ev->fd = -1;
            tr_pb_free(&ev->pending);
            return -1;
        }
        done += (size_t)w;
    }
    ev->pending.len = 0;
    ev->flushed_at = monotonic();
    if (sync && fsync(ev->fd) && errno != EINVAL) {
        snprintf(ev->error, sizeof ev->error, "syncing %s: %s", ev->path.s, strerror(errno));
        close(ev->fd);
        ev->fd = -1;
        return -1;
    }
    return 0;
}

void tr_events_tick(struct tr_events *ev)
{
    if (ev->fd >= 0 && ev->pending.len && monotonic() - ev->flushed_at >= ev->flush_secs)
        tr_events_flush(ev, 0);
}

int tr_events_close(struct tr_events *ev)
{
    int rc = tr_events_flush(ev, 1);
    if (ev->fd >= 0 && close(ev->fd) && !rc) {
        snprintf(ev->error, sizeof ev->error, "closing %s: %s", ev->path.s, strerror(errno));
        rc = -1;
    }
    ev->fd = -1;
    tr_pb_free(&ev->pending);
    return rc;
}

const char *tr_events_error(const struct tr_events *ev)
{
    return *ev->error ? ev->error : NULL;
}

int64_t tr_events_written(const struct tr_events *ev)
{
    return ev->fd >= 0 && !ev->pending.len ? (int64_t)lseek(ev->fd, 0, SEEK_CUR) : -1;
}

/* ---- cutting a file back ----------------------------------------------------------------------- */

/* A varint at *at (below end); false when it runs past end. */
static bool read_varint(const uint8_t **at, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; *at < end && shift < 64; shift += 7) {
        uint8_t byte = *(*at)++;
        *v |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80))
            return true;
    }
    return false;
}

/* An Event's step (field 2), 0 when it has none (the version record, the run's texts, graph and
 * HParams); -1 when the bytes are not an Event. */
static int64_t event_step(const uint8_t *at, size_t n)
{
    const uint8_t *end = at + n;
    while (at < end) {
        uint64_t key, v;
        if (!read_varint(&at, end, &key))
            return -1;
        switch (key & 7) {
        case 0:
            if (!read_varint(&at, end, &v))
                return -1;
            if (key >> 3 == EV_STEP)
                return (int64_t)v;
            break;
        case 1: at += 8; break;
        case 5: at += 4; break;
        case 2:
            if (!read_varint(&at, end, &v) || v > (uint64_t)(end - at))
                return -1;
            at += v;
            break;
        default:
            return -1;
        }
    }
    return at == end ? 0 : -1;
}

/* Where the records of data stop being wanted: at keep bytes (>= 0) or the first record past
 * last_step, whichever comes first, and at a torn or damaged record in any case. */
static size_t wanted_bytes(const uint8_t *data, size_t size, int64_t keep, int64_t last_step)
{
    size_t at = 0, limit = keep >= 0 && (uint64_t)keep < size ? (size_t)keep : size;
    while (at + 12 <= limit) {
        uint64_t n;
        uint32_t len_crc, data_crc;
        memcpy(&n, data + at, 8), memcpy(&len_crc, data + at + 8, 4);
        if (len_crc != tr_crc32c_mask(tr_crc32c(&n, 8)) || n > limit - at - 16)
            break;
        memcpy(&data_crc, data + at + 12 + n, 4);
        int64_t step = event_step(data + at + 12, (size_t)n);
        if (data_crc != tr_crc32c_mask(tr_crc32c(data + at + 12, (size_t)n)) || step < 0 || step > last_step)
            break;
        at += 12 + (size_t)n + 4;
    }
    return at;
}

int tr_events_trim(const char *path, int64_t keep, int64_t last_step, struct tr_diag *d)
{
    int fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        int e = fd < 0 ? errno : EINVAL;
        if (fd >= 0)
            close(fd);
        return tr_fail(d, TR_EIO, "cannot cut back %s: %s", path, fd < 0 ? strerror(e) : "not a regular file");
    }
    uint8_t *data = tr_xmalloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, data + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    size_t cut = wanted_bytes(data, got, keep, last_step);
    free(data);
    int rc = 0;
    if (cut < (size_t)st.st_size && (ftruncate(fd, (off_t)cut) || fsync(fd)))
        rc = tr_fail(d, TR_EIO, "cannot cut back %s: %s", path, strerror(errno));
    close(fd);
    return rc;
}
