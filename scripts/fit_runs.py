"""The runs the GPU checks of `memprof fit` compare (scripts/fit_check.py, scripts/fit_scale_check.py):
scripts/fit_workload.py bare (optionally capped), under `memprof run --trace`, and `memprof fit`.

    runs = FitRuns(MEMPROF, OUT); path, measured = runs.trace("resnet50", 16); runs.real(...)
"""
import json
import os
import subprocess
import sys

WORKLOAD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fit_workload.py")


def fit_line(stdout):
    """The workload's `FIT {json}` line: what its allocator read."""
    lines = [l for l in stdout.splitlines() if l.startswith("FIT ")]
    if not lines:
        raise SystemExit("the workload printed no FIT line:\n" + stdout[-2000:])
    return json.loads(lines[-1][4:])


class FitRuns:
    def __init__(self, memprof, out):
        self.memprof, self.out = memprof, out
        os.makedirs(out, exist_ok=True)

    def real(self, workload, batch, cap=None):
        """The workload run bare (capped at `cap` bytes), what its allocator read."""
        cmd = [sys.executable, WORKLOAD, workload, "--batch", str(batch)]
        if cap is not None:
            cmd += ["--cap", str(cap)]
        return fit_line(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)

    def trace(self, workload, batch):
        """The workload under `memprof run --trace`: the trace's path, what its allocator read."""
        path = os.path.join(self.out, f"{workload}.b{batch}.json")
        done = subprocess.run([self.memprof, "run", "--trace", path, "-o", path + ".report.json", WORKLOAD,
                               workload, "--batch", str(batch)], capture_output=True, text=True, check=True)
        return path, fit_line(done.stdout)

    def fit(self, *args):
        """`memprof fit ARGS --format json` (exit 0 or 5): its prediction."""
        done = subprocess.run([self.memprof, "fit", *args, "--format", "json"], capture_output=True, text=True)
        if done.returncode not in (0, 5):
            raise SystemExit(f"memprof fit {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
        return json.loads(done.stdout)
