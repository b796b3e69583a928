/* A GPU as the planner's device (device.h, tr_device_cuda): its memory read off the card once
 * this process's context exists — so the context's own cost is measured, not assumed — its host
 * link timed each way, and its other rates from the profile in etc/devices.yaml that names the
 * same GPU (rates are what a profile cites; memory and the link are what this card has now). */
#include "plan/device.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "core/error.h"
#ifdef HAVE_CUDA
#include "backend/cuda/probe.h"
#endif

/* The model in a GPU's name: its first word with a digit, up to a '-' ("NVIDIA H200" → "H200",
 * "NVIDIA A100-SXM4-80GB" → "A100", "NVIDIA GeForce RTX 3090" → "3090", "Tesla T4" → "T4"). */
static void model_word(const char *name, char *out, size_t size)
{
    *out = '\0';
    for (const char *p = name; *p;) {
        while (*p == ' ')
            p++;
        size_t n = strcspn(p, " -");
        bool digit = false;
        for (size_t i = 0; i < n; i++)
            digit |= isdigit((unsigned char)p[i]) != 0;
        if (digit && n < size) {
            memcpy(out, p, n), out[n] = '\0';
            return;
        }
        p += strcspn(p, " ");
    }
}

/* Whether word appears in text as a word of its own, ignoring case. */
static bool has_word(const char *text, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = text; n && *p; p++)
        if (!strncasecmp(p, word, n) && (p == text || !isalnum((unsigned char)p[-1])) && !isalnum((unsigned char)p[n]))
            return true;
    return false;
}

/* The cuda profile naming the GPU's model, the one nearest in memory when several do; 0 when
 * one is found. */
static int matching_profile(const char *path, const char *gpu, uint64_t memory, struct tr_device *out)
{
    char names[2048], word[64];
    model_word(gpu, word, sizeof word);
    if (!*word || tr_device_profile_names(path, names, sizeof names))
        return -1;
    int found = -1;
    for (char *name = strtok(names, ", "); name; name = strtok(NULL, ", ")) {
        struct tr_device d;
        struct tr_diag ignored = {0};
        int rc = tr_device_profile(path, name, &d, &ignored);
        tr_diag_free(&ignored);
        if (rc || d.kind != TR_DEVICE_CUDA || !has_word(d.description, word))
            continue;
        double off = (double)d.memory - (double)memory, best = (double)out->memory - (double)memory;
        if (found || off * off < best * best)
            *out = d, found = 0;
    }
    return found;
}

int tr_device_cuda(struct tr_device *d, int index, const char *profiles, struct tr_diag *diag)
{
#ifdef HAVE_CUDA
    struct tr_cuda_start s;
    char why[512];
    if (tr_cuda_start(index, &s, why, sizeof why))
        return tr_fail(diag, TR_EINVAL, "%s", why);
    struct tr_device p = {0};
    bool known = matching_profile(profiles, s.name, s.total, &p) == 0;
    memset(d, 0, sizeof *d);
    if (known)
        *d = p;
    else {   /* rates no profile cites: a Hopper's, said plainly (they only weigh time, never fit) */
        d->supports[0] = true, d->supports[1] = s.major >= 8, d->supports[2] = true;
        d->gemm_flops[0] = 20e12, d->gemm_flops[1] = d->gemm_flops[2] = 100e12;
        d->bandwidth = 1e12, d->node_seconds = 5e-6;
    }
    d->kind = TR_DEVICE_CUDA;
    d->index = index;
    snprintf(d->name, sizeof d->name, "cuda:%d", index);
    snprintf(d->description, sizeof d->description, "%.90s (%.1f GiB, compute capability %d.%d, %d SMs)", s.name,
             (double)s.total / (1u << 30), s.major, s.minor, s.multiprocessors);
    d->memory = s.total;
    d->context_bytes = s.total - s.free;   /* this context, its modules, and anything else on the card */
    d->library_workspace = 0;              /* cuBLASLt's is in the context, measured above */
    d->thread_bytes = 0;
    /* offloading's copies go both ways, as many bytes each: the two rates' harmonic mean */
    char link[160] = "";
    if (s.link_up > 0 && s.link_down > 0) {
        d->host_link = 2 / (1 / s.link_up + 1 / s.link_down);
        snprintf(link, sizeof link, "; host link measured at start: %.1f GB/s to the device, %.1f GB/s back "
                 "(page-locked, %llu MiB)", s.link_up / 1e9, s.link_down / 1e9, s.link_bytes >> 20);
    } else {
        snprintf(link, sizeof link, "; host link not measured (no page-locked buffer): %.1f GB/s %s",
                 tr_device_host_link(d) / 1e9, d->host_link > 0 ? "from the profile" : "assumed");
    }
    snprintf(d->source, sizeof d->source, "memory measured at start (cudaMemGetInfo: %.2f GiB free of %.2f GiB); "
             "rates %s%s%s", (double)s.free / (1u << 30), (double)s.total / (1u << 30),
             known ? "from the profile " : "assumed (no profile in devices.yaml names this GPU)",
             known ? p.name : "", link);
    if (tr_path_set(&d->path, diag, "%s", known ? profiles : ""))
        return TR_EINVAL;
    return 0;
#else
    (void)d, (void)index, (void)profiles;
    return tr_fail(diag, TR_EINVAL, "device: this trainrun was built without CUDA (configure found no CUDA "
                   "toolkit); rebuild where nvcc, cuBLASLt and cuDNN are installed, or set device: cpu");
#endif
}

bool tr_device_cuda_seen(void)
{
#ifdef HAVE_CUDA
    char name[256];
    unsigned long long memory;
    return tr_cuda_gpu(0, name, sizeof name, &memory) == 0;
#else
    return false;
#endif
}

int64_t tr_device_in_use(const struct tr_device *d)
{
#ifdef HAVE_CUDA
    if (d->kind == TR_DEVICE_CUDA)
        return (int64_t)tr_cuda_in_use();
#endif
    (void)d;
    return 0;
}
