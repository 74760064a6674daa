"""tvm.support.utils: temporary directories (removal, keep-for-debug naming, exit-time cleanup),
file locks between processes, which and is_source_path."""

import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tvm.support import utils
from tvm.support.utils import DirectoryCreatedPastAtExit, TempDirectory


def test_tempdir_lifecycle():
    temp = utils.tempdir()
    path = temp.temp_dir
    assert os.path.isdir(path) and path in TempDirectory.TEMPDIRS
    Path(temp.relpath("a.txt")).write_text("a")
    assert temp.listdir() == ["a.txt"]
    assert temp.path == Path(path)
    assert temp / "a.txt" == Path(path) / "a.txt"
    assert temp / Path("b") == Path(path) / "b"
    with pytest.raises(TypeError, match=r"str or pathlib.Path"):
        temp / 3
    temp.remove()
    assert not os.path.exists(path) and path not in TempDirectory.TEMPDIRS
    temp.remove()  # idempotent
    with pytest.raises(RuntimeError, match="removed"):
        temp.relpath("x")


def test_tempdir_removed_by_gc_and_context_manager():
    temp = utils.tempdir()
    path = temp.temp_dir
    del temp
    assert not os.path.exists(path)
    with utils.tempdir() as temp:
        path = temp.temp_dir
        assert os.path.isdir(path)
    assert not os.path.exists(path)


def test_tempdir_custom_path(tmp_path):
    target = tmp_path / "custom"
    with utils.tempdir(custom_path=target) as temp:
        assert temp.temp_dir == str(target) and target.is_dir()
    assert not target.exists()
    with pytest.raises(FileNotFoundError):
        utils.tempdir(custom_path=tmp_path / "no" / "parent")


def test_keep_for_debug_names_and_keeps_directories():
    kept = [utils.tempdir(keep_for_debug=True) for _ in range(2)]
    paths = [Path(k.temp_dir) for k in kept]
    try:
        first, second = (int(p.name) for p in paths)
        assert re.fullmatch(r"\d{5}", paths[0].name) and second == first + 1
        parent = paths[0].parent
        assert parent == paths[1].parent
        assert re.match(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d___", parent.name)
        assert parent.parent.name.startswith("tvm-debug-mode-tempdirs")
        for temp in kept:
            temp.remove()
        assert all(p.is_dir() for p in paths)  # kept
        with TempDirectory.set_keep_for_debug():
            inside = utils.tempdir()
            paths.append(Path(inside.temp_dir))
            assert paths[-1].parent == parent
        inside.remove()
        assert paths[-1].is_dir()
        with TempDirectory.set_keep_for_debug(False):
            assert not TempDirectory._KEEP_FOR_DEBUG
    finally:
        for p in paths:
            for child in p.iterdir():
                child.unlink()
            p.rmdir()


def test_keep_for_debug_from_environment(monkeypatch):
    monkeypatch.setenv("TVM_KEEP_TEMPDIRS", "1")
    temp = utils.tempdir()
    path = Path(temp.temp_dir)
    temp.remove()
    assert path.is_dir()
    path.rmdir()
    monkeypatch.setenv("TVM_KEEP_TEMPDIRS", "0")
    temp = utils.tempdir()
    path = Path(temp.temp_dir)
    temp.remove()
    assert not path.exists()


def test_exit_time_cleanup_in_a_fresh_interpreter():
    code = textwrap.dedent(
        """
        from tvm.support.utils import DirectoryCreatedPastAtExit, TempDirectory, tempdir
        kept_alive = tempdir()
        print(kept_alive.temp_dir)
        TempDirectory.remove_tempdirs()
        TempDirectory.remove_tempdirs()  # idempotent
        import os
        print(os.path.exists(kept_alive.temp_dir))
        try:
            tempdir()
        except DirectoryCreatedPastAtExit:
            print("refused")
        other = None
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    path, exists, refused = result.stdout.split()
    assert exists == "False" and refused == "refused"
    assert not os.path.exists(path)
    assert result.stderr == ""  # the object's __del__ at exit stays quiet
    assert issubclass(DirectoryCreatedPastAtExit, Exception)


def test_directories_alive_at_exit_are_removed():
    code = "from tvm.support.utils import tempdir; t = tempdir(); print(t.temp_dir)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert not os.path.exists(result.stdout.strip())
    assert result.stderr == ""


def test_file_lock_excludes_other_processes(tmp_path):
    lock_path = tmp_path / "lock"
    marker = tmp_path / "marker"
    code = textwrap.dedent(
        f"""
        import time
        from tvm.support.utils import filelock
        with filelock({str(lock_path)!r}):
            open({str(marker)!r}, "w").write(str(time.monotonic()))
        """
    )
    lock = utils.filelock(lock_path)
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(1.0)
        assert not marker.exists()  # the child waits for our lock
        released = time.monotonic()
        lock.release()
        lock.release()  # idempotent
        assert child.wait(30) == 0
        assert float(marker.read_text()) >= released
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_which_and_is_source_path(tmp_path, monkeypatch):
    assert utils.which("sh") is not None
    assert utils.which("no-such-program-xyz") is None
    tool = tmp_path / "mytool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert utils.which("mytool") == str(tool)
    assert utils.is_source_path(str(tool))
    assert utils.is_source_path("kernel.cc")
    assert not utils.is_source_path("int main() { return 0; }")
    assert not utils.is_source_path("kernel.cc\nint x;")
    assert not utils.is_source_path("noextension")
