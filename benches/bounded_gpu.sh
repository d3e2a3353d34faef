#!/usr/bin/env bash
# Bounded over a long GPU run (issue 50): memprof's peak resident memory and the report's size
# for runs of COUNTS CUDA allocations (default 10^6 and 4 x 10^6; benches/bounded.py), against
# python3's own, through the wheel (`memprof run` in the GPU machine's venv). On the GPU machine:
#   run(command="benches/bounded_gpu.sh", carry=[".device/wheel"])
set -uo pipefail
cd "$(dirname "$0")/.."
. benches/device_wheel.sh
export PYTHONUNBUFFERED=1
unset LD_LIBRARY_PATH VIRTUAL_ENV
py=$device_venv/bin/python
work=$(mktemp -d)
# The child's peak RSS (MiB) and seconds, as /usr/bin/time -f '%M %e' would give them.
measure() { "$py" -c 'import resource, subprocess, sys, time
t = time.time()
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, round(time.time() - t, 1))' "$@"; }
printf 'allocations\tpython_rss_mib python_s\tmemprof_rss_mib memprof_s\treport_kib\ttimeline_points\tgrowth_steps\n'
for n in ${COUNTS:-1000000 4000000}; do
  p=$(measure "$py" benches/bounded.py "$n" cuda)
  m=$(measure "$py" -m memprof run -o "$work/r.json" benches/bounded.py "$n" cuda)
  facts=$("$py" -c "import json,sys; r=json.load(open(sys.argv[1])); print(len(r['timeline']['allocations']), (r.get('growth') or {}).get('steps'))" "$work/r.json")
  printf '%s\t%s\t%s\t%s\t%s\n' "$n" "$p" "$m" "$(( $(stat -c %s "$work/r.json") / 1024 ))" "$(echo "$facts" | tr ' ' '\t')"
done
rm -rf "$work"
