/* A fake HIP runtime (`libamdhip64.so`) for the tests: the entry points the backend uses,
 * translated onto the host-memory GPU of `gpu_fake.h` beside it (compiled with `-I`
 * to it), which describes memory, streams, kernels and its build-time switches.
 *
 * HIP's own switches: FAKE_RUNTIME_VERSION (60032830, HIP 6.0), FAKE_LEGACY_PROPERTIES (only
 * the unversioned hipGetDeviceProperties of ROCm 5, with its struct layout),
 * FAKE_NO_COOPERATIVE_LAUNCH (no hipModuleLaunchCooperativeKernel). With
 * FAKE_DEVICE_COUNT=0, hipInit says hipErrorInvalidDevice and hipGetDeviceCount
 * hipErrorNoDevice, as ROCm 5.2 does on a machine without a GPU. Module images are text: each
 * `.entry <name>(` is a kernel and `gfx999` an architecture the device cannot run. Plain launches
 * take their arguments only as one blob in `extra`, each argument aligned to its size;
 * cooperative launches only as `kernelParams` (one address per argument), with at most one
 * block per compute unit (hipErrorCooperativeLaunchTooLarge past that).
 * `fake_hip_live("allocations")` (and "host", "streams", "events", "modules") counts what is not
 * released. */
#define FAKE_DEFAULT_SHARED_MEMORY (64 << 10)
#include "gpu_fake.h"

#ifndef FAKE_RUNTIME_VERSION
#define FAKE_RUNTIME_VERSION 60032830
#endif

typedef int hipError_t;
static int initialized;
static __thread int current_device;

long fake_hip_live(const char *what) { return fake_live_count(what); }

static int valid(int d) { return initialized && d >= 0 && d < FAKE_DEVICE_COUNT; }

hipError_t hipDriverGetVersion(int *v) { *v = FAKE_RUNTIME_VERSION; return OK; }
hipError_t hipRuntimeGetVersion(int *v) { *v = FAKE_RUNTIME_VERSION; return OK; }
hipError_t hipInit(unsigned flags) { (void)flags; if (!FAKE_DEVICE_COUNT) return INVALID_DEVICE; initialized = 1; return OK; }
hipError_t hipGetDeviceCount(int *n) { if (!initialized) return NO_DEVICE; *n = FAKE_DEVICE_COUNT; return OK; }
hipError_t hipSetDevice(int d) { if (!valid(d)) return INVALID_DEVICE; current_device = d; return OK; }
hipError_t hipGetDevice(int *d) { *d = current_device; return OK; }
hipError_t hipDeviceGetName(char *name, int len, int d) {
    if (!valid(d)) return INVALID_DEVICE;
    snprintf(name, len, "Fake AMD Instinct %d", d);
    return OK;
}
hipError_t hipDeviceTotalMem(size_t *bytes, int d) { if (!valid(d)) return INVALID_DEVICE; *bytes = MEMORY_BYTES; return OK; }
hipError_t hipDeviceGetAttribute(int *v, int attr, int d) {
    if (!valid(d)) return INVALID_DEVICE;
    switch (attr) {
    case 5: *v = 1700000; return OK;           /* clock rate, kHz */
    case 19: *v = 8 << 20; return OK;          /* L2 cache */
    case 23: *v = 9; return OK;                /* compute capability major */
    case 61: *v = 0; return OK;                /* and minor */
    case 26: case 27: case 28: *v = 1024; return OK; /* block dims */
    case 56: *v = 1024; return OK;             /* max threads per block */
    case 63: *v = 104 + d; return OK;          /* compute units */
    case 71: *v = 65536; return OK;            /* registers per block */
    case 74: *v = 64 << 10; return OK;         /* shared memory per block */
    case 87: *v = 64; return OK;               /* wavefront size */
    default: return INVALID_VALUE;
    }
}
static hipError_t properties(char *props, int d, size_t arch_offset) {
    if (!valid(d)) return INVALID_DEVICE;
    snprintf(props, 256, "Fake AMD Instinct %d", d);
    snprintf(props + arch_offset, 256, "gfx90a:sramecc+:xnack-");
    return OK;
}
#ifdef FAKE_LEGACY_PROPERTIES
hipError_t hipGetDeviceProperties(char *props, int d) { return properties(props, d, 396); }
#else
hipError_t hipGetDevicePropertiesR0600(char *props, int d) { return properties(props, d, 1160); }
/* The unversioned symbol of ROCm 6 fills the old layout; the backend must not use it there. */
hipError_t hipGetDeviceProperties(char *props, int d) { (void)props; (void)d; return INVALID_VALUE; }
#endif
hipError_t hipMemGetInfo(size_t *free_bytes, size_t *total) {
    if (!initialized) return NOT_INITIALIZED;
    *free_bytes = MEMORY_BYTES - used; *total = MEMORY_BYTES; return OK;
}

hipError_t hipMalloc(void **p, size_t n) { if (!initialized) return NOT_INITIALIZED; LOCKED(alloc_device((uint64_t *)p, n)); }
hipError_t hipFree(void *p) { LOCKED(free_device((uint64_t)(uintptr_t)p)); }
hipError_t hipHostMalloc(void **p, size_t n, unsigned flags) {
    if (!initialized) return NOT_INITIALIZED;
    return flags ? INVALID_VALUE : alloc_host(p, n);
}
hipError_t hipHostFree(void *p) { return free_host(p); }
/* hipMemcpyKind: 1 host to device, 2 device to host, 3 device to device. */
static hipError_t memcpy_kind(void *dst, const void *src, size_t n, int kind, void *s, int async) {
    if (kind < 1 || kind > 3) return INVALID_VALUE;
    LOCKED(copy(dst, src, n, kind != 2, kind != 1, s, async));
}
hipError_t hipMemcpy(void *dst, const void *src, size_t n, int kind) { return memcpy_kind(dst, src, n, kind, 0, 0); }
hipError_t hipMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *s) { return memcpy_kind(dst, src, n, kind, s, 1); }

hipError_t hipStreamCreateWithFlags(void **s, unsigned flags) { return flags > 1 ? INVALID_VALUE : stream_create(s); }
hipError_t hipStreamDestroy(void *s) { return stream_destroy(s); }
hipError_t hipStreamSynchronize(void *s) { return stream_synchronize(s); }
hipError_t hipEventCreate(void **e) { return event_create(e); }
/* hipEventDefault (0) and the flags up to hipEventInterprocess (4) combined. */
hipError_t hipEventCreateWithFlags(void **e, unsigned flags) { return flags > 7 ? INVALID_VALUE : event_create(e); }
hipError_t hipEventRecord(void *e, void *s) { return event_record(e, s); }
hipError_t hipEventSynchronize(void *e) { return event_synchronize(e); }
hipError_t hipEventDestroy(void *e) { return event_destroy(e); }
hipError_t hipStreamWaitEvent(void *s, void *e, unsigned flags) { return flags ? INVALID_VALUE : stream_wait_event(s, e); }

hipError_t hipModuleLoadData(void **m, const void *image) {
    if (!initialized) return NOT_INITIALIZED;
    if (strstr(image, "gfx999")) return NO_BINARY_FOR_GPU;
    return module_load(m, image);
}
hipError_t hipModuleUnload(void *m) { return module_unload(m); }
hipError_t hipModuleGetFunction(void **f, void *m, const char *name) { return module_get_function(f, m, name); }

/* The arguments of `extra` = {BUFFER_POINTER (1), blob, BUFFER_SIZE (2), &size, END (3)}, one
 * address per argument of `f` into the blob (each aligned to its size); INVALID_VALUE when the
 * list is malformed or the blob is too short. */
static hipError_t unpack(function *f, void **extra, void **params) {
    if (!extra || extra[0] != (void *)1 || extra[2] != (void *)2 || extra[4] != (void *)3) return INVALID_VALUE;
    char *blob = extra[1];
    size_t size = *(size_t *)extra[3], offset = 0;
    for (int i = 0; f->sizes && f->sizes[i] && i < 32; i++) {
        offset = (offset + f->sizes[i] - 1) / f->sizes[i] * f->sizes[i];
        if (offset + f->sizes[i] > size) return INVALID_VALUE;
        params[i] = blob + offset;
        offset += f->sizes[i];
    }
    return offset == size ? OK : INVALID_VALUE;
}
hipError_t hipModuleLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                 unsigned by, unsigned bz, unsigned shmem, void *s,
                                 void **kernel_params, void **extra) {
    void *params[32];
    if (kernel_params) return INVALID_VALUE; /* the backend passes the blob only */
    hipError_t rc = unpack(f, extra, params);
    if (rc != OK) return rc;
    unsigned dims[16] = {gx, gy, gz, bx, by, bz, shmem, 0, 1, 1, 1, 0, 1, 1, 1, 0};
    return launch(f, dims, s, params);
}

enum { COOPERATIVE_LAUNCH_TOO_LARGE = 720 };
#ifndef FAKE_NO_COOPERATIVE_LAUNCH
/* Every block of a cooperative grid must be resident at once: one per compute unit here
 * (hipDeviceGetAttribute's 104 + device). */
hipError_t hipModuleLaunchCooperativeKernel(void *f, unsigned gx, unsigned gy, unsigned gz,
                                            unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                            void *s, void **kernel_params) {
    function *fn = f;
    if (!kernel_params && fn->sizes && fn->sizes[0]) return INVALID_VALUE;
    if ((unsigned long)gx * gy * gz > 104ul + current_device) return COOPERATIVE_LAUNCH_TOO_LARGE;
    unsigned dims[16] = {gx, gy, gz, bx, by, bz, shmem, 1, 1, 1, 1, 0, 1, 1, 1, 0};
    return launch(f, dims, s, kernel_params);
}
#endif

static const error_entry errors[] = {
    {OK, "hipSuccess", "no error"},
    {INVALID_VALUE, "hipErrorInvalidValue", "invalid argument"},
    {OUT_OF_MEMORY, "hipErrorOutOfMemory", "out of memory"},
    {NOT_INITIALIZED, "hipErrorNotInitialized", "initialization error"},
    {NO_DEVICE, "hipErrorNoDevice", "no ROCm-capable device is detected"},
    {INVALID_DEVICE, "hipErrorInvalidDevice", "invalid device ordinal"},
    {INVALID_IMAGE, "hipErrorInvalidImage", "device kernel image is invalid"},
    {NO_BINARY_FOR_GPU, "hipErrorNoBinaryForGpu", "no kernel image is available for execution on the device"},
    {NOT_FOUND, "hipErrorNotFound", "named symbol not found"},
    {LAUNCH_FAILED, "hipErrorLaunchFailure", "unspecified launch failure"},
    {COOPERATIVE_LAUNCH_TOO_LARGE, "hipErrorCooperativeLaunchTooLarge", "too many blocks in cooperative launch"},
};
#define ERROR_COUNT (sizeof errors / sizeof errors[0])
const char *hipGetErrorName(hipError_t code) { return describe_error(errors, ERROR_COUNT, code, 0); }
const char *hipGetErrorString(hipError_t code) { return describe_error(errors, ERROR_COUNT, code, 1); }
