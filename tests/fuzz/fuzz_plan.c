/* libFuzzer harness for plan.json as `trainrun resume` reads it back (tr_plan_read_knobs,
 * src/plan/plan_json.c); the input is the whole file, written to /dev/shm since the reader
 * takes a path (make fuzz-plan). Beyond ASan+UBSan: a refusal names the file, and knobs that
 * are accepted are within the ranges the trainer indexes with. */
#include "fuzz.h"

#include "plan/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[256];
    if (fuzz_write_file(path, sizeof path, "plan.json", data, size))
        return 0;
    struct tr_knobs k;
    struct tr_diag diag = {0};
    int rc = tr_plan_read_knobs(path, &k, &diag);
    if (rc) {
        fuzz_check_names(&diag, path);
    } else {
        FUZZ_CHECK(k.precision >= TR_PREC_FP32 && k.precision <= TR_PREC_FP16);
        FUZZ_CHECK(k.remat_mode >= 0 && k.remat_mode < 3 && k.remat_blocks >= 0);
        FUZZ_CHECK(k.nbuckets >= 1 && k.nbuckets <= TR_PLAN_MAX_BUCKETS);
        FUZZ_CHECK(k.micro >= 1 && k.eval_batch >= 1);
        for (int i = 0; i < k.nbuckets; i++)
            FUZZ_CHECK(k.buckets[i].len >= 1 && k.buckets[i].rows >= 1);
    }
    tr_diag_free(&diag);
    unlink(path);
    return 0;
}
