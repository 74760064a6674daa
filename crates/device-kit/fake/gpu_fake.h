/* The host-memory GPU behind the fake drivers of the tests (`libcuda_fake.c` for device-cuda,
 * `libhip_fake.c` for device-rocm, beside it), included by each: they only translate their vendor's entry
 * points and error names onto what is here.
 *
 * "Device memory" is host memory (checked: a copy outside a live allocation is refused);
 * "kernels" are host functions of the kernels library (kernels.c) found by name; work queued on a
 * stream runs only when something waits for it, so a missing synchronization shows.
 *
 * Build-time switches: FAKE_DEVICE_COUNT (2), FAKE_DEFAULT_SHARED_MEMORY (48 KiB: dynamic shared
 * memory a kernel may use without asking), FAKE_KERNELS_LIBRARY (path; else $FAKE_GPU_KERNELS).
 * Module images are text: each `.entry <name>(` is a kernel. `fake_live_count("allocations")`
 * (and "host", "streams", "events", "modules") counts what is not released. */
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
#ifndef FAKE_DEFAULT_SHARED_MEMORY
#define FAKE_DEFAULT_SHARED_MEMORY (48 << 10)
#endif
#define MEMORY_BYTES (1ull << 30)
#define MAX_ALLOCATIONS 4096

typedef int (*kernel_fn)(void **, const unsigned *);
/* The result codes both vendors number alike. */
enum { OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3, NO_DEVICE = 100,
       INVALID_DEVICE = 101, INVALID_IMAGE = 200, INVALID_CONTEXT = 201, NO_BINARY_FOR_GPU = 209,
       NOT_FOUND = 500, LAUNCH_FAILED = 719 };

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
static stream default_stream;
static struct { char *start; size_t n; } allocations[MAX_ALLOCATIONS];
static long live_allocations, live_host, live_streams, live_events, live_modules;
static size_t used;

#define LOCKED(body) do { pthread_mutex_lock(&lock); int rc_ = (body); pthread_mutex_unlock(&lock); return rc_; } while (0)
#define PTR(p) ((void *)(uintptr_t)(p))

/* What is not released, by name; -1 for an unknown name. */
static long fake_live_count(const char *what) {
    if (!strcmp(what, "allocations")) return live_allocations;
    if (!strcmp(what, "host")) return live_host;
    if (!strcmp(what, "streams")) return live_streams;
    if (!strcmp(what, "events")) return live_events;
    if (!strcmp(what, "modules")) return live_modules;
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

static int alloc_device(uint64_t *p, size_t n) {
    if (n == 0) return INVALID_VALUE;
    if (used + n > MEMORY_BYTES) return OUT_OF_MEMORY;
    for (int i = 0; i < MAX_ALLOCATIONS; i++)
        if (!allocations[i].start) {
            allocations[i].start = aligned_alloc(256, (n + 255) / 256 * 256);
            allocations[i].n = n;
            used += n; live_allocations++;
            *p = (uint64_t)(uintptr_t)allocations[i].start;
            return OK;
        }
    return OUT_OF_MEMORY;
}
static int free_device(uint64_t p) {
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
static int alloc_host(void **p, size_t n) {
    *p = aligned_alloc(256, (n + 255) / 256 * 256);
    LOCKED((live_host++, OK));
}
static int free_host(void *p) { free(p); LOCKED((live_host--, OK)); }

static int copy(void *dst, const void *src, size_t n, int dst_dev, int src_dev, void *s, int async) {
    if ((dst_dev && !is_device(dst, n)) || (src_dev && !is_device(src, n))) return INVALID_VALUE;
    if (!async) { flush(&default_stream); memmove(dst, src, n); return OK; }
    op *o = enqueue(s, 0);
    o->dst = dst; o->src = src; o->n = n;
    return OK;
}

static int stream_create(void **s) { *s = calloc(1, sizeof(stream)); LOCKED((live_streams++, OK)); }
static int stream_destroy(void *s) { LOCKED((flush(resolve(s)), free(s), live_streams--, OK)); }
static int sync_stream(stream *s) { flush(s); int rc = s->error; s->error = 0; return rc; }
static int stream_synchronize(void *s) { LOCKED(sync_stream(resolve(s))); }
static int event_create(void **e) { *e = calloc(1, sizeof(event)); LOCKED((live_events++, OK)); }
static int event_record(void *e, void *s) {
    event *ev = e;
    LOCKED((ev->on = resolve(s), ev->pending++, enqueue(s, 2)->ev = ev, OK));
}
static int event_synchronize(void *e) { event *ev = e; LOCKED((ev->pending ? flush(ev->on) : (void)0, OK)); }
static int event_destroy(void *e) { event *ev = e; LOCKED((ev->pending ? flush(ev->on) : (void)0, free(e), live_events--, OK)); }
static int stream_wait_event(void *s, void *e) {
    event *ev = e;
    LOCKED((ev->pending && ev->on != resolve(s) ? (void)(enqueue(s, 3)->other = ev->on) : (void)0, OK));
}

static const char *kernels_path(void) {
#ifdef FAKE_KERNELS_LIBRARY
    return FAKE_KERNELS_LIBRARY;
#else
    return getenv("FAKE_GPU_KERNELS");
#endif
}
/* A module of a text image that names its kernels with `.entry <name>(`. */
static int module_load(void **m, const char *text) {
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
static int module_unload(void *m) {
    module *mod = m;
    dlclose(mod->kernels); free(mod->image); free(mod);
    LOCKED((live_modules--, OK));
}
static int module_get_function(void **f, void *m, const char *name) {
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
    func->max_dyn_shmem = FAKE_DEFAULT_SHARED_MEMORY;
    func->kernels = mod->kernels;
    *f = func;
    return OK;
}

/* Queues kernel `f` on stream `s`; `params` holds one address per argument, whose value is
 * copied now. `dims` is laid out as kernels.c describes. */
static int launch(function *f, const unsigned *dims, void *s, void **params) {
    char fail[96];
    if (!dims[0] || !dims[1] || !dims[2] || (unsigned long)dims[3] * dims[4] * dims[5] > 1024) return INVALID_VALUE;
    if (dims[6] > (unsigned)f->max_dyn_shmem) return INVALID_VALUE;
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

/* A result code's name or text from a vendor's table; NULL for a code not in it. */
typedef struct { int code; const char *name, *text; } error_entry;
static const char *describe_error(const error_entry *table, size_t count, int code, int text) {
    for (size_t i = 0; i < count; i++)
        if (table[i].code == code) return text ? table[i].text : table[i].name;
    return NULL;
}
