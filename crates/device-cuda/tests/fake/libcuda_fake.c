/* A fake CUDA driver for the tests: the driver API entry points the backend uses, on the host.
 * "Device memory" is host memory (checked: a copy outside a live allocation is refused);
 * "kernels" are host functions of the kernels library (kernels.c) found by name; work queued on a
 * stream runs only when something waits for it, so a missing synchronization shows.
 *
 * Build-time switches: FAKE_DEVICE_COUNT (2), FAKE_DRIVER_VERSION (12080), FAKE_KERNELS_LIBRARY
 * (path; else $FAKE_CUDA_KERNELS). Module images are text: each `.entry <name>` is a kernel;
 * `.version 99` is an unsupported PTX version and `.target sm_999` an architecture the device
 * cannot run. `fake_cuda_live("allocations")` (and "host", "streams", "events", "modules",
 * "contexts") counts what is not released. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FAKE_DEVICE_COUNT
#define FAKE_DEVICE_COUNT 2
#endif
#ifndef FAKE_DRIVER_VERSION
#define FAKE_DRIVER_VERSION 12080
#endif
#define MEMORY_BYTES (1ull << 30)
#define MAX_ALLOCATIONS 4096

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef int (*kernel_fn)(void **, const unsigned *);
enum { OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3, NO_DEVICE = 100,
       INVALID_DEVICE = 101, INVALID_IMAGE = 200, INVALID_CONTEXT = 201, NO_BINARY_FOR_GPU = 209,
       UNSUPPORTED_PTX_VERSION = 222, NOT_FOUND = 500, LAUNCH_FAILED = 719 };

typedef struct stream stream;
typedef struct { stream *on; int pending; } event;
typedef struct op {
    int kind; /* 0 copy, 1 kernel, 2 record, 3 wait */
    void *dst; const void *src; size_t n;
    kernel_fn fn; unsigned dims[16]; uint64_t values[32]; void *argv[32];
    event *ev; stream *other; struct op *next;
} op;
struct stream { op *head, *tail; int error; };
typedef struct { char name[64]; kernel_fn fn; const unsigned *sizes; int max_dyn_shmem; void *kernels; } function;
typedef struct { char *image; void *kernels; function functions[16]; int count; } module;

static pthread_mutex_t lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static int initialized;
static int retained[FAKE_DEVICE_COUNT + 1];
static __thread void *current;
static stream default_stream;
static struct { char *start; size_t n; } allocations[MAX_ALLOCATIONS];
static long live_allocations, live_host, live_streams, live_events, live_modules;
static size_t used;

#define LOCKED(body) do { pthread_mutex_lock(&lock); CUresult rc_ = (body); pthread_mutex_unlock(&lock); return rc_; } while (0)

long fake_cuda_live(const char *what) {
    long contexts = 0;
    for (int i = 0; i < FAKE_DEVICE_COUNT; i++) contexts += retained[i];
    if (!strcmp(what, "allocations")) return live_allocations;
    if (!strcmp(what, "host")) return live_host;
    if (!strcmp(what, "streams")) return live_streams;
    if (!strcmp(what, "events")) return live_events;
    if (!strcmp(what, "modules")) return live_modules;
    if (!strcmp(what, "contexts")) return contexts;
    return -1;
}

static stream *resolve(void *s) { return (uintptr_t)s <= 2 ? &default_stream : (stream *)s; }

static void run(op *o);
static void flush(stream *s) {
    while (s->head) {
        op *o = s->head;
        s->head = o->next;
        if (!s->head) s->tail = NULL;
        if (o->kind == 1 && o->fn(o->argv, o->dims)) s->error = LAUNCH_FAILED;
        else run(o);
        free(o);
    }
}
static void run(op *o) {
    if (o->kind == 0) memmove(o->dst, o->src, o->n);
    else if (o->kind == 2) o->ev->pending--;
    else if (o->kind == 3) flush(o->other);
}
static op *enqueue(void *s, int kind) {
    op *o = calloc(1, sizeof(op));
    stream *q = resolve(s);
    o->kind = kind;
    if (q->tail) q->tail->next = o; else q->head = o;
    q->tail = o;
    return o;
}

static int is_device(const void *p, size_t n) {
    for (int i = 0; i < MAX_ALLOCATIONS; i++)
        if (allocations[i].start && (const char *)p >= allocations[i].start &&
            (const char *)p + n <= allocations[i].start + allocations[i].n) return 1;
    return 0;
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

static CUresult alloc_device(CUdeviceptr *p, size_t n) {
    if (!current) return INVALID_CONTEXT;
    if (n == 0) return INVALID_VALUE;
    if (used + n > MEMORY_BYTES) return OUT_OF_MEMORY;
    for (int i = 0; i < MAX_ALLOCATIONS; i++)
        if (!allocations[i].start) {
            allocations[i].start = aligned_alloc(256, (n + 255) / 256 * 256);
            allocations[i].n = n;
            used += n; live_allocations++;
            *p = (CUdeviceptr)(uintptr_t)allocations[i].start;
            return OK;
        }
    return OUT_OF_MEMORY;
}
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { LOCKED(alloc_device(p, n)); }
static CUresult free_device(CUdeviceptr p) {
    for (int i = 0; i < MAX_ALLOCATIONS; i++)
        if (allocations[i].start == (char *)(uintptr_t)p) {
            flush(&default_stream);
            free(allocations[i].start);
            used -= allocations[i].n; live_allocations--;
            allocations[i].start = NULL;
            return OK;
        }
    return INVALID_VALUE;
}
CUresult cuMemFree_v2(CUdeviceptr p) { LOCKED(free_device(p)); }
CUresult cuMemAllocHost_v2(void **p, size_t n) {
    if (!current) return INVALID_CONTEXT;
    *p = aligned_alloc(256, (n + 255) / 256 * 256);
    LOCKED((live_host++, OK));
}
CUresult cuMemFreeHost(void *p) { free(p); LOCKED((live_host--, OK)); }
CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    if (!current) return INVALID_CONTEXT;
    *free_bytes = MEMORY_BYTES - used; *total = MEMORY_BYTES; return OK;
}

static CUresult copy(void *dst, const void *src, size_t n, int dst_dev, int src_dev, void *s, int async) {
    if ((dst_dev && !is_device(dst, n)) || (src_dev && !is_device(src, n))) return INVALID_VALUE;
    if (!async) { flush(&default_stream); memmove(dst, src, n); return OK; }
    op *o = enqueue(s, 0);
    o->dst = dst; o->src = src; o->n = n;
    return OK;
}
#define PTR(p) ((void *)(uintptr_t)(p))
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *h, size_t n) { LOCKED(copy(PTR(d), h, n, 1, 0, 0, 0)); }
CUresult cuMemcpyDtoH_v2(void *h, CUdeviceptr d, size_t n) { LOCKED(copy(h, PTR(d), n, 0, 1, 0, 0)); }
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { LOCKED(copy(PTR(d), PTR(s), n, 1, 1, 0, 0)); }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *h, size_t n, void *s) { LOCKED(copy(PTR(d), h, n, 1, 0, s, 1)); }
CUresult cuMemcpyDtoHAsync_v2(void *h, CUdeviceptr d, size_t n, void *s) { LOCKED(copy(h, PTR(d), n, 0, 1, s, 1)); }
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr src, size_t n, void *s) { LOCKED(copy(PTR(d), PTR(src), n, 1, 1, s, 1)); }

CUresult cuStreamCreate(void **s, unsigned flags) { (void)flags; *s = calloc(1, sizeof(stream)); LOCKED((live_streams++, OK)); }
CUresult cuStreamDestroy_v2(void *s) { LOCKED((flush(resolve(s)), free(s), live_streams--, OK)); }
static CUresult sync_stream(stream *s) { flush(s); int rc = s->error; s->error = 0; return rc; }
CUresult cuStreamSynchronize(void *s) { LOCKED(sync_stream(resolve(s))); }
CUresult cuEventCreate(void **e, unsigned flags) { (void)flags; *e = calloc(1, sizeof(event)); LOCKED((live_events++, OK)); }
CUresult cuEventRecord(void *e, void *s) {
    event *ev = e;
    LOCKED((ev->on = resolve(s), ev->pending++, enqueue(s, 2)->ev = ev, OK));
}
CUresult cuEventSynchronize(void *e) { event *ev = e; LOCKED((ev->pending ? flush(ev->on) : (void)0, OK)); }
CUresult cuEventDestroy_v2(void *e) { event *ev = e; LOCKED((ev->pending ? flush(ev->on) : (void)0, free(e), live_events--, OK)); }
CUresult cuStreamWaitEvent(void *s, void *e, unsigned flags) {
    event *ev = e; (void)flags;
    LOCKED((ev->pending && ev->on != resolve(s) ? (void)(enqueue(s, 3)->other = ev->on) : (void)0, OK));
}

static const char *kernels_path(void) {
#ifdef FAKE_KERNELS_LIBRARY
    return FAKE_KERNELS_LIBRARY;
#else
    return getenv("FAKE_CUDA_KERNELS");
#endif
}
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
    if (!strstr(text, ".entry ")) return INVALID_IMAGE;
    const char *path = kernels_path();
    void *kernels = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!kernels) return INVALID_IMAGE;
    module *mod = calloc(1, sizeof(module));
    mod->image = strdup(text);
    mod->kernels = kernels;
    *m = mod;
    LOCKED((live_modules++, OK));
}
CUresult cuModuleLoadData(void **m, const void *image) { return cuModuleLoadDataEx(m, image, 0, NULL, NULL); }
CUresult cuModuleUnload(void *m) {
    module *mod = m;
    dlclose(mod->kernels); free(mod->image); free(mod);
    LOCKED((live_modules--, OK));
}
CUresult cuModuleGetFunction(void **f, void *m, const char *name) {
    module *mod = m;
    char entry[80], sizes[96];
    snprintf(entry, sizeof entry, ".entry %s(", name);
    snprintf(sizes, sizeof sizes, "%s__param_sizes", name);
    kernel_fn fn = (kernel_fn)dlsym(mod->kernels, name);
    if (!strstr(mod->image, entry) || !fn || mod->count == 16 || strlen(name) >= 64) return NOT_FOUND;
    function *func = &mod->functions[mod->count++];
    snprintf(func->name, sizeof func->name, "%s", name);
    func->fn = fn;
    func->sizes = dlsym(mod->kernels, sizes);
    func->kernels = mod->kernels;
    *f = func;
    return OK;
}
CUresult cuFuncSetAttribute(void *f, int attr, int value) {
    if (attr != 8) return INVALID_VALUE;
    ((function *)f)->max_dyn_shmem = value;
    return OK;
}

static CUresult launch(function *f, const unsigned *dims, void *s, void **params) {
    char fail[96];
    if (!current) return INVALID_CONTEXT;
    if (!dims[0] || !dims[1] || !dims[2] || (unsigned long)dims[3] * dims[4] * dims[5] > 1024) return INVALID_VALUE;
    if (dims[6] > (48u << 10) && dims[6] > (unsigned)f->max_dyn_shmem) return INVALID_VALUE;
    snprintf(fail, sizeof fail, "%s__fail_launch", f->name);
    if (dlsym(f->kernels, fail)) return LAUNCH_FAILED;
    pthread_mutex_lock(&lock);
    op *o = enqueue(s, 1);
    o->fn = f->fn;
    memcpy(o->dims, dims, sizeof o->dims);
    o->dims[15] = (unsigned)(uintptr_t)s;
    for (int i = 0; f->sizes && f->sizes[i] && i < 32; i++) {
        memcpy(&o->values[i], params[i], f->sizes[i]);
        o->argv[i] = &o->values[i];
    }
    pthread_mutex_unlock(&lock);
    return OK;
}
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shmem, void *s, void **params, void **extra) {
    (void)extra;
    unsigned dims[16] = {gx, gy, gz, bx, by, bz, shmem, 0, 1, 1, 1, 0, 1, 1, 1, 0};
    return launch(f, dims, s, params);
}
CUresult cuLaunchCooperativeKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                   unsigned by, unsigned bz, unsigned shmem, void *s, void **params) {
    unsigned dims[16] = {gx, gy, gz, bx, by, bz, shmem, 1, 1, 1, 1, 0, 1, 1, 1, 0};
    return launch(f, dims, s, params);
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
    return launch(f, dims, c->stream, params);
}

static const struct { int code; const char *name, *text; } errors[] = {
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
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == code) { *out = text ? errors[i].text : errors[i].name; return OK; }
    *out = NULL;
    return INVALID_VALUE;
}
CUresult cuGetErrorName(int code, const char **out) { return describe(code, out, 0); }
CUresult cuGetErrorString(int code, const char **out) { return describe(code, out, 1); }
