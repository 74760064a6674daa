"""Tar archives of build outputs: ``tar`` packs files, ``untar`` unpacks an archive safely.

Archives are written gzip-compressed; ``untar`` reads plain, gzip, bz2 and xz archives. Before
anything is written, ``untar`` checks every member and refuses the whole archive if one of them
would land outside the target directory (an absolute name, ``..`` leading out, a name that
passes through a symbolic link, a link pointing outside) or is a device or FIFO; the error
names the member.
"""

from __future__ import annotations

import os
import posixpath
import tarfile
from collections.abc import Iterable, Sequence

from . import utils

__all__ = ["normalize_file_list_by_unpacking_tars", "tar", "untar"]


def tar(output: str | os.PathLike[str], files: Sequence[str | os.PathLike[str]]) -> None:
    """Packs ``files`` under their base names into the gzip-compressed tar ``output``.

    Two inputs with the same base name are a ``ValueError``; an input that does not exist a
    ``FileNotFoundError``; any other failure a ``RuntimeError`` starting with "Tar error".
    """
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    names: dict[str, str] = {}
    for entry in files:
        path = os.fspath(entry)
        name = os.path.basename(os.path.normpath(path))
        if name in names:
            raise ValueError(f"duplicate file name {name!r}: {names[name]!r} and {path!r}")
        if not os.path.exists(path):
            raise FileNotFoundError(f"cannot add {path!r} to {os.fspath(output)!r}: no such file")
        names[name] = path
    try:
        with tarfile.open(os.fspath(output), "w:gz") as archive:
            for name, path in names.items():
                archive.add(path, arcname=name)
    except (OSError, tarfile.TarError) as err:
        raise RuntimeError(f"Tar error:\ncannot write {os.fspath(output)!r}: {err}") from err


# `tvm.support.cc`-style attribute: what `export`-like callers use as the file extension.
tar.output_format = "tar"  # type: ignore[attr-defined]


class _UnsafeMember(Exception):
    pass


def _split(name: str) -> list[str]:
    return [part for part in name.replace("\\", "/").split("/") if part not in ("", ".")]


def _is_absolute(name: str) -> bool:
    text = name.replace("\\", "/")
    return text.startswith("/") or (len(text) > 1 and text[1] == ":")


def _resolve(parts: list[str], links: dict[str, str], depth: int = 0) -> list[str]:
    """Follows ``parts`` from the top of the archive, through the archive's own symbolic
    links, without leaving the top; raises ``_UnsafeMember`` if it would."""
    if depth > 40:
        raise _UnsafeMember("symbolic links nest too deeply (a loop?)")
    resolved: list[str] = []
    for part in parts:
        if part == "..":
            if not resolved:
                raise _UnsafeMember("it leads outside the target directory")
            resolved.pop()
            continue
        resolved.append(part)
        target = links.get("/".join(resolved))
        if target is not None:
            resolved = _resolve(resolved[:-1] + _split(target), links, depth + 1)
    return resolved


def _check_members(members: Iterable[tarfile.TarInfo], directory: str) -> None:
    members = list(members)
    links: dict[str, str] = {}
    for member in members:
        if member.issym():
            if _is_absolute(member.linkname):
                raise RuntimeError(
                    f"refusing to extract the archive: member {member.name!r} is unsafe: it is "
                    f"a symbolic link to the absolute path {member.linkname!r}; nothing was "
                    "extracted"
                )
            links["/".join(_split(posixpath.normpath(member.name)))] = member.linkname
    real_top = os.path.realpath(directory)
    for member in members:
        name = member.name
        try:
            if _is_absolute(name):
                raise _UnsafeMember("its name is an absolute path")
            if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
                raise _UnsafeMember("it is a device, FIFO or other special file")
            parts = _split(name)
            # The member's directory, with every link the archive defines followed.
            parent = _resolve(parts[:-1], links)
            if parts and parts[-1] == "..":
                raise _UnsafeMember("it leads outside the target directory")
            if member.issym():
                _resolve([*parent, *_split(member.linkname)], links)
            elif member.islnk():
                if _is_absolute(member.linkname):
                    raise _UnsafeMember(
                        f"it is a hard link to the absolute path {member.linkname!r}"
                    )
                _resolve(_split(member.linkname), links)
            # What is already on disk (perhaps links made before) must not lead outside either;
            # a link member replaces its own name, so only its directory counts for it.
            landing = parent if member.issym() or not parts else [*parent, parts[-1]]
            on_disk = os.path.realpath(os.path.join(directory, *landing))
            if os.path.commonpath([real_top, on_disk]) != real_top:
                raise _UnsafeMember("it is written through a link that leads outside")
        except _UnsafeMember as why:
            raise RuntimeError(
                f"refusing to extract the archive: member {name!r} is unsafe: {why}; nothing "
                "was extracted"
            ) from None


def untar(tar_file: str | os.PathLike[str], directory: str | os.PathLike[str]) -> None:
    """Unpacks ``tar_file`` into ``directory`` (created if missing).

    A member that would escape ``directory`` makes it refuse the whole archive with a
    ``RuntimeError`` naming the member, before anything is written. An archive that cannot
    be read is a ``RuntimeError`` starting with "Tar error"; a missing one ``FileNotFoundError``.
    """
    path = os.fspath(tar_file)
    target = os.fspath(directory)
    if not os.path.exists(path):
        raise FileNotFoundError(f"cannot untar {path!r}: no such file")
    try:
        with tarfile.open(path, "r:*") as archive:
            members = archive.getmembers()
            _check_members(members, target)
            os.makedirs(target, exist_ok=True)
            if hasattr(tarfile, "data_filter"):
                archive.extractall(target, members=members, filter="data")
            else:  # Python without extraction filters: the checks above are all there is
                archive.extractall(target, members=members)
    except (tarfile.TarError, OSError) as err:
        raise RuntimeError(f"Tar error:\ncannot extract {path!r} into {target!r}: {err}") from err


def normalize_file_list_by_unpacking_tars(
    temp: utils.TempDirectory, file_list: Iterable[str]
) -> list[str]:
    """``file_list`` with every ``.tar`` replaced by the files it contains, unpacked into
    fresh subdirectories ``temp/temp0``, ``temp/temp1``, ..."""
    result: list[str] = []
    counter = 0
    for entry in file_list:
        if not entry.endswith(".tar"):
            result.append(entry)
            continue
        while os.path.exists(temp.relpath(f"temp{counter}")):
            counter += 1
        unpack_dir = temp.relpath(f"temp{counter}")
        counter += 1
        untar(entry, unpack_dir)
        for root, _, files in os.walk(unpack_dir):
            result.extend(os.path.join(root, name) for name in sorted(files))
    return result
