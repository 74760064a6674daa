"""Where a popen worker's output goes: each kind of ``stdout``/``stderr`` argument of
PopenWorker (text and binary files without a descriptor, descriptors, ``STDOUT`` into a file or
into the parent's stdout), the arguments refused, and destinations that fail while forwarding."""

import io
import os
import subprocess

import pytest

import test_support_popen_jobs as jobs
from tvm.support.popen_pool import PopenWorker
from tvm.support.popen_pool.output import _stderr_sink


def forwarded_stderr(**streams) -> None:
    """Runs a job printing to both streams in a worker with ``streams``; returns after the
    worker's stderr has all been forwarded (kill joins the reader)."""
    w = PopenWorker(**streams)
    try:
        w.send(jobs.print_to_streams, ("hello",))
        assert w.recv() == "hello"
    finally:
        w.kill()


@pytest.mark.parametrize("stream", [io.StringIO, io.BytesIO])
def test_stderr_into_an_object_without_a_descriptor(stream):
    target = stream()
    forwarded_stderr(stdout=subprocess.DEVNULL, stderr=target)
    text = target.getvalue()
    assert (text if isinstance(text, str) else text.decode()) == "stderr: hello\n"


def test_stderr_into_a_file_descriptor(tmp_path):
    fd = os.open(tmp_path / "err.txt", os.O_WRONLY | os.O_CREAT)
    try:
        forwarded_stderr(stdout=subprocess.DEVNULL, stderr=fd)
    finally:
        os.close(fd)
    assert (tmp_path / "err.txt").read_text() == "stderr: hello\n"


def test_stderr_to_stdout_into_a_file(tmp_path):
    with open(tmp_path / "out.txt", "w") as out:
        forwarded_stderr(stdout=out, stderr=subprocess.STDOUT)
    assert sorted((tmp_path / "out.txt").read_text().splitlines()) == [
        "stderr: hello",
        "stdout: hello",
    ]


def test_stderr_to_the_parents_stdout(capfd):
    forwarded_stderr(stderr=subprocess.STDOUT)
    out, err = capfd.readouterr()
    assert "stderr: hello" in out and "stdout: hello" in out
    assert "hello" not in err


def test_refused_destinations():
    with pytest.raises(ValueError, match=r"stdout cannot be subprocess\.STDOUT"):
        PopenWorker(stdout=subprocess.STDOUT, stderr=subprocess.STDOUT)
    with pytest.raises(TypeError, match="stderr must be None, a file descriptor or a file"):
        PopenWorker(stderr=object())


def test_failing_destinations_are_ignored():
    read, write = os.pipe()
    os.close(read)
    try:
        _stderr_sink(write, None)(b"lost")  # EPIPE: nobody reads
    finally:
        os.close(write)
    closed = io.StringIO()
    closed.close()
    _stderr_sink(closed, None)(b"lost")  # ValueError: I/O operation on closed file

    class Refuses:
        def write(self, data):
            raise OSError("disk full")

    _stderr_sink(Refuses(), None)(b"lost")
