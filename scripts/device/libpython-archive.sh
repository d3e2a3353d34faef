#!/usr/bin/env bash
# Runs on the GPU machine: copies its static libpython3.12.a (Ubuntu's libpython3.12-dev) to $OUT,
# so that scripts/build-device.sh can link memprof for it as python3 is linked. Once per machine:
#   run(command="scripts/device/libpython-archive.sh")
#   then: mkdir -p target/device-libpython && cp <files_at>/libpython3.12.a target/device-libpython/
set -euo pipefail
a=$(python3.12 -c 'import sysconfig as s; print(s.get_config_var("LIBPL") + "/" + s.get_config_var("LIBRARY"))')
python3.12 -c 'import sys; print(sys.version)'
sha256sum "$a"
cp "$a" "${OUT:?}/"
