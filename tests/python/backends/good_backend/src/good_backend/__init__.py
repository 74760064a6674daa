"""A tvm backend used by the tests: registers a Python function, builds a small native library
that registers a C function at load time, and loads it with ``tvm.base.load_backend_libs``."""

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

LOAD_COUNT = 0


def _build(target: Path) -> Path:
    source = Path(__file__).with_name("native.c")
    include = os.environ["TVM_TEST_INCLUDE"]
    compiler = os.environ.get("CC", "gcc")
    command = [compiler, "-shared", "-fPIC", f"-I{include}", "-o", str(target), str(source)]
    subprocess.run(command, check=True)
    return target


def load() -> None:
    """The entry point: called once by ``import tvm``."""
    global LOAD_COUNT
    LOAD_COUNT += 1
    import tvm  # importing tvm inside the entry point works

    tvm.register_func("good_backend.hello", lambda name: f"hello {name}")
    build_dir = Path(os.environ.get("TVM_TEST_BUILD_DIR", sysconfig.get_path("purelib")))
    library = _build(build_dir / "libgood_backend_native.so")
    tvm.base.load_backend_libs([str(library)])
    print(f"good_backend loaded in {sys.executable}", file=sys.stderr)
