"""The peak's sites against torch's own allocation history (issue 22's GPU acceptance).

Runs `memprof run` with no flags on examples/gpt2_train.py (GPT-2 124M, module-level loop, bf16
autocast, fused AdamW, batch 12 x 1024), the script itself recording torch's history
(`_record_memory_history(stacks="python")`, `--history`). Then replays that history: the live
blocks at the largest live total, each attributed as memprof attributes it (the innermost frame
outside torch, the standard library and memprof; a block with no Python frame, allocated by
autograd's device threads, to the line that ran the backward). Passes when memprof's peak equals
the replay's largest total and the program's max_memory_allocated(), and every site's bytes equal
the replay's.

    python3 scripts/peak_check.py MEMPROF_BIN OUT_DIR [script args...]
    python3 scripts/peak_check.py MEMPROF_BIN OUT_DIR --compiled

--compiled checks compiled code instead (issue 25): examples/compiled_step.py --model gpt2 (GPT-2
124M under torch.compile), whose generated lines the replay maps to their FX nodes' source frames
with torch's own map (PyCodeCache.stack_frames_for_code, dumped by the script beside its history),
as memprof's compiled sites are.
"""
import json
import os
import pickle
import subprocess
import sys
import sysconfig

import torch

memprof, out = sys.argv[1], sys.argv[2]
extra = sys.argv[3:]
compiled = extra == ["--compiled"]
name = "peak_compiled" if compiled else "peak"
history = os.path.join(out, f"{name}_history.pickle")
report = os.path.join(out, f"{name}.json")
script = (["examples/compiled_step.py", "--model", "gpt2"] if compiled else ["examples/gpt2_train.py"])
cmd = [memprof, "run", "--peak-sites", "100000", "-o", report, *script,
       "--steps", "3", "--history", history, *([] if compiled else extra)]
print("$", " ".join(cmd), flush=True)
run = subprocess.run(cmd, capture_output=True, text=True)
print(run.stdout[-2000:], run.stderr[-2000:], sep="")
if run.returncode != 0:
    sys.exit("peak-check: memprof failed")
if compiled:
    max_allocated = next(json.loads(l.split(" ", 1)[1]) for l in run.stdout.splitlines()
                         if l.startswith("readings "))["max_memory_allocated"]
    generated = json.load(open(history + ".frames.json"))
else:
    max_allocated = int(next(l.split()[1] for l in run.stdout.splitlines() if l.startswith("max_memory_allocated")))
    generated = {}
peak = json.load(open(report))["peak"]

# Replay. torch's trace records each allocation's requested size, while allocated_bytes (and
# memprof) count the caching allocator's blocks (requests rounded up to 512 B, and a large
# block may keep up to 1 MiB more when splitting it would leave less). So the replay takes the
# blocks live at memprof's moment (its peak was its Nth allocation on the device; the trace holds
# the same allocations in the same order) and checks, per site, the number of blocks exactly and
# the bytes against the requests rounded as the allocator rounds them.
trace = pickle.load(open(history, "rb"))["device_traces"][0]
n = peak["reached"]["allocation"]
live, seen, total, best, best_at_alloc = {}, 0, 0, 0, 0
for e in trace:
    if e["action"] == "alloc":
        seen += 1
        total += e["size"]
        if seen <= n:
            live[e["addr"]] = e
        if total > best:
            best, best_at_alloc = total, seen
    elif e["action"] == "free_requested":
        total -= e["size"]
        if seen < n:
            live.pop(e["addr"], None)


def rounded(size):
    return max(512, (size + 511) // 512 * 512)


torch_dir = os.path.dirname(torch.__file__) + os.sep
stdlib = tuple(sysconfig.get_paths()[k] + os.sep for k in ("stdlib", "platstdlib"))


def short(name):
    """A function's name as memprof matches a compiled frame to a running one (dynamo's resumed
    rest after a graph break is the function's own)."""
    name = name.rsplit(".", 1)[-1]
    if name.startswith("torch_dynamo_resume_in_") and "_at_" in name:
        name = name[len("torch_dynamo_resume_in_"):].rsplit("_at_", 1)[0]
    return name


def expanded(frames):
    """The frames with each generated line replaced by its FX node's frames (innermost first),
    as memprof's site finder reads them: the compiled region's own function, which dynamo runs
    as transformed code standing at its first line, is not read again after them."""
    root = None
    for f in frames:
        mapped = generated.get(f"{f['filename']}:{f['line']}")
        if mapped is not None:
            yield from ({"filename": m[0], "line": m[1]} for m in mapped)
            root = (mapped[-1][0], short(mapped[-1][2])) if mapped else None
            continue
        if root is not None and not skipped(f["filename"]):
            if (f["filename"], short(f.get("name", ""))) == root:
                continue
            root = None
        yield f


def skipped(name):
    """Whether memprof looks through a file: torch's, the standard library's, memprof's own and
    inductor's generated files."""
    if name.startswith(("<frozen", "<memprof", torch_dir)) or "/torchinductor_" in name:
        return True
    return "/site-packages/" not in name and name.startswith(stdlib)


def site_of(frames):
    """memprof's rule (src/python/sites): the innermost frame outside torch, the standard
    library, memprof and inductor's generated files."""
    for f in expanded(frames):
        if not skipped(f["filename"]):
            return (f["filename"], f["line"])
    return None


backward = next(((s["file"], s["line"]) for s in peak["sites"] if s["source"] == "loss.backward()"), None)
replay = {}
for e in live.values():
    key = site_of(e.get("frames") or []) or backward
    blocks, requested, rounded_bytes, large = replay.get(key, (0, 0, 0, 0))
    replay[key] = (blocks + 1, requested + e["size"], rounded_bytes + rounded(e["size"]),
                   large + (e["size"] > 1 << 20))
mine = {}
for s in peak["sites"]:
    key = (s["file"], s["line"]) if s["file"] else None
    blocks, b = mine.get(key, (0, 0))
    mine[key] = (blocks + s["blocks"], b + s["bytes"])

ok = True
sites_sum = sum(b for _, b in mine.values()) + peak["unseen_bytes"] + (peak.get("other_sites") or {}).get("bytes", 0)
replay_rounded = sum(r for _, _, r, _ in replay.values())
print(f"peak: memprof {peak['allocated_bytes']} B, max_memory_allocated() {max_allocated} B, "
      f"memprof's sites sum {sites_sum} B (unseen {peak['unseen_bytes']})")
print(f"history at memprof's moment (allocation {n}): {len(live)} live blocks, requested "
      f"{sum(r for _, r, _, _ in replay.values())} B, rounded to 512 B {replay_rounded} B; "
      f"the history's largest requested total {best} B was first reached at allocation {best_at_alloc}")
ok &= peak["allocated_bytes"] == max_allocated == sites_sum
# memprof's moment is one where the history's own live total (of requests) is at its largest too.
at_moment = sum(r for _, r, _, _ in replay.values())
print(f"the history's live requests at memprof's moment {'equal' if at_moment == best else 'differ from'} "
      f"its largest live total ({at_moment} B, {best} B)")
ok &= at_moment == best
ok &= len(live) == sum(b for b, _ in mine.values())
print(f"{'memprof':>14} {'blocks':>7} {'history':>14} {'rounded':>14} {'blocks':>7}  site")
exact = 0
for key in sorted(set(mine) | set(replay), key=lambda k: -max(mine.get(k, (0, 0))[1], replay.get(k, (0, 0, 0, 0))[2])):
    mb, mbytes = mine.get(key, (0, 0))
    rb, req, rnd, large = replay.get(key, (0, 0, 0, 0))
    agrees = mb == rb and rnd <= mbytes <= rnd + large * (1 << 20)
    exact += mbytes == rnd
    ok &= agrees
    where = f"{os.path.basename(key[0])}:{key[1]}" if key else "(no Python frame)"
    print(f"{mbytes:>14} {mb:>7} {req:>14} {rnd:>14} {rb:>7}  {where}{'' if agrees else '   <-- differs'}")
print(f"{exact} of {len(set(mine) | set(replay))} sites equal the history's requests rounded to 512 B exactly; "
      "the others hold large blocks the allocator did not split (at most 1 MiB more each)")
print("reached:", json.dumps(peak["reached"]))
print("categories:", json.dumps({f"{os.path.basename(s['file'])}:{s['line']}": s.get("categories") for s in peak["sites"][:8]}))
if compiled:
    n_compiled = sum(1 for s in peak["sites"] if s.get("compiled"))
    print(f"compiled sites: {n_compiled} of {len(peak['sites'])}, "
          f"{sum(s['bytes'] for s in peak['sites'] if s.get('compiled'))} B")
    ok &= n_compiled > 0
print(f"peak-check{' --compiled' if compiled else ''}: {'PASSED' if ok else 'FAILED'}")
sys.exit(0 if ok else 1)
