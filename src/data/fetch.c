/* One URL into the download cache (fetch.h), with libcurl's easy API. In the cache folder, for a
 * file NAME: NAME (the verified copy), NAME.json (its metadata), NAME.part and NAME.part.json
 * (a download in progress and the validators it began with, so a later attempt can resume it
 * with Range + If-Range), NAME.lock (held while fetching: two runs never write one file).
 * Downloads are written 0644 and renamed into place only after their sha256 is checked; the
 * metadata and the lock 0600, the URL in them without its credentials (core/url.h). A download
 * stops at the cap (data.max_download), and at a stop asked for by a signal (core/stop.h). */
#include "data/fetch.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "core/atomic.h"
#include "core/stop.h"
#include "core/url.h"
#include "data/cache.h"
#include "data/definition.h"
#include "data/files.h"
#include "data/sha256.h"

#define FILE_MODE 0644            /* data: never executable */
#define META_MODE 0600            /* what the cache knows of a URL: the owner's business alone */
#define MAX_BACKOFF_DEFAULT 60.0
#define ERROR_PAGE_MAX (1 << 20)  /* bytes of an error page read (and dropped) before giving up */

/* ---- options ---------------------------------------------------------------------------------- */

/* One TRAINRUN_FETCH_* variable: its number in [min, max] (whole when whole), def when unset or
 * empty; a value that is not such a number is refused, naming it and the range. */
static int env_number(const char *name, double def, double min, double max, bool whole, double *v,
                      struct tr_diag *d)
{
    const char *s = getenv(name);
    *v = def;
    if (!s || !*s)
        return 0;
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(x) || x < min || x > max || (whole && x != floor(x)))
        return tr_fail(d, TR_EINVAL, "%s=%s: not %s from %g to %g", name, s, whole ? "a whole number" : "a number",
                       min, max);
    *v = x;
    return 0;
}

int tr_fetch_options_from_env(struct tr_fetch_options *o, int64_t max_bytes, const char *max_bytes_from,
                              struct tr_diag *d)
{
    double timeout, retries, backoff, cap;
    int rc = env_number("TRAINRUN_FETCH_TIMEOUT", 30, 1, 86400, false, &timeout, d);
    rc = rc ? rc : env_number("TRAINRUN_FETCH_RETRIES", 4, 0, 100, true, &retries, d);
    rc = rc ? rc : env_number("TRAINRUN_FETCH_BACKOFF", 2, 0, 3600, false, &backoff, d);
    rc = rc ? rc : env_number("TRAINRUN_FETCH_MAX_BYTES", -1, 0, 9007199254740992.0, true, &cap, d);
    *o = (struct tr_fetch_options){.timeout = (long)ceil(timeout), .retries = (int)retries, .backoff = backoff,
                                   .backoff_max = MAX_BACKOFF_DEFAULT > backoff ? MAX_BACKOFF_DEFAULT : backoff,
                                   .max_bytes = cap >= 0 ? (int64_t)cap : max_bytes,
                                   .max_bytes_from = cap >= 0 ? "TRAINRUN_FETCH_MAX_BYTES" : max_bytes_from};
    return rc;
}

double tr_fetch_backoff(const struct tr_fetch_options *o, int retry)
{
    double wait = o->backoff * ldexp(1.0, retry < 62 ? retry : 62);
    return wait < o->backoff_max ? wait : o->backoff_max;
}

/* ---- names ------------------------------------------------------------------------------------ */

bool tr_fetch_is_url(const char *s)
{
    size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-");
    return n > 0 && !strncmp(s + n, "://", 3);
}

bool tr_fetch_scheme_allowed(const char *url)
{
    return !strncasecmp(url, "https://", 8) || !strncasecmp(url, "http://", 7) || !strncasecmp(url, "file://", 7);
}

char *tr_fetch_cache_name(const char *url)
{
    char hex[65];
    tr_sha256_of(url, strlen(url), hex);
    const char *path = strstr(url, "://");
    path = path ? path + 3 : url;
    size_t end = strcspn(path, "?#");
    size_t start = end;
    while (start > 0 && path[start - 1] != '/')
        start--;
    if (start == 0 && strchr(path, '/') == NULL)   /* "https://host": no path at all */
        start = end;
    char base[65];
    size_t n = 0;
    for (size_t i = start; i < end && n < sizeof base - 1; i++) {
        char c = path[i];
        bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                     c == '_' || c == '-';
        base[n++] = plain ? c : '_';
    }
    base[n] = '\0';
    if (n == 0 || base[0] == '.')   /* never a hidden file, never "." or ".." */
        return tr_strdup_printf("%.32s-%s%s", hex, n ? "_" : "download", base);
    return tr_strdup_printf("%.32s-%s", hex, base);
}

/* ---- metadata --------------------------------------------------------------------------------- */

static void utc_now(char out[32])
{
    time_t t = time(NULL);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
}

int tr_fetch_meta_write(const char *path, const struct tr_fetch_meta *m)
{
    char *shown = tr_url_redact(m->url ? m->url : "", TR_URL_CREDENTIALS);
    json_t *j = json_pack("{ss ss* ss* ss sI ss}", "url", shown, "etag", m->etag,
                          "last_modified", m->last_modified, "sha256", m->sha256, "bytes", (json_int_t)m->bytes,
                          "fetched", m->fetched);
    if (!j) {
        free(shown);
        return EINVAL;
    }
    json_object_set_new(j, "etag", m->etag ? json_string(m->etag) : json_null());
    json_object_set_new(j, "last_modified", m->last_modified ? json_string(m->last_modified) : json_null());
    struct tr_atomic a;   /* the one atomic writer (core/atomic.h); its sentence is the caller's to word */
    struct tr_diag said = {0};
    int err = 0;
    errno = 0;
    if (tr_atomic_open(&a, path, &said))
        err = a.error;
    else if (fchmod(fileno(a.f), META_MODE) || json_dumpf(j, a.f, JSON_INDENT(2) | JSON_PRESERVE_ORDER)) {
        err = errno ? errno : EIO;
        tr_atomic_abort(&a);
    } else if (tr_atomic_commit(&a, &said))
        err = a.error;
    tr_diag_free(&said);
    json_decref(j);
    free(shown);
    return err;
}

static char *string_of(json_t *j, const char *key)
{
    const char *s = json_string_value(json_object_get(j, key));
    return s ? tr_strdup(s) : NULL;
}

int tr_fetch_meta_read(const char *path, struct tr_fetch_meta *m)
{
    memset(m, 0, sizeof *m);
    json_t *j = json_load_file(path, 0, NULL);
    const char *sha = json_string_value(json_object_get(j, "sha256"));
    json_t *bytes = json_object_get(j, "bytes");
    if (!json_is_object(j) || !json_string_value(json_object_get(j, "url")) || !sha || strlen(sha) != 64 ||
        !json_is_integer(bytes)) {
        json_decref(j);
        return -1;
    }
    m->url = string_of(j, "url");
    m->etag = string_of(j, "etag");
    m->last_modified = string_of(j, "last_modified");
    memcpy(m->sha256, sha, 65);
    m->bytes = json_integer_value(bytes);
    const char *when = json_string_value(json_object_get(j, "fetched"));
    snprintf(m->fetched, sizeof m->fetched, "%s", when ? when : "");
    json_decref(j);
    return 0;
}

/* Whether metadata's url (as written: redacted) is url's. The file's name holds a hash of the
 * whole URL, so two URLs that differ in their secrets alone still have files of their own. */
static bool same_url(const char *recorded, const char *url)
{
    char *shown = tr_url_redact(url, TR_URL_CREDENTIALS);
    bool same = recorded && !strcmp(recorded, shown);
    free(shown);
    return same;
}

void tr_fetch_meta_free(struct tr_fetch_meta *m)
{
    free(m->url);
    free(m->etag);
    free(m->last_modified);
    memset(m, 0, sizeof *m);
}

void tr_fetch_result_free(struct tr_fetch_result *res)
{
    free(res->path);
    tr_fetch_meta_free(&res->meta);
    memset(res, 0, sizeof *res);
}

/* ---- one attempt ------------------------------------------------------------------------------ */

/* The files of one cached URL. */
struct paths {
    char *file, *meta, *part, *part_meta, *lock;
};

/* ---- progress ----------------------------------------------------------------------------------- */

#define PROGRESS_QUIET 1.0        /* seconds: a download done sooner shows nothing */
#define PROGRESS_TTY_EVERY 0.25   /* seconds between redraws of the terminal's line */
#define PROGRESS_PLAIN_EVERY 5.0  /* seconds between plain lines (a log, a pipe) */

/* A download's progress on its stream (stderr unless quiet): one line redrawn in place on a
 * terminal, a plain line every PROGRESS_PLAIN_EVERY seconds otherwise. */
struct progress {
    FILE *out;            /* NULL: quiet */
    bool tty;
    const char *shown;    /* the URL, redacted */
    double began, last;
    bool drawn;           /* a line was written */
    int64_t done;         /* bytes so far */
};

static double monotonic(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void progress_begin(struct progress *pr, FILE *out, const char *shown)
{
    *pr = (struct progress){.out = out, .tty = out && isatty(fileno(out)), .shown = shown, .began = monotonic()};
    pr->last = pr->began;
}

/* bytes in the unit that shows it best: "812 B", "2.7 KiB", "41.3 MiB", "4.0 GiB". */
static void in_units(double bytes, char out[24])
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024 && u < 4)
        bytes /= 1024, u++;
    snprintf(out, 24, u ? "%.1f %s" : "%.0f %s", bytes, unit[u]);
}

/* done bytes of whole (-1: the server did not say). */
static void progress_show(struct progress *pr, int64_t done, int64_t whole)
{
    double t = monotonic();
    pr->done = done;
    double every = pr->tty ? PROGRESS_TTY_EVERY : PROGRESS_PLAIN_EVERY;
    if (!pr->out || t - pr->began < PROGRESS_QUIET || t - pr->last < every)
        return;
    pr->last = t;
    pr->drawn = true;
    char got[24], all[24], rate[24];
    in_units((double)done, got);
    in_units((double)whole, all);
    in_units((double)done / (t - pr->began), rate);
    const char *redraw = pr->tty ? "\r\033[K" : "", *end = pr->tty ? "" : "\n";
    if (whole > 0)
        fprintf(pr->out, "%strainrun: fetching %s: %s of %s (%.0f %%), %s/s%s", redraw, pr->shown, got, all,
                100.0 * (double)done / (double)whole, rate, end);
    else
        fprintf(pr->out, "%strainrun: fetching %s: %s, %s/s%s", redraw, pr->shown, got, rate, end);
    fflush(pr->out);
}

/* The line's last word, when one was shown: the terminal's line ends. */
static void progress_end(struct progress *pr, bool ok)
{
    if (!pr->drawn)
        return;
    char got[24];
    in_units((double)pr->done, got);
    fprintf(pr->out, "%strainrun: fetch%s %s: %s in %.1f s\n", pr->tty ? "\r\033[K" : "", ok ? "ed" : "ing stopped",
            pr->shown, got, monotonic() - pr->began);
    fflush(pr->out);
}

/* What one request saw: the final response's headers, and the body written to the part. */
struct attempt {
    CURL *curl;
    bool is_file;              /* file://: no status codes, no validators */
    int fd;                    /* the part, opened for appending */
    int64_t offset;            /* the part's size when the request was sent (a Range from it) */
    bool body_seen;            /* the final response's first body byte came */
    bool keep;                 /* its body is the file's (200, 206, file://), not an error page */
    char *etag, *last_modified;
    int64_t range_start;       /* Content-Range's first byte; -1 when none */
    double retry_after;        /* seconds, from Retry-After; 0 when none */
    const struct paths *paths;
    const char *url;
    int64_t limit;             /* the most the part may hold (the cap, the disk's room) */
    char limit_why[96];        /* that limit in words */
    bool too_big;              /* the transfer was stopped at the limit: no retry helps */
    int64_t dropped;           /* bytes of an error page read and dropped */
    char problem[256];         /* why the write callback stopped the transfer */
    int stopped_by;            /* the signal that stopped the transfer (core/stop.h), or 0 */
    struct progress *progress; /* where the transfer shows how far it is, or NULL */
};

static void reset_headers(struct attempt *a)
{
    free(a->etag);
    free(a->last_modified);
    a->etag = a->last_modified = NULL;
    a->range_start = -1;
    a->retry_after = 0;
}

/* The most the part may grow to: the cap (data.max_download, TRAINRUN_FETCH_MAX_BYTES), and
 * what the file system holding it can take while keeping TR_FETCH_KEEP_FREE free (a nightly
 * fetch of a file grown huge must not fill the disk that the runs write to). */
static void limit_of(struct attempt *a, const struct tr_fetch_options *o)
{
    a->limit = INT64_MAX;
    if (o->max_bytes > 0) {
        a->limit = o->max_bytes;
        snprintf(a->limit_why, sizeof a->limit_why, "more than the cap of %lld bytes (%s) allows",
                 (long long)o->max_bytes, o->max_bytes_from ? o->max_bytes_from : "data.max_download");
    }
    struct statvfs fs;
    if (fstatvfs(a->fd, &fs) == 0) {
        int64_t free_bytes = (int64_t)fs.f_bavail * (int64_t)fs.f_frsize;
        int64_t room = a->offset + (free_bytes > TR_FETCH_KEEP_FREE ? free_bytes - TR_FETCH_KEEP_FREE : 0);
        if (room < a->limit) {
            a->limit = room;
            snprintf(a->limit_why, sizeof a->limit_why, "the disk would keep less than %lld MiB free",
                     (long long)(TR_FETCH_KEEP_FREE >> 20));
        }
    }
}

/* A body past the limit: stopped, with the reason. */
static bool too_big(struct attempt *a, int64_t size)
{
    if (size <= a->limit)
        return false;
    snprintf(a->problem, sizeof a->problem, "the file has %lld bytes or more: %s", (long long)size, a->limit_why);
    a->too_big = true;
    return true;
}

/* A header's value without surrounding blanks, or NULL when line is not header name. */
static char *header_value(const char *line, size_t len, const char *name)
{
    size_t n = strlen(name);
    if (len <= n || strncasecmp(line, name, n) || line[n] != ':')
        return NULL;
    const char *v = line + n + 1, *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && strchr(" \t\r\n", end[-1]))
        end--;
    return tr_strdup_printf("%.*s", (int)(end - v), v);
}

static size_t on_header(char *line, size_t size, size_t count, void *ctx)
{
    struct attempt *a = ctx;
    size_t len = size * count;
    char *v;
    if (len >= 5 && !strncmp(line, "HTTP/", 5))   /* a new response: a redirect's, or 100 */
        reset_headers(a);
    else if ((v = header_value(line, len, "ETag")) != NULL) {
        free(a->etag);
        a->etag = v;
    } else if ((v = header_value(line, len, "Last-Modified")) != NULL) {
        free(a->last_modified);
        a->last_modified = v;
    } else if ((v = header_value(line, len, "Content-Range")) != NULL) {
        long long start;
        a->range_start = sscanf(v, "bytes %lld-", &start) == 1 ? start : -1;
        free(v);
    } else if ((v = header_value(line, len, "Retry-After")) != NULL) {
        char *end;
        double s = strtod(v, &end);
        a->retry_after = *v && !*end && s > 0 ? s : 0;   /* an HTTP date is ignored: our backoff */
        free(v);
    }
    return len;
}

/* The part's validators, so that a later attempt resumes only the same version of the file. */
static void save_part_meta(struct attempt *a)
{
    struct tr_fetch_meta pm = {.url = (char *)a->url, .etag = a->etag, .last_modified = a->last_modified};
    memset(pm.sha256, '0', 64);
    utc_now(pm.fetched);
    tr_fetch_meta_write(a->paths->part_meta, &pm);   /* without it the part is merely not resumed */
}

/* The first body byte of the final response: decides whether the body is the file's, and from
 * where. */
static bool begin_body(struct attempt *a)
{
    long code = 0;
    curl_easy_getinfo(a->curl, CURLINFO_RESPONSE_CODE, &code);
    a->body_seen = true;
    a->keep = a->is_file || code == 200 || code == 206;
    if (!a->keep)
        return true;   /* an error page: read and dropped */
    if (code == 206 && a->range_start != a->offset) {
        snprintf(a->problem, sizeof a->problem, "the server resumed at byte %lld, not %lld",
                 (long long)a->range_start, (long long)a->offset);
        return false;
    }
    if (code != 206 && a->offset > 0) {   /* 200: the whole file again, from its first byte */
        if (ftruncate(a->fd, 0) != 0) {
            snprintf(a->problem, sizeof a->problem, "cannot write %s: %s", a->paths->part, strerror(errno));
            return false;
        }
        a->offset = 0;
    }
    curl_off_t length = -1;   /* what the server announced: refused before a byte is kept */
    if (curl_easy_getinfo(a->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) == CURLE_OK && length > 0 &&
        too_big(a, a->offset + (int64_t)length))
        return false;
    if (code == 200)   /* file:// parts are never resumed: nothing to save */
        save_part_meta(a);
    return true;
}

static size_t on_body(char *data, size_t size, size_t count, void *ctx)
{
    struct attempt *a = ctx;
    size_t len = size * count;
    if (!a->body_seen && !begin_body(a))
        return 0;   /* CURLE_WRITE_ERROR, with a->problem */
    if (!a->keep) {   /* an error page, dropped; an endless one is cut (its status is the error) */
        a->dropped += (int64_t)len;
        return a->dropped > ERROR_PAGE_MAX ? 0 : len;
    }
    if (too_big(a, a->offset + (int64_t)len))
        return 0;
    a->offset += (int64_t)len;   /* the part's size from here on */
    for (size_t done = 0; done < len;) {
        ssize_t n = write(a->fd, data + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(a->problem, sizeof a->problem, "cannot write %s: %s", a->paths->part, strerror(errno));
            return 0;
        }
        done += (size_t)n;
    }
    return len;
}

/* libcurl's progress callback, called at least once a second even while nothing arrives: a
 * stop (SIGINT, SIGTERM, SIGHUP) ends the transfer here, within that second. */
static int on_progress(void *ctx, curl_off_t total, curl_off_t now, curl_off_t up_total, curl_off_t up_now)
{
    (void)up_total, (void)up_now;
    struct attempt *a = ctx;
    a->stopped_by = tr_stop_requested();
    if (a->stopped_by)
        return 1;   /* CURLE_ABORTED_BY_CALLBACK */
    if (a->progress && a->keep)
        progress_show(a->progress, a->offset, total > 0 ? a->offset - (int64_t)now + (int64_t)total : -1);
    return 0;
}

enum outcome {
    GOT_FILE,          /* the whole file is in the part */
    NOT_MODIFIED,      /* 304: the cached copy is current */
    TRANSIENT,         /* worth another attempt */
    STOPPED,           /* a signal asked for a stop: no more attempts */
    RESTART,           /* the part is useless: delete it and try again at once */
    FAILED,            /* give up: the reason is in diag */
};

static bool transient_curl(CURLcode c)
{
    switch ((int)c) {   /* CURLcode: curl adds codes, which are not transient */
    case CURLE_COULDNT_RESOLVE_HOST: case CURLE_COULDNT_RESOLVE_PROXY: case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT: case CURLE_PARTIAL_FILE: case CURLE_GOT_NOTHING: case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR: case CURLE_SSL_CONNECT_ERROR: case CURLE_HTTP2: case CURLE_HTTP2_STREAM:
        return true;
    default:
        return false;
    }
}

/* The request: conditional on the cached copy's validators, and a Range from the part's end
 * when the part's validators say it is the same version. */
static struct curl_slist *request_headers(const struct tr_fetch_meta *cached, const struct tr_fetch_meta *part,
                                          int64_t offset)
{
    struct curl_slist *h = NULL;
    char *line;
    if (cached && cached->etag) {
        line = tr_strdup_printf("If-None-Match: %s", cached->etag);
        h = curl_slist_append(h, line);
        free(line);
    }
    if (cached && cached->last_modified) {
        line = tr_strdup_printf("If-Modified-Since: %s", cached->last_modified);
        h = curl_slist_append(h, line);
        free(line);
    }
    if (offset > 0) {
        const char *validator = part->etag && strncmp(part->etag, "W/", 2) ? part->etag : part->last_modified;
        line = tr_strdup_printf("If-Range: %s", validator);
        h = curl_slist_append(h, line);
        free(line);
    }
    return h;
}

static void set_options(CURL *curl, struct attempt *a, const struct tr_fetch_options *o, int64_t offset,
                        struct curl_slist *headers, char *errbuf)
{
    curl_easy_setopt(curl, CURLOPT_URL, a->url);
#if LIBCURL_VERSION_NUM >= 0x075500   /* 7.85: the string forms; the bit masks are deprecated */
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "https,http,file");
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "https,http");
#else
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTPS | CURLPROTO_HTTP | CURLPROTO_FILE));
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTPS | CURLPROTO_HTTP));
#endif
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, PACKAGE_NAME "/" PACKAGE_VERSION);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, o->timeout);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, o->timeout);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, a);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, a);
    if (offset > 0) {
        char range[32];
        snprintf(range, sizeof range, "%lld-", (long long)offset);
        curl_easy_setopt(curl, CURLOPT_RANGE, range);
    }
}

/* The part's size when a Range can continue it (its validators name this URL and a version),
 * else 0 with the part emptied. */
static int64_t resumable_offset(const struct paths *p, const char *url, bool is_file, struct tr_fetch_meta *pm)
{
    struct stat st;
    tr_fetch_meta_free(pm);
    bool ok = !is_file && stat(p->part, &st) == 0 && st.st_size > 0 && tr_fetch_meta_read(p->part_meta, pm) == 0 &&
              same_url(pm->url, url) && ((pm->etag && strncmp(pm->etag, "W/", 2)) || pm->last_modified);
    if (ok)
        return st.st_size;
    tr_fetch_meta_free(pm);
    unlink(p->part_meta);   /* the part itself is emptied as it is opened */
    return 0;
}

/* One request: its outcome, and on GOT_FILE the validators it came with in *got. */
static enum outcome attempt_once(CURL *curl, const char *url, const struct paths *p,
                                 const struct tr_fetch_meta *cached, const struct tr_fetch_options *o,
                                 struct progress *progress, struct tr_fetch_meta *got, double *retry_after,
                                 char *why, size_t why_size)
{
    bool is_file = !strncasecmp(url, "file://", 7);
    struct tr_fetch_meta pm = {0};
    int64_t offset = resumable_offset(p, url, is_file, &pm);
    struct attempt a = {.curl = curl, .is_file = is_file, .offset = offset, .range_start = -1, .paths = p, .url = url,
                        .progress = progress};
    a.fd = open(p->part, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (offset ? 0 : O_TRUNC), FILE_MODE);
    if (a.fd < 0) {
        snprintf(why, why_size, "cannot write %s: %s", p->part, strerror(errno));
        tr_fetch_meta_free(&pm);
        return FAILED;
    }
    limit_of(&a, o);
    struct curl_slist *headers = request_headers(cached, &pm, offset);
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_reset(curl);
    set_options(curl, &a, o, offset, headers, errbuf);
    CURLcode c = curl_easy_perform(curl);
    long code = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    if (c == CURLE_OK && code == 200 && !a.body_seen && offset > 0 && ftruncate(a.fd, 0) != 0)
        c = CURLE_WRITE_ERROR;   /* an empty file, where the part held an older one's start */
    bool synced = fsync(a.fd) == 0;
    close(a.fd);
    curl_slist_free_all(headers);
    tr_fetch_meta_free(&pm);
    enum outcome out;
    *retry_after = a.retry_after;
    if (c == CURLE_WRITE_ERROR && !a.problem[0] && a.dropped > ERROR_PAGE_MAX)
        c = CURLE_OK;   /* an endless error page, cut: what counts is its status */
    if (c == CURLE_ABORTED_BY_CALLBACK && a.stopped_by) {
        snprintf(why, why_size, "stopped by signal %d (%s)", a.stopped_by, strsignal(a.stopped_by));
        out = STOPPED;
    } else if (c == CURLE_WRITE_ERROR && a.problem[0]) {
        snprintf(why, why_size, "%s", a.problem);
        out = strncmp(a.problem, "cannot write", 12) && !a.too_big ? RESTART : FAILED;
    } else if (c != CURLE_OK) {
        snprintf(why, why_size, "%s", errbuf[0] ? errbuf : curl_easy_strerror(c));
        out = transient_curl(c) ? TRANSIENT : FAILED;
    } else if (code == 304) {
        out = NOT_MODIFIED;
    } else if (is_file || code == 200 || code == 206) {
        out = synced ? GOT_FILE : FAILED;
        snprintf(why, why_size, "cannot write %s: %s", p->part, strerror(errno));
    } else if (code == 416) {   /* our Range is past the file's end: a part of another version */
        snprintf(why, why_size, "HTTP 416 for a range from byte %lld", (long long)offset);
        out = RESTART;
    } else {
        snprintf(why, why_size, "HTTP %ld", code);
        out = code == 408 || code == 429 || code >= 500 ? TRANSIENT : FAILED;
    }
    if (out == GOT_FILE) {
        got->etag = a.etag;
        got->last_modified = a.last_modified;
        a.etag = a.last_modified = NULL;
    }
    reset_headers(&a);
    return out;
}

/* ---- a whole fetch ---------------------------------------------------------------------------- */

static void paths_free(struct paths *p)
{
    free(p->file);
    free(p->meta);
    free(p->part);
    free(p->part_meta);
    free(p->lock);
}

static void discard_part(const struct paths *p)
{
    unlink(p->part);
    unlink(p->part_meta);
}

/* The cached copy's metadata when the copy is there, whole and what the metadata says. */
static bool cached_copy(const struct paths *p, const char *url, struct tr_fetch_meta *m)
{
    struct stat st;
    if (tr_fetch_meta_read(p->meta, m) != 0)
        return false;
    struct tr_data_file f = {.path = p->file};
    char hex[65];
    struct tr_diag ignored = {0};
    bool ok = same_url(m->url, url) && stat(p->file, &st) == 0 && st.st_size == m->bytes &&
              tr_data_check(&f, NULL, hex, &ignored) == 0 && !strcmp(hex, m->sha256);
    tr_diag_free(&ignored);
    if (!ok)
        tr_fetch_meta_free(m);
    return ok;
}

/* The downloaded part: hashed, checked against the pin, renamed into place with its metadata. */
static int install(const char *url, const char *shown, const struct paths *p, const char *sha256, const char *pinned_by,
                   struct tr_fetch_meta *got, struct tr_fetch_result *res, struct tr_diag *diag)
{
    struct tr_data_file f = {.path = p->part};
    struct stat st;
    int rc = tr_data_check(&f, NULL, got->sha256, diag);
    if (!rc && sha256 && *sha256 && strcmp(got->sha256, sha256)) {
        tr_diag_add(diag, (struct tr_where){0}, "%s: sha256 mismatch: expected %s (%s), got %s; the download "
                    "was deleted and the cached copy left as it was", shown, sha256, pinned_by ? pinned_by : "pinned",
                    got->sha256);
        rc = TR_EINVAL;
    }
    if (rc) {
        discard_part(p);
        return rc;
    }
    got->url = tr_strdup(url);
    got->bytes = stat(p->part, &st) == 0 ? (int64_t)st.st_size : 0;
    utc_now(got->fetched);
    /* The metadata first: a crash between the renames leaves a copy unlike its metadata, which
     * the next fetch finds (size and hash) and downloads again. */
    char *tmp_meta = tr_strdup_printf("%s.new", p->meta);
    int err = tr_fetch_meta_write(tmp_meta, got);
    if (!err && rename(p->part, p->file))
        err = errno;
    if (!err && rename(tmp_meta, p->meta))
        err = errno;
    struct tr_diag unsynced = {0};   /* the renames, durable: the folder's fsync (core/atomic.h) */
    if (!err && tr_sync_folder_of(p->file, &unsynced))
        err = errno;
    tr_diag_free(&unsynced);
    free(tmp_meta);
    if (err) {
        tr_diag_add(diag, (struct tr_where){.file = p->file}, "cannot write the download cache: %s", strerror(err));
        return TR_EIO;
    }
    unlink(p->part_meta);
    res->meta = *got;
    memset(got, 0, sizeof *got);
    res->downloaded = true;
    return 0;
}

/* Attempts until one succeeds, fails for good, the retries are spent, or a stop is asked for.
 * shown: the URL as messages show it. */
static int fetch_locked(CURL *curl, const char *url, const char *shown, const struct paths *p, const char *sha256,
                        const char *pinned_by, const struct tr_fetch_options *o, struct tr_fetch_result *res,
                        struct tr_diag *diag, struct tr_diag *warnings)
{
    struct tr_fetch_meta cached = {0};
    bool have = cached_copy(p, url, &cached);
    /* A copy that a changed pin disowns is not asked after: the server's 304 would keep it. */
    bool ask_conditionally = have && !(sha256 && *sha256 && strcmp(cached.sha256, sha256));
    struct progress progress;
    progress_begin(&progress, o->progress, shown);
    int rc = TR_EIO;
    char why[512] = "";
    for (int attempt = 0, retry = 0;; attempt++) {
        struct tr_fetch_meta got = {0};
        double retry_after = 0;
        enum outcome out = attempt_once(curl, url, p, ask_conditionally ? &cached : NULL, o, &progress, &got,
                                        &retry_after, why, sizeof why);
        if (out == GOT_FILE) {
            rc = install(url, shown, p, sha256, pinned_by, &got, res, diag);
            tr_fetch_meta_free(&got);
            break;
        }
        if (out == NOT_MODIFIED && !ask_conditionally) {   /* nothing to keep: a server's fault */
            snprintf(why, sizeof why, "HTTP 304 Not Modified to a request that named no cached copy");
            out = FAILED;
        }
        if (out == NOT_MODIFIED) {
            discard_part(p);
            res->meta = cached;
            memset(&cached, 0, sizeof cached);
            rc = 0;
            break;
        }
        if (out == STOPPED) {   /* the part, if any, is resumed by the next run */
            rc = tr_fail(diag, TR_EINTERRUPTED, "fetching %s: %s", shown, why);
            break;
        }
        if (out == FAILED) {   /* a 404's part, or one that cannot be written: of no use */
            tr_diag_add(diag, (struct tr_where){0}, "cannot fetch %s: %s", shown, why);
            discard_part(p);
            rc = TR_EINVAL;
            break;
        }
        if (out == RESTART)
            discard_part(p);
        if (retry >= o->retries || attempt > 2 * o->retries + 4) {
            tr_diag_add(diag, (struct tr_where){0}, "cannot fetch %s: %s (after %d attempt%s)", shown, why,
                        attempt + 1, attempt ? "s" : "");
            rc = TR_EIO;
            break;
        }
        if (out == TRANSIENT) {
            double wait = tr_fetch_backoff(o, retry);
            if (retry_after > wait)
                wait = retry_after < o->backoff_max ? retry_after : o->backoff_max;
            tr_diag_add(warnings, (struct tr_where){0}, "%s: %s; retrying in %g s (retry %d of %d)", shown, why, wait,
                        retry + 1, o->retries);
            if (tr_stop_sleep(wait)) {
                int sig = tr_stop_requested();
                rc = tr_fail(diag, TR_EINTERRUPTED, "fetching %s: stopped by signal %d (%s) while waiting to retry",
                             shown, sig, strsignal(sig));
                break;
            }
            retry++;
        }
    }
    progress_end(&progress, rc == 0);
    struct stat st;
    if (rc && stat(p->part, &st) == 0 && st.st_size == 0)   /* a non-empty one waits to be resumed */
        discard_part(p);
    tr_fetch_meta_free(&cached);
    return rc;
}

/* The cache's files for url in folder. */
static void paths_of(struct paths *p, const char *folder, const char *url)
{
    char *name = tr_fetch_cache_name(url);
    p->file = tr_strdup_printf("%s/%s", folder, name);
    p->meta = tr_strdup_printf("%s.json", p->file);
    p->part = tr_strdup_printf("%s.part", p->file);
    p->part_meta = tr_strdup_printf("%s.part.json", p->file);
    p->lock = tr_strdup_printf("%s.lock", p->file);
    free(name);
}

/* The fetch with the cache's lock held, which a stop may end while it waits for another run. */
static int fetch_in(const char *folder, const char *url, const char *shown, const char *sha256,
                    const char *pinned_by, const struct tr_fetch_options *o, struct tr_fetch_result *res,
                    struct tr_diag *diag, struct tr_diag *warnings)
{
    struct paths p;
    paths_of(&p, folder, url);
    int rc = TR_EIO;
    int lock = open(p.lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, META_MODE);
    int locked = lock >= 0 ? flock(lock, LOCK_EX | LOCK_NB) : -1;
    bool stopped = false;   /* no signal cuts a wait short (core/stop.h): the lock is tried a slice apart */
    while (locked && errno == EWOULDBLOCK && !(stopped = tr_stop_sleep(TR_STOP_SLICE)))
        locked = flock(lock, LOCK_EX | LOCK_NB);
    CURL *curl = locked ? NULL : curl_easy_init();
    if (locked && stopped)
        rc = tr_fail(diag, TR_EINTERRUPTED, "fetching %s: stopped by signal %d while waiting for another run's "
                     "download", shown, tr_stop_requested());
    else if (locked)
        tr_diag_add(diag, (struct tr_where){.file = p.lock}, "cannot lock the download cache: %s", strerror(errno));
    else if (!curl)
        tr_diag_add(diag, (struct tr_where){0}, "cannot fetch %s: libcurl could not start", shown);
    else
        rc = fetch_locked(curl, url, shown, &p, sha256, pinned_by, o, res, diag, warnings);
    if (curl)
        curl_easy_cleanup(curl);
    if (lock >= 0)
        close(lock);   /* and the lock with it */
    if (!rc)
        res->path = tr_strdup(p.file);
    paths_free(&p);
    return rc;
}

int tr_fetch(const char *url, const char *sha256, const char *pinned_by, const char *dir,
             const struct tr_fetch_options *o, struct tr_fetch_result *res, struct tr_diag *diag,
             struct tr_diag *warnings)
{
    memset(res, 0, sizeof *res);
    char *shown = tr_url_redact(url, TR_URL_CREDENTIALS);
    char *folder = dir ? tr_strdup(dir) : tr_cache_path("downloads");
    int err = folder ? tr_make_folders(folder) : 0;
    int rc = TR_EIO;
    if (!tr_fetch_scheme_allowed(url)) {
        tr_diag_add(diag, (struct tr_where){0}, "%s: trainrun fetches https://, http:// and file:// URLs only", shown);
        rc = TR_EINVAL;
    } else if (!folder) {
        tr_diag_add(diag, (struct tr_where){0}, "cannot fetch %s: neither XDG_CACHE_HOME nor HOME is set, so "
                    "there is no download cache", shown);
    } else if (err) {
        tr_diag_add(diag, (struct tr_where){.file = folder}, "cannot create the download cache: %s", strerror(err));
    } else {
        struct tr_stop_catch caught;   /* a signal ends the transfer cleanly, then trainrun */
        tr_stop_catch_begin(&caught);
        rc = fetch_in(folder, url, shown, sha256, pinned_by, o, res, diag, warnings);
        tr_stop_catch_end(&caught);
    }
    if (rc)
        tr_fetch_result_free(res);
    free(folder);
    free(shown);
    return rc;
}
