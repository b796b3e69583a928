/* libFuzzer harness for dataset definitions (src/data/definition.c): the input is a whole
 * dataset.yaml, written to /dev/shm since the reader takes a path (make fuzz-dataset). Beyond
 * ASan+UBSan it checks that a refusal names the file and that a definition that parses has a
 * format and the split sources the format needs. */
#include "fuzz.h"

#include "data/definition.h"
#include "recipe/recipe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[256];
    if (fuzz_write_file(path, sizeof path, "dataset.yaml", data, size))
        return 0;
    struct tr_data_def def;
    struct tr_diag diag = {0};
    int rc = tr_data_def_parse(path, &def, &diag);
    if (rc) {
        FUZZ_CHECK(rc == TR_EINVAL || rc == TR_EIO);
        fuzz_check_names(&diag, path);
    } else {
        FUZZ_CHECK(def.all.given || def.train.given);
        const struct tr_data_source *s[] = {&def.all, &def.train, &def.valid, &def.test};
        for (int i = 0; i < 4; i++)
            for (int k = 0; k < s[i]->nfiles; k++)
                FUZZ_CHECK(s[i]->files[k].path || s[i]->files[k].url);
    }
    tr_data_def_free(&def);
    tr_diag_free(&diag);
    unlink(path);
    return 0;
}
