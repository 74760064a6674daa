"""The runtime's parallel thread pool and the backend functions compiled kernels call.

Kernels compiled by TVM with a parallel loop run it on one pool of threads per process: the
calling thread plus one worker per remaining thread. Its size is, first found, the ``nthreads``
of :func:`config_threadpool`, ``TVM_NUM_THREADS``, ``OMP_NUM_THREADS``, and the CPUs the process
may run on.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ffi import get_global_func

#: Apache TVM's affinity modes for :func:`config_threadpool`.
AFFINITY_MODES = {
    "none": 0,
    "big": 1,
    "little": -1,
    "one_core_per_thread": -2,
    "share_all_cores": -3,
}


def num_threads() -> int:
    """The number of threads a parallel loop runs on, the calling thread included."""
    return int(get_global_func("runtime.NumThreads")())


def config_threadpool(
    affinity_mode: int | str = 0, nthreads: int = 0, cpus: Sequence[int] | None = None
) -> None:
    """Replaces the thread pool: ``nthreads`` threads (0: the default) pinned as
    ``affinity_mode`` says.

    Modes (numbers as in Apache TVM, or the names of :data:`AFFINITY_MODES`): ``0`` pins
    nothing; ``1`` ("big") gives each worker a core of its own, fastest cores first; ``-1``
    ("little") slowest first; ``-2`` one core per worker from ``cpus``, in order; ``-3`` every
    worker on all of ``cpus``. Worker ``i`` runs task ``i + 1`` and takes the ``(i + 1)``-th core
    of the order; the calling thread keeps its own affinity (pin it with
    ``os.sched_setaffinity(0, ...)``).

    Raises ``ValueError`` for an unknown mode, a negative ``nthreads`` or more than 1024, and a
    CPU this process may not run on.
    """
    if isinstance(affinity_mode, str):
        if affinity_mode not in AFFINITY_MODES:
            raise ValueError(
                f"unknown affinity mode {affinity_mode!r}; known: {', '.join(AFFINITY_MODES)}"
            )
        affinity_mode = AFFINITY_MODES[affinity_mode]
    configure = get_global_func("runtime.config_threadpool")
    if cpus is None:
        configure(affinity_mode, nthreads)
    else:
        configure(affinity_mode, nthreads, [int(cpu) for cpu in cpus])


def context_symbols() -> dict[str, int]:
    """The functions the runtime writes into the ``__<name>`` slots of the libraries it loads
    (``__TVMBackendParallelLaunch``, ``__TVMBackendAllocWorkspace``, ...), with their
    addresses. A library with a ``__TVM*`` slot missing here is refused at load."""
    flat = list(get_global_func("ffi.GetContextSymbols")())
    if len(flat) % 2:
        raise ValueError(
            f"ffi.GetContextSymbols returned {len(flat)} items, not name/address pairs"
        )
    return {str(name): address.value or 0 for name, address in zip(flat[::2], flat[1::2])}
