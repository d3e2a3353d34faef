#!/usr/bin/env bash
# Packs this machine's perf with the shared libraries it needs into .device/perf (or $1), for
# benches/cpu_profile.sh on the GPU machine, which has no perf: every library ldd lists but libc,
# libm, libstdc++, libgcc_s and the loader, which the GPU machine has in newer versions.
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:-.device/perf}
perf=$(command -v perf) || { echo "perf-bundle: no perf on this machine (apt install linux-perf)" >&2; exit 2; }
rm -rf "$dest" && mkdir -p "$dest/lib"
cp "$perf" "$dest/perf"
ldd "$perf" | awk '/=>/ {print $3}' | grep -vE '/(libc|libm|libstdc\+\+|libgcc_s)\.so|ld-linux' |
  while read -r lib; do cp -L "$lib" "$dest/lib/"; done
du -sh "$dest"
