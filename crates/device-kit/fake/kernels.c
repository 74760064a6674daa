/* Kernels of the fake GPU drivers: host functions found by name. Each kernel `k` is
 * `int k(void **args, const unsigned *dims)` and walks every thread of the launch itself; the
 * array `k__param_sizes` (zero-terminated) gives the byte size of each argument, so that a driver
 * can copy the arguments when the launch is queued. A nonzero return is a fault of the kernel.
 *
 * dims: [0..3) grid, [3..6) block, [6] dynamic shared memory, [7] cooperative, [8..11) cluster,
 * [11] programmatic dependent launch, [12..15) preferred cluster, [15] stream handle (low bits).
 */
#include <stdint.h>

static unsigned long threads(const unsigned *dims) {
    return (unsigned long)dims[0] * dims[1] * dims[2] * dims[3] * dims[4] * dims[5];
}

/* x[i] += 1 for i < n. */
const unsigned add_one__param_sizes[] = {8, 4, 0};
int add_one(void **args, const unsigned *dims) {
    float *x = *(float **)args[0];
    int n = *(int *)args[1];
    for (unsigned long t = 0; t < threads(dims); t++)
        if ((long)t < n) x[t] += 1.0f;
    return 0;
}

/* out[i] = a[i] + b[i] for i < n. */
const unsigned vadd__param_sizes[] = {8, 8, 8, 4, 0};
int vadd(void **args, const unsigned *dims) {
    const float *a = *(float **)args[0], *b = *(float **)args[1];
    float *out = *(float **)args[2];
    int n = *(int *)args[3];
    for (unsigned long t = 0; t < threads(dims); t++)
        if ((long)t < n) out[t] = a[t] + b[t];
    return 0;
}

/* Every scalar kind, written back as doubles: out[0..5) = a, b, c, d, e. */
const unsigned scalars__param_sizes[] = {8, 4, 4, 4, 8, 8, 0};
int scalars(void **args, const unsigned *dims) {
    (void)dims;
    double *out = *(double **)args[0];
    out[0] = *(int32_t *)args[1];
    out[1] = *(uint32_t *)args[2];
    out[2] = *(float *)args[3];
    out[3] = *(double *)args[4];
    out[4] = (double)*(int64_t *)args[5];
    return 0;
}

/* The launch as the driver saw it: out[0..16) = dims. */
const unsigned record_launch__param_sizes[] = {8, 0};
int record_launch(void **args, const unsigned *dims) {
    unsigned *out = *(unsigned **)args[0];
    for (int i = 0; i < 16; i++) out[i] = dims[i];
    return 0;
}

/* Refused by the driver at launch (the driver looks for `launch_fails__fail_launch`). */
const unsigned launch_fails__param_sizes[] = {0};
const int launch_fails__fail_launch = 1;
int launch_fails(void **args, const unsigned *dims) {
    (void)args;
    (void)dims;
    return 0;
}

/* Faults while running: the error shows when its stream is synchronized. */
const unsigned faults__param_sizes[] = {0};
int faults(void **args, const unsigned *dims) {
    (void)args;
    (void)dims;
    return 1;
}
