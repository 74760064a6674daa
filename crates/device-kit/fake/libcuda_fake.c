/* A fake CUDA driver for the tests: the driver API entry points the backend uses, translated onto
 * the host-memory GPU of `gpu_fake.h` beside it, which
 * describes memory, streams, kernels and its build-time switches.
 *
 * CUDA's own switches: FAKE_DRIVER_VERSION (12080). Module images are text: each `.entry <name>(`
 * is a kernel; `.version 99` is an unsupported PTX version and `.target sm_999` an architecture
 * the device cannot run. `fake_cuda_live("allocations")` (and "host", "streams", "events",
 * "modules", "contexts") counts what is not released. */
#include "gpu_fake.h"

#ifndef FAKE_DRIVER_VERSION
#define FAKE_DRIVER_VERSION 12080
#endif

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
enum { UNSUPPORTED_PTX_VERSION = 222 };

static int initialized;
static int retained[FAKE_DEVICE_COUNT + 1];
static __thread void *current;

long fake_cuda_live(const char *what) {
    long contexts = 0;
    for (int i = 0; i < FAKE_DEVICE_COUNT; i++) contexts += retained[i];
    if (!strcmp(what, "contexts")) return contexts;
    return fake_live_count(what);
}

CUresult cuDriverGetVersion(int *v) { *v = FAKE_DRIVER_VERSION; return OK; }
CUresult cuInit(unsigned flags) { (void)flags; if (!FAKE_DEVICE_COUNT) return NO_DEVICE; initialized = 1; return OK; }
CUresult cuDeviceGetCount(int *n) { if (!initialized) return NOT_INITIALIZED; *n = FAKE_DEVICE_COUNT; return OK; }
CUresult cuDeviceGet(int *d, int i) {
    if (!initialized) return NOT_INITIALIZED;
    if (i < 0 || i >= FAKE_DEVICE_COUNT) return INVALID_DEVICE;
    *d = i; return OK;
}
CUresult cuDeviceGetName(char *name, int len, int d) { snprintf(name, len, "Fake CUDA Device %d", d); return OK; }
CUresult cuDeviceTotalMem_v2(size_t *bytes, int d) { (void)d; *bytes = MEMORY_BYTES; return OK; }
CUresult cuDeviceGetAttribute(int *v, int attr, int d) {
    if (d < 0 || d >= FAKE_DEVICE_COUNT) return INVALID_DEVICE;
    switch (attr) {
    case 1: case 2: case 3: *v = 1024; return OK;  /* max threads, block x, block y */
    case 4: *v = 64; return OK;                      /* block z */
    case 8: *v = 48 << 10; return OK;                /* shared memory per block */
    case 10: *v = 32; return OK;                     /* warp size */
    case 12: *v = 65536; return OK;                  /* registers per block */
    case 13: *v = 1980000; return OK;                /* clock rate, kHz */
    case 16: *v = 132 + d; return OK;                /* multiprocessors */
    case 38: *v = 50 << 20; return OK;               /* L2 cache */
    case 75: *v = 9; return OK;                      /* compute capability */
    case 76: *v = 0; return OK;
    default: return INVALID_VALUE;
    }
}
CUresult cuDevicePrimaryCtxRetain(void **ctx, int d) {
    if (d < 0 || d >= FAKE_DEVICE_COUNT) return INVALID_DEVICE;
    LOCKED((retained[d]++, *ctx = &retained[d], OK));
}
CUresult cuDevicePrimaryCtxRelease_v2(int d) { LOCKED(retained[d] > 0 ? (retained[d]--, OK) : INVALID_CONTEXT); }
CUresult cuCtxSetCurrent(void *ctx) { current = ctx; return OK; }
CUresult cuCtxGetCurrent(void **ctx) { *ctx = current; return OK; }
CUresult cuCtxSynchronize(void) { if (!current) return INVALID_CONTEXT; LOCKED((flush(&default_stream), OK)); }

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
    if (!current) return INVALID_CONTEXT;
    LOCKED(alloc_device((uint64_t *)p, n));
}
CUresult cuMemFree_v2(CUdeviceptr p) { LOCKED(free_device(p)); }
CUresult cuMemAllocHost_v2(void **p, size_t n) { return current ? alloc_host(p, n) : INVALID_CONTEXT; }
CUresult cuMemFreeHost(void *p) { return free_host(p); }
CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    if (!current) return INVALID_CONTEXT;
    *free_bytes = MEMORY_BYTES - used; *total = MEMORY_BYTES; return OK;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *h, size_t n) { LOCKED(copy(PTR(d), h, n, 1, 0, 0, 0)); }
CUresult cuMemcpyDtoH_v2(void *h, CUdeviceptr d, size_t n) { LOCKED(copy(h, PTR(d), n, 0, 1, 0, 0)); }
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { LOCKED(copy(PTR(d), PTR(s), n, 1, 1, 0, 0)); }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *h, size_t n, void *s) { LOCKED(copy(PTR(d), h, n, 1, 0, s, 1)); }
CUresult cuMemcpyDtoHAsync_v2(void *h, CUdeviceptr d, size_t n, void *s) { LOCKED(copy(h, PTR(d), n, 0, 1, s, 1)); }
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr src, size_t n, void *s) { LOCKED(copy(PTR(d), PTR(src), n, 1, 1, s, 1)); }

CUresult cuStreamCreate(void **s, unsigned flags) { (void)flags; return stream_create(s); }
CUresult cuStreamDestroy_v2(void *s) { return stream_destroy(s); }
CUresult cuStreamSynchronize(void *s) { return stream_synchronize(s); }
CUresult cuEventCreate(void **e, unsigned flags) { (void)flags; return event_create(e); }
CUresult cuEventRecord(void *e, void *s) { return event_record(e, s); }
CUresult cuEventSynchronize(void *e) { return event_synchronize(e); }
CUresult cuEventDestroy_v2(void *e) { return event_destroy(e); }
CUresult cuStreamWaitEvent(void *s, void *e, unsigned flags) { (void)flags; return stream_wait_event(s, e); }

static void write_log(unsigned count, int *options, void **values, const char *text) {
    for (unsigned i = 0; i + 1 < count; i++)
        if (options[i] == 5 && options[i + 1] == 6)
            snprintf(values[i], (size_t)(uintptr_t)values[i + 1], "%s", text);
}
CUresult cuModuleLoadDataEx(void **m, const void *image, unsigned count, int *options, void **values) {
    if (!current) return INVALID_CONTEXT;
    const char *text = image;
    if (strstr(text, ".version 99")) { write_log(count, options, values, "ptxas fatal: Unsupported .version 99.0"); return UNSUPPORTED_PTX_VERSION; }
    if (strstr(text, ".target sm_999")) { write_log(count, options, values, "sm_999 is not a GPU of this machine"); return NO_BINARY_FOR_GPU; }
    return module_load(m, text);
}
CUresult cuModuleLoadData(void **m, const void *image) { return cuModuleLoadDataEx(m, image, 0, NULL, NULL); }
CUresult cuModuleUnload(void *m) { return module_unload(m); }
CUresult cuModuleGetFunction(void **f, void *m, const char *name) { return module_get_function(f, m, name); }
CUresult cuFuncSetAttribute(void *f, int attr, int value) {
    if (attr != 8) return INVALID_VALUE;
    ((function *)f)->max_dyn_shmem = value;
    return OK;
}

static CUresult launch_in_context(function *f, const unsigned *dims, void *s, void **params) {
    return current ? launch(f, dims, s, params) : INVALID_CONTEXT;
}
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shmem, void *s, void **params, void **extra) {
    (void)extra;
    unsigned dims[16] = {gx, gy, gz, bx, by, bz, shmem, 0, 1, 1, 1, 0, 1, 1, 1, 0};
    return launch_in_context(f, dims, s, params);
}
CUresult cuLaunchCooperativeKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                   unsigned by, unsigned bz, unsigned shmem, void *s, void **params) {
    unsigned dims[16] = {gx, gy, gz, bx, by, bz, shmem, 1, 1, 1, 1, 0, 1, 1, 1, 0};
    return launch_in_context(f, dims, s, params);
}
typedef struct { int id; int pad; union { char bytes[64]; int flag; unsigned dim[3]; } value; } attribute;
typedef struct { unsigned grid[3], block[3], shmem; void *stream; attribute *attrs; unsigned count; } launch_config;
CUresult cuLaunchKernelEx(const launch_config *c, void *f, void **params, void **extra) {
    (void)extra;
    unsigned dims[16] = {c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1], c->block[2],
                         c->shmem, 0, 1, 1, 1, 0, 1, 1, 1, 0};
    for (unsigned i = 0; i < c->count; i++) {
        const attribute *a = &c->attrs[i];
        if (a->id == 2) dims[7] = a->value.flag;
        else if (a->id == 4) memcpy(&dims[8], a->value.dim, 12);
        else if (a->id == 6) dims[11] = a->value.flag;
        else if (a->id == 11) memcpy(&dims[12], a->value.dim, 12);
        else return INVALID_VALUE;
    }
    return launch_in_context(f, dims, c->stream, params);
}

static const error_entry errors[] = {
    {OK, "CUDA_SUCCESS", "no error"},
    {INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain."},
    {NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
};
static CUresult describe(int code, const char **out, int text) {
    *out = describe_error(errors, sizeof errors / sizeof errors[0], code, text);
    return *out ? OK : INVALID_VALUE;
}
CUresult cuGetErrorName(int code, const char **out) { return describe(code, out, 0); }
CUresult cuGetErrorString(int code, const char **out) { return describe(code, out, 1); }
