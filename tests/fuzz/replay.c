/* Runs the fuzz harness over files given as arguments, without libFuzzer: `make check` replays
 * the seed corpus and every input that once crashed (tests/fuzz/regressions) under ASan+UBSan. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            perror(argv[i]);
            return 1;
        }
        static uint8_t buf[1 << 16];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, n);
        printf("ok %s\n", argv[i]);
    }
    return 0;
}
