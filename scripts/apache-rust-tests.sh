#!/usr/bin/env bash
# Runs the tests of apache-tvm-ffi 0.1.15.post2's Rust crates (the rust/ workspace of its source
# distribution: tvm-ffi-sys, tvm-ffi, tvm-ffi-macros) against our native library and against
# apache-tvm-ffi's, with no Python in the test processes (no LD_PRELOAD of libpython: the library
# must stand alone).
#
# How their build finds the library: tvm-ffi-sys's build script links libtvm_ffi (and, for the
# tests, libtvm_ffi_testing) from the directory that `tvm-ffi-config --libdir` prints. Here that
# is the package's own tvm-ffi-config, run from a private copy of the installed package and its
# dist-info (its RECORD is how the package finds lib/libtvm_ffi.so) put first on PYTHONPATH:
# site-apache as installed, site-ours with our library as lib/libtvm_ffi.so. Apache-tvm-ffi's
# lib/libtvm_ffi_testing.so stays in both: it must load on ours. The same directory is the
# loader path of the test binaries (LD_LIBRARY_PATH), and the script checks that it holds the
# library asked for and that the binaries do not load libpython.
#
# Set-up (cached under target/apache-rust; rerun with --fresh to redo it):
#   - a virtual environment target/apache-rust/venv with the package's wheel (for tvm-ffi-config
#     and apache-tvm-ffi's libraries);
#   - the sdist (target/dropin/sdist's when scripts/dropin-suite.sh fetched it, else
#     `pip download`), whose rust/ folder is unpacked into target/apache-rust/src (cargo writes
#     its Cargo.lock there; the crates' dependencies come from crates.io the first time);
#   - one cargo target directory per side (target/apache-rust/target-<side>), as the build
#     scripts do not rerun when only the library directory changes.
#
# Prints cargo's own lines (`Running ...`, `test result: ...`) per side, then a total per side;
# full logs in target/apache-rust/logs/<side>.log. Exits non-zero when a side fails.
#
# Usage: bash scripts/apache-rust-tests.sh [--lib PATH] [--side ours|apache|both] [--fresh]
#   --lib   our library (default: tvm/lib/libtvm_ffi.so of the worktree's .venv, the dev wheel);
#           pass a private copy when the wheel may be rebuilt during the run
#   --side  which library to test (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.1.15.post2
work=$PWD/target/apache-rust
lib=""
side=both
while (($#)); do
    case $1 in
    --lib) lib=$2; shift 2 ;;
    --side) side=$2; shift 2 ;;
    --fresh) rm -rf "$work"; shift ;;
    -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "apache-rust-tests: unknown argument $1" >&2; exit 2 ;;
    esac
done
case $side in
ours | apache | both) ;;
*) echo "apache-rust-tests: --side must be ours, apache or both, got '$side'" >&2; exit 2 ;;
esac
if [[ $side != apache ]]; then
    if [[ -z $lib ]]; then
        mapfile -t found < <(compgen -G ".venv/lib/python3*/site-packages/tvm/lib/libtvm_ffi.so" || true)
        if ((${#found[@]} != 1)); then
            echo "apache-rust-tests: no --lib given and no single tvm/lib/libtvm_ffi.so in .venv" \
                "(found: ${found[*]:-none}); build the dev wheel first (scripts/python-env.sh)" >&2
            exit 1
        fi
        lib=${found[0]}
    fi
    if [[ ! -f $lib ]]; then
        echo "apache-rust-tests: the library '$lib' does not exist" >&2
        exit 1
    fi
    lib=$(readlink -f "$lib")
fi

# The environment with apache-tvm-ffi's package (tvm-ffi-config and apache-tvm-ffi's libraries).
venv=$work/venv
if ! "$venv/bin/python" -c "import tvm_ffi.config" >/dev/null 2>&1; then
    python3 -m venv --clear "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "apache-tvm-ffi==$version"
fi
py=$venv/bin/python

# The crates, from the source distribution.
src=$work/src
if [[ ! -f $src/Cargo.toml ]]; then
    sdist=$PWD/target/dropin/sdist/apache_tvm_ffi-$version.tar.gz
    if [[ ! -f $sdist ]]; then
        mkdir -p "$work/sdist"
        "$py" -m pip download --quiet --disable-pip-version-check --no-deps \
            --no-binary apache-tvm-ffi -d "$work/sdist" "apache-tvm-ffi==$version"
        sdist=$work/sdist/apache_tvm_ffi-$version.tar.gz
    fi
    rm -rf "$work/unpack" "$src"
    mkdir -p "$work/unpack"
    tar -xzf "$sdist" -C "$work/unpack" "apache_tvm_ffi-$version/rust"
    mv "$work/unpack/apache_tvm_ffi-$version/rust" "$src"
    rm -rf "$work/unpack"
fi

# The private site directories: copies of the installed package and its dist-info.
site_packages=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
make_site() { # make_site DIR [LIBRARY]
    rm -rf "$1"
    mkdir -p "$1"
    cp -a "$site_packages/tvm_ffi" "$site_packages"/apache_tvm_ffi-"$version".dist-info "$1/"
    if [[ -n ${2:-} ]]; then
        cp --remove-destination "$2" "$1/tvm_ffi/lib/libtvm_ffi.so"
    fi
}

mkdir -p "$work/logs"
sides=()
[[ $side != ours ]] && sides+=(apache)
[[ $side != apache ]] && sides+=(ours)
status=0
totals=()
for s in "${sides[@]}"; do
    site=$work/site-$s
    if [[ $s == ours ]]; then
        make_site "$site" "$lib"
        expected=$lib
    else
        make_site "$site"
        expected=$site_packages/tvm_ffi/lib/libtvm_ffi.so
    fi
    libdir=$(PYTHONPATH=$site "$venv/bin/tvm-ffi-config" --libdir)
    if ! cmp -s "$libdir/libtvm_ffi.so" "$expected"; then
        echo "apache-rust-tests: tvm-ffi-config --libdir printed '$libdir', whose libtvm_ffi.so" \
            "is not '$expected'" >&2
        exit 1
    fi
    echo "== $s: $(readlink -f "$expected") (tvm-ffi-config --libdir: $libdir)"
    log=$work/logs/$s.log
    # The build scripts run tvm-ffi-config from PATH; the test binaries find the libraries through
    # LD_LIBRARY_PATH, and nothing is preloaded.
    rc=0
    (
        cd "$src"
        unset LD_PRELOAD
        # (line tables only, no incremental state: the crates do not change, backtraces keep
        # their lines, and the two target dirs stay small)
        PATH="$venv/bin:$PATH" PYTHONPATH=$site CARGO_TARGET_DIR=$work/target-$s \
            CARGO_PROFILE_DEV_DEBUG=line-tables-only CARGO_INCREMENTAL=0 \
            LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
            cargo test --workspace --no-fail-fast --color never
    ) >"$log" 2>&1 || rc=$?
    grep -E '^\s*(Running|Doc-tests) |^test result: |^error(\[|:)|^\s+`-p |^warning: build failed' \
        "$log" || true
    # What the test binaries load: the library from the site copy, and no libpython.
    mapfile -t binaries < <(find "$work/target-$s/debug/deps" -maxdepth 1 -type f -executable \
        -name 'test_*' ! -name '*.so' ! -name '*.d' | sort)
    with_python=()
    for binary in "${binaries[@]}"; do
        loaded=$(LD_LIBRARY_PATH=$libdir ldd "$binary")
        grep -q libpython <<<"$loaded" && with_python+=("$binary")
    done
    if ((${#binaries[@]})); then
        LD_LIBRARY_PATH=$libdir ldd "${binaries[0]}" | grep -E 'libtvm_ffi' | sed 's/^\s*/   ldd: /'
        echo "   ${#binaries[@]} test binaries, ${#with_python[@]} loading libpython"
    fi
    if ((${#with_python[@]})); then
        printf 'apache-rust-tests: loads libpython: %s\n' "${with_python[@]}" >&2
        rc=1
    fi
    read -r passed failed ignored < <(awk '/^test result: /{
        for (i = 1; i <= NF; i++) {
            if ($(i + 1) ~ /^passed/) p += $i
            if ($(i + 1) ~ /^failed/) f += $i
            if ($(i + 1) ~ /^ignored/) g += $i
        }} END { print p + 0, f + 0, g + 0 }' "$log")
    totals+=("$s: $passed passed, $failed failed, $ignored ignored (cargo exit $rc; log $log)")
    ((rc == 0)) || status=1
done
echo "== apache-tvm-ffi $version rust/ tests"
printf '   %s\n' "${totals[@]}"
exit "$status"
