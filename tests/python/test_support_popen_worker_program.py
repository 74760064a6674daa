"""The popen worker program (tvm.support._popen_worker) driven directly over its pipes, as the
pool starts it: the end of the request pipe and the end of the lifeline each end the worker and
its process group, a worker whose parent is not the one named exits at once, and a wrong
command line is a usage error."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys

import pytest

import test_support_popen_jobs as jobs
from test_support_popen_pool import wait_dead
from tvm.support._popen_worker import main
from tvm.support.popen_pool.launch import _worker_argv
from tvm.support.popen_pool.wire import StatusKind, _read_frame, _write_frame


class DirectWorker:
    """A worker process with the pipes the pool would give it, held by the test."""

    def __init__(self, parent_pid: int | None = None) -> None:
        request_read, self.request = os.pipe()
        self.reply, reply_write = os.pipe()
        lifeline_read, self.lifeline = os.pipe()
        child_ends = [request_read, reply_write, lifeline_read]
        argv = _worker_argv(child_ends)
        if parent_pid is not None:
            argv[-1] = str(parent_pid)
        self.proc = subprocess.Popen(
            argv, pass_fds=child_ends, start_new_session=True, stderr=subprocess.PIPE
        )
        for fd in child_ends:
            os.close(fd)
        _write_frame(self.request, pickle.dumps(("setup", {"sys_path": list(sys.path)})))

    def result(self):
        kind, status, payload, _ = pickle.loads(_read_frame(self.reply))
        assert kind == "result" and status == StatusKind.COMPLETE
        return pickle.loads(payload)

    def close(self) -> None:
        for fd in (self.request, self.reply, self.lifeline):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(5)
        self.proc.stderr.close()


@pytest.fixture
def direct():
    workers = []

    def start(parent_pid=None):
        workers.append(DirectWorker(parent_pid))
        return workers[-1]

    yield start
    for w in workers:
        w.close()


def _run_frame(fn, *args):
    return pickle.dumps(("run", pickle.dumps((fn, args, {}))))


def test_end_of_requests_ends_the_worker_and_its_group(direct):
    w = direct()
    _write_frame(w.request, _run_frame(jobs.start_grandchild))
    assert pickle.loads(_read_frame(w.reply)) == ("started", None)
    sleeper = w.result()
    os.close(w.request)
    assert w.proc.wait(10) == -signal.SIGKILL, "the worker kills its own group"
    assert wait_dead([sleeper]) == [], "with the process its job started"


def test_end_of_the_lifeline_ends_a_worker_in_the_middle_of_a_job(direct):
    w = direct()
    _write_frame(w.request, _run_frame(jobs.identity_after, "never", 60))
    assert pickle.loads(_read_frame(w.reply)) == ("started", None)
    os.close(w.lifeline)
    assert w.proc.wait(10) == -signal.SIGKILL
    assert _read_frame(w.reply) is None, "no result: the reply pipe just ends"


def test_worker_of_another_parent_exits_at_once(direct):
    w = direct(parent_pid=1)
    assert w.proc.wait(10) == -signal.SIGKILL
    assert _read_frame(w.reply) is None


def test_usage_error_names_the_arguments():
    with pytest.raises(SystemExit, match=r"usage: .*REQUEST REPLY LIFELINE PARENT_PID"):
        main(["3", "4"])
