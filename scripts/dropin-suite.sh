#!/usr/bin/env bash
# Runs the test suite of apache-tvm-ffi 0.1.15.post2 (its source distribution's tests/python)
# against our native library put in place of the package's own lib/libtvm_ffi.so, file by file,
# and against apache-tvm-ffi's library for the baseline.
#
# Set-up (cached under target/dropin and .venv-dropin; rerun with --fresh to redo it):
#   - a virtual environment .venv-dropin with the package's wheel, ninja (its C++ build tests),
#     pytest, numpy and ml_dtypes;
#   - the sdist, fetched with `pip download` and unpacked (the tests);
#   - two private site directories holding a copy of the installed package and its dist-info
#     (whose RECORD is how the package finds lib/libtvm_ffi.so): site-apache as installed,
#     site-ours with our library as lib/libtvm_ffi.so. apache-tvm-ffi's testing library
#     (lib/libtvm_ffi_testing.so) stays in both: it must load on ours.
#
# Each test file runs in a process of its own (scripts/dropin_suite.py), so a crash loses one
# file's remaining tests, never the run; logs go to target/dropin/logs/<side>/. Exits non-zero
# when a test fails or a file crashes on either side (both pass the whole suite).
#
# Usage: bash scripts/dropin-suite.sh [--lib PATH] [--side ours|apache|both] [--timeout S]
#                                     [--stub-missing] [--fresh] [TEST_FILE...]
#   --lib      the library to test (default: tvm/lib/libtvm_ffi.so of the worktree's .venv, the dev
#              wheel that `source scripts/python-env.sh && install_python_package` installs)
#   --side     which library to run the suite on (default: both)
#   --timeout  seconds per test file (default: 600)
#   --stub-missing  a measurement aid, not a drop-in run: before the package imports, register
#              each `ffi.*` global and type key apache-tvm-ffi has and ours lacks, the globals as
#              functions raising NotImplementedError (scripts/dropin_stub.py), so that the tests
#              not needing them run while the runtime is incomplete
#   TEST_FILE  paths relative to tests/python of the sdist (default: every test_*.py)
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.1.15.post2
work=$PWD/target/dropin
venv=$PWD/.venv-dropin
lib=""
side=both
timeout=600
stub=0
files=()
while (($#)); do
    case $1 in
    --lib) lib=$2; shift 2 ;;
    --side) side=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --stub-missing) stub=1; shift ;;
    --fresh) rm -rf "$work" "$venv"; shift ;;
    -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "dropin-suite: unknown option $1" >&2; exit 2 ;;
    *) files+=("$1"); shift ;;
    esac
done
case $side in
ours | apache | both) ;;
*) echo "dropin-suite: --side must be ours, apache or both, got '$side'" >&2; exit 2 ;;
esac

if [[ -z $lib ]]; then
    mapfile -t found < <(compgen -G ".venv/lib/python3*/site-packages/tvm/lib/libtvm_ffi.so" || true)
    if ((${#found[@]} != 1)); then
        echo "dropin-suite: no --lib given and no single tvm/lib/libtvm_ffi.so in .venv (found:" \
            "${found[*]:-none}); build the dev wheel first (scripts/python-env.sh)" >&2
        exit 1
    fi
    lib=${found[0]}
fi
if [[ $side != apache && ! -f $lib ]]; then
    echo "dropin-suite: the library '$lib' does not exist" >&2
    exit 1
fi

# The environment with apache-tvm-ffi's package and the tools its tests use.
if ! "$venv/bin/python" -c "import tvm_ffi, ninja, pytest" >/dev/null 2>&1; then
    python3 -m venv --clear "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "apache-tvm-ffi==$version" ninja pytest numpy ml_dtypes
fi
py=$venv/bin/python
# The tests run ninja (and the compilers) by name.
export PATH="$venv/bin:$PATH"

# The source distribution: only the package itself comes as source (its build tools, which pip
# installs to read the sdist's metadata, come as wheels; from source they take an hour).
src=$work/src/apache_tvm_ffi-$version
if [[ ! -d $src/tests/python ]]; then
    mkdir -p "$work/sdist" "$work/src"
    "$py" -m pip download --quiet --disable-pip-version-check --no-deps \
        --no-binary apache-tvm-ffi -d "$work/sdist" "apache-tvm-ffi==$version"
    tar -xzf "$work/sdist/apache_tvm_ffi-$version.tar.gz" -C "$work/src"
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

status=0
sides=()
[[ $side != ours ]] && sides+=(apache)
[[ $side != apache ]] && sides+=(ours)
for s in "${sides[@]}"; do
    if [[ $s == ours ]]; then
        make_site "$work/site-ours" "$lib"
        echo "== ours: $(readlink -f "$lib")"
        if ((stub)); then
            make_site "$work/site-spec"
            PYTHONPATH=$work/site-spec "$py" scripts/dropin_stub.py dump \
                "$work/site-spec/tvm_ffi/lib/libtvm_ffi.so" "$work/apache-spec.json"
            cp scripts/dropin_stub.py "$work/site-ours/sitecustomize.py"
            export STUB_SPEC=$work/apache-spec.json STUB_LIB=$work/site-ours/tvm_ffi/lib/libtvm_ffi.so
            echo "== with apache-tvm-ffi's missing ffi.* globals and types stubbed (--stub-missing)"
        fi
    else
        make_site "$work/site-apache"
        echo "== apache: apache-tvm-ffi $version"
    fi
    "$py" scripts/dropin_suite.py --site "$work/site-$s" --tests "$src/tests/python" \
        --logs "$work/logs/$s" --timeout "$timeout" "${files[@]}" || status=1
done
exit $status
