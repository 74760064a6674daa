"""Type stubs (``.pyi``) from what the runtime records: the type schemas and docs of a compiled
library's exported functions, and of global functions and object types registered under a
prefix (by C++, Rust or Python code).

.. code-block:: text

    python -m tvm.support.stubgen module libkernels.so -o kernels.pyi
    python -m tvm.support.stubgen globals mylib --load libmylib.so -o mylib.pyi

``module`` writes a class ``<Name>Module(tvm.ffi.Module)`` with a method per function the
library exports (``TVM_FFI_DLL_EXPORT_TYPED_FUNC``); ``cast`` a loaded module to it. ``globals``
writes a function per global ``<prefix>.<name>`` and a class per object type ``<prefix>.<Name>``
with its reflected fields. A function that recorded no schema gets ``(*args: Any) -> Any``.
"""

from __future__ import annotations

import json
import keyword
import os
import re
import sys
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["globals_stub", "main", "module_stub"]

#: Names the stubs import from ``tvm.ffi`` when an annotation uses them.
_FFI_NAMES = (
    "Array",
    "Device",
    "Dict",
    "List",
    "Map",
    "Module",
    "Object",
    "Shape",
    "Tensor",
    "dtype",
)
_EXPORT_PREFIX = "__tvm_ffi_"
#: Every name a stub may import.
_IMPORTED_NAMES = frozenset(
    {"annotations", "Any", "Callable", "Mapping", "Sequence", "DLPackProducer", *_FFI_NAMES}
)


def _schema_of(metadata: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not metadata or not isinstance(metadata.get("type_schema"), str):
        return None
    try:
        schema = json.loads(metadata["type_schema"])
    except (ValueError, RecursionError):
        return None
    return schema if isinstance(schema, dict) else None


def _object_classes() -> dict[str, str]:
    """The Python classes bound to object type keys, by key (``module.Class``)."""
    from ..ffi import Object

    found: dict[str, str] = {}
    pending: list[type] = [Object]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        key = getattr(cls, "_tvm_type_key", None)
        if isinstance(key, str) and key not in found:
            found[key] = f"{cls.__module__}.{cls.__qualname__}"
    return found


class _Writer:
    """Stub text and the imports its annotations need."""

    def __init__(self, classes: Mapping[str, str]) -> None:
        self.classes = dict(classes)
        self.lines: list[str] = []
        self.used: set[str] = set()

    def annotation(self, schema: Mapping[str, Any], param: bool = False) -> str:
        from ..ffi.type_schema import annotation_of

        text = annotation_of(schema, self.classes, param)
        self.used.update(re.findall(r"[A-Za-z_][A-Za-z0-9_.]*", text))
        return text

    def function(
        self, name: str, metadata: Any, doc: str | None, indent: str, method: bool
    ) -> None:
        schema = _schema_of(metadata)
        params = ["self"] if method else []
        typed = None
        if schema is not None and schema.get("type") == "ffi.Function" and schema.get("args"):
            try:
                typed = self.signature(schema["args"])
            except (TypeError, AttributeError, KeyError, IndexError, ValueError, RecursionError):
                typed = None  # a malformed schema: the function is stubbed untyped
        if typed is None:
            params.append("*args: Any")
            ret = "Any"
            self.used.add("Any")
        else:
            params += typed[0]
            ret = typed[1]
        self.lines.append(f"{indent}def {name}({', '.join(params)}) -> {ret}:")
        if doc:
            self.lines.append(f"{indent}    {_docstring(doc, indent + '    ')}")
        self.lines.append(f"{indent}    ...")

    def signature(self, args: Any) -> tuple[list[str], str]:
        """The parameters and the return annotation of a function's schema ``args`` (the
        return first)."""
        if not isinstance(args, list) or not all(isinstance(a, dict) for a in args):
            raise TypeError("a function schema's args are a list of schemas")
        ret_schema, *param_schemas = args
        params = [f"arg{i}: {self.annotation(p, param=True)}" for i, p in enumerate(param_schemas)]
        if param_schemas:
            params.append("/")
        return params, self.annotation(ret_schema)

    def text(self, header: str) -> str:
        imports = ["from __future__ import annotations", ""]
        abc_names = sorted(n for n in ("Callable", "Mapping", "Sequence") if n in self.used)
        if abc_names:
            imports.append(f"from collections.abc import {', '.join(abc_names)}")
        if "Any" in self.used:
            imports.append("from typing import Any")
        ffi_names = sorted(n for n in _FFI_NAMES if n in self.used)
        if ffi_names:
            imports.append(f"from tvm.ffi import {', '.join(ffi_names)}")
        if "DLPackProducer" in self.used:
            imports.append("from tvm.ffi.type_schema import DLPackProducer")
        modules = sorted(
            {path.rsplit(".", 1)[0] for path in self.classes.values() if path in self.used}
        )
        imports += [f"import {module}" for module in modules]
        return "\n".join([header, "", *imports, "", "", *self.lines]).rstrip() + "\n"


def _docstring(doc: str, indent: str) -> str:
    """``doc`` as a triple-quoted literal: backslashes and quotes escaped, control characters
    other than line breaks and tabs written as escapes, continuation lines indented."""
    out = []
    for char in doc:
        if char in '\\"':
            out.append("\\" + char)
        elif char == "\n":
            out.append("\n" + indent)
        elif char != "\t" and (ord(char) < 0x20 or ord(char) == 0x7F):
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return '"""' + "".join(out) + '"""'


def _identifier(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def _exported_functions(path: str) -> list[str]:
    from .cc import get_global_symbol_section_map

    names = []
    for symbol in get_global_symbol_section_map(path):
        if symbol.startswith(_EXPORT_PREFIX) and not symbol.startswith(_EXPORT_PREFIX + "_"):
            names.append(symbol[len(_EXPORT_PREFIX) :])
    return sorted(names)


def module_stub(path: str | os.PathLike[str], class_name: str | None = None) -> str:
    """The stub of the library at ``path``: a ``Module`` subclass with a method per function
    it exports, typed by the schemas it recorded. ``class_name`` defaults to the file's stem
    in CamelCase with ``Module`` after it (``libadd_ops.so``: ``AddOpsModule``)."""
    from ..ffi import load_module

    target = os.fspath(path)
    module = load_module(target)
    stem = os.path.basename(target).split(".")[0].removeprefix("lib")
    name = class_name or "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", stem))
    name = name if name.endswith("Module") else name + "Module"
    if not _identifier(name):
        raise ValueError(f"class name {name!r} is not a Python identifier")
    writer = _Writer(_object_classes())
    writer.used.add("Module")
    writer.lines.append(f"class {name}(Module):")
    functions = [f for f in _exported_functions(target) if _identifier(f) and f != "self"]
    for function in functions:
        metadata = module.get_function_metadata(function)
        writer.function(function, metadata, module.get_function_doc(function), "    ", True)
    if not functions:
        writer.lines.append("    pass")
    return writer.text(f"# Stub of {os.path.basename(target)}, by tvm.support.stubgen.")


def globals_stub(prefix: str) -> str:
    """The stub of what is registered under ``prefix`` (``"mylib"``): a function per global
    ``<prefix>.<name>`` and a class per object type ``<prefix>.<Name>`` with its reflected
    fields. Deeper names (``<prefix>.a.b``) belong to the stub of ``<prefix>.a``."""
    from .. import _native
    from ..ffi import get_global_func, get_global_func_doc, get_global_func_metadata
    from ..ffi.registry import _metadata_dict

    if not isinstance(prefix, str):
        raise TypeError(f"globals_stub takes a prefix as a str, got {prefix!r}")
    prefix = prefix.rstrip(".")
    if not prefix:
        raise ValueError("globals_stub needs a prefix such as 'mylib'")
    dotted = prefix + "."

    def direct(names: Iterable[str]) -> list[str]:
        children = (n[len(dotted) :] for n in names if n.startswith(dotted))
        # A name the stub imports (`Any`, `Tensor`, ...) would shadow the import: left out.
        return sorted(c for c in children if _identifier(c) and c not in _IMPORTED_NAMES)

    classes = _object_classes()
    type_keys = direct(get_global_func("ffi.GetRegisteredTypeKeys")())
    for name in type_keys:  # classes of this stub are referred to by their own name
        classes[dotted + name] = name
    writer = _Writer(classes)
    for name in type_keys:
        writer.used.add("Object")
        writer.lines.append(f"class {name}(Object):")
        fields = _native._type_fields(_native.type_key_to_index(dotted + name))
        for field, doc, metadata in fields:
            schema = _schema_of(_metadata_dict(metadata, f"field {field} of {dotted + name}"))
            annotation = writer.annotation(schema or {"type": "Any"})
            writer.lines.append(f"    {field}: {annotation}")
            if doc:
                writer.lines.append(f"    {_docstring(doc, '    ')}")
        if not fields:
            writer.lines.append("    pass")
        writer.lines += ["", ""]
    for name in direct(_native.list_global_func_names()):
        full = dotted + name
        writer.function(name, get_global_func_metadata(full), get_global_func_doc(full), "", False)
        writer.lines += ["", ""]
    return writer.text(f"# Stub of the globals under {prefix!r}, by tvm.support.stubgen.")


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docs)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tvm.support.stubgen", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    module = commands.add_parser("module", help="a class stub of a compiled library's exports")
    module.add_argument("library")
    module.add_argument("--class-name")
    module.add_argument("-o", "--output")
    registered = commands.add_parser("globals", help="the globals and types under a prefix")
    registered.add_argument("prefix")
    registered.add_argument("--load", action="append", default=[], help="load a library first")
    registered.add_argument("-o", "--output")
    args = parser.parse_args(argv)
    if args.command == "module":
        text = module_stub(args.library, args.class_name)
    else:
        from ..ffi import load_module

        for library in args.load:
            load_module(library)
        text = globals_stub(args.prefix)
    if args.output:
        with open(args.output, "w") as out:
            out.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
