/* Just enough protobuf to write TensorBoard's messages by hand (../shared/reference/
 * tensorboard-format.md §3): a growing byte buffer and one call per wire type. A nested
 * message is built in its own buffer and appended as bytes, so every length is known
 * before its prefix is written. Out of memory ends the program (core/error.h). */
#ifndef TR_PROTOBUF_H
#define TR_PROTOBUF_H

#include <stddef.h>
#include <stdint.h>

struct tr_pb {
    uint8_t *data;
    size_t len, cap;
};

void tr_pb_free(struct tr_pb *b);
void tr_pb_raw(struct tr_pb *b, const void *bytes, size_t n);
void tr_pb_varint(struct tr_pb *b, uint64_t v);

/* field = value, wire type 0 (varint): ints, enums, bools (negative ints take 10 bytes) */
void tr_pb_uint(struct tr_pb *b, int field, uint64_t v);
/* wire type 1 and 5: double and float, little-endian */
void tr_pb_double(struct tr_pb *b, int field, double v);
void tr_pb_float(struct tr_pb *b, int field, float v);
/* wire type 2: bytes, a NUL-terminated string, a finished nested message */
void tr_pb_bytes(struct tr_pb *b, int field, const void *bytes, size_t n);
void tr_pb_string(struct tr_pb *b, int field, const char *s);
void tr_pb_message(struct tr_pb *b, int field, const struct tr_pb *m);
/* Moves m in as a nested message and frees it: tr_pb_message + tr_pb_free. */
void tr_pb_take(struct tr_pb *b, int field, struct tr_pb *m);
/* a packed repeated double: one length-delimited field of 8·n bytes */
void tr_pb_packed_doubles(struct tr_pb *b, int field, const double *v, size_t n);

#endif
