//! The in-process front end (issue 26), through the real package and native core in the venv's
//! own python: `memprof.profile` gives the command's report line by line and leaves nothing
//! behind; the pytest plugin run by real pytest; the magics run by a real Jupyter kernel.
use crate::common::*;
use serde_json::Value;
use std::path::Path;

fn python_script(dir: &Path, name: &str, text: &str, args: &[&str]) -> Run {
    let script = dir.join(name);
    std::fs::write(&script, text).unwrap();
    finish(
        python_with_memprof()
            .current_dir(dir)
            .arg(&script)
            .args(args)
            .output()
            .expect("python starts"),
    )
}

/// A line's numbers that must match exactly: hits, Δ and the allocator's stats.
fn exact(line: &Value) -> Value {
    let mut stats = line["stats"].clone();
    if let Some(map) = stats.as_object_mut() {
        map.retain(|k, _| !k.starts_with("host_"));
    }
    serde_json::json!([line["line"], line["hits"], line["delta_bytes"], stats])
}

#[test]
fn the_apis_report_is_the_commands_line_by_line() {
    let dir = tempfile::tempdir().unwrap();
    let api = dir.path().join("api.json");
    let (r, cli) = profile(&[], &["-f", "step", "inprocess_step.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = finish(
        python_with_memprof()
            .arg("inprocess_step.py")
            .arg("--api")
            .arg(&api)
            .output()
            .unwrap(),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let api = read_json(&api);
    let (a, b) = (function(&cli, "step"), function(&api, "step"));
    let lines =
        |f: &Value| -> Vec<Value> { f["lines"].as_array().unwrap().iter().map(exact).collect() };
    assert_eq!(lines(a), lines(b));
    assert_eq!(lines(a).len(), 6);
    assert_eq!(a["lines"][1]["hits"], 3, "{a}");
    for key in ["allocated_bytes", "reserved_bytes"] {
        assert_eq!(cli["peak"][key], api["peak"][key], "{key}");
    }
    let sites = |r: &Value| -> Vec<Value> {
        r["peak"]["sites"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| serde_json::json!([s["line"], s["function"], s["bytes"], s["blocks"]]))
            .collect()
    };
    assert_eq!(sites(&cli), sites(&api));
    assert_eq!(api["warnings"], serde_json::json!([]), "{api:#}");
    // What `memprof show` reads.
    let shown = finish(
        memprof()
            .args(["show"])
            .arg(dir.path().join("api.json"))
            .output()
            .unwrap(),
    );
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(
        shown.stdout.contains("Function: step at line 13"),
        "{}",
        shown.stdout
    );
}

const SESSIONS: &str = r#"
import importlib._bootstrap_external as ext, json, sys, threading
import torch, memprof

def state():
    return [repr(sys.gettrace()), repr(threading.gettrace()), len(sys.meta_path),
            ext.SourceLoader.get_code.__qualname__,
            [sys.monitoring.get_tool(i) for i in range(6)] if hasattr(sys, "monitoring") else [],
            [id(vars(torch.nn.Module)[n])
             for n in ("__call__", "_wrapped_call_impl", "_call_impl")]]

def f(n):
    t = torch.ones(n)
    return t

before = state()
out = {}
with memprof.profile(f, device="cpu") as r:
    f(1000)
    try:
        with memprof.profile(device="cpu"):
            pass
    except RuntimeError as e:
        out["nested"] = str(e)
out["first"] = r.function("f")["lines"][1]["hits"]
out["bytes"] = r.function("f")["lines"][1]["delta_bytes"]
out["after_first"] = state() == before
with memprof.profile("f", device="cpu") as r2:
    f(10); f(10)
out["second"] = r2.function("f")["lines"][1]["hits"]
out["after_second"] = state() == before
try:
    memprof.profile(device="cpu", stats=["allocated_bytes.all.peek"]).__enter__()
except ValueError as e:
    out["bad_stat"] = str(e)
with memprof.profile(device="cpu") as r3:
    kept = torch.zeros(256, 256)
out["peak_above_start"] = r3.peak_above_start
out["after_bad"] = state() == before
out["repr"] = repr(r3)
net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
for k in ("modules_first", "modules_second"):
    with memprof.profile(modules=True, device="cpu") as rm:
        net(torch.randn(32, 64)).sum().backward()
    out[k] = sorted((e["module"], e["phase"], e["calls"]) for e in rm.modules["modules"])
out["after_modules"] = state() == before
# The program's own `Module.__call__` in place: memprof wraps `_call_impl` under it instead.
torch_call, own_calls = torch.nn.Module.__call__, []
def own_call(self, *args, **kwargs):
    own_calls.append(type(self).__name__)
    return torch_call(self, *args, **kwargs)
torch.nn.Module.__call__ = own_call
with memprof.profile(modules=True, device="cpu") as rm:
    net(torch.randn(32, 64)).sum().backward()
out["modules_under_own_call"] = sorted((e["module"], e["phase"], e["calls"])
                                       for e in rm.modules["modules"])
out["own_calls"] = own_calls
torch.nn.Module.__call__ = torch_call
out["after_own_call"] = state() == before
def tracer(frame, event, arg):
    return None
sys.settrace(tracer)
with memprof.profile(f, device="cpu"):
    f(10)
out["tracer_kept"] = sys.gettrace() is tracer
sys.settrace(None)
@memprof.profile(device="cpu")
def g():
    return torch.ones(4)
g(); g()
out["decorated"] = g.memprof_report.function("g")["calls"]
print(json.dumps(out))
"#;

#[test]
fn sessions_measure_again_never_nest_and_leave_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let r = python_script(dir.path(), "sessions.py", SESSIONS, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out: Value = serde_json::from_str(r.stdout.trim()).unwrap_or_else(|e| {
        panic!("{e}: {}\n{}", r.stdout, r.stderr);
    });
    assert!(
        out["nested"].as_str().unwrap().contains("do not nest"),
        "{out}"
    );
    assert_eq!((&out["first"], &out["bytes"]), (&1.into(), &4000.into()));
    assert_eq!(
        out["second"], 2,
        "a name resolved in code loaded before the session"
    );
    for k in ["after_first", "after_second", "after_bad"] {
        assert_eq!(out[k], true, "{k}: memprof left something installed");
    }
    let bad = out["bad_stat"].as_str().unwrap();
    assert!(bad.contains("allocated_bytes.all.peek"), "{bad}");
    assert_eq!(out["peak_above_start"], 256 * 256 * 4);
    assert_eq!(out["decorated"], 1, "each call its own report");
    // --modules in two sessions: each has its own module rows (the native tracker is fresh).
    let rows = out["modules_first"].as_array().unwrap();
    assert!(
        rows.iter().any(|r| r[1] == "backward") && rows.len() >= 6,
        "{rows:?}"
    );
    assert_eq!(out["modules_second"], out["modules_first"]);
    assert_eq!(out["after_modules"], true, "the module hooks are gone");
    // Under the program's own `Module.__call__`, the same rows through the wrapper of
    // `_call_impl`, the program's function called for every module, and both taken out after.
    assert_eq!(out["modules_under_own_call"], out["modules_first"]);
    assert_eq!(
        out["own_calls"],
        serde_json::json!(["Sequential", "Linear", "ReLU", "Linear"])
    );
    assert_eq!(out["after_own_call"], true, "{out}");
    assert_eq!(
        out["tracer_kept"], true,
        "the program's own trace function (coverage's) stays"
    );
}

const LIMITS: &str = r#"
import pytest, torch

MiB = 1024 * 1024

@pytest.mark.limit_device_memory("2 MiB")
def test_within():
    x = torch.ones(MiB // 4)           # 1 MiB
    assert x.sum() == MiB // 4

@pytest.mark.limit_device_memory("1 MiB")
def test_over():
    kept = torch.ones(MiB // 16)       # 256 KiB
    x = torch.ones(MiB // 4)           # 1 MiB: 1.25 MiB live
    del x

def test_raises():
    x = torch.ones(10)
    raise ValueError("the test's own error")

def test_unlimited():
    x = torch.ones(4 * MiB)

@pytest.mark.limit_device_memory("64 MiB")
def test_own_limit_wins():
    x = torch.ones(MiB)                # 4 MiB
"#;

#[test]
fn the_pytest_plugin_fails_a_test_over_its_limit_and_says_where_the_peak_came_from() {
    if on_cuda() {
        return; // CPU tensors here; the CUDA case is scripts/gpu-inprocess-check.sh (the wheel)
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("test_limits.py"), LIMITS).unwrap();
    let reports = dir.path().join("reports");
    let r = pytest(
        dir.path(),
        &[
            "--memprof-report",
            reports.to_str().unwrap(),
            "test_limits.py",
        ],
    );
    let text = format!("{}{}", r.stdout, r.stderr);
    assert_eq!(r.code, 1, "{text}");
    assert!(text.contains("2 failed, 3 passed"), "{text}");
    assert!(
        text.contains(
            "test_over: device peak 1.25 MiB (1310720 B) on cpu is over its limit of 1.00 MiB \
             (@pytest.mark.limit_device_memory('1 MiB'))"
        ),
        "{text}"
    );
    assert!(
        text.contains("peak reached at test_limits.py:14 test_over: x = torch.ones(MiB // 4)"),
        "{text}"
    );
    assert!(
        text.contains("1.00 MiB  test_limits.py:14 test_over: x = torch.ones(MiB // 4)"),
        "{text}"
    );
    assert!(
        text.contains("256.00 KiB  test_limits.py:13 test_over: kept = torch.ones(MiB // 16)"),
        "{text}"
    );
    assert!(text.contains("ValueError: the test's own error"), "{text}");
    // One report per test, the erroring one's too, each one `memprof show` reads.
    let mut names: Vec<String> = std::fs::read_dir(&reports)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 5, "{names:?}");
    let raised = reports.join("test_limits.py_test_raises.json");
    let report = read_json(&raised);
    assert_eq!(
        report["metadata"]["outcome"]["status"], "exception",
        "{report:#}"
    );
    let shown = finish(memprof().arg("show").arg(&raised).output().unwrap());
    assert_eq!(shown.code, 0, "{}", shown.stderr);

    // A limit for every test: the marked ones keep their own.
    let r = pytest(dir.path(), &["--memprof-limit", "2 MiB", "test_limits.py"]);
    let text = format!("{}{}", r.stdout, r.stderr);
    assert!(text.contains("3 failed, 2 passed"), "{text}");
    // (test_raises's 40-byte tensor may still be alive in its traceback: above that.)
    assert!(
        text.contains("test_unlimited: device peak 16.00 MiB (")
            && text.contains("B) on cpu is over its limit of 2.00 MiB (--memprof-limit 2 MiB)"),
        "{text}"
    );
    // A size that is not one: a usage error before any test runs.
    let r = pytest(dir.path(), &["--memprof-limit", "2 MIBS", "test_limits.py"]);
    let text = format!("{}{}", r.stdout, r.stderr);
    assert_eq!(r.code, 4, "{text}");
    assert!(text.contains("'2 MIBS' is not a size"), "{text}");
}

#[test]
fn a_jupyter_kernel_runs_both_magics() {
    if on_cuda() {
        return; // the GPU machine is offline, without a Jupyter kernel: CI runs this one
    }
    // scripts/notebook_check.py: a notebook with %memprof and %%memprof in a real kernel (also
    // what scripts/wheel_check.py runs against the installed wheel).
    let r = finish(
        python_with_memprof()
            .arg(root().join("scripts").join("notebook_check.py"))
            .output()
            .expect("python starts"),
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("NOTEBOOK OK"), "{}", r.stdout);
}

#[test]
fn under_memprof_run_a_session_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("nested.py");
    std::fs::write(
        &script,
        "import memprof\n\
         try:\n\
         \x20   with memprof.profile():\n\
         \x20       pass\n\
         except RuntimeError as e:\n\
         \x20   print('refused:', e)\n",
    )
    .unwrap();
    let r = finish(
        memprof()
            .env("PYTHONPATH", root().join("src").join("wheel"))
            .args(["--device", "cpu", "run", "-o"])
            .arg(dir.path().join("r.json"))
            .arg(&script)
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("refused: `memprof run` is already profiling this program"),
        "{}",
        r.stdout
    );
}

/// On a rank of a distributed run (torchrun sets RANK and WORLD_SIZE), `memprof.profile()` was
/// refused with "-o is the command's": the command's default report file per rank was taken for
/// an `-o` the user gave. The session measures, and writes no file.
#[test]
fn a_session_on_a_rank_of_a_distributed_run_measures_and_writes_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("rank.py");
    std::fs::write(
        &script,
        "import memprof, torch\n\
         with memprof.profile(device='cpu') as r:\n\
         \x20   x = torch.ones(1024)\n\
         print(r.peak['allocated_bytes'], r.metadata['process']['rank'])\n",
    )
    .unwrap();
    let r = finish(
        python_with_memprof()
            .current_dir(dir.path())
            .env("RANK", "1")
            .env("LOCAL_RANK", "1")
            .env("WORLD_SIZE", "2")
            .arg(&script)
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "4096 1", "{}", r.stderr);
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files, ["rank.py"]);
}

#[test]
fn cpu_tensors_from_before_the_first_session_are_live_at_its_start_and_free_silently() {
    if on_cuda() {
        return; // the CPU allocator's own bookkeeping: the CUDA allocator counts by itself
    }
    let dir = tempfile::tempdir().unwrap();
    let r = python_script(
        dir.path(),
        "before.py",
        r#"import json, torch, memprof
MiB = 1024 * 1024
big = torch.ones(4 * MiB)            # 16 MiB, before any session
view = big[: MiB]                     # a view: the same storage, counted once
with memprof.profile(device="cpu") as r:
    x = torch.ones(1024)              # 4 KiB
del big, view                          # freed after the session
with memprof.profile(device="cpu") as again:
    y = torch.ones(1024)
print(json.dumps({"start": r.allocated_at_start, "peak": r.peak["allocated_bytes"],
                  "again": again.allocated_at_start}))
"#,
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(out["start"], 16 * MIB, "{out}");
    assert_eq!(out["peak"], 16 * MIB + 4 * KIB, "{out}");
    // The 16 MiB went after the first session: the second starts with x's 4 KiB only.
    assert_eq!(out["again"], 4 * KIB, "{out}");
    // torch's CPU reporter knew the block: no "unknown size" warning in the program's stderr.
    assert!(!r.stderr.contains("unknown size"), "{}", r.stderr);
}

#[test]
fn each_session_writes_its_own_allocation_history() {
    if on_cuda() {
        return; // on CUDA: scripts/device/inprocess_history_check.py
    }
    let dir = tempfile::tempdir().unwrap();
    let r = python_script(
        dir.path(),
        "history.py",
        r#"import json, pickle, torch, memprof
def step(n):
    a = torch.ones(n, 1024)          # n * 4 KiB
    b = a * 2                         # n * 4 KiB
    return float(b.sum())
out = {}
for name, n in (("first", 64), ("second", 128)):
    with memprof.profile(step, device="cpu", history=name + ".pickle") as r:
        for _ in range(3):
            step(n)
    snapshot = pickle.load(open(name + ".pickle", "rb"))
    allocs = [e for e in snapshot["device_traces"][0] if e["action"] == "alloc"]
    out[name] = {"big": sorted(e["size"] for e in allocs if e["size"] >= 4096),
                 "lines": sorted({e["frames"][0]["line"] for e in allocs if e["size"] >= 4096}),
                 "report": r.to_dict()["history"]["events"],
                 "recorded": snapshot["memprof"]["events"]}
# warmup= and calls= in a `with` block: the command's --warmup and --calls; the history ends
# with the last measured call (calls 2 and 3 of five).
with memprof.profile(step, device="cpu", history="scheduled.pickle", warmup=1, calls=2) as r:
    for n in (1, 2, 3, 4, 5):
        step(n)
snapshot = pickle.load(open("scheduled.pickle", "rb"))
out["scheduled"] = sorted(e["size"] for e in snapshot["device_traces"][0]
                          if e["action"] == "alloc" and e["size"] >= 4096)
out["scheduled_hits"] = [l["hits"] for l in r.function("step")["lines"]]
try:
    memprof.profile(step, every=2).__enter__()
except TypeError as e:
    out["every"] = str(e)
with memprof.profile(step, device="cpu") as r:
    step(8)
out["without"] = r.to_dict().get("history")
try:
    memprof.profile(step, history=3)
except TypeError as e:
    out["refused"] = str(e)
print(json.dumps(out))
"#,
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out: Value = serde_json::from_str(r.stdout.trim()).unwrap_or_else(|e| {
        panic!("{e}: {}\n{}", r.stdout, r.stderr);
    });
    // Each file holds its own session's steps only: three steps of two n x 4 KiB tensors, at
    // the lines that made them; the second session's file nothing of the first's.
    for (name, n) in [("first", 64), ("second", 128)] {
        assert_eq!(
            out[name]["big"],
            serde_json::json!(vec![n * 4096; 6]),
            "{out}"
        );
        assert_eq!(out[name]["lines"], serde_json::json!([3, 4]), "{out}");
        assert_eq!(out[name]["report"], out[name]["recorded"], "{out}");
    }
    assert_eq!(
        out["scheduled"],
        serde_json::json!([8192, 8192, 12288, 12288]),
        "{out}"
    );
    assert_eq!(
        out["scheduled_hits"],
        serde_json::json!([0, 2, 2, 2]),
        "{out}"
    );
    assert!(out["every"]
        .as_str()
        .unwrap()
        .contains("`with` block runs once"));
    assert_eq!(
        out["without"],
        Value::Null,
        "no history asked, none written"
    );
    assert!(
        out["refused"].as_str().unwrap().contains("a file's path"),
        "{out}"
    );
}
