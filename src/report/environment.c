/* The environment block of the run report (environment.h): what a person needs to rerun a run
 * on the same footing or to explain why two runs differ — host, OS, CPUs, memory, GPUs and
 * driver, and the versions of the libraries actually loaded (asked of each library at run
 * time where it can say, so that an upgraded .so shows). libcurl is linked but unused, so
 * the linker drops it (--as-needed) and it is not listed: asking its version would load it. */
#include "report/environment.h"

#include "core/blas.h"
#include <gnu/libc-version.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <utf8proc.h>
#include <yaml.h>
#include <zlib.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "config.h"
#ifdef HAVE_CUDA
#include "backend/cuda/probe.h"
#endif

#if defined(__clang__)
#define TR_COMPILER "clang " __clang_version__
#elif defined(__GNUC__)
#define TR_COMPILER "gcc " __VERSION__
#else
#define TR_COMPILER "unknown C compiler"
#endif

char *tr_environment_file_value(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t keylen = strlen(key), cap = 0;
    char *line = NULL, *value = NULL;
    while (!value && getline(&line, &cap, f) >= 0) {
        if (strncmp(line, key, keylen))
            continue;
        char *p = line + keylen;
        p += strspn(p, " \t");
        if (*p != ':' && *p != '=')
            continue;   /* a longer key that starts with this one */
        p += 1 + strspn(p + 1, " \t");
        size_t n = strcspn(p, "\r\n");
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if (n >= 2 && (p[0] == '"' || p[0] == '\'') && p[n - 1] == p[0])
            p++, n -= 2;
        if (n)
            value = strndup(p, n);
    }
    free(line);
    fclose(f);
    return value;
}

/* s as a JSON string; null for NULL or for bytes that are not UTF-8 (a hostname may be). */
static json_t *text(const char *s)
{
    json_t *j = s ? json_string(s) : NULL;
    return j ? j : json_null();
}

static json_t *printed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static json_t *printed(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return text(buf);
}

static json_t *text_free(char *s)
{
    json_t *j = text(s);
    free(s);
    return j;
}

/* "Debian GNU/Linux 12 (bookworm)": os-release(5) lives in /etc, else in /usr/lib. */
static json_t *distribution(void)
{
    char *name = tr_environment_file_value("/etc/os-release", "PRETTY_NAME");
    if (!name)
        name = tr_environment_file_value("/usr/lib/os-release", "PRETTY_NAME");
    return text_free(name);
}

static json_t *memory_bytes(void)
{
    char *kib = tr_environment_file_value("/proc/meminfo", "MemTotal");   /* "131072 kB" */
    unsigned long long n = kib ? strtoull(kib, NULL, 10) : 0;
    free(kib);
    return n ? json_integer((json_int_t)(n * 1024)) : json_null();
}

/* The first word of s that starts with a digit and holds a dot: "535.104.05" out of "NVIDIA
 * UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 …" (the open module words it otherwise). */
static char *version_word(const char *s)
{
    for (const char *p = s; *p; p += strcspn(p, " \t"), p += strspn(p, " \t")) {
        size_t n = strcspn(p, " \t");
        if (*p >= '0' && *p <= '9' && memchr(p, '.', n))
            return strndup(p, n);
    }
    return NULL;
}

/* The NVIDIA kernel driver's version; without its /proc file (a container that sees the GPU
 * but not the host's /proc), the CUDA version the driver supports, which the probe reads. */
static json_t *driver(int cuda_driver_version)
{
    char *line = tr_environment_file_value("/proc/driver/nvidia/version", "NVRM version");
    char *word = line ? version_word(line) : NULL;
    free(line);
    if (!word && cuda_driver_version > 0)
        return printed("CUDA %d.%d", cuda_driver_version / 1000, cuda_driver_version % 1000 / 10);
    return text_free(word);
}

/* _OPENMP is the date of the specification the compiler implements. */
static json_t *openmp_version(void)
{
    static const struct { int date; const char *version; } specs[] = {
        {200505, "2.5"}, {200805, "3.0"}, {201107, "3.1"}, {201307, "4.0"},
        {201511, "4.5"}, {201811, "5.0"}, {202011, "5.1"}, {202111, "5.2"}, {202411, "6.0"},
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
        if (specs[i].date == _OPENMP)
            return printed("%s (%d)", specs[i].version, _OPENMP);
    return printed("%d", _OPENMP);
}

#ifdef HAVE_CUDA
/* cuDNN 9 and cuBLAS count major·10000 + minor·100 + patch; cuDNN 8 counted major·1000. */
static json_t *cuda_library_version(long v, int major_unit)
{
    return printed("%ld.%ld.%ld", v / major_unit, v % major_unit / 100, v % 100);
}

/* Appends the GPUs to gpus and the CUDA libraries' versions to libraries; returns the CUDA
 * version the driver supports (0: no driver). */
static int probe_cuda(json_t *gpus, json_t *libraries)
{
    struct tr_cuda_info info;
    tr_cuda_probe(&info);
    for (int i = 0; i < info.devices; i++) {
        char name[256];
        unsigned long long memory = 0;
        if (tr_cuda_gpu(i, name, sizeof name, &memory) == 0)
            json_array_append_new(gpus, json_pack("{s:o s:I}", "name", text(name), "memory_bytes",
                                                  (json_int_t)memory));
    }
    json_object_set_new(libraries, "cuda_runtime", printed("%d.%d", info.runtime_version / 1000,
                                                                info.runtime_version % 1000 / 10));
    json_object_set_new(libraries, "cudnn",
                        cuda_library_version(info.cudnn_version, info.cudnn_version >= 90000 ? 10000 : 1000));
    json_object_set_new(libraries, "cublaslt", cuda_library_version(info.cublaslt_version, 10000));
    return info.driver_version;
}
#endif

static json_t *libraries(void)
{
    char pcre2[64] = "";
    if (pcre2_config(PCRE2_CONFIG_VERSION, pcre2) < 0)
        pcre2[0] = '\0';
    json_t *j = json_object();
    json_object_set_new(j, "openblas", text(tr_blas.get_config()));
#if JANSSON_VERSION_HEX >= 0x020d00
    json_object_set_new(j, "jansson", text(jansson_version_str()));
#else
    json_object_set_new(j, "jansson", text(JANSSON_VERSION));
#endif
    json_object_set_new(j, "libyaml", text(yaml_get_version_string()));
    json_object_set_new(j, "zlib", text(zlibVersion()));
    json_object_set_new(j, "utf8proc", text(utf8proc_version()));
    json_object_set_new(j, "pcre2", text(pcre2[0] ? pcre2 : NULL));
    json_object_set_new(j, "glibc", text(gnu_get_libc_version()));
    json_object_set_new(j, "compiler", text(TR_COMPILER));
    json_object_set_new(j, "openmp", openmp_version());
    return j;
}

/* The settings that change how fast a run goes or where (the seed's checklist, item 4): thread
 * counts, the BLAS kernels forced, the devices visible, the backend; null when unset. */
static json_t *settings(void)
{
    static const char *const names[] = {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE",
                                        "CUDA_VISIBLE_DEVICES", "TRAINRUN_BACKEND"};
    json_t *j = json_object();
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        json_object_set_new(j, names[i], text(getenv(names[i])));
    return j;
}

json_t *tr_environment(const char *recipe_sha256)
{
    json_t *env = json_object();
    if (!env)
        return NULL;
    struct utsname u;
    int have_uname = uname(&u) == 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    char *cpu = tr_environment_file_value("/proc/cpuinfo", "model name");
    json_object_set_new(env, "host", have_uname ? text(u.nodename) : json_null());
    json_object_set_new(env, "os", have_uname ? printed("%s %s %s", u.sysname, u.release, u.machine)
                                              : json_null());
    json_object_set_new(env, "distribution", distribution());
    json_object_set_new(env, "cpu", text_free(cpu));
    json_object_set_new(env, "cpus", cpus > 0 ? json_integer(cpus) : json_null());
    json_object_set_new(env, "threads", json_integer(omp_get_max_threads()));
    json_object_set_new(env, "blas_kernels", text(tr_blas.get_corename()));
    json_object_set_new(env, "settings", settings());
    json_object_set_new(env, "memory_bytes", memory_bytes());
    json_t *gpus = json_array(), *libs = libraries();
    int cuda_driver = 0;
#ifdef HAVE_CUDA
    cuda_driver = probe_cuda(gpus, libs);
#endif
    json_object_set_new(env, "gpus", gpus);
    json_object_set_new(env, "driver", driver(cuda_driver));
    json_object_set_new(env, "libraries", libs);
    json_object_set_new(env, "trainrun", printed("%s (git %s)", PACKAGE_VERSION, TR_GIT_REVISION));
    json_object_set_new(env, "recipe_sha256", text(recipe_sha256));
    return env;
}
