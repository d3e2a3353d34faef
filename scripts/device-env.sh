# The GPU machine's environment for memprof's checks, sourced from the repository root by the
# scripts that run there: its torch venv, libtorch's libraries, and the device build in .device
# (scripts/build-device.sh) for the integration tests (MEMPROF_NATIVE: the in-process tests'
# native core; the checkout's package is put on their PYTHONPATH). MEMPROF_BIN, where set, names
# another memprof to check (the wheel's: /opt/torch/.venv/bin/memprof after benches/device_wheel.sh).
export VIRTUAL_ENV=/opt/torch/.venv PATH=/opt/torch/.venv/bin:$PATH
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/torch/lib
export MEMPROF_BIN=${MEMPROF_BIN:-$PWD/.device/memprof} MEMPROF_REPO=$PWD MEMPROF_TEST_DEVICE=cuda
export MEMPROF_NATIVE=$PWD/.device/libmemprof.so
