#!/usr/bin/env bash
# Sourced by the benchmarks that run a worker per GPU (modes_cost.sh, paired_cost.sh): `gpus`
# from GPUS (default 0), and `cores_of I`, the cores of the I-th GPU's processes: the same for
# every process on that GPU, CORES_PER_GPU of them (default 8) from core 2 (not core 0, where
# interrupts land), where there are enough; on a small machine, all of them.
gpus=(${GPUS:-0})
per_gpu=${CORES_PER_GPU:-8}
cores_of() {
  local i=$1
  if [ "$(nproc)" -ge $((2 + per_gpu * ${#gpus[@]})) ]; then
    echo "$((2 + i * per_gpu))-$((1 + (i + 1) * per_gpu))"
  else
    echo "0-$(($(nproc) - 1))"
  fi
}
