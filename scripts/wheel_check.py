#!/usr/bin/env python3
"""Checks an installed memprof wheel: run through the venv's `memprof` command, with no Rust, no
LD_LIBRARY_PATH and no VIRTUAL_ENV, it profiles a fixture with exact bytes, leaves the script's
environment as `python` would, and stops with one clear message (exit 2) where torch is missing.

    scripts/wheel_check.py VENV [VENV_WITHOUT_TORCH]
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
KiB, MiB = 1024, 1024 * 1024
failures = []


def check(ok, what, detail=""):
    print("%s   %s %s" % ("ok" if ok else "FAIL", what, detail))
    if not ok:
        failures.append(what)


def run(cmd, extra_env=None):
    # A bare environment: what a user's shell has, without this project's venv or Rust.
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}
    env.update(extra_env or {})
    return subprocess.run(cmd, cwd=FIXTURES, env=env, capture_output=True, text=True)


def main():
    venv = Path(sys.argv[1]).resolve()
    memprof = venv / "bin" / "memprof"
    python = venv / "bin" / "python"
    check(memprof.is_file(), "the wheel put memprof on the venv's PATH", str(memprof))

    r = run([str(memprof), "--version"])
    check(r.returncode == 0 and r.stdout.startswith("memprof "), "memprof --version",
          (r.stdout + r.stderr).strip())

    r = run([str(memprof), "run", "-f", "step", "--format", "json", "--stat",
             "allocated_bytes.all.current", "lines.py", "x", "--device", "3", "--format", "yaml"])
    check(r.returncode == 0, "memprof run -f step lines.py (exit 0)", r.stderr[-2000:])
    if r.returncode == 0:
        text = r.stdout
        check("['x', '--device', '3', '--format', 'yaml']" in text.splitlines()[0],
              "the script ran with its own arguments")
        report = json.loads(text[text.index("{"):])
        step = next(f for f in report["functions"] if f["qualname"] == "step")
        line = next(l for l in step["lines"] if "a = torch.empty" in l["source"])
        check(line["delta_bytes"] == 8 * MiB, "exact bytes: 2 x 4 MiB on `a = torch.empty`",
              line["delta_bytes"])
        check(step["peak_allocated_bytes"] == 8 * MiB + 512 * KiB, "exact peak of step",
              step["peak_allocated_bytes"])
        check(report["metadata"]["torch_version"].startswith(report_torch(python)),
              "the venv's torch", report["metadata"]["torch_version"])

    for ld in (None, "/nonexistent/lib"):
        extra = {} if ld is None else {"LD_LIBRARY_PATH": ld}
        plain = run([str(python), "environment.py", "a"], extra)
        profiled = run([str(memprof), "run", "environment.py", "a"], extra)
        seen = profiled.stdout.splitlines()[0] if profiled.stdout else profiled.stderr
        check(plain.stdout.strip() == seen.strip(),
              "the script sees the environment python gives it (LD_LIBRARY_PATH %s)"
              % ("unset" if ld is None else ld), seen)

    if len(sys.argv) > 2:
        bare = Path(sys.argv[2]).resolve() / "bin" / "memprof"
        r = run([str(bare), "run", "lines.py"])
        check(r.returncode == 2 and "has no torch" in r.stderr and "pip install torch==" in r.stderr
              and "error while loading" not in r.stderr,
              "a venv without torch: one message, exit 2", (r.stderr.strip(), r.returncode))

    print("wheel-check: %s" % ("PASSED" if not failures else "FAILED: " + ", ".join(failures)))
    return 1 if failures else 0


def report_torch(python):
    out = subprocess.run([str(python), "-c", "import torch; print(torch.__version__)"],
                         capture_output=True, text=True)
    return out.stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
