"""Builds the nanobind extension of the benchmark, ``tvm_bench_nanobind`` (``nanobind_rows.cpp``),
with g++ from the sources of the installed ``nanobind`` pip package (``nb_combined.cpp``), into
the site-packages of the running interpreter. A stamp beside the module (a hash of the source,
nanobind's version and the command) skips the build (about 5 s) when nothing changed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

MODULE = "tvm_bench_nanobind"
SOURCE = Path(__file__).resolve().with_name("nanobind_rows.cpp")


def available() -> bool:
    """Whether nanobind is installed and g++ can be found."""
    return importlib.util.find_spec("nanobind") is not None and shutil.which("g++") is not None


def _command(output: Path) -> list[str]:
    import nanobind

    nb_dir = Path(nanobind.__file__).resolve().parent
    paths = sysconfig.get_paths()
    return [
        "g++",
        "-std=c++17",
        "-O2",
        "-DNDEBUG",
        "-fPIC",
        "-shared",
        "-fvisibility=hidden",
        "-fno-strict-aliasing",
        f"-I{nb_dir / 'include'}",
        f"-I{nb_dir / 'ext' / 'robin_map' / 'include'}",
        f"-I{paths['include']}",
        str(nb_dir / "src" / "nb_combined.cpp"),
        str(SOURCE),
        "-o",
        str(output),
    ]


def build(verbose: bool = False) -> Path:
    """The built module (built now if missing or stale); raises on a failed build."""
    import nanobind

    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    output = Path(sysconfig.get_paths()["platlib"]) / f"{MODULE}{suffix}"
    command = _command(output)
    digest = hashlib.sha256()
    digest.update(SOURCE.read_bytes())
    digest.update(nanobind.__version__.encode())
    digest.update(shlex.join(command).encode())
    stamp = output.with_name(f"{MODULE}.stamp")
    if output.exists() and stamp.exists() and stamp.read_text() == digest.hexdigest():
        return output
    if verbose:
        print(f"building {output.name} with nanobind {nanobind.__version__}", file=sys.stderr)
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} failed:\n{proc.stderr[-4000:]}")
    stamp.write_text(digest.hexdigest())
    return output


if __name__ == "__main__":
    print(build(verbose=True))
