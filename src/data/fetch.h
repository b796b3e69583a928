/* Downloads for the data stage (DESIGN.md §2, §5): one URL into trainrun's download cache,
 * $XDG_CACHE_HOME/trainrun/downloads/ (~/.cache/… when unset), through libcurl. Internal to
 * src/data/: dataset.c fetches a definition's URL sources before reading them. Nightly runs ask
 * with the cached copy's ETag and Last-Modified, so unchanged data is not downloaded again;
 * transient failures are retried with exponential backoff, and a cut download is resumed.
 * What is fetched is data: it is written without any execute bit and never run. */
#ifndef TR_DATA_FETCH_H
#define TR_DATA_FETCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/error.h"

/* How hard one fetch tries. */
struct tr_fetch_options {
    long timeout;            /* seconds to connect, and seconds a transfer may stall (under
                              * 1 byte/s) before the attempt fails: a hung server must not
                              * hang a nightly run */
    int retries;             /* further attempts after a transient failure */
    double backoff;          /* seconds before the first retry; doubled for each next one */
    double backoff_max;      /* never longer than this */
    int64_t max_bytes;       /* a download stops (and fails) past this size; 0: no cap but the
                              * disk's: it never leaves less than TR_FETCH_KEEP_FREE free */
    const char *max_bytes_from;   /* where that cap was set, for its message */
    FILE *progress;          /* where a download shows how far it is; NULL: quiet */
};

/* The default cap on one download: larger than any data set trainrun ships or lists, small
 * enough that an endless body stops long before it fills a disk (data.max_download). */
#define TR_FETCH_MAX_DEFAULT ((int64_t)4 << 30)

/* What a download leaves free on the download cache's file system, at least: 1 GiB. */
#define TR_FETCH_KEEP_FREE ((int64_t)1 << 30)

/* The defaults (30 s, 4 retries, 2 s doubling up to 60 s, the cap max_bytes set by
 * max_bytes_from, quiet), with TRAINRUN_FETCH_TIMEOUT (1 to 86400 s), TRAINRUN_FETCH_RETRIES
 * (0 to 100), TRAINRUN_FETCH_BACKOFF (0 to 3600 s) and TRAINRUN_FETCH_MAX_BYTES (bytes; 0: no
 * cap) from the environment where set. A value out of its range, or not a number, is refused:
 * TR_EINVAL naming the variable, its value and the range (the defaults are then in o). */
int tr_fetch_options_from_env(struct tr_fetch_options *o, int64_t max_bytes, const char *max_bytes_from,
                              struct tr_diag *d);
/* Seconds to wait before retry number retry (0 for the first): backoff · 2^retry, at most
 * backoff_max. */
double tr_fetch_backoff(const struct tr_fetch_options *o, int retry);

/* Whether url's scheme is one trainrun fetches: https://, http:// or file://. */
bool tr_fetch_scheme_allowed(const char *url);
/* Whether s is a URL at all ("scheme://…"), allowed or not. */
bool tr_fetch_is_url(const char *s);

/* A cached file's name in the download cache: 32 hex digits of the sha256 of the URL, '-', and
 * the URL path's last part (letters, digits, '.', '_', '-' kept, the rest '_', at most 64), so
 * that a person can tell the files apart and a ".gz" stays at the end. Caller frees. */
char *tr_fetch_cache_name(const char *url);

/* What the download cache knows about a file: NAME.json beside NAME. */
struct tr_fetch_meta {
    char *url;
    char *etag;              /* the server's validators, or NULL */
    char *last_modified;
    char sha256[65];         /* of the content as definitions pin it: decompressed (files.h) */
    int64_t bytes;           /* the cached file's size */
    char fetched[32];        /* when it was downloaded, UTC, ISO 8601 */
};

/* Writes m to path atomically (a temporary file renamed over it), mode 0600, its url without
 * credentials (core/url.h): 0 or an errno. */
int tr_fetch_meta_write(const char *path, const struct tr_fetch_meta *m);
/* Reads path into m: 0, or −1 when it is missing or not such a file (m then zeroed). */
int tr_fetch_meta_read(const char *path, struct tr_fetch_meta *m);
void tr_fetch_meta_free(struct tr_fetch_meta *m);

struct tr_fetch_result {
    char *path;              /* the cached file to read (caller frees) */
    struct tr_fetch_meta meta;
    bool downloaded;         /* false: the cached copy was current (304 Not Modified) */
};

/* Fetches url into dir (NULL: the download cache). sha256, when not NULL or "", pins the
 * content (pinned_by says where): a download that differs is deleted and the cached file and
 * its metadata are left exactly as they were. Otherwise the content's hash is recorded. The
 * file is renamed into place only once complete and verified. Returns 0, or TR_EINVAL (a URL
 * trainrun does not fetch, an HTTP error, a sha256 mismatch) or TR_EIO (no connection after the
 * retries, the cache cannot be written) or TR_EINTERRUPTED (SIGINT, SIGTERM or SIGHUP came:
 * core/stop.h; a part already fetched is kept to be resumed), with the reason in diag, the URL
 * shown without its credentials; each retry is a line in warnings. While it runs, those signals
 * ask for a stop (as they do during a run), and one that nothing else catches is delivered again
 * after it. res is zeroed on failure (tr_fetch_result_free is harmless). */
int tr_fetch(const char *url, const char *sha256, const char *pinned_by, const char *dir,
             const struct tr_fetch_options *o, struct tr_fetch_result *res, struct tr_diag *diag,
             struct tr_diag *warnings);
void tr_fetch_result_free(struct tr_fetch_result *res);

#endif
