/* The run report's environment block (src/report/environment.c): every documented field with
 * its JSON type, values that agree with what the system says (uname, sysconf, OpenMP), the
 * library versions as non-empty strings, the recipe hash passed through; and the file reader
 * behind the /proc and os-release probes, fed missing, odd and hostile files. */
#include "runner.h"
#include "unit.h"

#include <jansson.h>
#include <omp.h>
#include <sys/utsname.h>

#include "config.h"
#include "report/environment.h"

static const char *string_of(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    ck_assert_msg(json_is_string(v), "%s is not a string", key);
    return json_string_value(v);
}

static void assert_string_or_null(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    ck_assert_msg(v != NULL, "%s is missing", key);
    ck_assert_msg(json_is_null(v) || (json_is_string(v) && json_string_length(v) > 0),
                  "%s is neither null nor a non-empty string", key);
}

START_TEST(fields_and_types)
{
    static const char *const keys[] = {"host", "os", "distribution", "cpu", "cpus", "threads",
                                       "memory_bytes", "gpus", "driver", "libraries", "trainrun",
                                       "recipe_sha256", "blas_kernels", "settings"};
    const char *sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    json_t *env = tr_environment(sha);
    ck_assert_ptr_nonnull(env);
    ck_assert_int_eq(json_object_size(env), sizeof keys / sizeof keys[0]);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        ck_assert_msg(json_object_get(env, keys[i]) != NULL, "%s is missing", keys[i]);

    struct utsname u;
    ck_assert_int_eq(uname(&u), 0);
    ck_assert_str_eq(string_of(env, "host"), u.nodename);
    char os[600];
    snprintf(os, sizeof os, "%s %s %s", u.sysname, u.release, u.machine);
    ck_assert_str_eq(string_of(env, "os"), os);
    assert_string_or_null(env, "distribution");
    assert_string_or_null(env, "cpu");
    assert_string_or_null(env, "driver");

    json_t *cpus = json_object_get(env, "cpus");
    ck_assert(json_is_integer(cpus));
    ck_assert_int_ge(json_integer_value(cpus), 1);
    ck_assert_int_eq(json_integer_value(cpus), sysconf(_SC_NPROCESSORS_ONLN));
    ck_assert_int_eq(json_integer_value(json_object_get(env, "threads")), omp_get_max_threads());
    /* The seed's item 4: the kernels OpenBLAS picked and the variables that change threads,
     * kernels and devices, as this process sees them (null when unset). */
    assert_string_or_null(env, "blas_kernels");
    ck_assert(json_is_string(json_object_get(env, "blas_kernels")));
    json_t *settings = json_object_get(env, "settings");
    static const char *const names[] = {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE",
                                        "CUDA_VISIBLE_DEVICES", "TRAINRUN_BACKEND"};
    ck_assert_int_eq(json_object_size(settings), sizeof names / sizeof names[0]);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *set = getenv(names[i]);
        json_t *v = json_object_get(settings, names[i]);
        ck_assert_msg(set ? json_is_string(v) && !strcmp(json_string_value(v), set) : json_is_null(v),
                      "settings.%s is not the environment's", names[i]);
    }
    json_t *memory = json_object_get(env, "memory_bytes");
    ck_assert(json_is_integer(memory));
    ck_assert_int_gt(json_integer_value(memory), 0);
    ck_assert_int_eq(json_integer_value(memory) % 1024, 0);   /* /proc/meminfo counts kB */

    json_t *gpus = json_object_get(env, "gpus"), *gpu;
    size_t i;
    ck_assert(json_is_array(gpus));
    json_array_foreach(gpus, i, gpu) {
        ck_assert_int_gt(strlen(string_of(gpu, "name")), 0);
        ck_assert_int_gt(json_integer_value(json_object_get(gpu, "memory_bytes")), 0);
    }

    const char *trainrun = string_of(env, "trainrun");
    ck_assert_msg(!strncmp(trainrun, PACKAGE_VERSION " (git ", strlen(PACKAGE_VERSION " (git ")),
                  "trainrun is '%s'", trainrun);
    ck_assert_str_eq(string_of(env, "recipe_sha256"), sha);
    json_decref(env);
}
END_TEST

START_TEST(library_versions)
{
    json_t *env = tr_environment(NULL);
    json_t *libs = json_object_get(env, "libraries"), *v;
    const char *name;
    ck_assert(json_is_object(libs));
    static const char *const always[] = {"openblas", "jansson", "libyaml", "zlib", "utf8proc",
                                         "pcre2", "glibc", "compiler", "openmp"};
    for (size_t i = 0; i < sizeof always / sizeof always[0]; i++)
        ck_assert_msg(json_object_get(libs, always[i]) != NULL, "libraries.%s is missing", always[i]);
    json_object_foreach(libs, name, v)
        ck_assert_msg(json_is_string(v) && json_string_length(v) > 0,
                      "libraries.%s is not a non-empty string", name);
    ck_assert_msg(!strncmp(string_of(libs, "openblas"), "OpenBLAS ", 9), "openblas: %s",
                  string_of(libs, "openblas"));
    ck_assert_ptr_nonnull(strstr(string_of(libs, "compiler"), __VERSION__));
    ck_assert_ptr_null(json_object_get(libs, "libcurl"));   /* linked, unused, dropped */
#ifdef HAVE_CUDA
    ck_assert_ptr_nonnull(json_object_get(libs, "cuda_runtime"));
    ck_assert_ptr_nonnull(json_object_get(libs, "cudnn"));
    ck_assert_ptr_nonnull(json_object_get(libs, "cublaslt"));
#else
    ck_assert_ptr_null(json_object_get(libs, "cuda_runtime"));
    ck_assert_ptr_null(json_object_get(libs, "cudnn"));
    ck_assert_ptr_null(json_object_get(libs, "cublaslt"));
#endif
    ck_assert(json_is_null(json_object_get(env, "recipe_sha256")));
    json_decref(env);
}
END_TEST

/* The same machine twice gives the same block; its text is valid JSON (UTF-8 throughout). */
START_TEST(stable_and_serialisable)
{
    json_t *a = tr_environment("abc"), *b = tr_environment("abc");
    ck_assert(json_equal(a, b));
    char *text = json_dumps(a, JSON_COMPACT);
    ck_assert_ptr_nonnull(text);
    json_t *back = json_loads(text, 0, NULL);
    ck_assert(json_equal(a, back));
    free(text);
    json_decref(back);
    json_decref(a);
    json_decref(b);
}
END_TEST

static void assert_value(const char *path, const char *key, const char *want)
{
    char *got = tr_environment_file_value(path, key);
    if (!want)
        ck_assert_msg(got == NULL, "%s in %s: got '%s', expected none", key, path, got);
    else {
        ck_assert_msg(got != NULL, "%s in %s: none, expected '%s'", key, path, want);
        ck_assert_str_eq(got, want);
    }
    free(got);
}

START_TEST(file_value)
{
    char *dir = unit_mkdtemp();
    char *osr = unit_write_in(dir, "os-release",
                              "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME_X=no\nPRETTY_NAME=\"Debian 12\"\n"
                              "ID=debian\nEMPTY=\"\"\nEMPTY=second\nSINGLE='quoted'\nHALF=\"open");
    assert_value(osr, "PRETTY_NAME", "Debian 12");   /* not PRETTY_NAME_X */
    assert_value(osr, "ID", "debian");
    assert_value(osr, "EMPTY", "second");            /* an empty value does not count */
    assert_value(osr, "SINGLE", "quoted");
    assert_value(osr, "HALF", "\"open");             /* no closing quote, no newline at the end */
    assert_value(osr, "VERSION", NULL);
    assert_value(osr, "NAME", "Debian GNU/Linux");

    char *cpuinfo = unit_write_in(dir, "cpuinfo",
                                  "processor\t: 0\r\nmodel name\t: AMD EPYC 7B13  \r\nflags\t\t: fpu\n");
    assert_value(cpuinfo, "model name", "AMD EPYC 7B13");
    assert_value(cpuinfo, "model", NULL);            /* a key is matched whole */
    char *meminfo = unit_write_in(dir, "meminfo", "MemTotalX: 1 kB\nMemTotal:       16314624 kB\n");
    assert_value(meminfo, "MemTotal", "16314624 kB");

    char long_line[20000];
    memset(long_line, 'x', sizeof long_line);
    memcpy(long_line, "KEY: ", 5);
    long_line[sizeof long_line - 1] = '\0';
    char *big = unit_write_in(dir, "long", long_line);
    char *got = tr_environment_file_value(big, "KEY");
    ck_assert_int_eq(strlen(got), sizeof long_line - 6);
    free(got);

    char *empty = unit_write_in(dir, "empty", "");
    assert_value(empty, "KEY", NULL);
    char *binary = unit_write_in(dir, "binary", "\x01\x02\xff:\xfe\n:\n=\n");
    assert_value(binary, "KEY", NULL);
    assert_value(dir, "KEY", NULL);                   /* a folder */
    char *missing = tr_strdup_printf("%s/missing", dir);
    assert_value(missing, "KEY", NULL);
    free(osr), free(cpuinfo), free(meminfo), free(big), free(empty), free(binary), free(missing);
    unit_rmtree(dir);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("environment");
    TCase *tc = tcase_create("environment");
    tcase_add_test(tc, fields_and_types);
    tcase_add_test(tc, library_versions);
    tcase_add_test(tc, stable_and_serialisable);
    tcase_add_test(tc, file_value);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
