#!/usr/bin/env python3
"""Checks an installed memprof wheel: run through the venv's `memprof` command, with no Rust, no
LD_LIBRARY_PATH and no VIRTUAL_ENV, it profiles a fixture with exact bytes, names the peak's
sites by file and line (a fixture's exactly, the GPT-2 example's summing to its peak), predicts
a simulated H100's peak without a GPU, leaves the script's environment as `python` would, reads
reports without loading libtorch, runs the API, the pytest plugin and a Jupyter kernel, and
stops with one clear message (exit 2) where torch is missing.

    scripts/wheel_check.py VENV [VENV_WITHOUT_TORCH]
"""

import json
import os
import subprocess
import sys
import tempfile
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
        # The JSON report has standard output to itself; the script's own line is on stderr.
        check("['x', '--device', '3', '--format', 'yaml']" in r.stderr,
              "the script ran with its own arguments", r.stderr[:300])
        report = json.loads(r.stdout)
        step = next(f for f in report["functions"] if f["qualname"] == "step")
        line = next(l for l in step["lines"] if "a = torch.empty" in l["source"])
        check(line["delta_bytes"] == 8 * MiB, "exact bytes: 2 x 4 MiB on `a = torch.empty`",
              line["delta_bytes"])
        check(step["peak_allocated_bytes"] == 8 * MiB + 512 * KiB, "exact peak of step",
              step["peak_allocated_bytes"])
        check(report["metadata"]["torch_version"].startswith(report_torch(python)),
              "the venv's torch", report["metadata"]["torch_version"])

    check_peak_sites(memprof)
    check_tensors(memprof, python)
    check_saved_hooks(memprof, python)
    check_modules_compiled_and_lines(memprof, python)
    check_snapshot(memprof)
    check_history_stacks(memprof, python)
    check_attach(memprof)
    check_simulate(memprof)

    for ld in (None, "/nonexistent/lib"):
        extra = {} if ld is None else {"LD_LIBRARY_PATH": ld}
        plain = run([str(python), "environment.py", "a"], extra)
        profiled = run([str(memprof), "run", "environment.py", "a"], extra)
        seen = profiled.stdout.splitlines()[0] if profiled.stdout else profiled.stderr
        check(plain.stdout.strip() == seen.strip(),
              "the script sees the environment python gives it (LD_LIBRARY_PATH %s)"
              % ("unset" if ld is None else ld), seen)

    r = run([str(python), "like_python.py"])
    plain = r.stdout
    r = run([str(memprof), "run", "-o", "/tmp/memprof-wheel-like.json", "like_python.py"])
    check(r.returncode == 0 and r.stdout == plain,
          "memprof run (in this python) leaves the script what python gives it",
          r.stdout if r.stdout != plain else "")

    # The commands that read reports load no libtorch: the core links none (only `run` and
    # the API load the torch they find).
    r = run([str(memprof), "stats", "--help"], {"LD_DEBUG": "files"})
    loaded = [l for l in r.stderr.splitlines() if "file=" in l and ("libtorch" in l or "libc10" in l)]
    check(r.returncode == 0 and "file=" in r.stderr and not loaded,
          "memprof's commands that read reports load no libtorch", loaded[:3] if loaded else "")
    r = run([str(python), "-m", "memprof", "show", "--help"])
    check(r.returncode == 0 and "Usage" in r.stdout, "python -m memprof show --help",
          r.stderr[-500:])

    # The in-process front end from the wheel: the API's report is the command's, line by line.
    api, cli = Path("/tmp/memprof-wheel-api.json"), Path("/tmp/memprof-wheel-cli.json")
    r = run([str(python), "inprocess_step.py", "--api", str(api)])
    check(r.returncode == 0, "memprof.profile from the wheel", r.stderr[-2000:])
    r2 = run([str(memprof), "--device", "cpu", "run", "-f", "step", "-o", str(cli),
              "inprocess_step.py"])
    if r.returncode == 0 and r2.returncode == 0:
        def lines(path):
            step = next(f for f in json.loads(path.read_text())["functions"]
                        if f["qualname"] == "step")
            return [(l["line"], l.get("hits"), l.get("delta_bytes"),
                     {k: v for k, v in l.get("stats", {}).items() if not k.startswith("host_")})
                    for l in step["lines"]]
        check(lines(api) == lines(cli), "the API's report equals the command's, line by line")
        r = run([str(memprof), "show", str(api)])
        check(r.returncode == 0 and "Function: step at line" in r.stdout,
              "memprof show reads the API's report", r.stderr[-500:])

    # The pytest plugin (the wheel's pytest11 entry point) and the Jupyter magics, if the venv
    # has pytest and a kernel (scripts/wheel-check.sh installs them).
    has = run([str(python), "-c", "import pytest, nbclient, ipykernel"]).returncode == 0
    check(has, "the check venv has pytest, nbclient and ipykernel")
    if has:
        tmp = Path("/tmp/memprof-wheel-pytest")
        tmp.mkdir(exist_ok=True)
        (tmp / "test_limit.py").write_text(
            "import pytest, torch\n\n"
            "@pytest.mark.limit_device_memory('1 MiB')\n"
            "def test_over():\n"
            "    x = torch.ones(512 * 1024)\n"
            "\n"
            "def test_free():\n"
            "    x = torch.ones(512 * 1024)\n")
        r = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "test_limit.py"], cwd=tmp, capture_output=True, text=True,
                           env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")})
        out = r.stdout + r.stderr
        check(r.returncode == 1 and "1 failed, 1 passed" in out
              and "test_over: device peak 2.00 MiB (2097152 B) on cpu is over its limit of 1.00 MiB"
              in out and "test_limit.py:5 test_over: x = torch.ones(512 * 1024)" in out,
              "the pytest plugin fails the test over its limit and names the line",
              "" if r.returncode == 1 else out[-1500:])
        nb = run([str(python), str(ROOT / "scripts" / "notebook_check.py")])
        check(nb.returncode == 0 and "NOTEBOOK OK" in nb.stdout,
              "a Jupyter kernel runs %memprof and %%memprof",
              "" if nb.returncode == 0 else (nb.stdout + nb.stderr)[-1500:])

    if len(sys.argv) > 2:
        bare = Path(sys.argv[2]).resolve() / "bin" / "memprof"
        r = run([str(bare), "run", "lines.py"])
        check(r.returncode == 2 and "has no torch; memprof needs torch 2.9 to 2.15" in r.stderr
              and "pip install torch`" in r.stderr and "error while loading" not in r.stderr,
              "a venv without torch: one message, exit 2", (r.stderr.strip(), r.returncode))

    print("wheel-check: %s" % ("PASSED" if not failures else "FAILED: " + ", ".join(failures)))
    return 1 if failures else 0


def check_tensors(memprof, python):
    """`--tensors` through the wheel: the copy inventory_steps.py keeps at call 3 of 6 where no
    name reaches it is listed at call 6 (32 KiB), without a walk of every object where the
    venv's torch has c10's use counts."""
    out = "/tmp/memprof-wheel-tensors.json"
    r = run([str(memprof), "run", "-f", "train_step", "--tensors", "--format", "json", "-o", out,
             "inventory_steps.py", "6", "3"])
    check(r.returncode == 0, "memprof run -f train_step --tensors inventory_steps.py (exit 0)",
          r.stderr[-2000:])
    if r.returncode != 0:
        return
    last = json.load(open(out))["tensors"][-1]
    kept = [t["bytes"] for t in last["tensors"]
            if (t.get("created_at") or "").endswith("inventory_steps.py:23 (train_step)")]
    has = run([str(python), "-c", "import torch; print(hasattr(torch._C, '_storage_Use_Count'))"])
    walked = has.stdout.strip() != "True"
    check(last["call"] == 6 and kept == [32 * KiB] and last.get("walked") == walked,
          "--tensors: call 6 lists the copy kept at call 3 (32 KiB), walked=%s" % walked,
          json.dumps({"call": last["call"], "kept": kept, "walked": last.get("walked")}))


def check_saved_hooks(memprof, python):
    """How `--modules` counts saved bytes on the venv's torch: without a hook by default
    (src/torch/cpp/saved_interpose.cpp), the program seeing the tensor objects and the
    saved-tensors hooks (none) that python gives it; and every module row the same as with the
    hooks in C++ (MEMPROF_SAVED_HOOKS=hooks) and in Python (=python)."""
    plain = run([str(python), "saved_objects.py"])
    r = run([str(memprof), "run", "--modules", "-o", "/tmp/memprof-wheel-objects.json",
             "saved_objects.py"])
    same = r.returncode == 0 and plain.stdout and r.stdout == plain.stdout
    check(same, "--modules leaves the program the tensor objects and hooks python leaves it",
          "" if same else r.stdout + r.stderr[-1000:])
    rows = []
    for hooks in ("", "hooks", "python"):
        out = f"/tmp/memprof-wheel-saved-{hooks or 'none'}.json"
        r = run([str(memprof), "--device", "cpu", "run", "--modules", "--format", "json", "-o",
                 out, "cnn.py", "float32", "3"], {"MEMPROF_SAVED_HOOKS": hooks})
        check(r.returncode == 0, f"memprof run --modules cnn.py, hooks {hooks!r} (exit 0)",
              r.stderr[-2000:])
        if r.returncode != 0:
            return
        rows.append([(e["module"], e["phase"], e["calls"], e.get("saved_bytes"), e["peak_bytes"])
                     for e in json.load(open(out))["modules"]["modules"]])
    same = rows[0] == rows[1] == rows[2]
    check(same and any(row[3] for row in rows[0]),
          "--modules: every row the same without a hook as with the hooks in C++ and in Python",
          "" if same else rows)


def check_modules_compiled_and_lines(memprof, python):
    """`--modules` on the venv's torch and Python: a graph dynamo traces through memprof's
    `_call_impl` wrapper has no graph break and python's output (dynamo is told what the native
    `module_enter` answers in a graph), a non-strict export runs as without memprof; and lines
    measured with `--modules` read what they read alone (the module windows' scope take keeps
    the maximum it restarts for the lines)."""
    plain = run([str(python), "compiled_hooked.py"])
    r = run([str(memprof), "run", "--modules", "-o", "/tmp/memprof-wheel-compiled.json",
             "compiled_hooked.py"])
    same = r.returncode == 0 and plain.stdout.startswith("graphs 1 breaks 0\n") and \
        r.stdout == plain.stdout
    check(same, "--modules: a traced graph without a break and a non-strict export, as python",
          "" if same else plain.stdout + "\n---\n" + r.stdout + r.stderr[-1500:])
    lines = []
    for extra in ([], ["--modules"]):
        out = "/tmp/memprof-wheel-lines-%d.json" % len(extra)
        r = run([str(memprof), "--device", "cpu", "run", "--stat", "allocated_bytes.all.peak",
                 "-f", "train_step", *extra, "--format", "json", "-o", out,
                 "mlp.py", "float32", "3"])
        check(r.returncode == 0, "memprof run -f train_step %s mlp.py (exit 0)" % extra,
              r.stderr[-2000:])
        if r.returncode != 0:
            return
        function = [f for f in json.load(open(out))["functions"] if f["qualname"] == "train_step"]
        lines.append([(line["line"], line.get("delta_bytes"), line.get("stats"))
                      for line in function[0]["lines"]])
    same = lines[0] == lines[1]
    check(same and any(line[2] for line in lines[0]),
          "-f train_step: every line the same with --modules as without", "" if same else lines)


def check_history_stacks(memprof, python):
    """`--history` on the CPU through the installed command: each allocation's whole Python stack,
    frame by frame, with none of the command's own (its console script, its launcher)."""
    history = Path(tempfile.mkdtemp()) / "nested.pickle"
    r = run([str(memprof), "--device", "cpu", "run", "--history", str(history), "-f", "step",
             "history_nested.py"])
    check(r.returncode == 0, "memprof run --history -f step history_nested.py (exit 0)",
          r.stderr[-2000:])
    read = run([str(python), "-c", (
        "import json, os, pickle, sys\n"
        "d = pickle.load(open(sys.argv[1], 'rb'))\n"
        "print(json.dumps([[e['size'], [[os.path.basename(f['filename']), f['line'], f['name']]"
        " for f in e['frames']]] for e in d['device_traces'][0] if e['action'] == 'alloc']))"),
        str(history)])
    frames = [["memprof", 22, "step line 22"], ["history_nested.py", 13, "make"],
              ["history_nested.py", 18, "forward"], ["history_nested.py", 22, "step"],
              ["history_nested.py", 28, "<module>"]]
    got = json.loads(read.stdout) if read.returncode == 0 else read.stderr[-1000:]
    check(got == [[4096, frames], [8192, frames]],
          "--history: each allocation's whole Python stack, the program's frames only", got)


def check_snapshot(memprof):
    """`memprof snapshot PID` of a run going on: its report so far (running, what grows), and
    the program's output as without the snapshot."""
    import time
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}
    program = subprocess.Popen([str(memprof), "run", "-o", "/tmp/memprof-wheel-snapshot-end.json",
                                "growing_steps.py", "leak", "20"], cwd=FIXTURES,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    report, deadline = None, time.monotonic() + 120
    while program.poll() is None and time.monotonic() < deadline:
        r = run([str(memprof), "snapshot", str(program.pid), "--format", "json"])
        if r.returncode == 0:
            report = json.loads(r.stdout)
            if report.get("growth", {}).get("steps", 0) >= 4:
                break
        time.sleep(0.5)
    out, err = program.communicate()
    growth = (report or {}).get("growth") or {}
    check(report is not None and report["metadata"]["outcome"]["status"] == "running"
          and [s["bytes_per_step"] for s in growth.get("sites", [])] == [32 * 4 * KiB],
          "memprof snapshot PID of a running program: running, the 128 KiB-a-step leak",
          json.dumps(growth)[:300])
    plain = run([str(memprof.parent / "python"), "growing_steps.py", "leak", "20"])
    check(program.returncode == 0 and out == plain.stdout,
          "the program ran on unchanged (its output as under python)", "%r vs %r" % (out, plain.stdout))


def check_simulate(memprof):
    """`memprof run --simulate-gpu H100` on a machine without a GPU: the program sees an H100,
    and the prediction's allocated peak is the one worked out by hand in tests/simulate.rs."""
    r = run([str(memprof), "run", "--simulate-gpu", "H100", "--format", "json", "simulated.py"])
    check(r.returncode == 0, "memprof run --simulate-gpu H100 simulated.py (exit 0)",
          r.stderr[-2000:])
    if r.returncode == 0:
        p = json.loads(r.stdout)
        check(p["predicted"]["allocated_bytes.all.peak"] == 70821888
              and p["simulated"]["gpu"] == "NVIDIA H100 80GB HBM3" and p["fits"],
              "the simulated H100's allocated peak, worked out by hand",
              json.dumps(p["predicted"]))
        check("device NVIDIA H100 80GB HBM3 85017493504 9 0" in r.stderr
              and "max_memory_allocated 70821888" in r.stderr,
              "the program saw the H100 and its own memory readings", r.stderr[:500])
    # As rank 0 of 4 under FSDP2: torch's fake process group, a quarter of each layer, and the
    # peak rank 0 of a real torchrun on 4 x H200 read (tests/simulate.rs).
    r = run([str(memprof), "run", "--simulate-gpu", "H100", "--simulate-ranks", "4", "--format",
             "json", "simulated_ranks.py", "fsdp"])
    check(r.returncode == 0 and "world 0 4 0 4" in r.stderr and "after wrapping 4194304" in r.stderr
          and "max_memory_allocated 102761472" in r.stderr,
          "memprof run --simulate-gpu H100 --simulate-ranks 4 simulated_ranks.py fsdp: rank 0 of 4",
          r.stderr[-2000:])
    # cuDNN's workspaces as measured on the H200: resnet50's 64-channel 3 x 3 convolution at
    # batch 32, forward, input's and weight's gradients (tests/simulate.rs).
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace.json")
        r = run([str(memprof), "run", "--simulate-gpu", "H100", "--trace", trace,
                 "simulated_conv.py", "32"])
        lent = []
        if r.returncode == 0:
            with open(trace) as f:
                lent = [e["size"] for e in json.load(f)["events"]
                        if e.get("category") == "workspaces"]
    check(lent == [25837584, 51527696, 53592743],
          "memprof run --simulate-gpu H100 simulated_conv.py 32: cuDNN's workspaces",
          r.stderr[-2000:] + repr(lent))
    # torch.compile: inductor's code for the simulated GPU, on this release's inductor: the
    # chain is one fused kernel, whose 4 KiB output is its only buffer (tests/simulate.rs).
    r = run([str(memprof), "run", "--simulate-gpu", "H100", "--format", "json",
             "simulated_compiled.py"])
    notes = json.loads(r.stdout)["simulated"]["notes"] if r.returncode == 0 else []
    check(r.returncode == 0 and "max_memory_allocated 8396800" in r.stderr
          and [n["what"] for n in notes] == [
              "torch.compile: inductor's code for the simulated GPU (its buffers; no kernel runs)"],
          "memprof run --simulate-gpu H100 simulated_compiled.py: inductor's buffers",
          r.stderr[-2000:] + repr(notes))


def check_attach(memprof):
    """`memprof attach PID` from the wheel: on these Pythons (before 3.14) the program is named
    with its version and the fix, and runs on (the attach itself: scripts/attach-check.sh)."""
    python = memprof.parent / "python"
    program = subprocess.Popen([str(python), "-c", "import time, torch\nprint('ready', flush=True)\n"
                                "while True: time.sleep(0.05)"], stdout=subprocess.PIPE, text=True)
    program.stdout.readline()
    r = run([str(memprof), "attach", str(program.pid)])
    alive = program.poll() is None
    program.kill()
    program.wait()
    check(r.returncode == 2 and "memprof attach needs Python 3.14 or later" in r.stderr
          and "memprof run script.py ARGS" in r.stderr and alive,
          "memprof attach PID of a python before 3.14: its version and the fix, the program untouched",
          r.stderr[-500:])


def check_peak_sites(memprof):
    """With no flags: the peak of fixtures/peak_sites.py by its known lines, to the byte (as
    tests/peak.rs), and the small GPT-2 example's sites by file and line, summing to its peak."""
    out = Path("/tmp/memprof-wheel-peak.json")
    r = run([str(memprof), "run", "-o", str(out), "peak_sites.py"])
    check(r.returncode == 0, "memprof run peak_sites.py (exit 0)", r.stderr[-2000:])
    if r.returncode == 0:
        peak = json.loads(out.read_text())["peak"]
        got = [(s["file"].rsplit("/", 1)[-1], s["line"], s["function"], s["bytes"], s["blocks"])
               for s in peak["sites"]]
        want = [("peak_sites.py", 35, "<module>", 4 * MiB, 1),
                ("peak_sites.py", 29, "worker", 3 * MiB, 1),
                ("peak_sites.py", 15, "<module>", 2 * MiB, 1),
                ("peak_helper.py", 11, "make", MiB, 1),
                ("peak_sites.py", 21, "chunks", MiB, 2)]
        check(got == want and peak["allocated_bytes"] == 11 * MiB,
              "the peak's sites by file and line, exact bytes (peak_sites.py: 11 MiB)",
              "" if got == want else got)
        # The script's module-level lines lead to no frame of the command that ran it.
        contexts = [s["context"] for s in peak["sites"] if s.get("context")]
        check(not any("torch_memprof" in (c.get("file") or "") for c in contexts),
              "no site's context is the wheel's command (torch_memprof.py)", contexts)
    # Blocks made again from the same frames, and by code objects made anew that may take a
    # freed one's address (src/python/sites/memo.rs remembers walks: on 3.12+ only, where a
    # code watcher says when to forget them).
    r = run([str(memprof), "run", "-o", str(out), "peak_same_frames.py"])
    check(r.returncode == 0, "memprof run peak_same_frames.py (exit 0)", r.stderr[-2000:])
    if r.returncode == 0:
        peak = json.loads(out.read_text())["peak"]
        got = sorted((s["line"], s["bytes"], s["blocks"], (s.get("context") or {}).get("line"))
                     for s in peak["sites"])
        want = sorted([(11, 6 * MiB, 6, 15), (11, 9 * MiB, 3, 19)]
                      + [(30 + 100 * i, (i + 1) * MiB, 1, 37) for i in range(6)]
                      + [(47 + i, 3 * (i + 1) * MiB, 3, 56) for i in range(6)])
        check(got == want, "each block at its own line and caller, however often its frames "
              "recur or its code is made anew (peak_same_frames.py)", got)
    r = run([str(memprof), "run", "-o", str(out), str(ROOT / "examples" / "gpt2_train.py"),
             "--layers", "2", "--embd", "128", "--heads", "4", "--batch", "4", "--seq", "128",
             "--vocab", "4096", "--steps", "2"])
    check(r.returncode == 0, "memprof run examples/gpt2_train.py (small, exit 0)", r.stderr[-2000:])
    if r.returncode == 0:
        peak = json.loads(out.read_text())["peak"]
        sites = peak["sites"]
        named = [s for s in sites if s["file"] and s["line"] > 0]
        ours = [s for s in named if s["file"].endswith(("gpt2_train.py", "gpt2_model.py"))]
        # The listed sites, the rest (`other_sites`) and what memprof saw no allocation of
        # (`unseen_bytes`) sum to the peak exactly.
        total = (sum(s["bytes"] for s in sites) + peak.get("other_sites", {}).get("bytes", 0)
                 + peak.get("unseen_bytes", 0))
        check(bool(ours) and len(named) == len(sites) and total == peak["allocated_bytes"],
              "GPT-2's peak by file and line, the sites summing to the peak",
              "%d sites, %d named, %d in the example; %d B of %d B" % (
                  len(sites), len(named), len(ours), total, peak["allocated_bytes"]))


def report_torch(python):
    out = subprocess.run([str(python), "-c", "import torch; print(torch.__version__)"],
                         capture_output=True, text=True)
    return out.stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
