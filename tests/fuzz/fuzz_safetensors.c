/* libFuzzer harness for the safetensors reader (src/core/safetensors.c): the input is a whole
 * file. Beyond crashes, leaks and undefined behaviour (ASan+UBSan; every tensor's bytes are
 * read, so a pointer outside the input is caught), it checks what a caller relies on after a
 * successful parse: the tensors tile the data exactly, each is found by its name, sizes
 * agree with shapes, and a failure leaves a message naming the file and an empty struct. Each
 * input is parsed twice: strictly, and with TR_ST_ANY_DTYPE (model.init's reading), which
 * accepts whatever the strict parse accepts. */
#include "fuzz.h"

#include "core/safetensors.h"

#define CHECK FUZZ_CHECK

static volatile unsigned sink;   /* keeps the reads of every byte from being optimized out */

/* An element's bytes, from the format's description rather than the reader's table. */
static size_t element_size(const struct tr_st_tensor *t)
{
    if (t->dtype != TR_ST_OTHER) {
        CHECK((unsigned)t->dtype < TR_NDTYPES && t->other_dtype == NULL);
        return tr_dtype_size(t->dtype);
    }
    static const struct { const char *name; size_t size; } other[] = {
        {"BOOL", 1}, {"I8", 1}, {"I16", 2}, {"U16", 2}, {"U32", 4}, {"I64", 8}, {"U64", 8},
        {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1}, {"C64", 8},
    };
    CHECK(t->other_dtype != NULL);
    for (size_t i = 0; i < sizeof other / sizeof *other; i++)
        if (!strcmp(t->other_dtype, other[i].name))
            return other[i].size;
    CHECK(!"a dtype the format does not define, or a packed one");
    return 0;
}

static void check_opened(const struct tr_safetensors *st, const uint8_t *data, size_t size, unsigned flags)
{
    const uint8_t *end = data + size;
    unsigned sum = 0;
    for (int i = 0; i < st->n; i++) {
        const struct tr_st_tensor *t = &st->tensors[i];
        CHECK(t->rank >= 0 && t->rank <= TR_MAX_RANK);
        CHECK((flags & TR_ST_ANY_DTYPE) || t->dtype != TR_ST_OTHER);
        size_t numel = 1;
        for (int k = 0; k < t->rank; k++) {
            CHECK(t->shape[k] >= 0);
            numel *= (size_t)t->shape[k];
        }
        CHECK(numel * element_size(t) == t->bytes);
        const uint8_t *p = t->data;
        CHECK(p >= data && p <= end && t->bytes <= (size_t)(end - p));
        if (i + 1 < st->n)   /* back to back, in file order */
            CHECK(p + t->bytes == (const uint8_t *)st->tensors[i + 1].data);
        else
            CHECK(p + t->bytes == end);
        for (size_t b = 0; b < t->bytes; b++)
            sum += p[b];
        CHECK(tr_st_find(st, t->name) == t);
    }
    for (int i = 0; i < st->n_metadata; i++)
        CHECK(tr_st_metadata(st, st->metadata[2 * i]) != NULL);
    CHECK(st->metadata[2 * st->n_metadata] == NULL);
    sink = sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *input, size_t size)
{
    /* an exact-size copy: replay.c passes a larger static buffer, where ASan would miss a
     * read past the input's end */
    uint8_t *data = malloc(size ? size : 1);
    if (!data)
        return 0;
    memcpy(data, input, size);
    int strict = -1;
    for (unsigned flags = 0; flags <= TR_ST_ANY_DTYPE; flags += TR_ST_ANY_DTYPE) {
        struct tr_safetensors st;
        struct tr_diag err = {0};
        int rc = tr_st_parse_with(&st, data, size, "fuzz.safetensors", flags, &err);
        if (rc == 0) {
            check_opened(&st, data, size, flags);
        } else {
            CHECK(rc == TR_EINVAL || rc == TR_ENOMEM);
            CHECK(strict != 0 || rc == TR_ENOMEM);   /* what the strict parse read, the other reads */
            CHECK(!strncmp(tr_diag_last(&err), "fuzz.safetensors: ", 18) && strlen(tr_diag_last(&err)) > 18);
            for (const char *c = tr_diag_last(&err); *c; c++)   /* hostile bytes never reach the message raw */
                CHECK((unsigned char)*c >= 0x20 && *c != 0x7f);
            CHECK(st.n == 0 && st.tensors == NULL && st.header == NULL);
        }
        strict = flags ? strict : rc;
        tr_st_close(&st);
        tr_diag_free(&err);
    }
    free(data);
    return 0;
}
