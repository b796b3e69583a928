/* The token cache's shards (cache.h). A shard is a 128-byte header (magic, version, byte order,
 * key, kind, counts, its own size, a CRC-32 of the rest) and then its arrays as the machine
 * holds them, each at a 64-byte boundary: int32 tokens, then for samples int64 offsets and int32
 * labels. Mapped, they are used where they lie; so every count is checked against the file's
 * size, the bytes against the CRC, and every offset, id and label against its bounds, before a
 * pointer into the file is handed out: a damaged shard is a miss, never a crash. */
#include "data/cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "config.h"
#include "core/atomic.h"

#define SHARD_MAGIC "trshard\n"
#define BYTE_ORDER_MARK 0x01020304u       /* reads otherwise on a machine of the other order */
#define SHARD_ALIGN 64                    /* a cache line, and more than any array needs */
#define MAX_COUNT ((int64_t)1 << 40)      /* bounds n and ntokens: no size below overflows */

struct shard_header {
    char magic[8];                        /* SHARD_MAGIC */
    uint32_t version;                     /* TR_SHARD_VERSION */
    uint32_t byte_order;                  /* BYTE_ORDER_MARK */
    unsigned char key[32];
    uint32_t kind;                        /* enum tr_shard_kind */
    uint32_t crc;                         /* zlib's crc32 of every byte after the header: a
                                           * flipped bit is found at about 1 GB/s */
    int64_t n, ntokens;
    uint64_t bytes;                       /* the whole file */
    unsigned char unused[48];             /* 0 */
};
_Static_assert(sizeof(struct shard_header) == 128, "a shard's header is 128 bytes");

/* Where a shard's arrays start, and where it ends. */
struct layout {
    uint64_t tokens, offsets, labels, end;
};

static uint64_t aligned(uint64_t at)
{
    return (at + SHARD_ALIGN - 1) & ~(uint64_t)(SHARD_ALIGN - 1);
}

static struct layout layout_of(int kind, int64_t n, int64_t ntokens)
{
    struct layout l = {.tokens = sizeof(struct shard_header)};
    l.end = l.tokens + (uint64_t)ntokens * sizeof(int32_t);
    if (kind == TR_SHARD_SAMPLES) {
        l.offsets = aligned(l.end);
        l.labels = aligned(l.offsets + (uint64_t)(n + 1) * sizeof(int64_t));
        l.end = l.labels + (uint64_t)n * sizeof(int32_t);
    }
    return l;
}

/* crc32_z, but an empty array adds nothing: zlib answers 0 for a NULL one, whatever crc was. */
static uLong crc_add(uLong crc, const void *p, uint64_t len)
{
    return len ? crc32_z(crc, p, (size_t)len) : crc;
}

/* ---- the folders ----------------------------------------------------------------------------- */

char *tr_cache_path(const char *sub)
{
    const char *cache = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (cache && cache[0] == '/')
        return tr_strdup_printf("%s/trainrun/%s", cache, sub);
    if (home && *home)
        return tr_strdup_printf("%s/.cache/trainrun/%s", home, sub);
    return NULL;
}

int tr_make_folders(const char *path)
{
    char *p = tr_strdup(path);
    size_t n = strlen(p);
    int err = 0;
    for (size_t i = 1; i <= n && !err; i++)   /* each prefix that ends before a '/', then all */
        if (p[i] == '/' || p[i] == '\0') {
            char c = p[i];
            p[i] = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST)
                err = errno;
            p[i] = c;
        }
    free(p);
    return err;
}

/* What a run is told when a shard cannot be written (where: the shard, or its folder). */
static void cannot_write(struct tr_diag *warnings, const char *where, int err)
{
    tr_diag_add(warnings, (struct tr_where){.file = where}, "cannot write the token cache: %s; the text is "
                "tokenised again next run (TRAINRUN_NO_CACHE=1 turns the cache off)", strerror(err));
}

char *tr_token_cache_dir(struct tr_diag *warnings)
{
    const char *off = getenv("TRAINRUN_NO_CACHE");
    if (off && *off && strcmp(off, "0"))
        return NULL;
    char *dir = tr_cache_path("tokens");
    int err = dir ? tr_make_folders(dir) : 0;
    if (!dir)
        tr_diag_add(warnings, (struct tr_where){0}, "no token cache: neither XDG_CACHE_HOME nor HOME is set, so "
                    "text is tokenised on every run");
    else if (err) {   /* said once, not for every shard */
        cannot_write(warnings, dir, err);
        free(dir);
        dir = NULL;
    }
    return dir;
}

/* ---- keys ------------------------------------------------------------------------------------ */

void tr_shard_key_int(struct tr_sha256 *k, int64_t v)
{
    tr_sha256_update(k, &v, sizeof v);
}

void tr_shard_key_text(struct tr_sha256 *k, const char *s)
{
    tr_shard_key_int(k, s ? (int64_t)strlen(s) : -1);
    if (s)
        tr_sha256_update(k, s, strlen(s));
}

void tr_shard_key_begin(struct tr_sha256 *k)
{
    tr_sha256_init(k);
    tr_shard_key_text(k, SHARD_MAGIC);
    tr_shard_key_int(k, TR_SHARD_VERSION);
    tr_shard_key_text(k, PACKAGE_VERSION);   /* a new release may tokenise differently */
}

/* ---- reading --------------------------------------------------------------------------------- */

void tr_cache_free(void *p, const void *map, size_t bytes)
{
    const char *c = p, *m = map;
    if (!map || c < m || c >= m + bytes)
        free(p);
}

void tr_cache_unmap(void *map, size_t bytes)
{
    if (map)
        munmap(map, bytes);
}

static int damaged(struct tr_diag *warnings, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Says why the shard at path is not used, and returns 0 (a miss). */
static int damaged(struct tr_diag *warnings, const char *path, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    tr_diag_add(warnings, (struct tr_where){.file = path}, "a damaged token cache shard (%s); tokenising again",
                why);
    return 0;
}

/* Why header h does not describe a shard of kind for key in a file of size bytes; NULL when it
 * does. */
static const char *header_problem(const struct shard_header *h, const unsigned char key[32], int kind,
                                  uint64_t size, char *why, size_t whysize)
{
    if (memcmp(h->magic, SHARD_MAGIC, sizeof h->magic))
        return "not a shard: its magic is wrong";
    if (h->byte_order != BYTE_ORDER_MARK)
        return "written on a machine of the other byte order";
    if (h->version != TR_SHARD_VERSION) {
        snprintf(why, whysize, "version %u, not %u", h->version, TR_SHARD_VERSION);
        return why;
    }
    if (memcmp(h->key, key, 32))
        return "its key is not the one its name promises";
    if (h->kind != (uint32_t)kind)
        return "it holds another kind of data";
    for (size_t i = 0; i < sizeof h->unused; i++)
        if (h->unused[i])
            return "its header's unused bytes are not zeros";
    if (h->n < 0 || h->n > MAX_COUNT || h->ntokens < 0 || h->ntokens > MAX_COUNT ||
        (kind == TR_SHARD_STREAM && h->n))
        return "its counts are impossible";
    uint64_t end = layout_of(kind, h->n, h->ntokens).end;
    if (h->bytes != end || size != end) {   /* cut short, or grown */
        snprintf(why, whysize, "%llu bytes, its header says %llu, its counts need %llu", (unsigned long long)size,
                 (unsigned long long)h->bytes, (unsigned long long)end);
        return why;
    }
    if (crc_add(crc32_z(0, NULL, 0), (const unsigned char *)h + sizeof *h, size - sizeof *h) != h->crc)
        return "its bytes fail their CRC-32";
    return NULL;
}

/* Why s's arrays are not what a shard holds; NULL when they are. */
static const char *content_problem(const struct tr_shard *s, int64_t vocab, int nclasses)
{
    for (int64_t i = 0; i < s->ntokens; i++)
        if (s->tokens[i] < 0 || s->tokens[i] >= vocab)
            return "a token id outside the vocabulary";
    if (s->kind == TR_SHARD_STREAM)
        return NULL;
    if (s->offsets[0] != 0 || s->offsets[s->n] != s->ntokens)
        return "its offsets do not span its tokens";
    for (int64_t i = 0; i < s->n; i++) {
        if (s->offsets[i + 1] < s->offsets[i])
            return "its offsets are out of order";
        if (s->labels[i] < 0 || s->labels[i] >= nclasses)
            return "a label outside the classes";
    }
    return NULL;
}

int tr_shard_open(const char *path, const unsigned char key[32], int kind, int64_t vocab, int nclasses,
                  struct tr_shard *s, struct tr_diag *warnings)
{
    memset(s, 0, sizeof *s);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT && errno != ENOTDIR)
            tr_diag_add(warnings, (struct tr_where){.file = path}, "cannot read the token cache: %s; "
                        "tokenising again", strerror(errno));
        return 0;
    }
    struct stat st;
    int err = fstat(fd, &st) ? errno : 0;
    size_t size = err ? 0 : (size_t)st.st_size;
    void *map = err || size < sizeof(struct shard_header) ? MAP_FAILED
                                                          : mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    if (!err && map == MAP_FAILED && size >= sizeof(struct shard_header))
        err = errno;
    close(fd);   /* the mapping stays */
    if (err)
        return damaged(warnings, path, "cannot map it: %s", strerror(err));
    if (map == MAP_FAILED)
        return damaged(warnings, path, "%zu bytes, shorter than its header", size);
    char why[128];
    const struct shard_header *h = map;
    const char *problem = header_problem(h, key, kind, size, why, sizeof why);
    if (problem) {
        munmap(map, size);
        return damaged(warnings, path, "%s", problem);
    }
    struct layout l = layout_of(kind, h->n, h->ntokens);
    const char *base = map;
    *s = (struct tr_shard){.kind = kind, .n = h->n, .ntokens = h->ntokens,
                           .tokens = h->ntokens ? (const int32_t *)(base + l.tokens) : NULL,
                           .offsets = kind == TR_SHARD_SAMPLES ? (const int64_t *)(base + l.offsets) : NULL,
                           .labels = kind == TR_SHARD_SAMPLES && h->n ? (const int32_t *)(base + l.labels) : NULL,
                           .map = map, .map_bytes = size};
    problem = content_problem(s, vocab, nclasses);
    if (problem) {
        munmap(map, size);
        memset(s, 0, sizeof *s);
        return damaged(warnings, path, "%s", problem);
    }
    return 1;
}

/* ---- writing --------------------------------------------------------------------------------- */

/* pwrite until all of it is written: 0, or the errno. */
static int write_at(int fd, const void *data, uint64_t len, uint64_t at)
{
    const char *p = data;
    while (len) {
        ssize_t done = pwrite(fd, p, len, (off_t)at);
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0)
            return done < 0 ? errno : EIO;
        p += done, at += (uint64_t)done, len -= (uint64_t)done;
    }
    return 0;
}

/* The CRC-32 of the bytes after the header: the arrays, and the zeros before each aligned one. */
static uint32_t crc_of(const struct tr_shard *s, const struct layout *l)
{
    static const unsigned char zeros[SHARD_ALIGN];
    uint64_t tokens_end = l->tokens + (uint64_t)s->ntokens * sizeof(int32_t);
    uint64_t offsets_end = l->offsets + (uint64_t)(s->n + 1) * sizeof(int64_t);
    uLong crc = crc_add(crc32_z(0, NULL, 0), s->tokens, tokens_end - l->tokens);
    if (s->kind == TR_SHARD_SAMPLES) {
        crc = crc_add(crc, zeros, l->offsets - tokens_end);
        crc = crc_add(crc, s->offsets, offsets_end - l->offsets);
        crc = crc_add(crc, zeros, l->labels - offsets_end);
        crc = crc_add(crc, s->labels, (uint64_t)s->n * sizeof(int32_t));
    }
    return (uint32_t)crc;
}

/* The shard's bytes into fd (the commit makes them durable): 0 or the errno. The gaps before
 * aligned arrays are holes, which read as zeros. */
static int write_shard(int fd, const unsigned char key[32], const struct tr_shard *s)
{
    struct layout l = layout_of(s->kind, s->n, s->ntokens);
    struct shard_header h = {.version = TR_SHARD_VERSION, .byte_order = BYTE_ORDER_MARK, .kind = (uint32_t)s->kind,
                             .crc = crc_of(s, &l), .n = s->n, .ntokens = s->ntokens, .bytes = l.end};
    memcpy(h.magic, SHARD_MAGIC, sizeof h.magic);
    memcpy(h.key, key, sizeof h.key);
    int err = write_at(fd, &h, sizeof h, 0);
    if (!err)
        err = write_at(fd, s->tokens, (uint64_t)s->ntokens * sizeof(int32_t), l.tokens);
    if (!err && s->kind == TR_SHARD_SAMPLES)
        err = write_at(fd, s->offsets, (uint64_t)(s->n + 1) * sizeof(int64_t), l.offsets);
    if (!err && s->kind == TR_SHARD_SAMPLES)
        err = write_at(fd, s->labels, (uint64_t)s->n * sizeof(int32_t), l.labels);
    if (!err && ftruncate(fd, (off_t)l.end) != 0)   /* a hole at the end would not be counted */
        err = errno;
    return err;
}

void tr_shard_write(const char *path, const unsigned char key[32], const struct tr_shard *s,
                    struct tr_diag *warnings)
{
    /* Through the one atomic writer (core/atomic.h), whose temporary is the process's own, as
     * checkpoints': two runs never share one, and one left by a crashed run is replaced when its
     * pid comes round again. The shard's arrays go to its descriptor (pwrite, with holes). */
    char *dir = tr_strdup(path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    const char *failed = dir;
    int err = slash ? tr_make_folders(dir) : 0;
    if (!err) {
        struct tr_atomic a;
        struct tr_diag said = {0};   /* the warning below words it, from the errno */
        failed = path;
        if (tr_atomic_open(&a, path, &said))
            err = a.error;
        else if ((err = write_shard(fileno(a.f), key, s)))
            tr_atomic_abort(&a);
        else if (tr_atomic_commit(&a, &said))
            err = a.error;
        tr_diag_free(&said);
    }
    if (err)
        cannot_write(warnings, failed, err);
    free(dir);
}
