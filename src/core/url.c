/* URL redaction (url.h): a URL cut into scheme, user, host, path, query and fragment by hand
 * (RFC 3986's delimiters; no libcurl in core), the secret parts replaced by ***. */
#include "core/url.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"

#define HIDDEN "***"

static const char *const secret_names[] = {"token", "key", "password", "secret", "signature", "sig",
                                           "access_token", "api_key"};

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* name with %XX decoded, at most size - 1 bytes: "tok%65n" is "token" to a server. */
static void decode_name(const char *name, size_t len, char *out, size_t size)
{
    size_t n = 0;
    for (size_t i = 0; i < len && n + 1 < size; i++) {
        if (name[i] == '%' && i + 2 < len && hex_digit(name[i + 1]) >= 0 && hex_digit(name[i + 2]) >= 0) {
            out[n++] = (char)(hex_digit(name[i + 1]) * 16 + hex_digit(name[i + 2]));
            i += 2;
        } else {
            out[n++] = name[i];
        }
    }
    out[n] = '\0';
}

bool tr_url_param_is_secret(const char *name, size_t len)
{
    char plain[256];
    decode_name(name, len, plain, sizeof plain);
    size_t n = strlen(plain);
    for (size_t i = 0; i < sizeof secret_names / sizeof secret_names[0]; i++) {
        size_t w = strlen(secret_names[i]);
        if (n < w || strcasecmp(plain + n - w, secret_names[i]))
            continue;
        if (n == w || strchr("-_.", plain[n - w - 1]))
            return true;
    }
    return false;
}

/* Appends n bytes of s to the growing string *out (length *len, capacity *cap). */
static void append(char **out, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 1 > *cap) {
        while (*len + n + 1 > *cap)
            *cap *= 2;
        *out = tr_xrealloc(*out, *cap);
    }
    memcpy(*out + *len, s, n);
    *len += n;
    (*out)[*len] = '\0';
}

/* A query or fragment (without its '?' or '#'), each secret parameter's value as ***. Both
 * '&' and ';' separate parameters (HTML 4's ';' still reaches servers that split on it). */
static void append_params(char **out, size_t *len, size_t *cap, const char *s, size_t n)
{
    size_t i = 0;
    while (i <= n) {
        size_t end = i;
        while (end < n && s[end] != '&' && s[end] != ';')
            end++;
        const char *eq = memchr(s + i, '=', end - i);
        if (eq && tr_url_param_is_secret(s + i, (size_t)(eq - (s + i)))) {
            append(out, len, cap, s + i, (size_t)(eq - (s + i)) + 1);
            append(out, len, cap, HIDDEN, strlen(HIDDEN));
        } else {
            append(out, len, cap, s + i, end - i);
        }
        if (end < n)
            append(out, len, cap, s + end, 1);
        i = end + 1;
    }
}

/* The parts of scheme://[user@]host[:port][/path][?query][#fragment], as spans of the URL. */
struct url_spans {
    size_t scheme_end;         /* the "://" */
    size_t authority, at;      /* the authority's start; its last '@', or authority when none */
    size_t path, query, fragment, end;   /* each part's first byte (its delimiter), or end */
};

static bool split(const char *url, struct url_spans *s)
{
    size_t n = strspn(url, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-");
    if (n == 0 || strncmp(url + n, "://", 3))
        return false;
    s->scheme_end = n;
    s->authority = n + 3;
    s->end = strlen(url);
    s->path = s->authority + strcspn(url + s->authority, "/?#");
    s->at = s->authority;
    for (size_t i = s->authority; i < s->path; i++)
        if (url[i] == '@')
            s->at = i + 1;   /* the last '@': a password may hold one unencoded */
    s->query = s->path + strcspn(url + s->path, "?#");
    s->fragment = s->query + strcspn(url + s->query, "#");
    return true;
}

char *tr_url_redact(const char *url, enum tr_url_redaction how)
{
    struct url_spans s;
    bool parsed = url && split(url, &s);
    if (!parsed || (how == TR_URL_WEBHOOK && s.at == s.path))   /* no host */
        return tr_strdup(!parsed && how == TR_URL_CREDENTIALS && url ? url : "<a URL that does not parse>");
    size_t cap = s.end + 16, len = 0;
    char *out = tr_xmalloc(cap);
    out[0] = '\0';
    append(&out, &len, &cap, url, s.authority);
    if (s.at > s.authority)
        append(&out, &len, &cap, HIDDEN "@", strlen(HIDDEN) + 1);
    append(&out, &len, &cap, url + s.at, s.path - s.at);
    if (how == TR_URL_WEBHOOK) {
        bool has_path = s.query - s.path > 1 || (s.query - s.path == 1 && url[s.path] != '/');
        if (has_path)
            append(&out, &len, &cap, "/…", strlen("/…"));
        if (s.query < s.fragment)
            append(&out, &len, &cap, "?" HIDDEN, 1 + strlen(HIDDEN));
        if (s.fragment < s.end)
            append(&out, &len, &cap, "#" HIDDEN, 1 + strlen(HIDDEN));
        return out;
    }
    append(&out, &len, &cap, url + s.path, s.query - s.path);
    if (s.query < s.fragment) {
        append(&out, &len, &cap, "?", 1);
        append_params(&out, &len, &cap, url + s.query + 1, s.fragment - s.query - 1);
    }
    if (s.fragment < s.end) {
        append(&out, &len, &cap, "#", 1);
        append_params(&out, &len, &cap, url + s.fragment + 1, s.end - s.fragment - 1);
    }
    return out;
}
