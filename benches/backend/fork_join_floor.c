/*
 * fork_join_floor.c -- what waking a worker costs on this machine, without any runtime: the
 * floor under a parallel launch's latency.
 *
 *   spin:  the caller stores a new epoch, a worker spinning on it answers with a store the
 *          caller spins on (two cache-line transfers between cores): the least a fork-join with
 *          a hot worker can cost.
 *   futex: the same round trip with a worker asleep in FUTEX_WAIT, woken by FUTEX_WAKE (and
 *          waking the caller the same way): what a launch costs once the workers parked.
 *
 * Prints one JSON line: {"spin_ns": ..., "futex_ns": ...}, the median of 7 runs of each.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static _Atomic uint32_t request;
static _Atomic uint32_t reply;
static int use_futex;
static long rounds;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static void futex_wait(_Atomic uint32_t* word, uint32_t value) {
  syscall(SYS_futex, (uint32_t*)word, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t* word) {
  syscall(SYS_futex, (uint32_t*)word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void wait_for(_Atomic uint32_t* word, uint32_t value) {
  while (atomic_load_explicit(word, memory_order_acquire) != value) {
    if (use_futex) {
      futex_wait(word, value - 1); /* sleeps only while the word still holds the old value */
    } else {
      cpu_relax();
    }
  }
}

static void* worker(void* arg) {
  (void)arg;
  for (uint32_t i = 1; i <= (uint32_t)rounds; ++i) {
    wait_for(&request, i);
    atomic_store_explicit(&reply, i, memory_order_release);
    if (use_futex) futex_wake(&reply);
  }
  return NULL;
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double measure(int futex, long n) {
  use_futex = futex;
  rounds = n;
  atomic_store(&request, 0);
  atomic_store(&reply, 0);
  pthread_t thread;
  pthread_create(&thread, NULL, worker, NULL);
  double start = now_ns();
  for (uint32_t i = 1; i <= (uint32_t)n; ++i) {
    atomic_store_explicit(&request, i, memory_order_release);
    if (futex) futex_wake(&request);
    wait_for(&reply, i);
  }
  double elapsed = now_ns() - start;
  pthread_join(thread, NULL);
  return elapsed / (double)n;
}

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median_of_runs(int futex, long n) {
  double runs[7];
  for (int i = 0; i < 7; ++i) runs[i] = measure(futex, n);
  qsort(runs, 7, sizeof(double), by_value);
  return runs[3];
}

int main(void) {
  double spin = median_of_runs(0, 200000);
  double futex = median_of_runs(1, 20000);
  printf("{\"spin_ns\": %.1f, \"futex_ns\": %.1f}\n", spin, futex);
  return 0;
}
