"""Compiled models on the GPU (issue 25), run by scripts/gpu-check.sh: for a compiled GPT-2-size
step, a compiled resnet50 step and a reduce-overhead (CUDA graphs) MLP (examples/compiled_step.py),
the program's own readings (max_memory_allocated, memory_allocated, memory_reserved, the first loss)
must be identical with and without memprof in each mode: cold with cold (each in a fresh inductor
cache) and warm with warm (the cache the bare cold run filled; bare warm runs repeat until two in
a row agree, and one more after memprof's must agree too). Under max-autotune the bare program's own
memory_reserved() moves by a 2 MiB segment from one warm run to the next (its kernels still
benchmark themselves, counted in inductor's counters), so there a bare run follows each memprof run
and each memprof run must read exactly what one of the bare runs read. The no-flag report must
attribute the compiled graphs' buffers to source lines (compiled sites), never to generated files.

    python3 scripts/compiled_check.py MEMPROF_BIN OUT_DIR
"""
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

MEMPROF, OUT = sys.argv[1], sys.argv[2]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEP = os.path.join(ROOT, "examples", "compiled_step.py")
# (name, arguments of examples/compiled_step.py beyond --model): the mlp runs under
# reduce-overhead (CUDA graphs) by default.
VARIANTS = [
    ("gpt2", []),
    ("resnet50", []),
    ("mlp-reduce-overhead", []),
    ("mlp-max-autotune-no-cudagraphs", ["--mode", "max-autotune-no-cudagraphs"]),
    ("resnet50-compiled-autograd", ["--compiled-autograd"]),
]
MODES = [[], ["-f", "train_step"], ["--modules"], ["-f", "train_step", "--tensors"],
         ["-f", "train_step", "--collectives"],
         ["-f", "train_step", "--warmup", "1", "--history", os.path.join(OUT, "compiled_history.pickle")]]


# Bare warm runs until two in a row agree, at most.
SETTLE_RUNS = 5


def readings(cmd, cache):
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=os.path.join(ROOT, "examples"))
    lines = [l for l in r.stdout.splitlines() if l.startswith("readings ")]
    if r.returncode != 0 or not lines:
        return None, f"exit {r.returncode}: {r.stderr[-1500:]}"
    return json.loads(lines[-1][len("readings "):]), None


def check(variant):
    name, extra = variant
    model = name.split("-")[0]
    log, ok = [], True
    script = [STEP, "--model", model] + extra
    py = [sys.executable] + script
    mp = lambda mode, out=None: [MEMPROF, "run"] + (["-o", out] if out else []) + mode + script
    with tempfile.TemporaryDirectory() as warm, tempfile.TemporaryDirectory() as cold2:
        cold_bare, err = readings(py, warm)
        if err:
            return False, [f"{name}: bare run failed: {err}"]
        # Under max-autotune the bare program's own memory_reserved() moves by a 2 MiB segment
        # from run to run on a warm cache (its kernels still benchmark themselves): a bare run
        # follows each memprof run, and each memprof run must read exactly what some bare run read.
        interleave = "autotune" in name
        warm_runs = []
        while len(warm_runs) < 2 or (not interleave and warm_runs[-1] != warm_runs[-2]):
            if len(warm_runs) == SETTLE_RUNS:
                return False, [f"{name}: the bare program's warm readings never settled: {warm_runs}"]
            got, err = readings(py, warm)
            if err:
                return False, [f"{name}: bare run failed: {err}"]
            warm_runs.append(got)
        warm_bare = warm_runs[-1]
        log.append(f"{name}: bare cold {json.dumps(cold_bare)}")
        log.append(f"{name}: bare warm {json.dumps(warm_bare)} (the last of {len(warm_runs)} warm runs"
                   + ("" if all(r == warm_bare for r in warm_runs) else f"; before: {warm_runs[:-2]}") + ")")
        if interleave:
            # Autotuning picks kernels by timing them: two bare cold runs differ by themselves.
            log.append(f"{name}: cold runs not compared (max-autotune's choices vary run to run)")
        else:
            cold_mp, err = readings(mp([]), cold2)
            same = cold_mp == cold_bare
            ok &= same
            verdict = "identical" if same else f"DIFFERENT {cold_mp} {err or ''}"
            log.append(f"{name}: memprof (no flags), cold vs bare cold: {verdict}")
        report = os.path.join(OUT, f"compiled_{name}.json")
        bare_runs = list(warm_runs)
        for mode in MODES:
            got, err = readings(mp(mode, report if not mode else None), warm)
            if interleave:
                after, err2 = readings(py, warm)
                bare_runs.append(after)
                same = got in bare_runs
                verdict = (f"identical to {bare_runs.count(got)} of the {len(bare_runs)} bare warm runs so far"
                           if same else f"DIFFERENT {got} {err or ''}{err2 or ''}")
            else:
                same = got == warm_bare
                verdict = "identical" if same else f"DIFFERENT {got} {err or ''}"
            ok &= same
            log.append(f"{name}: memprof {' '.join(mode) or '(no flags)'}, warm vs bare warm: {verdict}")
        if interleave:
            distinct = [r for i, r in enumerate(bare_runs) if r not in bare_runs[:i]]
            log.append(f"{name}: the bare program's own warm readings, {len(bare_runs)} runs: "
                       + "; ".join(f"{r['memory_reserved']} B reserved x{bare_runs.count(r)}" for r in distinct))
        else:
            # The bare program once more: had its own readings moved, a difference above would not be memprof's.
            again, err = readings(py, warm)
            ok &= again == warm_bare
            log.append(f"{name}: bare warm again: "
                       + ("identical" if again == warm_bare else f"DIFFERENT {again} {err or ''}"))
    with open(report) as f:
        peak = json.load(f)["peak"]
    sites = peak["sites"]
    compiled = [s for s in sites if s.get("compiled")]
    generated = [s for s in sites if "torchinductor" in s["file"]]
    share = sum(s["bytes"] for s in compiled) / peak["allocated_bytes"]
    log.append(
        f"{name}: peak {peak['allocated_bytes']} B; {len(compiled)} of {len(sites)} listed sites compiled "
        f"({share:.1%} of the peak); top: "
        + "; ".join(f"{os.path.basename(s['file'])}:{s['line']} {s['function']}{' [compiled]' if s.get('compiled') else ''} {s['bytes']}" for s in sites[:4])
    )
    ok &= not generated
    if generated:
        log.append(f"{name}: FAILED: generated files among the sites: {generated}")
    return ok, log


status = True
with concurrent.futures.ThreadPoolExecutor(len(VARIANTS)) as pool:
    # Each variant's lines as soon as it is done: a run cut short still shows the finished ones.
    for done in concurrent.futures.as_completed([pool.submit(check, v) for v in VARIANTS]):
        ok, log = done.result()
        print("\n".join(log), flush=True)
        status &= ok
print("compiled-check:", "PASSED" if status else "FAILED")
sys.exit(0 if status else 1)
