/* libFuzzer harness for TSV text-classification files (make fuzz-tsv); see fuzz_fields.h. */
#include "fuzz_fields.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_fields(data, size, TR_FMT_TSV, "fuzz.tsv");
}
