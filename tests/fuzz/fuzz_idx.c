/* libFuzzer harness for the IDX reader (tr_idx_parse, src/data/files.c; MNIST-style images and
 * labels) from memory (make fuzz-idx). Input: a 4-byte little-endian length n, then n bytes of
 * image file, then the label file; nclasses 10. Beyond ASan+UBSan: a refusal names a file, and
 * a table that parses holds n images of the file's shape, as bytes, with every label below
 * nclasses. */
#include "fuzz.h"

#include "data/files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    size_t n = (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 | (size_t)data[3] << 24;
    size -= 4, data += 4;
    if (n > size)
        n = size;
    /* exact-size copies, so ASan sees a read past either file's end */
    unsigned char *images = malloc(n ? n : 1), *labels = malloc(size - n ? size - n : 1);
    memcpy(images, data, n);
    memcpy(labels, data + n, size - n);
    struct tr_table t = {0};
    struct tr_diag diag = {0};
    int rc = tr_idx_parse("images.idx", images, n, "labels.idx", labels, size - n, 10, &t, &diag);
    if (rc) {
        FUZZ_CHECK(diag.n > 0);
        char *line = tr_diag_line(&diag, diag.n - 1);
        FUZZ_CHECK(strstr(line, "images.idx") || strstr(line, "labels.idx"));
        free(line);
    } else {
        FUZZ_CHECK(t.n >= 0 && t.nfeatures >= 0);
        int64_t per = 1;
        for (int i = 0; i < t.rank; i++)
            per *= t.dims[i];
        FUZZ_CHECK(per == t.nfeatures);
        FUZZ_CHECK(t.x == NULL && (t.pixels || t.n * t.nfeatures == 0));
        unsigned sum = 0;   /* every grey level read, so ASan sees the whole array */
        for (int64_t i = 0; i < t.n * t.nfeatures; i++)
            sum += t.pixels[i] <= 255;
        for (int64_t i = 0; i < t.n; i++)
            FUZZ_CHECK(t.y[i] >= 0 && t.y[i] < 10);
        FUZZ_CHECK(sum == (unsigned)(t.n * t.nfeatures));
    }
    tr_table_free(&t);
    tr_diag_free(&diag);
    free(images);
    free(labels);
    return 0;
}
