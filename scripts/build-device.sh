#!/usr/bin/env bash
# Builds, here, what scripts/gpu-check.sh runs on the GPU machine: the release binary for its
# Python 3.12 and torch 2.11.0+cu130 (through ../shared/gpu/build-for-device.sh) and the
# integration test binary, all into .device/ (git-ignored). Then, with the device tool:
#   run(command="scripts/gpu-check.sh", carry=[".device"])
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${MEMPROF_SHARED:-../shared}
scripts/setup.sh debug >/dev/null
# A working copy of the shared build kit: its libpython3.12.so may arrive as a text file naming
# its target instead of a symlink, which the linker cannot read.
kit=target/gpu-kit
rm -rf "$kit" && mkdir -p target && cp -r "$shared/gpu" "$kit" && chmod -R u+w "$kit"
ln -sf libpython3.12.so.1.0 "$kit/py312/libpython3.12.so"
# .device/memprof-embedded and the test binaries link the GPU machine's static libpython3.12.a, as python3
# is linked there (build/libpython.rs), when target/device-libpython holds a copy of it
# (scripts/device/libpython-archive.sh says how to fetch it); else the shared library.
d=$PWD/target/device-libpython
if [ -f "$d/libpython3.12.a" ]; then
  # glibc 2.38's C23 entry points, which the archive calls and this machine's glibc lacks.
  cc -O2 -c scripts/device/glibc238.c -o "$d/glibc238.o"
  # The GPU machine's libexpat (2.6) has functions this machine's lacks: link against a stub of
  # the same SONAME; the real library loads there.
  nm -u "$d/libpython3.12.a" 2>/dev/null | awk '$2 ~ /^XML_/ {print "void " $2 "(void) {}"}' |
    sort -u >"$d/expat_stub.c"
  cc -shared -fPIC "$d/expat_stub.c" -o "$d/libexpat.so.1" -Wl,-soname,libexpat.so.1
  export MEMPROF_LIBPYTHON=static MEMPROF_LIBPYTHON_ARCHIVE=$d/libpython3.12.a
  export MEMPROF_LIBPYTHON_LIBS="$d/glibc238.o $d/libexpat.so.1 -lz -lm -ldl"
else
  echo "build-device: no $d/libpython3.12.a: .device/memprof links the shared libpython" \
    "(scripts/device/libpython-archive.sh fetches the archive)" >&2
  export MEMPROF_LIBPYTHON=shared
fi
# The binaries and the native core's cdylib (the extension), then the test binaries.
"$kit/build-for-device.sh" --features tch >/dev/null
"$kit/build-for-device.sh" --features tch --tests >/dev/null
# memprof's torch library for torch 2.11, beside the binaries and the native core (where the
# core looks for it: src/torch/loader.rs).
rm -rf .device/torch_shims .device/libmemprof_torch-*.so && mkdir -p .device/torch_shims
cp target/device/release/torch_shims/libmemprof_torch-2.11.so .device/torch_shims/
# The wheel for its Python, as scripts/release.sh builds every wheel (manylinux_2_28, every
# torch library; here only 2.11's, the machine's torch), installed there by name from its index
# (scripts/gpu-wheel-check.sh).
rm -rf .device/wheel .device/memprof-shared .device/pywheels
scripts/release.sh --python 3.12 --torch 2.11 >/dev/null
mkdir -p .device/wheel && cp -r dist/torch_memprof-*-cp312-*.whl dist/simple .device/wheel/
# pytest and its dependencies for scripts/gpu-inprocess-check.sh (the GPU machine is offline).
.venv/bin/python -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
  --python-version 3.12 --platform manylinux2014_x86_64 --dest .device/pywheels pytest
mkdir -p .device/tests
rm -f .device/tests/*
# The one integration test binary (tests/tests.rs).
exe=$(ls -t target/device/release/deps/integration-* 2>/dev/null | grep -v '\.d$' | head -n 1)
cp "$exe" .device/tests/integration
# The baselines for benches/run.sh: pytorch_memlab 0.3.2 (+ calmsize) and line_profiler 5.1.
mkdir -p .device/wheels && cp "$shared"/gpu/wheels/*.whl .device/wheels/
# benches/libpython_cost.sh's python3.12 through the shared libpython3.12.so (the library memprof
# embeds), to tell that library's cost from memprof's own.
mkdir -p .device/diag
cc -O2 benches/dynpython.c -o .device/diag/dynpython -L"$kit/py312" -l:libpython3.12.so.1.0 \
  -Wl,--allow-shlib-undefined
ls -la .device .device/tests
