/*
 * backend_host.c -- drives the backend API of libtvm_ffi.so from C, with no Python in the
 * process: parallel launches (every task once, all at the same time, on distinct threads),
 * barriers, a failing task, nested launches, concurrent launches from several threads,
 * workspaces of many sizes freed in any order, and the refusals of bad input.
 *
 * Usage: backend_host EXPECTED_THREADS. Prints "backend host ok" and exits 0, or names the
 * failed check and exits 1. `backend_host bad-count` checks instead that a launch under an
 * unusable TVM_NUM_THREADS fails with a ValueError naming the variable.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/ffi/c_api.h>
#include <tvm/runtime/c_backend_api.h>

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

#define MAX_TASKS 64

static int expected_threads;

/* Takes the raised error and checks its kind and that its message contains `fragment`. */
static void expect_raised(const char* kind, const char* fragment) {
  TVMFFIObjectHandle error = NULL;
  TVMFFIErrorMoveFromRaised(&error);
  CHECK(error != NULL, "an error is raised");
  TVMFFIErrorCell* cell = TVMFFIErrorGetCellPtr(error);
  char kind_text[64] = {0};
  char message[512] = {0};
  memcpy(kind_text, cell->kind.data, cell->kind.size < 63 ? cell->kind.size : 63);
  memcpy(message, cell->message.data, cell->message.size < 511 ? cell->message.size : 511);
  CHECK(strcmp(kind_text, kind) == 0, "kind %s, expected %s (%s)", kind_text, kind, message);
  CHECK(strstr(message, fragment) != NULL, "message '%s' lacks '%s'", message, fragment);
  TVMFFIObjectDecRef(error);
}

/* ---- tasks ----------------------------------------------------------------------------- */

typedef struct {
  atomic_int runs[MAX_TASKS];
  pthread_t threads[MAX_TASKS];
  atomic_int num_task_seen;
  atomic_int started;
  atomic_int all_started; /* every task saw all the others start: they ran at the same time */
} TaskRecord;

static int record_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  TaskRecord* record = (TaskRecord*)cdata;
  atomic_fetch_add(&record->runs[task_id], 1);
  record->threads[task_id] = pthread_self();
  atomic_store(&record->num_task_seen, penv->num_task);
  atomic_fetch_add(&record->started, 1);
  /* Spin until every task started (bounded: a pool that ran tasks one after another fails). */
  for (long spins = 0; spins < 2000000000L; ++spins) {
    if (atomic_load(&record->started) == penv->num_task) {
      atomic_fetch_add(&record->all_started, 1);
      break;
    }
  }
  return 0;
}

static void check_tasks(int requested, int expected) {
  TaskRecord record;
  memset(&record, 0, sizeof(record));
  CHECK(TVMBackendParallelLaunch(record_task, &record, requested) == 0, "launch of %d", requested);
  CHECK(atomic_load(&record.num_task_seen) == expected, "num_task %d, expected %d",
        atomic_load(&record.num_task_seen), expected);
  CHECK(atomic_load(&record.all_started) == expected, "only %d of %d tasks ran at once",
        atomic_load(&record.all_started), expected);
  for (int task = 0; task < expected; ++task) {
    CHECK(atomic_load(&record.runs[task]) == 1, "task %d ran %d times", task,
          atomic_load(&record.runs[task]));
    for (int other = 0; other < task; ++other) {
      CHECK(!pthread_equal(record.threads[task], record.threads[other]),
            "tasks %d and %d on one thread", task, other);
    }
  }
  CHECK(pthread_equal(record.threads[0], pthread_self()), "task 0 runs on the caller");
}

/* ---- barriers: phase k of task i reads what every task wrote in phase k - 1 -------------- */

#define PHASES 50

typedef struct {
  int values[MAX_TASKS];
  atomic_int mismatches;
} BarrierRecord;

static int barrier_phases(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  BarrierRecord* record = (BarrierRecord*)cdata;
  for (int phase = 1; phase <= PHASES; ++phase) {
    record->values[task_id] = phase;
    if (TVMBackendParallelBarrier(task_id, penv) != 0) return -1;
    for (int other = 0; other < penv->num_task; ++other) {
      if (record->values[other] != phase) atomic_fetch_add(&record->mismatches, 1);
    }
    if (TVMBackendParallelBarrier(task_id, penv) != 0) return -1;
  }
  return 0;
}

static void check_barriers(void) {
  BarrierRecord record;
  memset(&record, 0, sizeof(record));
  CHECK(TVMBackendParallelLaunch(barrier_phases, &record, 0) == 0, "barrier launch");
  CHECK(atomic_load(&record.mismatches) == 0, "%d reads saw another phase",
        atomic_load(&record.mismatches));
  /* A NULL environment and a handle that is not a launch's barrier are refused. */
  CHECK(TVMBackendParallelBarrier(0, NULL) != 0, "NULL penv");
  expect_raised("ValueError", "penv is NULL");
  int not_a_barrier[16] = {0};
  TVMParallelGroupEnv fake = {not_a_barrier, 2};
  CHECK(TVMBackendParallelBarrier(0, &fake) != 0, "foreign handle");
  expect_raised("ValueError", "not the barrier of a launch");
}

/* ---- errors ------------------------------------------------------------------------------- */

static int fail_last_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  (void)cdata;
  if (task_id == penv->num_task - 1) {
    TVMFFIErrorSetRaisedFromCStr("IndexError", "task gave up on element 7");
    return -1;
  }
  /* The others wait at a barrier the failed task never reaches: they are released. */
  return TVMBackendParallelBarrier(task_id, penv);
}

static int fail_silently(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  (void)penv;
  (void)cdata;
  return task_id == 0 ? 3 : 0;
}

static void check_errors(void) {
  CHECK(TVMBackendParallelLaunch(fail_last_task, NULL, 0) == -1, "a failed task fails the launch");
  expect_raised("IndexError", "task gave up on element 7");
  CHECK(TVMBackendParallelLaunch(fail_silently, NULL, 0) == -1, "a silent failure");
  expect_raised("RuntimeError", "returned 3 without raising");
  CHECK(TVMBackendParallelLaunch(NULL, NULL, 0) == -1, "NULL flambda");
  expect_raised("ValueError", "flambda is NULL");
  CHECK(TVMBackendParallelLaunch(record_task, NULL, -1) == -1, "negative num_task");
  expect_raised("ValueError", "got -1");
  /* The pool still works after failures. */
  check_tasks(0, expected_threads);
}

/* ---- nested launches run serially as one task -------------------------------------------- */

typedef struct {
  atomic_int inner_tasks;
  atomic_int inner_num_task_not_one;
} NestedRecord;

static int inner_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  NestedRecord* record = (NestedRecord*)cdata;
  atomic_fetch_add(&record->inner_tasks, 1);
  if (penv->num_task != 1 || task_id != 0) atomic_fetch_add(&record->inner_num_task_not_one, 1);
  return TVMBackendParallelBarrier(task_id, penv);
}

static int outer_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  (void)task_id;
  (void)penv;
  return TVMBackendParallelLaunch(inner_task, cdata, 0);
}

static void check_nested(void) {
  NestedRecord record;
  memset(&record, 0, sizeof(record));
  CHECK(TVMBackendParallelLaunch(outer_task, &record, 0) == 0, "nested launch");
  CHECK(atomic_load(&record.inner_tasks) == expected_threads, "%d inner tasks",
        atomic_load(&record.inner_tasks));
  CHECK(atomic_load(&record.inner_num_task_not_one) == 0, "inner launches are single tasks");
}

/* ---- launches from several threads at once ------------------------------------------------ */

typedef struct {
  long long partial[MAX_TASKS];
} SumRecord;

static int sum_range(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  SumRecord* record = (SumRecord*)cdata;
  const long long n = 100000;
  long long begin = n * task_id / penv->num_task, end = n * (task_id + 1) / penv->num_task;
  long long sum = 0;
  for (long long i = begin; i < end; ++i) sum += i;
  record->partial[task_id] = sum;
  return 0;
}

static void* launch_many(void* arg) {
  atomic_int* failures = (atomic_int*)arg;
  for (int round = 0; round < 300; ++round) {
    SumRecord record;
    memset(&record, 0, sizeof(record));
    if (TVMBackendParallelLaunch(sum_range, &record, 0) != 0) {
      atomic_fetch_add(failures, 1);
      continue;
    }
    long long total = 0;
    for (int task = 0; task < MAX_TASKS; ++task) total += record.partial[task];
    if (total != 99999LL * 100000LL / 2) atomic_fetch_add(failures, 1);
  }
  return NULL;
}

static void check_concurrent_launches(void) {
  atomic_int failures = 0;
  pthread_t threads[4];
  for (int i = 0; i < 4; ++i) pthread_create(&threads[i], NULL, launch_many, &failures);
  for (int i = 0; i < 4; ++i) pthread_join(threads[i], NULL);
  CHECK(atomic_load(&failures) == 0, "%d launches went wrong", atomic_load(&failures));
}

/* ---- workspaces --------------------------------------------------------------------------- */

static void check_workspaces(void) {
  const uint64_t sizes[] = {0, 1, 63, 64, 65, 4095, 4096, 4097, 100000, 1 << 20, 16 << 20};
  const int count = (int)(sizeof(sizes) / sizeof(sizes[0]));
  void* blocks[32];
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < count; ++i) {
      blocks[i] = TVMBackendAllocWorkspace(kDLCPU, 0, sizes[i], kDLFloat, 32);
      CHECK(blocks[i] != NULL, "%llu bytes", (unsigned long long)sizes[i]);
      CHECK((uintptr_t)blocks[i] % 64 == 0, "%p is not 64-byte aligned", blocks[i]);
      memset(blocks[i], 0xA5, sizes[i]);
    }
    for (int i = 0; i < count; ++i) {
      for (int j = 0; j < i; ++j) CHECK(blocks[i] != blocks[j], "blocks %d and %d alias", i, j);
    }
    /* Freed in an order that is neither the allocation's nor its reverse. */
    for (int i = 0; i < count; i += 2) CHECK(TVMBackendFreeWorkspace(kDLCPU, 0, blocks[i]) == 0, "free %d", i);
    for (int i = 1; i < count; i += 2) CHECK(TVMBackendFreeWorkspace(kDLCPU, 0, blocks[i]) == 0, "free %d", i);
  }
  /* A freed block of the same size is reused. */
  void* first = TVMBackendAllocWorkspace(kDLCPU, 0, 3000, kDLFloat, 32);
  CHECK(TVMBackendFreeWorkspace(kDLCPU, 0, first) == 0, "free");
  void* again = TVMBackendAllocWorkspace(kDLCPU, 0, 3000, kDLFloat, 32);
  CHECK(again == first, "a freed block is reused (%p, then %p)", first, again);
  /* Refusals: a double free, a foreign pointer, the wrong device, an impossible size. */
  CHECK(TVMBackendFreeWorkspace(kDLCPU, 0, again) == 0, "free");
  CHECK(TVMBackendFreeWorkspace(kDLCPU, 0, again) == -1, "double free");
  expect_raised("ValueError", "freed already");
  int on_stack = 0;
  CHECK(TVMBackendFreeWorkspace(kDLCPU, 0, &on_stack) == -1, "foreign pointer");
  expect_raised("ValueError", "is not a workspace");
  void* block = TVMBackendAllocWorkspace(kDLCPU, 0, 256, kDLInt, 8);
  CHECK(TVMBackendFreeWorkspace(kDLCPU, 1, block) == -1, "wrong device");
  expect_raised("ValueError", "was allocated on cpu:0");
  CHECK(TVMBackendFreeWorkspace(kDLCPU, 0, block) == 0, "free on its device");
  CHECK(TVMBackendAllocWorkspace(kDLCPU, 0, UINT64_MAX, kDLFloat, 32) == NULL, "UINT64_MAX");
  expect_raised("MemoryError", "bytes");
  CHECK(TVMBackendAllocWorkspace(kDLCPU, 0, (uint64_t)1 << 62, kDLFloat, 32) == NULL, "2^62");
  expect_raised("MemoryError", "bytes");
  CHECK(TVMBackendAllocWorkspace(99, 0, 64, kDLFloat, 32) == NULL, "unknown device type");
  expect_raised("ValueError", "no device backend");
}

/* Workspaces inside tasks: each task allocates and frees on its own thread. */
static int task_workspaces(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  (void)penv;
  atomic_int* failures = (atomic_int*)cdata;
  for (int round = 0; round < 200; ++round) {
    uint64_t size = 64 + (uint64_t)(task_id * 977 + round * 131) % 20000;
    unsigned char* a = TVMBackendAllocWorkspace(kDLCPU, 0, size, kDLFloat, 32);
    unsigned char* b = TVMBackendAllocWorkspace(kDLCPU, 0, size * 2, kDLFloat, 32);
    if (a == NULL || b == NULL) return -1;
    memset(a, task_id, size);
    memset(b, task_id + 1, size * 2);
    if (a[size - 1] != (unsigned char)task_id) atomic_fetch_add(failures, 1);
    if (TVMBackendFreeWorkspace(kDLCPU, 0, a) != 0) return -1;
    if (TVMBackendFreeWorkspace(kDLCPU, 0, b) != 0) return -1;
  }
  return 0;
}

static void check_workspaces_in_tasks(void) {
  atomic_int failures = 0;
  CHECK(TVMBackendParallelLaunch(task_workspaces, &failures, 0) == 0, "workspaces in tasks");
  CHECK(atomic_load(&failures) == 0, "%d blocks overwritten", atomic_load(&failures));
}

int main(int argc, char** argv) {
  CHECK(argc == 2, "usage: backend_host EXPECTED_THREADS | bad-count");
  if (strcmp(argv[1], "bad-count") == 0) {
    CHECK(TVMBackendParallelLaunch(record_task, NULL, 0) == -1, "launch under a bad count");
    expect_raised("ValueError", "TVM_NUM_THREADS");
    printf("backend host ok\n");
    return 0;
  }
  expected_threads = atoi(argv[1]);
  CHECK(expected_threads >= 1 && expected_threads <= MAX_TASKS, "threads %d", expected_threads);
  check_tasks(0, expected_threads);
  check_tasks(1, 1);
  check_tasks(expected_threads, expected_threads);
  check_tasks(MAX_TASKS, expected_threads); /* more than the pool has: as many as it has */
  check_barriers();
  check_errors();
  check_nested();
  check_concurrent_launches();
  check_workspaces();
  check_workspaces_in_tasks();
  printf("backend host ok\n");
  return 0;
}
