/* What the CUDA build of trainrun sees: library versions and GPUs. Used by --version and by
 * the GPU tests to decide whether to skip (77). The backend's kernels join this folder later. */
#ifndef TR_CUDA_PROBE_H
#define TR_CUDA_PROBE_H

#ifdef __cplusplus
extern "C" {
#endif

struct tr_cuda_info {
    int runtime_version;   /* cudaRuntimeGetVersion: 13000 for 13.0 */
    int driver_version;    /* 0 when no driver is installed */
    long cudnn_version;    /* cudnnGetVersion: 91000 for 9.10.0 */
    int cublaslt_version;  /* cublasLtGetVersion */
    int devices;           /* GPUs seen; 0 when none (or no driver) */
    char first_name[256];  /* the first GPU's name, when devices > 0 */
    unsigned long long first_memory;  /* its memory, bytes */
};

void tr_cuda_probe(struct tr_cuda_info *info);
/* GPU index's name and memory (bytes); 0, or −1 when there is no such GPU. */
int tr_cuda_gpu(int index, char *name, unsigned long namesize, unsigned long long *memory);

/* What training on a GPU starts with (plan/device_cuda.c): GPU index made current, its context
 * made with every module loaded at once (CUDA_MODULE_LOADING=EAGER, set before the first CUDA
 * call, so that no kernel's code arrives later, outside the measurement), the host link timed
 * each way (offloading's copies), the backend's own context (stream, cuBLASLt) started; then
 * the device's memory read. */
struct tr_cuda_start {
    char name[256];
    unsigned long long total;     /* the GPU's memory */
    unsigned long long free;      /* what is left once this process's context exists */
    int major, minor;             /* compute capability */
    int multiprocessors;
    double link_up, link_down;    /* the host link measured each way, bytes/s: page-locked copies
                                   * to the device and back; 0 when it could not be measured */
    unsigned long long link_bytes;   /* the copy measured */
};
/* 0, or -1 with a sentence in err (no such GPU, no driver, the context failed). */
int tr_cuda_start(int index, struct tr_cuda_start *s, char *err, unsigned long errsize);
/* The device memory in use now, all processes' (total − free); 0 when it cannot be read. */
unsigned long long tr_cuda_in_use(void);

#ifdef __cplusplus
}
#endif

#endif
