/* Element types, symbolic sizes and bound tensors: the vocabulary every stage of the engine
 * shares (DESIGN.md §3, ENGINE.md). A graph is built once with sizes that may depend on the
 * micro-batch B and the sequence length S; kernels see concrete sizes and a pointer. */
#ifndef TR_TENSOR_H
#define TR_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum tr_dtype {
    TR_F32,
    TR_BF16,   /* 16-bit storage, f32 compute */
    TR_F16,    /* 16-bit storage, f32 compute */
    TR_I32,
    TR_U8,
    TR_F64,    /* test kernels only: the finite-difference gradient checks */
    TR_NDTYPES
};

#define TR_MAX_RANK 5

/* The size k·B^b·S^s / div: B is the micro-batch, S the sequence length; div (0 read as 1)
 * divides what the rest makes, exactly — sequence parallelism's S/T, where every S is a
 * multiple of T (the loader pads it so). */
struct tr_dim {
    int64_t k;
    uint8_t b, s, div;
};

struct tr_shape {
    int rank;
    struct tr_dim dim[TR_MAX_RANK];
};

/* What a kernel sees: concrete sizes (row-major, contiguous) and the data. */
struct tr_tensor {
    enum tr_dtype dtype;
    int rank;
    int64_t dim[TR_MAX_RANK];
    void *data;
};

size_t tr_dtype_size(enum tr_dtype t);
const char *tr_dtype_name(enum tr_dtype t);

static inline bool tr_dtype_is_16bit(enum tr_dtype t) { return t == TR_BF16 || t == TR_F16; }
static inline bool tr_dtype_is_float(enum tr_dtype t) { return t == TR_F32 || t == TR_F64 || tr_dtype_is_16bit(t); }

static inline struct tr_dim tr_dim_const(int64_t k) { return (struct tr_dim){k, 0, 0, 0}; }
static inline struct tr_dim tr_dim_B(int64_t k) { return (struct tr_dim){k, 1, 0, 0}; }
static inline struct tr_dim tr_dim_S(int64_t k) { return (struct tr_dim){k, 0, 1, 0}; }
int64_t tr_dim_eval(struct tr_dim d, int64_t B, int64_t S);
bool tr_dim_equal(struct tr_dim a, struct tr_dim b);
struct tr_dim tr_dim_mul(struct tr_dim a, struct tr_dim b);

struct tr_shape tr_shape_make(int rank, const struct tr_dim *dims);
struct tr_dim tr_shape_numel(const struct tr_shape *s);
bool tr_shape_equal(const struct tr_shape *a, const struct tr_shape *b);
/* "[B, S, 768]", for messages. */
void tr_shape_format(const struct tr_shape *s, char *out, size_t n);

int64_t tr_tensor_numel(const struct tr_tensor *t);
size_t tr_tensor_bytes(const struct tr_tensor *t);

/* 16-bit floats: round to nearest even, NaN kept NaN. The bf16 pair is inline so conversion
 * loops vectorise (bf16 is the top half of an f32); f16 has its F16C path in the CPU backend. */
static inline uint16_t tr_f32_to_bf16(float x)
{
    uint32_t u;
    __builtin_memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);   /* quiet NaN, sign kept */
    u += 0x7fffu + ((u >> 16) & 1u);          /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

static inline float tr_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    __builtin_memcpy(&x, &u, 4);
    return x;
}

uint16_t tr_f32_to_f16(float x);
float tr_f16_to_f32(uint16_t h);
/* Whole arrays, using F16C where the CPU has it (bit-identical to the scalar functions). */
void tr_f16_widen(const uint16_t *in, float *out, int64_t n);
void tr_f16_narrow(const float *in, uint16_t *out, int64_t n);

#endif
