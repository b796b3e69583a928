/* A URL as messages and files may show it (core: every stage prints URLs): its credentials —
 * the user:password@ before the host, and the query's or fragment's parameters that hold
 * secrets — replaced by ***. The one redaction of the program: the data stage's downloads
 * (messages, the download cache's metadata, data-sources.json) and the webhook's messages,
 * which hide the webhook's path and query whole, since hooks keep their tokens there. */
#ifndef TR_CORE_URL_H
#define TR_CORE_URL_H

#include <stdbool.h>
#include <stddef.h>

enum tr_url_redaction {
    TR_URL_CREDENTIALS,   /* user:password@ → ***@, token=… → token=***: the path stays readable */
    TR_URL_WEBHOOK,       /* the scheme, *** for a user, the host and port, then "/…" for a
                           * path, "?***" for a query, "#***" for a fragment */
};

/* url redacted as how says, in a new string (caller frees). Text that is not "scheme://…" is
 * returned as it is for TR_URL_CREDENTIALS (a path holds no credentials) and as
 * "<a URL that does not parse>" for TR_URL_WEBHOOK. */
char *tr_url_redact(const char *url, enum tr_url_redaction how);

/* Whether a query parameter's name (len bytes, percent-encoding decoded) names a secret: token,
 * key, password, secret, signature, sig, access_token or api_key, in any case, alone or as the
 * last word of a longer name after '-', '_' or '.' (X-Amz-Signature, refresh_token). */
bool tr_url_param_is_secret(const char *name, size_t len);

#endif
