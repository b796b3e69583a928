/* Runs a fuzz harness over files given as arguments, without libFuzzer: make check replays each
 * harness's seeds and every input that once crashed or hung it (tests/fuzz/regressions-<reader>)
 * under ASan+UBSan (tests/fuzz-replay.sh). An input that takes longer than
 * FUZZ_REPLAY_SECONDS (default 30: libFuzzer's 2 s, with room for a loaded machine and gcc's
 * sanitizers) fails, so that a hang once found stays fixed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));   /* where the harness has one */

/* The whole of path in a buffer of exactly its size (ASan then sees a read past the end). */
static uint8_t *read_input(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n == cap && !(buf = realloc(buf, cap = cap ? 2 * cap : 4096)))
            break;
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    int bad = ferror(f) || !buf;
    fclose(f);
    uint8_t *exact = bad ? NULL : malloc(n ? n : 1);
    if (exact && n)
        memcpy(exact, buf, n);
    free(buf);
    *size = n;
    return exact;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    const char *limit_text = getenv("FUZZ_REPLAY_SECONDS");
    double limit = limit_text ? atof(limit_text) : 30;
    int slow = 0;
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        size_t size;
        uint8_t *data = read_input(argv[i], &size);
        if (!data) {
            perror(argv[i]);
            return 1;
        }
        double start = now();
        LLVMFuzzerTestOneInput(data, size);
        double seconds = now() - start;
        free(data);
        if (seconds > limit) {
            printf("SLOW %s: %.1f s (limit %.0f s)\n", argv[i], seconds, limit);
            slow++;
        } else {
            printf("ok %s (%.2f s)\n", argv[i], seconds);
        }
    }
    return slow ? 1 : 0;
}
