/* SHA-256 (FIPS 180-4), self-contained: data definitions pin the hash of each file's
 * decompressed content, checked as the file is read. We link zlib and libcurl, not a crypto
 * library, and 100 lines do not justify one. */
#ifndef TR_SHA256_H
#define TR_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct tr_sha256 {
    uint32_t h[8];
    uint64_t bytes;          /* message length so far */
    unsigned char block[64];
    size_t used;             /* bytes waiting in block */
};

void tr_sha256_init(struct tr_sha256 *s);
void tr_sha256_update(struct tr_sha256 *s, const void *data, size_t len);
void tr_sha256_final(struct tr_sha256 *s, unsigned char digest[32]);
/* The digest as 64 lower-case hex digits and a NUL. */
void tr_sha256_hex(const unsigned char digest[32], char hex[65]);
/* One call: the hex digest of data. */
void tr_sha256_of(const void *data, size_t len, char hex[65]);

#endif
