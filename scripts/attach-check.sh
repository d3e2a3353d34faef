#!/usr/bin/env bash
# `memprof attach` on a real Python 3.14 (sys.remote_exec, PEP 768), which these machines lack
# (pyenv has 3.11 to 3.13, CI's are the same): a Debian sid root made by debootstrap, with
# sid's python3.14, a venv there with torch 2.15 from PyPI and torch-memprof's cp314 wheel as
# scripts/release.sh builds it; then scripts/attach_check.py in that root (attach, -f and
# --modules, snapshot, Ctrl-C, the program's end, re-attach, the refusals, the program's output
# as without memprof) and the live view in tmux (`q` detaches). Needs root (debootstrap,
# chroot, mounts), Debian's mirror and PyPI; the root (about 6 GB) stays in target/attach-root
# for the next run.
#   scripts/attach-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/stack.sh
root=$PWD/target/attach-root
# The root's /proc, /sys and /dev are the machine's own, bound in while the checks run: never
# remove the root with them there (rm would go into the machine's /dev).
unmount() {
  for m in proc sys dev; do umount -l "$root/$m" 2>/dev/null || true; done
  if grep -q " $root/" /proc/mounts; then
    echo "attach-check: something is still mounted under $root; unmount it first" >&2; exit 2
  fi
}
unmount
if [ ! -x "$root/usr/bin/python3.14" ]; then
  command -v debootstrap >/dev/null || apt-get install -y -q debootstrap >/dev/null
  rm -rf --one-file-system "$root"
  debootstrap --variant=minbase --include=python3.14,python3.14-venv,ca-certificates sid \
    "$root" http://deb.debian.org/debian >/dev/null
  # This machine's certificates (its registry's proxy) and name servers.
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
fi
trap unmount EXIT
for m in proc sys dev; do mount --bind "/$m" "$root/$m"; done
# The venv's python is a link to the root's /usr/bin/python3.14: looked at from inside.
if ! chroot "$root" /opt/v/bin/python -c 'import torch' 2>/dev/null; then
  chroot "$root" python3.14 -m venv /opt/v
  chroot "$root" env -u PIP_FIND_LINKS PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_NO_CACHE_DIR=1 \
    /opt/v/bin/python -m pip install --quiet --disable-pip-version-check torch==2.15.0 numpy
fi
scripts/release.sh --debug --python 3.14 --torch 2.15 >/dev/null 2>&1
wheel=$(ls dist/torch_memprof-*-cp314-*.whl)
cp "$wheel" "$root/tmp/"
chroot "$root" /opt/v/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
  --force-reinstall "/tmp/$(basename "$wheel")"
rm -rf --one-file-system "$root/work" && mkdir -p "$root/work/fixtures"
cp fixtures/growing_steps.py "$root/work/fixtures/"
cp scripts/attach_check.py "$root/work/"
echo "attach-check: $(chroot "$root" /opt/v/bin/python --version), $(chroot "$root" /opt/v/bin/python -c 'import torch; print("torch", torch.__version__)'), $(basename "$wheel")"
status=0
chroot "$root" /opt/v/bin/python /work/attach_check.py /work/fixtures || status=1
# The live view, in a real terminal: drawn while attached, `q` detaches, the report follows.
if command -v tmux >/dev/null; then
  session=memprof-attach-check
  tmux kill-session -t "$session" 2>/dev/null || true
  chroot "$root" sh -c 'cd /work/fixtures && exec /opt/v/bin/python growing_steps.py leak 200 --pace 0.1 >/tmp/live-program.out 2>&1' &
  program=$!
  sleep 3
  pid=$(pgrep -f "growing_steps.py leak 200" | head -1)
  # The view takes the terminal; the report goes to a file (-o).
  tmux new-session -d -s "$session" -x 150 -y 45 \
    "chroot $root /opt/v/bin/memprof attach --live -o /tmp/live-report.txt --format table $pid 2>$root/tmp/live-attach.err; sleep 30"
  drawn="" screen=""
  for _ in $(seq 60); do
    sleep 0.5
    screen=$(tmux capture-pane -p -t "$session" 2>&1 || true)
    # Drawn, and some steps measured (the header names the step), before `q`.
    if [[ "$screen" == *"allocated"* && "$screen" == *"optimizer step "[3-9]* ]]; then drawn=$screen; break; fi
  done
  if [ -n "$drawn" ]; then echo "ok     the live view drawn while attached"; else echo "FAIL   no live view: $screen"; status=1; fi
  tmux send-keys -t "$session" q
  for _ in $(seq 60); do sleep 0.5; grep -q "= the peak" "$root/tmp/live-report.txt" 2>/dev/null && break; done
  if grep -q "= the peak" "$root/tmp/live-report.txt"; then echo "ok     q detaches and the report follows"; else echo "FAIL   after q: $(cat "$root/tmp/live-attach.err")"; status=1; fi
  echo "$drawn" | grep -v '^$' >target/attach-live-screen.txt || true
  wait "$program" && echo "ok     the program ran on to its end" || { echo "FAIL   the program"; status=1; }
  tmux kill-session -t "$session" 2>/dev/null || true
fi
echo "attach-check: $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
