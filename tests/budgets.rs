//! `--max` budgets (exit 3, the lines that broke them marked) and `memprof diff` between two runs
//! (lines matched by source text across an inserted line; `--max-increase`, exit 4), with exact
//! numbers from fixtures of known allocations (multiples of 2 MiB: the same on CUDA).
use crate::common::*;
use serde_json::{json, Value};

fn budgets_of(report: &Value) -> &Vec<Value> {
    report["budgets"]
        .as_array()
        .expect("the report has budgets")
}

#[test]
fn a_budget_that_holds_exits_0_and_one_that_breaks_exits_3_naming_the_lines() {
    let stats = ["allocated_bytes.all.current"];
    // lines.py: step's peak is 8.5 MiB (at `c = a.clone()` and `del a`).
    let (r, report) = profile(
        &stats,
        &[
            "--max",
            "allocated_bytes.all.peak=9MiB",
            "-f",
            "step",
            "lines.py",
            "x",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(budgets_of(&report)[0]["exceeded"], json!([]));
    assert!(
        report["metadata"]["stats"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["key"] == "allocated_bytes.all.peak"),
        "a budgeted stat is measured even when --stat left it out"
    );

    let (r, report) = profile(
        &stats,
        &[
            "--max",
            "allocated_bytes.all.peak=8MiB",
            "--max",
            "loop:delta=1",
            "-f",
            "step",
            "-f",
            "loop",
            "lines.py",
            "x",
        ],
    );
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("budget exceeded: --max allocated_bytes.all.peak=8MiB"),
        "{}",
        r.stderr
    );
    let b = &budgets_of(&report)[0];
    assert_eq!(b["limit"], 8 * MIB);
    let lines: Vec<(&str, u64, i64)> = b["exceeded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["function"].as_str().unwrap(),
                e["line"].as_u64().unwrap(),
                e["value"].as_i64().unwrap(),
            )
        })
        .collect();
    let step = function(&report, "step");
    let clone = line(step, "c = a.clone()")["line"].as_u64().unwrap();
    let del = line(step, "del a")["line"].as_u64().unwrap();
    assert_eq!(
        lines,
        [
            ("step", clone, 8 * MIB + 512 * KIB),
            ("step", del, 8 * MIB + 512 * KIB)
        ]
    );
    // A per-function budget looks at that function only.
    let per_function = &budgets_of(&report)[1];
    assert_eq!(per_function["function"], "loop");
    assert!(per_function["exceeded"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["function"] == "loop"));

    // The table marks the lines.
    let r = run(&[
        "--max",
        "allocated_bytes.all.peak=8MiB",
        "-f",
        "step",
        "lines.py",
        "x",
    ]);
    assert_eq!(r.code, 3);
    assert!(r.stdout.contains("Over budget"), "{}", r.stdout);
    assert!(
        r.stdout.contains("EXCEEDED  allocated_bytes.all.peak=8MiB"),
        "{}",
        r.stdout
    );
}

#[test]
fn a_scripts_own_failure_comes_before_a_broken_budget() {
    let r = run(&["--max", "delta=0", "-f", "fail", "raises.py"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
}

#[test]
fn bad_budget_expressions_are_usage_errors() {
    for (spec, why) in [
        ("allocated_bytes.all.peak", "no '='"),
        ("allocated_bytes.all.peak=big", "'big' is not a size"),
        ("segments.all.peek=1", "is not a stat here"),
    ] {
        let r = run(&["--max", spec, "-f", "step", "lines.py", "x"]);
        assert_eq!(r.code, 2, "{spec}: {}", r.stderr);
        assert!(r.stderr.contains(why), "{spec}: {}", r.stderr);
    }
}

/// Reports of diff_base.py and diff_new.py, and their diff as JSON (with the given limits).
fn diff_runs(limits: &[&str]) -> (Run, Value) {
    let dir = tempfile::tempdir().unwrap();
    let stats = "allocated_bytes.all.peak,allocated_bytes.all.current";
    for name in ["diff_base", "diff_new"] {
        let out = dir.path().join(format!("{name}.json"));
        let r = run(&[
            "--stat",
            stats,
            "-f",
            "step",
            "--format",
            "json",
            "-o",
            out.to_str().unwrap(),
            &format!("{name}.py"),
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let mut cmd = memprof();
    cmd.args(["diff", "--format", "json"])
        .arg(dir.path().join("diff_base.json"))
        .arg(dir.path().join("diff_new.json"));
    for l in limits {
        cmd.args(["--max-increase", l]);
    }
    let r = finish(cmd.output().unwrap());
    let v = serde_json::from_str(&r.stdout).unwrap_or(Value::Null);
    (r, v)
}

fn diff_line<'a>(d: &'a Value, needle: &str) -> &'a Value {
    d["functions"][0]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["source"].as_str().unwrap().contains(needle))
        .unwrap_or_else(|| panic!("no line {needle:?} in {d:#}"))
}

#[test]
fn diff_matches_lines_by_source_across_an_insertion_with_exact_changes() {
    let (r, d) = diff_runs(&[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(d["schema"], "memprof.diff/1");
    assert_eq!(
        d["compared"],
        json!([
            "delta",
            "allocated_bytes.all.peak",
            "allocated_bytes.all.current"
        ])
    );
    // `b = torch.empty(SIZE_B ...)` moved from line 14 to 15 and allocates 2 MiB more per call.
    let b = diff_line(&d, "b = torch.empty(SIZE_B");
    assert_eq!(
        (
            b["status"].clone(),
            b["base_line"].clone(),
            b["new_line"].clone()
        ),
        (json!("same"), json!(14), json!(15))
    );
    assert_eq!(
        b["delta_bytes"],
        json!({"base": 4 * MIB, "new": 8 * MIB, "change": 4 * MIB})
    );
    assert_eq!(
        b["stats"]["allocated_bytes.all.peak"],
        json!({"base": 6 * MIB, "new": 10 * MIB, "change": 4 * MIB})
    );
    // The inserted line is new; its 2 MiB per call count from nothing.
    let extra = diff_line(&d, "extra = torch.empty");
    assert_eq!(
        (
            extra["status"].clone(),
            extra["base_line"].clone(),
            extra["new_line"].clone()
        ),
        (json!("added"), json!(null), json!(14))
    );
    assert_eq!(
        extra["delta_bytes"],
        json!({"base": null, "new": 4 * MIB, "change": 4 * MIB})
    );
    // Unchanged lines match with no change; the return frees the extra tensor too.
    let a = diff_line(&d, "a = torch.empty");
    assert_eq!(a["delta_bytes"]["change"], 0);
    let ret = diff_line(&d, "return b.numel()");
    assert_eq!(
        ret["delta_bytes"],
        json!({"base": -4 * MIB, "new": -12 * MIB, "change": -8 * MIB})
    );
    assert_eq!(d["functions"][0]["peak_allocated_bytes"]["change"], 4 * MIB);
    // A level (peak, current) of a line only one run has is not compared; an amount counts 0.
    let extra = diff_line(&d, "extra = torch.empty");
    assert_eq!(
        extra["stats"]["allocated_bytes.all.peak"],
        json!({"base": null, "new": 6 * MIB, "change": null})
    );
    // The largest increase is a function's: step's net Δ per call is 0 in both runs (every
    // tensor is freed by its return), its highest peak over its lines 6 -> 10 MiB (first of the
    // two keys that grew 4 MiB).
    let largest = &d["largest_increase"];
    assert_eq!(
        (
            largest["function"].clone(),
            largest["line"].clone(),
            largest["key"].clone(),
            largest["base"].clone(),
            largest["new"].clone()
        ),
        (
            json!("step"),
            json!(null),
            json!("allocated_bytes.all.peak"),
            json!(6 * MIB),
            json!(10 * MIB)
        )
    );
}

#[test]
fn max_increase_compares_each_functions_peak_and_net_and_fails_with_exit_4() {
    let (r, d) = diff_runs(&[
        "allocated_bytes.all.current=5MiB",
        "allocated_bytes.all.peak=50%",
    ]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert_eq!(
        d["limits"][0]["exceeded"],
        json!([]),
        "step's highest current grew by 4 MiB, within 5 MiB"
    );
    assert_eq!(
        d["limits"][1]["exceeded"],
        json!([{"function": "step", "line": null, "source": "highest over its lines",
                "key": "allocated_bytes.all.peak", "base": 6 * MIB, "new": 10 * MIB,
                "change": 4 * MIB}])
    );
    // Net per call: 0 in both runs, however the lines moved.
    let (r, _) = diff_runs(&["delta=0"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (r, _) = diff_runs(&["allocated_bytes.all.peak=4MiB"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (r, _) = diff_runs(&["allocated_bytes.all.peak=4194303"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    let (r, _) = diff_runs(&["reserved_bytes.all.peak=1MiB"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("is not compared"), "{}", r.stderr);
}

/// Reports of two versions of one step, written into `dir`, and `memprof diff`'s JSON with `limits`.
fn diff_of(dir: &std::path::Path, base: &str, new: &str, limits: &[&str]) -> (Run, Value) {
    for (name, body) in [("base", base), ("new", new)] {
        let script = dir.join(format!("{name}.py"));
        std::fs::write(&script, body).unwrap();
        let r = run(&[
            "-f",
            "step",
            "-o",
            dir.join(format!("{name}.json")).to_str().unwrap(),
            script.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let mut cmd = memprof();
    cmd.args(["diff", "--format", "json"])
        .arg(dir.join("base.json"))
        .arg(dir.join("new.json"));
    for l in limits {
        cmd.args(["--max-increase", l]);
    }
    let r = finish(cmd.output().unwrap());
    let v = serde_json::from_str(&r.stdout).unwrap_or(Value::Null);
    (r, v)
}

#[test]
fn removing_an_allocation_and_its_del_is_not_an_increase() {
    // The first hour's case: NEW only dropped `a = torch.empty(...)` and `del a`. Memory went
    // down; the removed `del a` (a -4 MiB line) must not read as +4 MiB.
    let dir = tempfile::tempdir().unwrap();
    let head = "import os, torch\nDEV = os.environ.get('MEMPROF_TEST_DEVICE', 'cpu')\n";
    let base = format!(
        "{head}def step():\n    x = torch.ones(256, 1024, device=DEV)\n    a = torch.empty(1024, 1024, device=DEV)\n    del a\n    return x\nkeep = [step() for _ in range(3)]\n"
    );
    let new = format!(
        "{head}def step():\n    x = torch.ones(256, 1024, device=DEV)\n    return x\nkeep = [step() for _ in range(3)]\n"
    );
    let (r, d) = diff_of(
        dir.path(),
        &base,
        &new,
        &["delta=1MiB", "allocated_bytes.all.peak=0"],
    );
    assert_eq!(r.code, 0, "{} {d:#}", r.stderr);
    assert!(
        d["largest_increase"].is_null() || d["largest_increase"]["key"] != "delta",
        "{d:#}"
    );
    // What was compared: step's net per call, 1 MiB in both (the tensor it returns).
    let net = &d["functions"][0];
    assert_eq!(net["qualname"], "step");
    let (r, table) = {
        let mut cmd = memprof();
        cmd.args(["diff"])
            .arg(dir.path().join("base.json"))
            .arg(dir.path().join("new.json"))
            .args(["--max-increase", "delta=1MiB"]);
        let r = finish(cmd.output().unwrap());
        let t = r.stdout.clone();
        (r, t)
    };
    assert_eq!(r.code, 0);
    assert!(
        table.contains("held      --max-increase delta=1MiB (≤ 1.00 MiB; compared each function's net per call)"),
        "{table}"
    );
    // The other way round memory went up: the peak gate fails, naming the function.
    let (r, d) = diff_of(dir.path(), &new, &base, &["allocated_bytes.all.peak=1MiB"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert_eq!(d["limits"][0]["exceeded"][0]["change"], 4 * MIB, "{d:#}");
}

/// keep.py: `step` keeps exactly 4 MiB per call, three calls.
fn keeper(dir: &std::path::Path) -> String {
    let script = dir.join("keep.py");
    std::fs::write(
        &script,
        "import os, torch\nDEV = os.environ.get('MEMPROF_TEST_DEVICE', 'cpu')\nkeep = []\ndef step():\n    keep.append(torch.empty(4 * 1024 * 1024, dtype=torch.uint8, device=DEV))\nfor _ in range(3):\n    step()\n",
    )
    .unwrap();
    script.to_string_lossy().into_owned()
}

#[test]
fn a_budget_that_checked_nothing_fails_instead_of_holding() {
    let dir = tempfile::tempdir().unwrap();
    let script = keeper(dir.path());
    // A misspelt -f: nothing measured, so `--max delta=1` checked nothing.
    let r = run(&["--max", "delta=1", "-f", "stpe", &script]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains("budget checked nothing: --max delta=1"),
        "{}",
        r.stderr
    );
    assert!(
        r.stdout
            .contains("UNCHECKED delta=1: no targeted function was measured"),
        "{}",
        r.stdout
    );
    // A budget naming a function that was not measured.
    let r = run(&["--max", "nosuch:delta=1MiB", "-f", "step", &script]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("UNCHECKED nosuch:delta=1MiB: no measured function is named 'nosuch'"),
        "{}",
        r.stdout
    );
    // One that checked lines says how many.
    let r = run(&["--max", "step:delta=12MiB", "-f", "step", &script]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("held      step:delta=12MiB (≤ 12.00 MiB, 1 lines checked)"),
        "{}",
        r.stdout
    );
}

#[test]
fn delta_per_call_budgets_do_not_depend_on_the_number_of_steps() {
    let dir = tempfile::tempdir().unwrap();
    let script = keeper(dir.path());
    // Δ summed over the 3 calls is 12 MiB: a 4 MiB `delta` budget breaks...
    let r = run(&["--max", "delta=4MiB", "-f", "step", &script]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    // ... the per-call form holds at exactly 4 MiB and breaks a byte below.
    let r = run(&["--max", "delta_per_call=4MiB", "-f", "step", &script]);
    assert_eq!(r.code, 0, "{} {}", r.stderr, r.stdout);
    let (r, report) = profile(
        &[],
        &[
            "--max",
            "step:delta_per_call=4194303",
            "-f",
            "step",
            &script,
        ],
    );
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(budgets_of(&report)[0]["exceeded"][0]["value"], 4 * MIB);
}
