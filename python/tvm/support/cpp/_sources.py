"""The source files of an inline build: the text given, behind the include of the whole C++ layer,
with the exports of the named functions (and their docs) after it."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

#: What every inline source starts with: the header-only C++ layer (``tvm/ffi/ffi.h``).
PRELUDE = "#include <tvm/ffi/ffi.h>\n\n"

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Characters a build name may hold (it names files and a directory).
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def check_name(name: object) -> str:
    """``name`` if it can name the library's files; a ``TypeError`` or ``ValueError`` naming
    it otherwise."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"name must be letters, digits, '_', '.' or '-' (not starting with '.' or '-'), "
            f"got {name!r}"
        )
    return name


def joined(sources: str | Sequence[str] | None, what: str) -> str | None:
    """One source text from a str or a list of them (joined by newlines); None for None."""
    if sources is None or isinstance(sources, str):
        return sources
    if isinstance(sources, (list, tuple)) and all(isinstance(s, str) for s in sources):
        return "\n".join(sources)
    raise TypeError(f"{what} must be a str or a list of str, got {type(sources).__name__}")


def function_docs(
    functions: Sequence[str] | Mapping[str, str | None] | None,
) -> dict[str, str | None]:
    """The functions to export, each with its doc (None: no doc export): from a list of names
    or a mapping of name to doc."""
    if functions is None:
        return {}
    if isinstance(functions, str):
        raise TypeError(
            f"functions must be a list of names or a dict of name to doc, got the str "
            f"{functions!r} (write [{functions!r}])"
        )
    if isinstance(functions, Mapping):
        docs = dict(functions)
    elif isinstance(functions, (list, tuple)):
        docs = {}
        for name in functions:
            if not isinstance(name, str):
                raise TypeError(f"functions must name functions as str, got {name!r}")
            if name in docs:
                raise ValueError(f"functions names {name!r} twice")
            docs[name] = None
    else:
        raise TypeError(
            f"functions must be a list of names or a dict of name to doc, "
            f"got {type(functions).__name__}"
        )
    for name, doc in docs.items():
        if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
            raise ValueError(f"functions must name C++ identifiers, got {name!r}")
        if doc is not None and not isinstance(doc, str):
            raise TypeError(f"the doc of {name!r} must be a str or None, got {type(doc).__name__}")
        if doc is not None and "\0" in doc:
            raise ValueError(f"the doc of {name!r} holds a NUL character, which would end it")
    return docs


def cpp_string(text: str) -> str:
    """``text`` as a C++ string literal (UTF-8; quotes, backslashes and control characters
    escaped)."""
    out = ['"']
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif ord(char) < 0x20 or char == "\x7f":
            out.append(f"\\{ord(char):03o}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def with_exports(source: str, docs: Mapping[str, str | None]) -> str:
    """``source`` behind the prelude, followed by an export of each function in ``docs``
    (``TVM_FFI_DLL_EXPORT_TYPED_FUNC``, and ``..._DOC`` for those with a doc)."""
    lines = [PRELUDE, source, "\n\n// Exported by tvm.support.cpp.\n"]
    for name, doc in docs.items():
        lines.append(f"TVM_FFI_DLL_EXPORT_TYPED_FUNC({name}, {name});\n")
        if doc is not None:
            lines.append(f"TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC({name}, {cpp_string(doc)});\n")
    return "".join(lines)
