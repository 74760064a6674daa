"""tvm.support.popen_pool with real worker processes: timeouts, crashes, recycling, exceptions,
pickling errors, initializers, the pool executor, and no worker outliving its owner (kill,
garbage collection, pool shutdown, interpreter exit, SIGKILL of the parent)."""

import contextlib
import functools
import gc
import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import test_support_popen_jobs as jobs
from tvm.support.popen_pool import (
    MapResult,
    PopenPoolExecutor,
    PopenWorker,
    StatusKind,
    kill_child_processes,
)
from tvm.support.popen_pool.proctree import _process_table

TESTS_DIR = Path(__file__).resolve().parent


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (zombies count as dead)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return state not in ("Z", "X")


def wait_dead(pids, timeout=5.0):
    """The pids still alive after waiting up to ``timeout`` seconds for all to die."""
    deadline = time.monotonic() + timeout
    alive = [pid for pid in pids if pid_alive(pid)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [pid for pid in alive if pid_alive(pid)]
    return alive


@pytest.fixture
def worker():
    w = PopenWorker()
    yield w
    w.kill()


def run(w, fn, *args, timeout=None):
    w.send(fn, args, timeout=timeout)
    return w.recv()


# ---- PopenWorker ---------------------------------------------------------------------------


def test_worker_runs_jobs_in_one_process(worker):
    assert worker.pid is None and not worker.is_alive()
    first = run(worker, jobs.getpid)
    assert first != os.getpid()
    assert worker.pid == first and worker.is_alive()
    assert run(worker, jobs.identity_after, {"a": [1, 2]}) == {"a": [1, 2]}
    assert run(worker, jobs.getpid) == first  # maximum_uses=None: reused


def test_worker_recycles_after_maximum_uses():
    w = PopenWorker(maximum_uses=2)
    try:
        first = run(w, jobs.getpid)
        assert run(w, jobs.getpid) == first
        third = run(w, jobs.getpid)
        assert third != first
        assert wait_dead([first]) == []
    finally:
        w.kill()


def test_timeout_kills_worker_and_next_job_runs(worker):
    old = run(worker, jobs.getpid)
    started = time.monotonic()
    worker.send(jobs.identity_after, (1, 30), timeout=0.2)
    with pytest.raises(TimeoutError, match=r"identity_after did not finish within 0\.2 s"):
        worker.recv()
    assert time.monotonic() - started < 10
    assert wait_dead([old]) == []
    assert run(worker, jobs.identity_after, 5) == 5
    assert worker.pid != old


def test_job_within_timeout_completes(worker):
    assert run(worker, jobs.identity_after, 3, 0.05, timeout=5) == 3


def test_exit_in_job_is_child_process_error_with_stderr_tail(worker):
    old = run(worker, jobs.getpid)
    worker.send(jobs.exit_with, (3, "fatal: something broke in the worker"))
    with pytest.raises(ChildProcessError) as info:
        worker.recv()
    message = str(info.value)
    assert "Subprocess terminated" in message
    assert "exited with code 3" in message and "exit_with" in message
    assert "fatal: something broke in the worker" in message
    assert info.value.returncode == 3
    assert "something broke" in info.value.stderr_tail
    assert wait_dead([old]) == []
    assert run(worker, jobs.identity_after, "again") == "again"


@pytest.mark.parametrize(
    ("code", "status", "printed"),
    [(-1, 255, None), (0, 0, None), (None, 0, None), ("leaving: no more work", 1, "no more work")],
    ids=["minus-one", "zero", "none", "message"],
)
def test_sys_exit_in_job_is_child_process_error(worker, code, status, printed):
    # SystemExit is not sent back: like os._exit it ends the worker, which is then replaced.
    old = run(worker, jobs.getpid)
    worker.send(jobs.sys_exit, (code,))
    with pytest.raises(ChildProcessError, match=f"exited with code {status} while running") as info:
        worker.recv()
    assert info.value.returncode == status
    if printed is not None:
        assert printed in info.value.stderr_tail
    assert wait_dead([old]) == []
    assert run(worker, jobs.identity_after, 1) == 1


@pytest.mark.parametrize("name", ["KeyboardInterrupt", "GeneratorExit", "CustomBaseError"])
def test_base_exception_in_job_keeps_its_type_and_the_worker(worker, name):
    pid = run(worker, jobs.getpid)
    worker.send(jobs.raise_base_exception, (name, "raised by the job"))
    with pytest.raises(BaseException) as info:
        worker.recv()
    assert type(info.value) is jobs._BASE_EXCEPTIONS[name]
    text = str(info.value)
    assert f"raised in popen worker (pid {pid})" in text
    assert "in raise_base_exception" in text
    assert f"{name}: raised by the job" in text
    assert "SIGKILL" not in text
    assert run(worker, jobs.getpid) == pid  # the same process keeps serving


def test_sigint_during_job_is_keyboard_interrupt_and_worker_keeps_serving(worker):
    pid = run(worker, jobs.getpid)
    worker.send(jobs.interrupt_self, timeout=30)
    with pytest.raises(KeyboardInterrupt, match=r"(?s)popen worker.*in interrupt_self"):
        worker.recv()
    assert run(worker, jobs.getpid) == pid


@pytest.mark.skipif(
    not hasattr(signal, "SIGINT") or signal.getsignal(signal.SIGINT) is signal.SIG_IGN,
    reason="SIGINT is ignored in this process, and so in its workers",
)
def test_sigint_to_idle_worker_is_ignored(worker):
    pid = run(worker, jobs.getpid)
    os.kill(pid, signal.SIGINT)
    time.sleep(0.3)
    assert worker.is_alive()
    assert run(worker, jobs.getpid) == pid


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_worker_killed_by_signal(worker, signum):
    worker.send(jobs.kill_self, (signum,))
    with pytest.raises(ChildProcessError, match=f"was killed by {signum.name}"):
        worker.recv()
    assert run(worker, jobs.identity_after, 2) == 2


def test_exception_keeps_type_and_carries_worker_traceback(worker):
    worker.send(jobs.raise_value_error, ("boom in the job",))
    with pytest.raises(ValueError) as info:
        worker.recv()
    text = str(info.value)
    assert type(info.value) is ValueError
    assert "raised in popen worker (pid" in text
    assert "Traceback (most recent call last)" in text
    assert "in raise_value_error" in text  # the worker's frame
    assert "ValueError: boom in the job" in text
    assert run(worker, jobs.identity_after, 4) == 4  # the worker keeps serving


def test_a_key_error_keeps_its_key_and_carries_the_traceback_as_a_note(worker):
    """A KeyError prints its message as a repr: the traceback goes in a note, where its lines
    print as lines."""
    worker.send(jobs.raise_key_error, ("missing",))
    with pytest.raises(KeyError) as info:
        worker.recv()
    assert info.value.args == ("missing",)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "Traceback (most recent call last)" in notes and "\n" in notes
    assert "\\n" not in str(info.value)


def test_exception_that_cannot_be_rebuilt_from_text_keeps_type_and_args(worker):
    worker.send(jobs.raise_two_argument_error)
    with pytest.raises(jobs.TwoArgumentError) as info:
        worker.recv()
    assert (info.value.code, info.value.detail) == (7, "detail")
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "raise_two_argument_error" in notes and "popen worker" in notes


def local_closure_factory():
    def local_job():
        return 1

    return local_job


def test_unpicklable_jobs_are_clear_errors_and_worker_keeps_serving(worker):
    pid = run(worker, jobs.getpid)
    with pytest.raises(
        pickle.PicklingError, match=r"<lambda>.*lambda or a function defined inside"
    ):
        worker.send(lambda: 1)
    local = r"local_closure_factory\.<locals>\.local_job"
    with pytest.raises(pickle.PicklingError, match=local):
        worker.send(local_closure_factory())
    with pytest.raises(pickle.PicklingError, match=r"identity_after.*cannot be pickled.*lock"):
        worker.send(jobs.identity_after, (threading.Lock(),))
    with pytest.raises(TypeError, match="must be callable"):
        worker.send(42)
    # Nothing was sent: the same process serves the next job.
    assert run(worker, jobs.getpid) == pid


def test_unpicklable_result_is_clear_error(worker):
    pid = run(worker, jobs.getpid)
    worker.send(jobs.return_lock)
    with pytest.raises(pickle.PicklingError, match=r"result of .*return_lock.*cannot be pickled"):
        worker.recv()
    assert run(worker, jobs.getpid) == pid


def test_send_and_recv_must_alternate(worker):
    with pytest.raises(RuntimeError, match="no job was sent"):
        worker.recv()
    worker.send(jobs.identity_after, (1,))
    with pytest.raises(RuntimeError, match="call recv"):
        worker.send(jobs.identity_after, (2,))
    assert worker.recv() == 1


def test_initializer_runs_in_every_new_process():
    w = PopenWorker(initializer=jobs.init_values, initargs=(1, "two", 3.0), maximum_uses=2)
    try:
        values, calls, first = run(w, jobs.after_initializer)
        assert values == (1, "two", 3.0) and calls == 1
        # The initializer is not counted as a use: the second job runs in the same process.
        assert run(w, jobs.after_initializer)[2] == first
        values, calls, recycled = run(w, jobs.after_initializer)
        assert recycled != first and values == (1, "two", 3.0) and calls == 1
        w.send(jobs.identity_after, (None, 30), timeout=0.1)
        with pytest.raises(TimeoutError):
            w.recv()
        values, calls, restarted = run(w, jobs.after_initializer)
        assert restarted not in (first, recycled) and calls == 1
    finally:
        w.kill()


def test_initializer_errors():
    with pytest.raises(TypeError, match="initializer must be callable"):
        PopenWorker(initializer=3)
    with pytest.raises(pickle.PicklingError):
        PopenWorker(initializer=lambda: None)
    w = PopenWorker(initializer=jobs.failing_initializer)
    try:
        with pytest.raises(KeyError, match="initializer failed on purpose") as info:
            w.send(jobs.getpid)
        assert "initializer" in "\n".join(info.value.__notes__)
        assert not w.is_alive()
    finally:
        w.kill()


def test_kill_kills_processes_started_by_jobs(worker):
    grandchild = run(worker, jobs.start_grandchild)
    assert pid_alive(grandchild)
    worker.kill()
    assert not worker.is_alive()
    assert wait_dead([grandchild]) == []


def test_kill_from_another_thread_interrupts_recv(worker):
    worker.send(jobs.identity_after, (None, 30))
    timer = threading.Timer(0.3, worker.kill)
    timer.start()
    started = time.monotonic()
    with pytest.raises(ChildProcessError, match=r"killed by PopenWorker\.kill"):
        worker.recv()
    timer.join()
    assert time.monotonic() - started < 10
    assert run(worker, jobs.identity_after, 6) == 6


def test_join_and_is_alive(worker):
    pid = run(worker, jobs.getpid)
    worker.join(0.05)  # an idle worker does not exit by itself
    assert worker.is_alive()
    os.kill(pid, signal.SIGKILL)
    worker.join(5)
    assert not worker.is_alive()
    # A worker that died while idle is replaced on the next send.
    assert run(worker, jobs.identity_after, 7) == 7


def test_garbage_collected_worker_kills_its_process():
    w = PopenWorker()
    pid = run(w, jobs.getpid)
    del w
    gc.collect()
    assert wait_dead([pid]) == []


def test_worker_started_from_a_thread_outlives_the_thread():
    # Linux's parent-death signal follows the *thread* that started a child: a worker started
    # from a thread that then ends must keep running.
    w = PopenWorker()
    box = []
    thread = threading.Thread(target=lambda: box.append(run(w, jobs.getpid)))
    thread.start()
    thread.join()
    time.sleep(0.2)
    try:
        assert w.is_alive()
        assert run(w, jobs.getpid) == box[0]
    finally:
        w.kill()


def test_worker_output_streams(tmp_path):
    out_path, err_path = tmp_path / "out.txt", tmp_path / "err.txt"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        with PopenWorker(stdout=out, stderr=err) as w:
            assert run(w, jobs.print_to_streams, "hello") == "hello"
            # stderr goes through the parent (for crash reports): wait until it is forwarded.
            w.kill()
    assert "stdout: hello" in out_path.read_text()
    assert "stderr: hello" in err_path.read_text()
    with PopenWorker(stderr=subprocess.DEVNULL) as w:
        w.send(jobs.exit_with, (5, "still reported"))
        with pytest.raises(ChildProcessError, match="still reported"):
            w.recv()
    with pytest.raises(ValueError, match="PIPE is not supported"):
        PopenWorker(stderr=subprocess.PIPE)


def test_ffi_in_worker():
    w = PopenWorker(initializer=jobs.register_ffi)
    try:
        assert run(w, jobs.call_py_ffi, 5) == 15
        assert run(w, jobs.call_cpp_ffi, "echo") == "echo"
        assert run(w, jobs.make_string, "text") == "text"
    finally:
        w.kill()


def test_kill_child_processes(worker):
    # kill_child_processes(pid) kills descendants of pid, not pid itself.
    grandchild = run(worker, jobs.start_grandchild)
    kill_child_processes(worker.pid)
    assert wait_dead([grandchild]) == []
    assert worker.is_alive()
    # Nor what makes the worker take its process group along when it dies.
    second = run(worker, jobs.start_grandchild)
    os.kill(worker.pid, signal.SIGKILL)
    assert wait_dead([second]) == []


def group_members(pgid):
    """Live processes of process group ``pgid``."""
    return [pid for pid, _, group in _process_table() if group == pgid and pid_alive(pid)]


def wait_group_empty(pgid, timeout=5.0):
    deadline = time.monotonic() + timeout
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return group_members(pgid)


@pytest.mark.parametrize("start", [jobs.start_grandchild, jobs.fork_sleeper], ids=["exec", "fork"])
def test_worker_killed_by_sigkill_takes_its_process_group_along(worker, start):
    # The parent does nothing here: the worker's group goes as soon as the worker dies, even
    # while a forked process of its job holds all of the worker's pipes.
    grandchild = run(worker, start)
    pid = worker.pid
    os.kill(pid, signal.SIGKILL)
    assert wait_dead([grandchild]) == []
    assert wait_group_empty(pid) == []


@pytest.mark.parametrize("how", ["kill", "exit", "recycle"])
def test_worker_leaves_no_process_of_its_group_behind(how):
    w = PopenWorker(maximum_uses=1 if how == "recycle" else None)
    try:
        grandchild = run(w, jobs.start_grandchild)
        pid = w.pid
        if how == "kill":
            w.kill()
        elif how == "exit":
            w.send(jobs.sys_exit, (0,))
            with pytest.raises(ChildProcessError):
                w.recv()
        else:
            assert run(w, jobs.getpid) != pid
        assert wait_dead([grandchild]) == []
        assert wait_group_empty(pid) == []
    finally:
        w.kill()


# ---- PopenPoolExecutor ---------------------------------------------------------------------


def test_pool_executor_outcomes():
    with PopenPoolExecutor(max_workers=2, timeout=0.5) as pool:
        timeout = pool.submit(jobs.identity_after, 1, 30)
        crash = pool.submit(jobs.exit_with, 4, "pool worker crash")
        value = pool.submit(jobs.identity_after, 9)
        string = pool.submit(jobs.make_string, "hello")
        with pytest.raises(TimeoutError):
            timeout.result()
        with pytest.raises(ChildProcessError, match="pool worker crash"):
            crash.result()
        assert value.result() == 9
        assert string.result() == "hello"
        error = pool.submit(jobs.raise_value_error, "from the pool")
        with pytest.raises(ValueError, match="from the pool"):
            error.result()


def test_pool_reports_base_exceptions_of_jobs():
    with PopenPoolExecutor(max_workers=1, timeout=30) as pool:
        pid = pool.submit(jobs.getpid).result()
        future = pool.submit(jobs.raise_base_exception, "KeyboardInterrupt", "stop the job")
        with pytest.raises(KeyboardInterrupt, match="KeyboardInterrupt: stop the job"):
            future.result(timeout=30)
        interrupt = functools.partial(jobs.raise_base_exception, "KeyboardInterrupt")
        results = list(pool.map_with_error_catching(interrupt, ["first", "second"]))
        assert [r.status for r in results] == [StatusKind.EXCEPTION] * 2
        assert all(isinstance(r.value, KeyboardInterrupt) for r in results)
        assert "second" in str(results[1].value)
        assert pool.submit(jobs.getpid).result() == pid


def test_pool_map_with_error_catching():
    with PopenPoolExecutor(max_workers=2, timeout=5) as pool:
        results = list(pool.map_with_error_catching(jobs.identity_after, range(30)))
        assert [r.status for r in results] == [StatusKind.COMPLETE] * 30
        assert [r.value for r in results] == list(range(30))
        mixed = list(pool.map_with_error_catching(jobs.raise_value_error, ["a"]))
        assert mixed[0].status == StatusKind.EXCEPTION and isinstance(mixed[0].value, ValueError)
        assert isinstance(mixed[0], MapResult)
    with PopenPoolExecutor(max_workers=1, timeout=0.2) as pool:
        (result,) = pool.map_with_error_catching(jobs.getpid_after, [30])
        assert result.status == StatusKind.TIMEOUT and isinstance(result.value, TimeoutError)


def test_pool_recycles_and_runs_initializer():
    with PopenPoolExecutor(
        max_workers=1,
        maximum_process_uses=2,
        initializer=jobs.init_values,
        initargs=("x", "y", "z"),
    ) as pool:
        outcomes = [pool.submit(jobs.after_initializer).result() for _ in range(3)]
    pids = [pid for _, _, pid in outcomes]
    assert pids[0] == pids[1] != pids[2]
    assert all(values == ("x", "y", "z") and calls == 1 for values, calls, _ in outcomes)


def test_pool_unpicklable_job_and_pool_keeps_serving():
    with PopenPoolExecutor(max_workers=1) as pool:
        with pytest.raises(pickle.PicklingError, match="lambda"):
            pool.submit(lambda: 1).result()
        (result,) = pool.map_with_error_catching(local_closure_factory(), [1])
        assert result.status == StatusKind.EXCEPTION
        assert isinstance(result.value, pickle.PicklingError)
        assert pool.submit(jobs.identity_after, "ok").result() == "ok"


def test_pool_shutdown_kills_workers():
    pool = PopenPoolExecutor(max_workers=2)
    pids = {f.result() for f in [pool.submit(jobs.getpid_after, 0.3) for _ in range(2)]}
    running = pool.submit(jobs.identity_after, None, 30)
    time.sleep(0.2)
    started = time.monotonic()
    pool.shutdown()
    assert time.monotonic() - started < 10
    assert wait_dead(pids) == []
    with pytest.raises((ChildProcessError, RuntimeError)):
        running.result(timeout=10)
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(jobs.getpid)


def test_garbage_collected_pool_kills_its_workers():
    pool = PopenPoolExecutor(max_workers=2)
    pids = {f.result() for f in [pool.submit(jobs.getpid_after, 0.3) for _ in range(2)]}
    del pool
    gc.collect()
    assert wait_dead(pids) == []


def test_pool_argument_checks():
    with pytest.raises(ValueError, match="max_workers"):
        PopenPoolExecutor(max_workers=0)
    with pytest.raises(TypeError, match="initializer"):
        PopenPoolExecutor(initializer="not callable")
    with pytest.raises(pickle.PicklingError):
        PopenPoolExecutor(initializer=lambda: None)


# ---- Processes that outlive nothing --------------------------------------------------------


def run_python(code, *, stdin=None, env=None, timeout=60, args=("-c",)):
    full_env = dict(os.environ)
    full_env.update(env or {})
    command = [sys.executable, *args] if stdin is not None else [sys.executable, *args, code]
    return subprocess.run(
        command,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        check=False,
    )


PARENT_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    sys.path.insert(0, {tests_dir!r})
    import test_support_popen_jobs as jobs
    from tvm.support.popen_pool import PopenPoolExecutor, PopenWorker

    pool = PopenPoolExecutor(max_workers=2)
    workers = sorted({{f.result() for f in [pool.submit(jobs.getpid_after, 0.3) for _ in "ab"]}})
    busy = PopenWorker()
    busy.send(jobs.getpid)
    workers.append(busy.recv())
    busy.send(jobs.identity_after, (None, 60))  # still running when the parent dies
    keeper = PopenWorker()
    keeper.send(jobs.start_grandchild)
    grandchild = keeper.recv()
    keeper.send(jobs.getpid)
    workers.append(keeper.recv())
    print(json.dumps({{"workers": workers, "grandchild": grandchild}}), flush=True)
    time.sleep(60)
    """
)


@contextlib.contextmanager
def parent_process(script, pdeathsig):
    """Runs ``script`` in a parent interpreter (with the kernel's parent-death signal for its
    workers, or the watchdog alone); yields it and a list that the test fills with the pids to
    kill afterwards if they are still alive."""
    env = dict(os.environ)
    if not pdeathsig:
        env["TVM_POPEN_WORKER_NO_PDEATHSIG"] = "1"
    parent = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    leftovers = []
    try:
        yield parent, leftovers
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        parent.stdout.close()
        parent.stderr.close()
        for pid in leftovers:
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


def first_line(parent):
    line = parent.stdout.readline()
    assert line, parent.stderr.read()
    return line


@pytest.mark.parametrize("pdeathsig", [True, False], ids=["pdeathsig", "watchdog"])
def test_workers_die_when_parent_is_killed(pdeathsig):
    script = PARENT_SCRIPT.format(tests_dir=str(TESTS_DIR))
    with parent_process(script, pdeathsig) as (parent, leftovers):
        info = json.loads(first_line(parent))
        workers = info["workers"]
        leftovers += [*workers, info["grandchild"]]
        assert len(workers) == 4 and all(pid_alive(pid) for pid in workers)
        parent.kill()  # SIGKILL: no cleanup code runs in the parent
        parent.wait(10)
        assert wait_dead(workers, timeout=5.0) == []
        # Processes started by jobs go with the worker, whatever killed it.
        assert wait_dead([info["grandchild"]], timeout=5.0) == []


SLEEP_PARENT_SCRIPT = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests_dir!r})
    import test_support_popen_jobs as jobs
    from tvm.support.popen_pool import PopenWorker

    worker = PopenWorker()
    worker.send(jobs.start_sleep_and_record, ({pid_file!r}, {hold}))
    if not {hold}:
        worker.recv()
    print(worker.pid, flush=True)
    time.sleep(60)
    """
)


@pytest.mark.parametrize("hold", [0, 60], ids=["idle-worker", "running-job"])
@pytest.mark.parametrize("pdeathsig", [True, False], ids=["pdeathsig", "watchdog"])
def test_sleep_started_by_job_dies_with_sigkilled_parent(tmp_path, hold, pdeathsig):
    pid_file = tmp_path / "sleep.pid"
    script = SLEEP_PARENT_SCRIPT.format(tests_dir=str(TESTS_DIR), pid_file=str(pid_file), hold=hold)
    with parent_process(script, pdeathsig) as (parent, leftovers):
        worker_pid = int(first_line(parent))
        leftovers.append(worker_pid)
        deadline = time.monotonic() + 30
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        sleep_pid = int(pid_file.read_text())
        leftovers.append(sleep_pid)
        assert pid_alive(sleep_pid) and pid_alive(worker_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        assert wait_dead([sleep_pid], timeout=5.0) == []
        assert wait_dead([worker_pid], timeout=5.0) == []
        assert wait_group_empty(worker_pid) == []


def test_interpreter_exit_kills_running_workers_quietly():
    code = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(TESTS_DIR)!r})
        import test_support_popen_jobs as jobs
        from tvm.support.popen_pool import PopenPoolExecutor, PopenWorker

        w = PopenWorker()
        w.send(jobs.getpid)
        print(w.recv(), flush=True)
        w.send(jobs.identity_after, (None, 60))  # left running
        pool = PopenPoolExecutor(max_workers=1)
        print(pool.submit(jobs.getpid).result(), flush=True)
        pool.submit(jobs.identity_after, None, 60)  # running at exit: no shutdown() called
        """
    )
    started = time.monotonic()
    result = run_python(code, timeout=45)
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # the exit guard: nothing printed while shutting down
    assert elapsed < 20  # did not wait for the 60 s jobs
    pids = [int(line) for line in result.stdout.split()]
    assert len(pids) == 2
    assert wait_dead(pids) == []


def test_python_c_functions_defined_in_main():
    code = textwrap.dedent(
        """
        import math, pickle
        from tvm.support.popen_pool import PopenPoolExecutor

        OFFSET = 100

        def helper(x):
            return x + OFFSET

        def job(x, scale=2):
            return helper(int(math.sqrt(x))) * scale

        def fact(n):
            return 1 if n <= 1 else n * fact(n - 1)

        class Local:
            pass

        def make_local():
            return Local()

        with PopenPoolExecutor(max_workers=1) as pool:
            print(pool.submit(job, 49).result(), pool.submit(fact, 5).result())
            for bad in (make_local, lambda: 0):
                try:
                    pool.submit(bad).result()
                except pickle.PicklingError as err:
                    print("PicklingError:", err)
            print(pool.submit(job, 16, scale=3).result())
        """
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "214 120"
    assert "class Local is defined in the main script" in lines[1]
    assert "<lambda>" in lines[2]
    assert lines[3] == "312"
    assert result.stderr == ""


def test_interactive_session():
    session = textwrap.dedent(
        """
        from tvm.support.popen_pool import PopenWorker
        def square(x):
            return x * x

        w = PopenWorker()
        w.send(square, (12,))
        print("result", w.recv())
        """
    )
    result = run_python("", stdin=session, args=("-i", "-q"))
    assert result.returncode == 0, result.stderr
    assert "result 144" in result.stdout
    assert "Traceback" not in result.stderr
