"""Modules: compiled libraries and the system library, with their exported functions."""

from __future__ import annotations

import os
import struct
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._native import Function, Object
from .registry import get_global_func, register_object

if TYPE_CHECKING:
    import inspect

    from .._native import Device
    from ..runtime.benchmark import BenchmarkResult

__all__ = ["Module", "load_module", "system_lib"]


def _api(name: str, release_gil: bool = False) -> Function:
    func = get_global_func(name)
    assert func is not None
    if release_gil:
        # A module of an RPC session looks its functions up over the network: other Python
        # threads keep running while it waits.
        func.release_gil = True
    return func


def _signature(metadata: str) -> inspect.Signature | None:
    """A signature from the type schema a library recorded for a function, if any."""
    import inspect
    import json

    try:
        schema = json.loads(json.loads(metadata)["type_schema"])
        ret, *params = schema.get("args", [])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None

    def name_of(entry: Any) -> str:
        return entry.get("type", "Any") if isinstance(entry, dict) else str(entry)

    parameters = [
        inspect.Parameter(f"arg{i}", inspect.Parameter.POSITIONAL_ONLY, annotation=name_of(p))
        for i, p in enumerate(params)
    ]
    return inspect.Signature(parameters, return_annotation=name_of(ret))


@register_object("ffi.Module")
class Module(Object):
    """A collection of functions: a loaded shared library, the system library, or a device
    module. Functions are found with ``mod["name"]``, ``mod.name`` or :meth:`get_function`."""

    @property
    def kind(self) -> str:
        """The module kind, such as ``"library"``."""
        return _api("ffi.ModuleGetKind")(self)

    @property
    def imports(self) -> list[Module]:
        """The imported modules."""
        return list(_api("ffi.ModuleGetImports")(self))

    def implements_function(self, name: str, query_imports: bool = False) -> bool:
        """Whether the module (or, with ``query_imports``, an import) has function ``name``."""
        return _api("ffi.ModuleImplementsFunction")(self, name, query_imports)

    def get_function(self, name: str, query_imports: bool = False) -> Function:
        """Function ``name``; an ``AttributeError`` naming it and the module if missing."""
        func = _api("ffi.ModuleGetFunction", release_gil=True)(self, name, query_imports)
        if func is None:
            raise AttributeError(f"Module[{self.kind}] has no function `{name}`")
        if self.kind == "rpc":
            # It runs on the remote: other Python threads keep running while it waits.
            func.release_gil = True
        # The doc and metadata exports are optional: a broken one costs its information (with a
        # warning naming it), never the working function.
        doc = self._optional_export("ffi.ModuleGetFunctionDoc", name, "doc")
        if doc is not None:
            func.__doc__ = doc
        metadata = self._optional_export("ffi.ModuleGetFunctionMetadata", name, "metadata")
        if metadata is not None:
            signature = _signature(metadata)
            if signature is not None:
                func.__signature__ = signature
        return func

    def get_function_metadata(self, name: str) -> dict[str, Any] | None:
        """The metadata the library exported with function ``name`` (``__tvm_ffi__metadata_``:
        ``{"type_schema": "<JSON>"}`` for a typed C++ export), or None when it exported none."""
        from .registry import _metadata_dict

        text = _api("ffi.ModuleGetFunctionMetadata")(self, name)
        if text is None:
            return None
        return _metadata_dict(text, f"function `{name}` of Module[{self.kind}]")

    def get_function_doc(self, name: str) -> str | None:
        """The documentation the library exported with function ``name``
        (``TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC``), or None when it exported none."""
        return _api("ffi.ModuleGetFunctionDoc")(self, name)

    def _optional_export(self, getter: str, name: str, what: str) -> str | None:
        try:
            return _api(getter)(self, name)
        except Exception as err:
            warnings.warn(
                f"Module[{self.kind}]: the {what} export of `{name}` is broken "
                f"({type(err).__name__}: {err}); using the function without it",
                RuntimeWarning,
                stacklevel=3,
            )
            return None

    def import_module(self, other: Module) -> None:
        """Add ``other`` to the imports (a cycle is a ``RuntimeError``)."""
        _api("ffi.ModuleImportModule")(self, other)

    def time_evaluator(
        self,
        func_name: str,
        dev: Device,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: int = 0,
        limit_zero_time_iterations: int = 100,
        cooldown_interval_ms: int = 0,
        repeats_to_cooldown: int = 1,
        cache_flush_bytes: int = 0,
        f_preproc: str = "",
    ) -> Callable[..., BenchmarkResult]:
        """A function that times ``func_name`` on ``dev`` and returns a
        :class:`~tvm.runtime.benchmark.BenchmarkResult` of seconds per call.

        After a warm-up call, each of ``repeat`` measurements runs the function ``number`` times
        back to back (more when one measurement takes under ``min_repeat_ms``), synchronizing
        the device around it. ``f_preproc`` names a global function run with the same arguments
        before each measurement (``"cache_flush_cpu_non_first_arg"`` evicts the inputs from the
        CPU caches); ``cache_flush_bytes`` copies that many bytes on the device first. A module
        of an RPC session is timed on the remote, next to its device.
        """
        from ..runtime.benchmark import BenchmarkResult

        feval = _api("runtime.RPCTimeEvaluator")(
            self,
            func_name,
            dev.device_type,
            dev.device_id,
            number,
            repeat,
            min_repeat_ms,
            limit_zero_time_iterations,
            cooldown_interval_ms,
            repeats_to_cooldown,
            cache_flush_bytes,
            f_preproc,
        )

        # Timing runs the function many times (on a remote: waiting on the network), with the
        # interpreter lock released.
        feval.release_gil = True

        def evaluator(*args: Any) -> BenchmarkResult:
            blob = bytes(feval(*args))
            return BenchmarkResult(struct.unpack(f"@{repeat}d", blob))

        return evaluator

    def __getitem__(self, name: str) -> Function:
        return self.get_function(name)

    def __getattr__(self, name: str) -> Function:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self.get_function(name)

    def __repr__(self) -> str:
        if self._use_count() == 0:  # made by Module() without a runtime module behind it
            return super().__repr__()
        return f"Module(kind={self.kind!r})"


def load_module(path: str | os.PathLike[str]) -> Module:
    """Load a module from a file (a shared library for ``.so``/``.dylib``/``.dll``).

    A path is resolved against the current directory; a bare name that is not a file there is
    searched for as the dynamic loader searches (``LD_LIBRARY_PATH``, the system's library path,
    libraries already loaded). A missing file is a ``FileNotFoundError`` and a file that is not a
    loadable library an ``OSError``, both naming the path.
    """
    return _api("ffi.ModuleLoadFromFile")(os.fspath(path))


def system_lib(prefix: str = "") -> Module:
    """The module of functions linked into the program and registered as its system library."""
    return _api("ffi.SystemLib")(prefix)
