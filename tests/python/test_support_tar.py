"""tvm.support.tar: packing, unpacking, and refusing archives whose members escape the target
directory (nothing is extracted then)."""

import io
import os
import tarfile
from pathlib import Path

import pytest

from tvm.support import tar, utils


def make_files(directory: Path, names):
    paths = []
    for name in names:
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"content of {name}")
        paths.append(str(path))
    return paths


def test_tar_and_untar_round_trip(tmp_path):
    files = make_files(tmp_path / "src", ["a.o", "sub/b.o"])
    archive = tmp_path / "lib.tar"
    tar.tar(str(archive), files)
    with tarfile.open(archive) as opened:
        assert sorted(opened.getnames()) == ["a.o", "b.o"]  # base names
    assert archive.read_bytes()[:2] == b"\x1f\x8b"  # gzip
    out = tmp_path / "out"
    tar.untar(str(archive), str(out))
    assert (out / "a.o").read_text() == "content of a.o"
    assert (out / "b.o").read_text() == "content of sub/b.o"
    assert tar.tar.output_format == "tar"


def test_tar_errors(tmp_path):
    files = make_files(tmp_path, ["x/a.o", "y/a.o"])
    with pytest.raises(ValueError, match=r"duplicate file name 'a.o'"):
        tar.tar(str(tmp_path / "dup.tar"), files)
    with pytest.raises(FileNotFoundError, match=r"missing.o"):
        tar.tar(str(tmp_path / "m.tar"), [str(tmp_path / "missing.o")])
    with pytest.raises(FileNotFoundError, match="no such file"):
        tar.untar(str(tmp_path / "none.tar"), str(tmp_path / "out"))
    bad = tmp_path / "bad.tar"
    bad.write_bytes(b"this is not a tar archive at all" * 20)
    with pytest.raises(RuntimeError, match="Tar error"):
        tar.untar(str(bad), str(tmp_path / "out"))


def build_archive(path: Path, members):
    """members: (name, kind, payload) with kind 'file', 'dir', 'sym', 'hard' or 'fifo'."""
    with tarfile.open(path, "w") as archive:
        for name, kind, payload in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                data = payload.encode()
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
                continue
            if kind == "dir":
                info.type = tarfile.DIRTYPE
            elif kind == "sym":
                info.type, info.linkname = tarfile.SYMTYPE, payload
            elif kind == "hard":
                info.type, info.linkname = tarfile.LNKTYPE, payload
            elif kind == "fifo":
                info.type = tarfile.FIFOTYPE
            archive.addfile(info)


ESCAPES = {
    "absolute": ([("ok.txt", "file", "x"), ("/tmp/evil.txt", "file", "x")], "/tmp/evil.txt"),
    "dotdot": ([("ok.txt", "file", "x"), ("a/../../evil.txt", "file", "x")], "a/../../evil.txt"),
    "symlink-absolute": ([("ok.txt", "file", "x"), ("link", "sym", "/etc")], "link"),
    "symlink-outside": ([("ok.txt", "file", "x"), ("d/link", "sym", "../../x")], "d/link"),
    "through-symlink": (
        [
            ("ok.txt", "file", "x"),
            ("up", "sym", "sub/.."),
            ("sub", "dir", ""),
            ("up/../e", "file", ""),
        ],
        "up/../e",
    ),
    "symlink-chain": (
        [
            ("ok.txt", "file", "x"),
            ("l", "sym", "."),
            ("l/m", "sym", ".."),
            ("l/m/evil", "file", "x"),
        ],
        "l/m",
    ),
    "hardlink-outside": ([("ok.txt", "file", "x"), ("h", "hard", "../secret")], "h"),
    "fifo": ([("ok.txt", "file", "x"), ("pipe", "fifo", "")], "pipe"),
}


@pytest.mark.parametrize("case", sorted(ESCAPES))
def test_untar_rejects_escaping_members_and_extracts_nothing(tmp_path, case):
    members, offender = ESCAPES[case]
    archive = tmp_path / "evil.tar"
    build_archive(archive, members)
    out = tmp_path / "nested" / "out"
    with pytest.raises(RuntimeError, match="refusing to extract") as info:
        tar.untar(str(archive), str(out))
    assert repr(offender) in str(info.value)
    assert "nothing was extracted" in str(info.value)
    assert not out.exists() or list(out.iterdir()) == []
    assert not (tmp_path / "nested" / "evil.txt").exists()
    assert not (tmp_path / "e").exists()


def test_untar_refuses_writing_through_existing_link(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(outside, out / "dir")
    archive = tmp_path / "a.tar"
    build_archive(archive, [("dir/file.txt", "file", "x")])
    with pytest.raises(RuntimeError, match=r"'dir/file.txt'.*outside"):
        tar.untar(str(archive), str(out))
    assert list(outside.iterdir()) == []


def test_untar_accepts_links_that_stay_inside(tmp_path):
    archive = tmp_path / "ok.tar"
    build_archive(
        archive,
        [
            ("sub", "dir", ""),
            ("sub/data.txt", "file", "payload"),
            ("alias", "sym", "sub/data.txt"),
            ("sub/up", "sym", "../sub"),
            ("hard.txt", "hard", "sub/data.txt"),
            ("sub/../top.txt", "file", "top"),
        ],
    )
    out = tmp_path / "out"
    tar.untar(str(archive), str(out))
    assert (out / "alias").read_text() == "payload"
    assert (out / "hard.txt").read_text() == "payload"
    assert (out / "top.txt").read_text() == "top"


def test_normalize_file_list_by_unpacking_tars(tmp_path):
    files = make_files(tmp_path / "src", ["one.o", "two.o"])
    bundle = tmp_path / "bundle.tar"
    tar.tar(str(bundle), files)
    plain = make_files(tmp_path, ["plain.o"])[0]
    with utils.tempdir() as temp:
        result = tar.normalize_file_list_by_unpacking_tars(temp, [plain, str(bundle)])
        assert result[0] == plain
        assert sorted(os.path.basename(p) for p in result[1:]) == ["one.o", "two.o"]
        assert all(p.startswith(temp.relpath("temp0")) for p in result[1:])
