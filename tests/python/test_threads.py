"""Containers shared between Python threads while native functions run without the interpreter
lock (``release_gil = True``): every operation sees the container whole, so nothing crashes,
corrupts the heap or reads out of bounds. Each scenario runs in a fresh interpreter, so a crash
fails the test instead of the suite."""

import subprocess
import sys
import textwrap

import pytest

from isolated import run_isolated

SCENARIO = textwrap.dedent(
    """
    import sys, threading
    import tvm

    kind, rounds = sys.argv[1], int(sys.argv[2])
    # Each read gives the lock up and takes it back; with the default 5 ms switch interval every
    # take would wait out the writer's slice (minutes for the whole run, and fewer interleavings).
    sys.setswitchinterval(1e-4)
    if kind == "list":
        c = tvm.ffi.List(["s%d" % i * 3 for i in range(50)])
        readers = [("ffi.ListGetItem", (3,)), ("ffi.ListContains", ("zz",)), ("ffi.ListSize", ())]
    else:
        c = tvm.ffi.Dict({"k%d" % i: "v%d" % i * 3 for i in range(50)})
        readers = [
            ("ffi.DictGetItemOrMissing", ("k3",)),
            ("ffi.DictCount", ("k7",)),
            ("ffi.DictSize", ()),
        ]
    stop = threading.Event()

    def mutate():
        i = 0
        while not stop.is_set():
            i += 1
            if kind == "list":
                c.clear()
                c.extend(["x%d" % j * 3 for j in range(50)])
            else:
                c["k%d" % (i % 100)] = "v" * 20
                if i % 200 == 0:
                    c.clear()

    writer = threading.Thread(target=mutate)
    writer.start()
    try:
        for name, args in readers:
            f = tvm.get_global_func(name)
            f.release_gil = True
            for _ in range(rounds):
                try:
                    f(c, *args)
                except (IndexError, KeyError):
                    pass  # the writer cleared it just now: a clean error, not a crash
    finally:
        stop.set()
        writer.join()
    print("ok", len(c) >= 0)
    """
)


def run_scenario(code: str, *args: str, timeout: float) -> str:
    """Runs ``code`` in a fresh interpreter (which finds libtvm_ffi_testing.so through
    TVM_FFI_TESTING_LIB, set by conftest) and returns what it printed; a crash fails."""
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip()


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_native_readers_and_a_python_writer_share_a_container(kind):
    assert run_scenario(SCENARIO, kind, "20000", timeout=300) == "ok True"


THREAD_KERNEL = r"""
#include <pthread.h>
#include <tvm/ffi/c_api.h>

typedef struct {
  TVMFFIObjectHandle func;
  int status;
  TVMFFIObjectHandle error;
  TVMFFIAny result;
} Job;

static void* run(void* arg) {
  Job* job = (Job*)arg;
  job->result.type_index = kTVMFFINone;
  job->result.zero_padding = 0;
  job->result.v_int64 = 0;
  job->status = TVMFFIFunctionCall(job->func, NULL, 0, &job->result);
  if (job->status != 0) TVMFFIErrorMoveFromRaised(&job->error);
  return NULL;
}

/* Calls the function argument on a thread of its own and waits for it, as kernels do. */
TVM_FFI_DLL_EXPORT int __tvm_ffi_call_in_thread(void* self, const TVMFFIAny* args,
                                                int32_t num_args, TVMFFIAny* result) {
  (void)self, (void)num_args;
  Job job = {args[0].v_obj, 0, NULL, {0}};
  pthread_t thread;
  pthread_create(&thread, NULL, run, &job);
  pthread_join(thread, NULL);
  if (job.status != 0) {
    TVMFFIErrorSetRaised(job.error);
    TVMFFIObjectDecRef(job.error);
    return -1;
  }
  *result = job.result;
  return 0;
}
"""

FOREIGN_THREAD_SCENARIO = textwrap.dedent(
    """
    import sys
    import tvm

    module = tvm.runtime.load_module(sys.argv[1])
    call_in_thread = module.get_function("call_in_thread")
    call_in_thread.release_gil = sys.argv[2] == "release"
    try:
        print("result", call_in_thread(lambda: 42))
    except RuntimeError as err:
        print("error", "release_gil = True" in str(err))
    """
)


@pytest.mark.parametrize(("mode", "expected"), [("release", "result 42"), ("hold", "error True")])
def test_callbacks_from_a_kernel_thread_run_or_fail_clearly(compile_c, mode, expected):
    library = compile_c(THREAD_KERNEL, name="libthreads.so", extra_flags=("-pthread",))
    assert run_scenario(FOREIGN_THREAD_SCENARIO, str(library), mode, timeout=60) == expected


PYTHON_THREADS_SCENARIO = textwrap.dedent(
    """
    import os, sys, threading
    import tvm

    tvm.base.load_backend_libs(os.environ["TVM_FFI_TESTING_LIB"])
    sys.setswitchinterval(1e-4)
    apply = tvm.get_global_func("testing.apply")
    results = {}

    def work(name):
        # Callbacks on the thread inside the lock-holding call run at once, nested calls too,
        # while the other threads make the same calls and take turns with the lock.
        total = 0
        for i in range(2000):
            total += apply(lambda x: apply(lambda y: y + 1, x) * 2, i)
        results[name] = total

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    work("main")
    for t in threads:
        t.join()
    print(sorted(results.values()) == [sum((i + 1) * 2 for i in range(2000))] * 5)
    """
)


def test_callbacks_on_python_threads_inside_lock_holding_calls_run():
    assert run_scenario(PYTHON_THREADS_SCENARIO, timeout=120) == "True"


def test_callback_recursion_on_threads_of_different_stack_sizes_is_a_recursion_error():
    # Each thread's callbacks check against its own stack: the base cached for the lock-holding
    # thread is keyed by the thread (threads started one after another often get the same thread
    # pointer, glibc handing the ended thread's stack to the next), so a small stack never
    # inherits the room measured on a large one.
    out = run_isolated(
        """
        import sys
        import threading
        import tvm

        sys.setrecursionlimit(10_000_000)

        def again(n):
            return f(n + 1)

        f = tvm.ffi.convert(again)
        outcomes = []

        def recurse():
            try:
                f(0)
                outcomes.append("returned")
            except RecursionError:
                outcomes.append("RecursionError")

        for size in [64 << 20, 2 << 20, 1 << 20, 32 << 20, 4 << 20, 768 << 10]:
            threading.stack_size(size)
            thread = threading.Thread(target=recurse)
            thread.start()
            thread.join()
        print(" ".join(outcomes))
        """
    )
    assert out == " ".join(["RecursionError"] * 6)
