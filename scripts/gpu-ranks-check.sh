#!/usr/bin/env bash
# Ranks at scale (issue 51) on four GPUs, in one device call after scripts/build-device.sh here:
#   run(command="scripts/gpu-ranks-check.sh", carry=[".device"], kind="nvidia-h100-x4")
# Through the installed wheel's `memprof` (torch-memprof from .device/wheel, as users run it),
# under torchrun with 4 ranks, each on its own GPU:
#   DDP and FSDP2, eager and compiled (ddp.py --compile: the DDP model compiled; fsdp.py
#   --compile: each block compiled, then sharded), with no flags and with
#   -f train_step --modules --collectives: every rank's peak = its own max_memory_allocated()
#   (scripts/multigpu_check.py *-peak), and for the eager runs with flags the lines' and modules'
#   collective bytes and shards (multigpu_check.py ddp, fsdp);
#   the merge summary of each; one merged page (back in $OUT);
#   --gather over two torchrun "nodes" of two GPUs each (CUDA_VISIBLE_DEVICES 0,1 and 2,3,
#   separate folders): rank 0's folder has all four reports, merged.
# STAGES=eager, STAGES=compiled or STAGES=gather runs one part (default: all). The runs' folders
# are under /tmp/ranks; $OUT gets the whole log (log.txt), every merge (merges.txt) and one merged
# page.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
venv=/opt/torch/.venv
export PATH=$venv/bin:$PATH
unset LD_LIBRARY_PATH VIRTUAL_ENV
out=/tmp/ranks
results=${OUT:-/tmp/ranks-results}
rm -rf "$out" && mkdir -p "$out" "$results"
exec > >(tee "$results/log.txt") 2>&1
stages=${STAGES:-eager,compiled,gather}
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "GPUs", torch.cuda.device_count())'
if command -v uv >/dev/null; then
  uv pip install --quiet --python "$venv/bin/python" --no-index --find-links .device/wheel torch-memprof
else
  /usr/bin/python3 -m pip --python "$venv/bin/python" install --quiet --no-index \
    --find-links .device/wheel --break-system-packages torch-memprof
fi || { echo "gpu-ranks-check: FAILED (install)"; exit 1; }
bin=$venv/bin/memprof
echo "memprof: $bin ($("$bin" --version))"
status=0
# One inductor cache for the compiled runs: the first compiles, the rest read it.
export TORCHINDUCTOR_CACHE_DIR=$(mktemp -d)
launch4() { torchrun --standalone --nproc-per-node 4 --no-python "$bin" run "$@"; }

# case NAME SCRIPT KIND FLAGS... -- SCRIPT_ARGS...: 4 ranks of SCRIPT under memprof FLAGS in
# $out/NAME, each rank's report checked (KIND of multigpu_check.py), then merged.
case_run() {
  local name=$1 script=$2 kind=$3
  shift 3
  local flags=() args=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do flags+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  args=("$@")
  local d=$out/$name
  mkdir -p "$d"
  echo "== $name: torchrun --nproc-per-node 4 --no-python memprof run ${flags[*]} -o 'p.{rank}.json' $script ${args[*]}"
  local t0=$SECONDS
  (cd "$d" && launch4 "${flags[@]}" -o "p.{rank}.json" "$repo/fixtures/multigpu/$script" "$d" "${args[@]}" >"$d/run.log" 2>&1) ||
    { status=1; echo "FAIL: the run"; tail -20 "$d/run.log"; return; }
  echo "   ran in $((SECONDS - t0)) s"
  for k in $kind; do
    python3 scripts/multigpu_check.py "$k" "$d" "$d/p.{rank}.json" | grep -E "FAIL|PASSED|FAILED|the peak = " || status=1
    python3 scripts/multigpu_check.py "$k" "$d" "$d/p.{rank}.json" >/dev/null || status=1
  done
  "$bin" merge "$d"/p.*.json >"$d/merged.txt" || status=1
  { echo "== $name"; cat "$d/merged.txt"; } >>"$results/merges.txt"
  sed -n '/^Peak over/,/^$/p' "$d/merged.txt" | sed -n '3,4p'
}

if [[ $stages == *eager* ]]; then
  case_run ddp-eager ddp.py ddp-peak
  case_run ddp-eager-flags ddp.py "ddp-peak ddp" -f train_step --modules --collectives
  case_run fsdp-eager fsdp.py fsdp-peak
  case_run fsdp-eager-flags fsdp.py "fsdp-peak fsdp" -f train_step --modules --collectives --depth 2
  echo "== the summary of ddp-eager (4 ranks; each merge is in \$OUT)"
  sed -n '1,/^Peak sites/p' "$out/ddp-eager/merged.txt"
  "$bin" merge "$out"/ddp-eager/p.*.json -o "$results/ddp-merged.html" || status=1
fi
if [[ $stages == *compiled* ]]; then
  case_run ddp-compiled ddp.py ddp-peak -- --compile
  case_run ddp-compiled-flags ddp.py ddp-peak -f train_step --modules --collectives -- --compile
  case_run fsdp-compiled fsdp.py fsdp-peak -- --compile
  case_run fsdp-compiled-flags fsdp.py fsdp-peak -f train_step --modules --collectives -- --compile
fi
if [[ $stages == *gather* ]]; then
  echo "== --gather: two torchrun nodes of 2 GPUs each (static rendezvous), DDP, each node its own folder"
  g=$out/gather
  mkdir -p "$g/node0" "$g/node1"
  port=$((29600 + RANDOM % 300))
  node() {
    local n=$1 gpus=$2
    (cd "$g/node$n" && CUDA_VISIBLE_DEVICES=$gpus torchrun --nnodes 2 --node-rank "$n" --nproc-per-node 2 \
      --master-addr 127.0.0.1 --master-port "$port" --no-python "$bin" run --gather \
      -o "p.{rank}.json" "$repo/fixtures/multigpu/ddp.py" "$g/node$n" >"$g/node$n/run.log" 2>&1)
  }
  node 0 0,1 & a=$!
  node 1 2,3 & b=$!
  wait $a || status=1
  wait $b || status=1
  grep -h "gathered\|--gather" "$g"/node*/run.log
  echo "node0: $(cd "$g/node0" && ls p.*.json | tr '\n' ' ')"
  echo "node1: $(cd "$g/node1" && ls p.*.json | tr '\n' ' ')"
  for r in 2 3; do cmp -s "$g/node0/p.$r.json" "$g/node1/p.$r.json" ||
    { status=1; echo "FAIL: rank $r's report on node0 differs from node1's"; }; done
  # The truth files are on each node: the check reads the gathered reports on node0 against them.
  cp "$g"/node1/truth.rank*.json "$g/node0/"
  python3 scripts/multigpu_check.py ddp-peak "$g/node0" "$g/node0/p.{rank}.json" | grep -E "FAIL|PASSED|FAILED" || status=1
  python3 scripts/multigpu_check.py ddp-peak "$g/node0" "$g/node0/p.{rank}.json" >/dev/null || status=1
  "$bin" merge "$g"/node0/p.*.json >"$g/merged.txt" || status=1
  { echo "== gather"; cat "$g/merged.txt"; } >>"$results/merges.txt"
  head -4 "$g/merged.txt"
fi
rm -rf "$TORCHINDUCTOR_CACHE_DIR"
if command -v uv >/dev/null; then
  uv pip uninstall --quiet --python "$venv/bin/python" torch-memprof
else
  /usr/bin/python3 -m pip --python "$venv/bin/python" uninstall --quiet -y --break-system-packages torch-memprof
fi
echo "gpu-ranks-check: $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
