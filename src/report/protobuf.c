/* The protobuf encoder (protobuf.h). */
#include "report/protobuf.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

void tr_pb_free(struct tr_pb *b)
{
    free(b->data);
    *b = (struct tr_pb){0};
}

void tr_pb_raw(struct tr_pb *b, const void *bytes, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n)
            cap *= 2;
        b->data = tr_xrealloc(b->data, cap);
        b->cap = cap;
    }
    if (n)
        memcpy(b->data + b->len, bytes, n);
    b->len += n;
}

void tr_pb_varint(struct tr_pb *b, uint64_t v)
{
    uint8_t out[10];
    size_t n = 0;
    do {
        out[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    tr_pb_raw(b, out, n);
}

static void key(struct tr_pb *b, int field, int wire)
{
    tr_pb_varint(b, (uint64_t)field << 3 | (uint64_t)wire);
}

void tr_pb_uint(struct tr_pb *b, int field, uint64_t v)
{
    key(b, field, WIRE_VARINT);
    tr_pb_varint(b, v);
}

void tr_pb_double(struct tr_pb *b, int field, double v)
{
    key(b, field, WIRE_I64);
    tr_pb_raw(b, &v, 8);   /* the host is little-endian (configure checks) */
}

void tr_pb_float(struct tr_pb *b, int field, float v)
{
    key(b, field, WIRE_I32);
    tr_pb_raw(b, &v, 4);
}

void tr_pb_bytes(struct tr_pb *b, int field, const void *bytes, size_t n)
{
    key(b, field, WIRE_LEN);
    tr_pb_varint(b, n);
    tr_pb_raw(b, bytes, n);
}

void tr_pb_string(struct tr_pb *b, int field, const char *s)
{
    tr_pb_bytes(b, field, s, strlen(s));
}

void tr_pb_message(struct tr_pb *b, int field, const struct tr_pb *m)
{
    tr_pb_bytes(b, field, m->data, m->len);
}

void tr_pb_take(struct tr_pb *b, int field, struct tr_pb *m)
{
    tr_pb_message(b, field, m);
    tr_pb_free(m);
}

void tr_pb_packed_doubles(struct tr_pb *b, int field, const double *v, size_t n)
{
    tr_pb_bytes(b, field, v, n * sizeof(double));
}
