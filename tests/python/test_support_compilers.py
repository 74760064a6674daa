"""tvm.support.xcode, ndk, clang, emcc and rocm running their tools: stand-ins on PATH record
their command lines and write the outputs the real tools would, so that the commands, the
results and the error messages are checked without Xcode, the NDK, LLVM, Emscripten or ROCm."""

import warnings

import pytest

from stand_ins import fake_tool, logged_args, recording_tool
from tvm.support import clang, emcc, ndk, rocm, xcode

# ---- xcode ---------------------------------------------------------------------------------

# xcrun answers `-find clang` and `--show-sdk-path`, runs the tools named after the SDK
# (metal, metallib) by writing their command line to their `-o` output, and appends each
# command line to a log.
XCRUN = """\
echo "$@" >> "{log}"
all="$*"
case "$*" in
  *"-find clang") echo "{bin}/clang" ;;
  *--show-sdk-path) echo "/SDKs/$2.sdk" ;;
  *) while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then printf "%s" "$all" > "$2"; fi; shift; done ;;
esac
"""


@pytest.fixture
def xcrun_log(bare_path, tmp_path):
    log = tmp_path / "xcrun.log"
    fake_tool(bare_path, "xcrun", XCRUN.format(log=log, bin=bare_path))
    return log


def test_xcrun_output_and_failure(bare_path, xcrun_log):
    assert xcode.xcrun(["-sdk", "iphoneos", "--show-sdk-path"]) == "/SDKs/iphoneos.sdk"
    fake_tool(bare_path, "xcrun", 'echo "xcrun: error: unable to find utility"; exit 72')
    with pytest.raises(RuntimeError, match=r"xcrun -find nope failed:\nxcrun: error: unable"):
        xcode.xcrun(["-find", "nope"])


@pytest.mark.parametrize(
    ("sdk", "min_os", "flag"),
    [
        ("macosx", None, []),
        ("macosx", "12.0", ["-mmacosx-version-min=12.0"]),
        ("iphoneos", None, ["-mios-version-min=13.0"]),
        ("iphonesimulator", "15.1", ["-mios-version-min=15.1"]),
        ("appletvos", "15.0", []),
    ],
)
def test_create_dylib_command_line(bare_path, xcrun_log, tmp_path, sdk, min_os, flag):
    clang_log = tmp_path / "clang.args"
    recording_tool(bare_path, "clang", clang_log, output="DYLIB")
    output = tmp_path / "lib.dylib"
    xcode.create_dylib(str(output), "a.o", arch="arm64", sdk=sdk, min_os_version=min_os)
    assert logged_args(clang_log) == [
        "-dynamiclib",
        "-arch",
        "arm64",
        "-isysroot",
        f"/SDKs/{sdk}.sdk",
        *flag,
        "-o",
        str(output),
        "a.o",
    ]
    assert output.read_text() == "DYLIB"


def test_create_dylib_link_error(bare_path, xcrun_log, tmp_path):
    fake_tool(bare_path, "clang", 'echo "ld: symbol(s) not found for architecture arm64"; exit 1')
    with pytest.raises(RuntimeError, match=r"Compilation error:\nld: symbol\(s\) not found"):
        xcode.create_dylib(str(tmp_path / "lib.dylib"), ["a.o", "b.o"], arch="arm64")


def test_compile_metal_steps_and_result(xcrun_log, tmp_path):
    target = tmp_path / "kernels.metallib"
    result = xcode.compile_metal(
        "kernel void k() {}", path_target=str(target), sdk="iphoneos", min_os_version="14.0"
    )
    assert result == bytearray(target.read_bytes())
    assert result.decode().startswith("-sdk iphoneos metallib ") and b"my_lib.air -o" in result
    metal, metallib = xcrun_log.read_text().splitlines()
    assert metal.startswith("-sdk iphoneos metal -std=ios-metal2.3 -O3 -c ")
    assert metal.endswith("my_lib.air -mios-version-min=14.0")
    assert metallib.startswith("-sdk iphoneos metallib ") and metallib.endswith(f"-o {target}")
    result = xcode.compile_metal("kernel void k() {}")  # for macOS, into a temporary file
    assert result is not None and result.startswith(b"-sdk macosx metallib ")
    assert "-std=macos-metal2.3" in xcrun_log.read_text().splitlines()[2]


def test_compile_coreml_saves_and_compiles(xcrun_log, tmp_path):
    class Model:
        def save(self, path):
            self.saved = path

    model = Model()
    assert xcode.compile_coreml(model, "net", str(tmp_path)) == str(tmp_path / "net.mlmodelc")
    assert model.saved == str(tmp_path / "net.mlmodel")
    assert xcrun_log.read_text() == f"coremlcompiler compile {model.saved} {tmp_path}\n"


# ---- ndk -----------------------------------------------------------------------------------


@pytest.fixture
def ndk_bin(bare_path, tmp_path, monkeypatch):
    """An NDK toolchain bin directory with a clang++ stand-in that TVM_NDK_CC names."""
    directory = tmp_path / "ndk" / "bin"
    recording_tool(directory, "aarch64-linux-android33-clang++", tmp_path / "cc.args", "SO")
    monkeypatch.setenv("TVM_NDK_CC", str(directory / "aarch64-linux-android33-clang++"))
    return directory


def test_ndk_create_shared_command_line(ndk_bin, tmp_path):
    ndk.create_shared(str(tmp_path / "lib.so"), "a.o")
    assert logged_args(tmp_path / "cc.args") == [
        "-o",
        str(tmp_path / "lib.so"),
        "a.o",
        "-shared",
        "-fPIC",
        "-lm",
    ]
    ndk.create_shared(str(tmp_path / "lib.so"), ["a.o", "b.o"], options=["-shared", "-static"])
    assert logged_args(tmp_path / "cc.args")[2:] == ["a.o", "b.o", "-shared", "-static"]
    fake_tool(ndk_bin, "aarch64-linux-android33-clang++", 'echo "ld: undefined symbol: f"; exit 1')
    with pytest.raises(RuntimeError, match=r"Compilation error:\nld: undefined symbol: f"):
        ndk.create_shared(str(tmp_path / "lib.so"), "a.o")
    (ndk_bin / "aarch64-linux-android33-clang++").write_text("no interpreter line")
    with pytest.raises(RuntimeError, match=r"cannot run .*clang\+\+: "):
        ndk.create_shared(str(tmp_path / "lib.so"), "a.o")


def test_ndk_static_library_with_the_tools_beside_the_compiler(ndk_bin, tmp_path):
    with pytest.raises(RuntimeError, match=r"llvm-ar was not found next to TVM_NDK_CC"):
        ndk.create_staticlib(str(tmp_path / "lib.a"), ["a.o"])
    log = tmp_path / "tools.log"
    for tool in ("llvm-ar", "llvm-ranlib"):
        fake_tool(ndk_bin, tool, f'echo "${{0##*/}} $*" >> "{log}"')
    ndk.create_staticlib(str(tmp_path / "lib.a"), [str(tmp_path / "a.o")])
    assert log.read_text().splitlines() == [
        f"llvm-ar qcs {tmp_path / 'lib.a'} {tmp_path / 'a.o'}",
        f"llvm-ranlib {tmp_path / 'lib.a'}",
    ]
    fake_tool(ndk_bin, "llvm-ranlib", "echo bad archive; exit 1")
    with pytest.raises(RuntimeError, match=r"creation error \(ranlib\):\nbad archive"):
        ndk.create_staticlib(str(tmp_path / "lib.a"), "a.o")


def test_ndk_symbol_map_uses_llvm_nm(ndk_bin, tmp_path):
    (tmp_path / "lib.a").write_bytes(b"!<arch>\n")
    fake_tool(ndk_bin, "llvm-nm", 'echo "0000000000001000 T kernel_main"\necho "         U memcpy"')
    assert ndk.get_global_symbol_section_map(str(tmp_path / "lib.a")) == {"kernel_main": "T"}


def test_ndk_export_of_a_module(ndk_bin, tmp_path):
    class Module:
        def export_library(self, path, fcompile):
            self.exported = (path, fcompile)

    module = Module()
    path = ndk._export_ndk(module)
    assert module.exported == (path, ndk.create_shared)
    assert path.endswith("tmp_binary.so") and ndk._EXPORT_DIRS[-1].relpath("") in path


# ---- clang and emcc ------------------------------------------------------------------------


def test_clang_versions_best_first_and_source_files(bare_path, tmp_path):
    for name in ("clang-14", "clang-17", "clang-9.0"):
        fake_tool(bare_path, name, "exit 0")
    (bare_path / "clang-18").write_text("")  # not executable: not a candidate
    assert clang.find_clang() == ["clang-17", "clang-14", "clang-9.0"]
    log = tmp_path / "clang.args"
    recording_tool(bare_path, "clang-17", log, output="; IR")
    source = tmp_path / "kernel.c"
    source.write_text("int f(void) { return 1; }")
    output = tmp_path / "kernel.ll"
    assert clang.create_llvm(str(source), output=str(output)) == "; IR"
    assert logged_args(log) == ["-S", "-emit-llvm", "-o", str(output), str(source)]
    fake_tool(bare_path, "clang-17", 'echo "kernel.c:1: error: expected ;"; exit 1')
    with pytest.raises(RuntimeError, match=r"(?s)expected ;\n\nCommand line: clang-17 -S"):
        clang.create_llvm(str(source))
    (bare_path / "clang-17").write_text("no interpreter line")
    with pytest.raises(RuntimeError, match="cannot run clang-17"):
        clang.create_llvm(str(source))


@pytest.fixture
def wasm_home(tmp_path, monkeypatch):
    dist = tmp_path / "home" / "web" / "dist" / "wasm"
    dist.mkdir(parents=True)
    for name in ("wasm_runtime.bc", "tvmjs_support.bc", "webgpu_runtime.bc"):
        (dist / name).write_bytes(b"")
    monkeypatch.setenv("TVM_HOME", str(tmp_path / "home"))
    return dist


def test_emcc_with_the_runtime_among_the_inputs_and_failures(bare_path, wasm_home, tmp_path):
    log = tmp_path / "emcc.args"
    recording_tool(bare_path, "emcc", log)
    extra = tmp_path / "extra.bc"
    extra.write_bytes(b"")
    own_runtime = str(tmp_path / "wasm_runtime.bc")
    emcc.create_tvmjs_wasm(str(tmp_path / "o.wasm"), own_runtime, libs=[str(extra)])
    args = logged_args(log)
    assert str(wasm_home / "wasm_runtime.bc") not in args, "the inputs bring their own runtime"
    assert args[-6:] == [
        str(wasm_home / "tvmjs_support.bc"),
        str(wasm_home / "webgpu_runtime.bc"),
        str(extra),
        own_runtime,
        "-o",
        str(tmp_path / "o.wasm"),
    ]
    fake_tool(bare_path, "emcc", 'echo "wasm-ld: error: duplicate symbol"; exit 1')
    with pytest.raises(RuntimeError, match=r"Compilation error:\nwasm-ld: error: duplicate"):
        emcc.create_tvmjs_wasm(str(tmp_path / "o.wasm"), ["m.bc"])
    (bare_path / "emcc").write_text("no interpreter line")
    with pytest.raises(RuntimeError, match="cannot run emcc"):
        emcc.create_tvmjs_wasm(str(tmp_path / "o.wasm"), ["m.bc"])


# ---- rocm ----------------------------------------------------------------------------------


def test_rocm_found_from_hipcc_and_its_tools(bare_path, tmp_path):
    root = tmp_path / "rocm"
    fake_tool(root / "bin", "hipcc", "exit 0")
    (bare_path / "hipcc").symlink_to(root / "bin" / "hipcc")
    assert rocm.find_rocm_path() == str(root), "the directory above the real bin/hipcc"
    fake_tool(root / "bin", "rocminfo", 'echo "  Name:  gfx1100"')
    assert rocm.get_rocm_arch() == "gfx1100"
    assert rocm.have_matrixcore(), "gfx1100 is version 11.0"
    fake_tool(root / "bin", "rocminfo", 'echo "  Name:  gfx9"')
    with pytest.raises(RuntimeError, match="cannot read a version from the ROCm architecture"):
        rocm.have_matrixcore()
    # bitcode under lib/ (some packagings), without the abi-version file of older releases
    for name in rocm._BITCODE_NAMES[:-1]:
        (root / "lib").mkdir(exist_ok=True)
        (root / "lib" / f"{name}.bc").write_bytes(b"")
    paths = rocm.callback_rocm_bitcode_path()
    assert [p.rsplit("/", 1)[1] for p in paths] == [f"{n}.bc" for n in rocm._BITCODE_NAMES[:-1]]


def test_rocm_arch_when_rocminfo_cannot_tell(bare_path, tmp_path):
    root = tmp_path / "rocm"
    fake_tool(root / "bin", "rocminfo", 'echo "HSA agents: none"')
    with pytest.warns(UserWarning, match="cannot detect the ROCm GPU architecture"):
        assert rocm.get_rocm_arch(str(root)) == "gfx900"
    (root / "bin" / "rocminfo").write_text("no interpreter line")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert rocm.get_rocm_arch(str(root)) == "gfx900"
    assert len(caught) == 1


def test_rocm_link_errors(bare_path, tmp_path, monkeypatch):
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "rocm"))
    linker = fake_tool(tmp_path / "rocm" / "llvm" / "bin", "ld.lld", "echo undefined: f; exit 1")
    assert rocm.find_lld() == [str(linker)]
    with pytest.raises(RuntimeError, match=r"(?s)Linking error using ld.lld:\nundefined: f\n"):
        rocm.rocm_link("in.o", str(tmp_path / "out.co"))
    linker.write_text("no interpreter line")
    with pytest.raises(RuntimeError, match=r"cannot run .*ld\.lld: .*pass lld="):
        rocm.rocm_link("in.o", str(tmp_path / "out.co"))


def test_rocm_versioned_lld_first_and_missing_bitcode(bare_path, tmp_path, monkeypatch):
    for name in ("ld.lld-15", "ld.lld-17.0", "ld.lld-x"):
        fake_tool(bare_path, name, "exit 0")
    fake_tool(bare_path, "ld.lld", "exit 0")
    assert rocm.find_lld()[:3] == ["ld.lld-17.0", "ld.lld-15", "ld.lld"]
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "empty-rocm"))
    with pytest.raises(RuntimeError, match=r"empty-rocm/amdgcn/bitcode/oclc_daz_opt_on.bc does"):
        rocm.callback_rocm_bitcode_path()
