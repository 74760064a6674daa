"""The backend API of compiled kernels (issue 29) on our runtime alone: kernels built by Apache TVM
(apache-tvm 0.27, ``tests/apache_tvm/backend_kernels.py``) with parallel loops, a barrier,
workspaces, nested launches, a failing task and a call of a global function, loaded by our
``tvm`` (directly and through our RPC server) and checked against numpy; the thread settings;
the context symbols, called directly; the loader filling and refusing ``__TVM*`` slots.

Each scenario runs in a fresh interpreter of ours (this file is its program: ``python
test_backend_api.py SCENARIO KERNEL_DIR``), so that the thread pool starts from the environment
the test gives it and a crash fails one test. Every scenario reports the ``libtvm*`` libraries
mapped into its process: ours only, no Apache TVM runtime.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import apache_tvm_env
import tvm
from tvm import rpc

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILDER = REPO_ROOT / "tests" / "apache_tvm" / "backend_kernels.py"
BACKEND_FUNCTIONS = (
    "TVMBackendParallelLaunch",
    "TVMBackendParallelBarrier",
    "TVMBackendAllocWorkspace",
    "TVMBackendFreeWorkspace",
)
CHECKED_MESSAGE = "negative input to checked"


# -- What a scenario process runs ------------------------------------------------------------------


def _our_library() -> str:
    return os.path.realpath(Path(tvm.__file__).parent / "lib" / "libtvm_ffi.so")


def _kernels(kernel_dir: Path, *names: str) -> dict[str, Callable]:
    """The functions of the kernels ``names`` (all but ``packed_call`` when none are named),
    loaded by our runtime."""
    description = json.loads((kernel_dir / "kernels.json").read_text())["kernels"]
    wanted = names or [name for name in description if name != "packed_call"]
    return {
        name: tvm.runtime.load_module(str(kernel_dir / description[name]["file"]))[
            description[name]["function"]
        ]
        for name in wanted
    }


def _tensor(array: np.ndarray, device=None):
    return tvm.runtime.tensor(array, device if device is not None else tvm.runtime.cpu())


def _empty(shape: tuple[int, ...], dtype: str, device=None):
    return tvm.runtime.empty(shape, dtype, device if device is not None else tvm.runtime.cpu())


def check_matmul(matmul: Callable, rng: np.random.Generator, device=None) -> None:
    a = rng.standard_normal((256, 256), dtype=np.float32)
    b = rng.standard_normal((256, 256), dtype=np.float32)
    out = _empty((256, 256), "float32", device)
    matmul(_tensor(a, device), _tensor(b, device), out)
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-4, atol=1e-3)


def check_two_stage(two_stage: Callable, rng: np.random.Generator, device=None) -> None:
    a = rng.standard_normal((64, 1024), dtype=np.float32)
    out = _empty((64, 1024), "float32", device)
    two_stage(_tensor(a, device), out)
    np.testing.assert_allclose(out.numpy(), 2 * a[::-1, ::-1] + 1 + 2 * a, rtol=1e-5, atol=1e-5)


def check_nested(nested: Callable, rng: np.random.Generator) -> None:
    a = rng.standard_normal((16, 64), dtype=np.float32)
    out = _empty((16, 64), "float32")
    nested(_tensor(a), out)
    rows = np.arange(16, dtype=np.float32)[:, None]
    np.testing.assert_allclose(out.numpy(), 3 * a + rows, rtol=1e-5, atol=1e-6)


def check_checked(checked: Callable, rng: np.random.Generator, device=None) -> None:
    """Good input computes ``2 * a``; a negative element first or last (the calling thread's
    task, then the last task) raises ``ValueError`` with the kernel's message; then good input
    computes right again."""
    a = rng.integers(0, 1000, 64, dtype=np.int32)
    out = _empty((64,), "int32", device)
    checked(_tensor(a, device), out)
    np.testing.assert_array_equal(out.numpy(), 2 * a)
    for bad in (0, 63):
        poisoned = a.copy()
        poisoned[bad] = -1
        with pytest.raises(ValueError, match=CHECKED_MESSAGE):
            checked(_tensor(poisoned, device), out)
    checked(_tensor(a + 1, device), out)
    np.testing.assert_array_equal(out.numpy(), 2 * (a + 1))


def check_tiny(tiny: Callable, times: int) -> None:
    counter = _tensor(np.arange(64, dtype=np.int32))
    for _ in range(times):
        tiny(counter)
    np.testing.assert_array_equal(counter.numpy(), np.arange(64) + times)


def _threads_now() -> int:
    return len(os.listdir("/proc/self/task"))


def scenario_all_kernels(kernel_dir: Path) -> dict:
    """Every kernel, a few times each, on the pool the environment sets up."""
    kernels = _kernels(kernel_dir)
    rng = np.random.default_rng(29)
    for _ in range(3):
        check_matmul(kernels["matmul"], rng)
    for _ in range(10):
        check_two_stage(kernels["two_stage"], rng)
        check_nested(kernels["nested"], rng)
    check_checked(kernels["checked"], rng)
    check_tiny(kernels["tiny"], 200)
    return {"num_threads": tvm.runtime.num_threads(), "threads": _threads_now()}


def scenario_concurrent(kernel_dir: Path) -> dict:
    """Four Python threads launching at once, many times; one of them also makes tasks fail."""
    kernels = _kernels(kernel_dir)
    start = threading.Barrier(4)
    failures: list[BaseException] = []
    rounds = 300

    def caller(index: int) -> None:
        try:
            rng = np.random.default_rng(index)
            counter = _tensor(np.zeros(64, dtype=np.int32))
            start.wait()
            for round_ in range(rounds):
                kernels["tiny"](counter)
                if round_ % 10 == 0:
                    check_two_stage(kernels["two_stage"], rng)
                    check_nested(kernels["nested"], rng)
                if index == 0 and round_ % 30 == 0:
                    check_checked(kernels["checked"], rng)
            np.testing.assert_array_equal(counter.numpy(), np.full(64, rounds))
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=caller, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return {"num_threads": tvm.runtime.num_threads()}


def scenario_config_threadpool(kernel_dir: Path) -> dict:
    """``config_threadpool`` resizes the pool (kernels stay right) and refuses bad settings."""
    kernels = _kernels(kernel_dir)
    rng = np.random.default_rng(7)
    default = tvm.runtime.num_threads()
    sizes = []
    for nthreads in (3, 1, 2):
        tvm.runtime.config_threadpool(nthreads=nthreads)
        sizes.append(tvm.runtime.num_threads())
        check_matmul(kernels["matmul"], rng)
        check_two_stage(kernels["two_stage"], rng)
    tvm.runtime.config_threadpool(nthreads=0)
    sizes.append(tvm.runtime.num_threads())
    refused = {}
    not_ours = max(os.sched_getaffinity(0)) + 1000
    for label, kwargs, named in (
        ("negative nthreads", {"nthreads": -2}, "-2"),
        ("CPU out of range", {"affinity_mode": -2, "nthreads": 1, "cpus": [not_ours]}, not_ours),
        ("unknown mode", {"affinity_mode": 42}, "42"),
        ("unknown mode name", {"affinity_mode": "fastest"}, "fastest"),
    ):
        with pytest.raises(ValueError) as raised:
            tvm.runtime.config_threadpool(**kwargs)
        refused[label] = str(raised.value)
        assert str(named) in str(raised.value), (label, str(raised.value))
    # A refused setting leaves the pool as it was.
    check_two_stage(kernels["two_stage"], rng)
    return {
        "default": default,
        "sizes": sizes,
        "after_refusals": tvm.runtime.num_threads(),
        "refused": refused,
    }


def scenario_packed_call(kernel_dir: Path) -> dict:
    """A kernel that calls a global function of this process (``T.call_packed``) and then runs a
    parallel loop; an exception raised by that function comes out of the kernel's call."""

    def plus_one(a, c) -> None:
        values = a.numpy()
        if values[0] < 0:
            raise ValueError("plus_one refuses a negative first element")
        c.copyfrom(values + 1)

    tvm.register_func("backend_test.plus_one", plus_one)
    packed_call = _kernels(kernel_dir, "packed_call")["packed_call"]
    rng = np.random.default_rng(11)
    out = _empty((256,), "float32")
    for _ in range(5):
        a = rng.random(256, dtype=np.float32)
        packed_call(_tensor(a), out)
        np.testing.assert_allclose(out.numpy(), 2 * (a + 1), rtol=1e-6)
    with pytest.raises(ValueError, match="plus_one refuses a negative first element"):
        packed_call(_tensor(-np.ones(256, dtype=np.float32)), out)
    return {}


class _GroupEnv(ctypes.Structure):
    _fields_ = (("sync_handle", ctypes.c_void_p), ("num_task", ctypes.c_int32))


_TASK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.POINTER(_GroupEnv), ctypes.c_void_p)


def scenario_direct_calls(kernel_dir: Path) -> dict:
    """The registered backend functions called through their addresses, as a kernel calls them:
    a launch of Python tasks with a barrier, a failing task, workspaces freed through the
    library's exported function."""
    del kernel_dir
    symbols = tvm.runtime.context_symbols()
    launch = ctypes.CFUNCTYPE(ctypes.c_int, _TASK, ctypes.c_void_p, ctypes.c_int)(
        symbols["__TVMBackendParallelLaunch"]
    )
    barrier = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.POINTER(_GroupEnv))(
        symbols["__TVMBackendParallelBarrier"]
    )
    before, after, counts, statuses = set(), {}, set(), []

    @_TASK
    def task(task_id, env, _data):
        counts.add(env.contents.num_task)
        before.add(task_id)
        statuses.append(barrier(task_id, env))
        after[task_id] = set(before)
        return 0

    @_TASK
    def failing(task_id, env, _data):
        return -1 if task_id == env.contents.num_task - 1 else 0

    assert launch(task, None, 0) == 0
    threads = tvm.runtime.num_threads()
    assert counts == {threads}, counts
    assert set(after) == set(range(threads))
    # Every task passed the barrier only after all of them had reached it.
    assert all(seen == set(range(threads)) for seen in after.values()), after
    assert statuses == [0] * threads
    assert launch(failing, None, 0) != 0

    # A launch from inside a task runs all its tasks on that task's thread, one after another.
    inner_runs: dict[int, list[tuple[int, int, int]]] = {}

    @_TASK
    def inner(task_id, env, data):
        outer_id = ctypes.cast(data, ctypes.POINTER(ctypes.c_int)).contents.value
        inner_runs.setdefault(outer_id, []).append(
            (task_id, env.contents.num_task, threading.get_ident())
        )
        return 0

    @_TASK
    def outer(task_id, _env, _data):
        here, outer_id = threading.get_ident(), ctypes.c_int(task_id)
        status = launch(inner, ctypes.addressof(outer_id), 0)
        runs = inner_runs.get(task_id, [])
        on_this_thread = {run[2] for run in runs} == {here}
        every_task = bool(runs) and sorted(run[0] for run in runs) == list(range(runs[0][1]))
        return 0 if status == 0 and on_this_thread and every_task else 1

    assert launch(outer, None, 0) == 0, inner_runs
    assert sorted(inner_runs) == list(range(threads))

    alloc = ctypes.CFUNCTYPE(
        ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_int, ctypes.c_int
    )(symbols["__TVMBackendAllocWorkspace"])
    library = ctypes.CDLL(_our_library())
    free = library.TVMBackendFreeWorkspace
    free.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_void_p)
    free.restype = ctypes.c_int
    blocks = [alloc(1, 0, size, 2, 32) for size in (1, 100, 4096, 1 << 20)]
    assert all(block and block % 64 == 0 for block in blocks), blocks
    ctypes.memset(blocks[-1], 0xAB, 1 << 20)
    assert [free(1, 0, block) for block in reversed(blocks)] == [0] * len(blocks)
    # Memory the pool did not hand out is refused, not freed.
    foreign = ctypes.create_string_buffer(256)
    assert free(1, 0, ctypes.addressof(foreign)) != 0
    return {"threads": threads}


SCENARIOS: dict[str, Callable[[Path], dict]] = {
    "all_kernels": scenario_all_kernels,
    "packed_call": scenario_packed_call,
    "direct_calls": scenario_direct_calls,
    "concurrent": scenario_concurrent,
    "config_threadpool": scenario_config_threadpool,
}


def _scenario_main(name: str, kernel_dir: str) -> None:
    report = SCENARIOS[name](Path(kernel_dir))
    with open("/proc/self/maps") as maps:
        report["libraries"] = sorted(
            {line.split()[-1] for line in maps if "libtvm" in line.rsplit("/", 1)[-1]}
        )
    print(json.dumps(report), flush=True)


# -- The tests -------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def apache_python() -> Path:
    return apache_tvm_env.apache_tvm_python()


@pytest.fixture(scope="session")
def kernel_dir(apache_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The kernels, built once per session by Apache TVM into a temporary directory."""
    out = tmp_path_factory.mktemp("backend-kernels")
    result = subprocess.run(
        [str(apache_python), str(BUILDER), str(out)],
        capture_output=True,
        text=True,
        env=apache_tvm_env.apache_tvm_environ(),
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return out


@pytest.fixture(scope="session")
def description(kernel_dir: Path) -> dict:
    return json.loads((kernel_dir / "kernels.json").read_text())["kernels"]


def run_scenario(name: str, kernel_dir: Path, **environ: str) -> dict:
    """Runs a scenario in a fresh interpreter of ours with ``environ`` added (and the thread
    settings of this process removed); returns its report, after checking that our
    ``libtvm_ffi.so`` and no other ``libtvm*`` library was mapped."""
    env = dict(os.environ)
    for variable in ("TVM_NUM_THREADS", "OMP_NUM_THREADS"):
        env.pop(variable, None)
    env.update(environ)
    result = subprocess.run(
        [sys.executable, __file__, name, str(kernel_dir)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    libraries = [os.path.realpath(path) for path in report["libraries"]]
    assert _our_library() in libraries, libraries
    assert not [path for path in libraries if "libtvm_runtime" in path], libraries
    return report


def test_the_kernels_make_the_backend_calls(description: dict):
    assert set(description) == {
        "matmul",
        "two_stage",
        "nested",
        "checked",
        "tiny",
        "packed_call",
    }
    slots = {slot for spec in description.values() for slot in spec["slots"]}
    assert {f"__{name}" for name in BACKEND_FUNCTIONS} <= slots


def test_all_kernels_on_the_default_pool(kernel_dir: Path):
    report = run_scenario("all_kernels", kernel_dir)
    assert report["num_threads"] in {os.cpu_count(), len(os.sched_getaffinity(0))}


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"TVM_NUM_THREADS": "1"}, 1),
        ({"TVM_NUM_THREADS": "3"}, 3),
        ({"OMP_NUM_THREADS": "3"}, 3),
        ({"TVM_NUM_THREADS": "1", "OMP_NUM_THREADS": "3"}, 1),
    ],
    ids=["tvm-1", "tvm-3", "omp-3", "tvm-over-omp"],
)
def test_all_kernels_on_a_pool_of_the_size_set(kernel_dir: Path, environ: dict, expected: int):
    report = run_scenario("all_kernels", kernel_dir, **environ)
    assert report["num_threads"] == expected
    # The caller and its workers are threads of the process once a launch has run.
    assert report["threads"] >= expected


def test_concurrent_launches_from_four_python_threads(kernel_dir: Path):
    run_scenario("concurrent", kernel_dir, TVM_NUM_THREADS="2")


def test_config_threadpool_resizes_and_refuses_bad_settings(kernel_dir: Path):
    report = run_scenario("config_threadpool", kernel_dir, TVM_NUM_THREADS="2")
    assert report["default"] == 2
    # nthreads=0 goes back to the default, which TVM_NUM_THREADS sets.
    assert report["sizes"] == [3, 1, 2, 2]
    assert report["after_refusals"] == 2


def _context_symbols() -> dict[str, int]:
    return tvm.runtime.context_symbols()


def test_context_symbols_name_the_backend_functions():
    symbols = _context_symbols()
    for name in (*BACKEND_FUNCTIONS, "TVMFFIFunctionCall"):
        assert symbols.get(f"__{name}"), (name, symbols)
    assert len(set(symbols.values())) == len(symbols), symbols
    # The library exports the backend functions too, for programs that link it.
    library = ctypes.CDLL(_our_library())
    for name in BACKEND_FUNCTIONS:
        assert ctypes.cast(getattr(library, name), ctypes.c_void_p).value, name


def test_the_backend_functions_called_directly(kernel_dir: Path):
    report = run_scenario("direct_calls", kernel_dir, TVM_NUM_THREADS="3")
    assert report["threads"] == 3


# apache-tvm 0.27 compiles T.call_packed to calls through the slots __TVMFFIEnvModLookupFromImports
# and __TVMFFIHandleInitOnce, which our runtime fills too.
def test_a_kernel_calling_a_global_function(kernel_dir: Path):
    run_scenario("packed_call", kernel_dir)


def test_every_slot_of_the_kernels_is_provided(description: dict):
    provided = _context_symbols()
    for name, spec in description.items():
        assert not [slot for slot in spec["slots"] if slot not in provided], name


def test_the_loader_fills_the_slots_of_a_library(compile_c):
    source = "".join(f"void* __{name} = 0;\n" for name in BACKEND_FUNCTIONS)
    path = compile_c(source, name="libslots.so")
    tvm.runtime.load_module(str(path))
    library = ctypes.CDLL(str(path))
    symbols = _context_symbols()
    for name in BACKEND_FUNCTIONS:
        assert ctypes.c_void_p.in_dll(library, f"__{name}").value == symbols[f"__{name}"], name


def test_a_library_with_a_slot_the_runtime_lacks_is_refused(compile_c):
    path = compile_c("void* __TVMBackendNoSuchThing = 0;\n", name="libunknown_slot.so")
    with pytest.raises(OSError) as raised:
        tvm.runtime.load_module(str(path))
    assert "__TVMBackendNoSuchThing" in str(raised.value)
    assert path.name in str(raised.value)


@pytest.fixture(scope="module")
def remote():
    server = rpc.Server(port=0)
    session = rpc.connect("127.0.0.1", server.port)
    yield session
    session.close()
    server.terminate()


def test_kernels_through_our_rpc_server(remote, kernel_dir: Path, description: dict):
    functions = {}
    for name in ("matmul", "two_stage", "checked"):
        remote.upload(str(kernel_dir / description[name]["file"]))
        module = remote.load_module(description[name]["file"])
        functions[name] = module[description[name]["function"]]
    device = remote.cpu()
    rng = np.random.default_rng(3)
    check_matmul(functions["matmul"], rng, device)
    for _ in range(3):
        check_two_stage(functions["two_stage"], rng, device)
    check_checked(functions["checked"], rng, device)


if __name__ == "__main__":
    _scenario_main(*sys.argv[1:])


def test_the_backend_benchmark_measures_every_row(apache_python: Path, tmp_path: Path):
    """``benches/backend/bench_backend.py`` runs end to end on both runtimes (one quick round;
    the numbers are not checked, only that each row was measured on each side)."""
    bench = Path(__file__).resolve().parents[2] / "benches" / "backend" / "bench_backend.py"
    report = tmp_path / "backend.json"
    command = [sys.executable, str(bench), "--ours", sys.executable, "--apache", str(apache_python)]
    command += ["--quick", "--threads", "2", "--json", str(report)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    medians = json.loads(report.read_text())["medians_s"]
    for side in ("ours", "apache"):
        assert set(medians[side]) == {"launch", "call_1thread", "matmul_256", "two_stage"}
        assert all(seconds > 0 for seconds in medians[side].values()), medians
    assert "launch adds" in run.stdout
