//! `--max` budgets (exit 3, the lines that broke them marked) and `memprof diff` between two runs
//! (lines matched by source text across an inserted line; `--max-increase`, exit 4), with exact
//! numbers from fixtures of known allocations (multiples of 2 MiB: the same on CUDA).
mod common;
use common::*;
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
    // The largest increase: the first line that grew most.
    let largest = &d["largest_increase"];
    assert_eq!(
        (
            largest["line"].clone(),
            largest["key"].clone(),
            largest["change"].clone()
        ),
        (json!(14), json!("delta"), json!(4 * MIB))
    );
}

#[test]
fn max_increase_fails_with_exit_4_and_names_the_lines() {
    let (r, d) = diff_runs(&["allocated_bytes.all.current=5MiB", "delta=50%"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    let held = &d["limits"][0];
    assert_eq!(
        held["exceeded"],
        json!([]),
        "no line's current grew by more than 5 MiB"
    );
    let broke: Vec<String> = d["limits"][1]["exceeded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["source"].as_str().unwrap().to_string())
        .collect();
    assert!(
        broke
            .iter()
            .any(|s| s.starts_with("b = torch.empty(SIZE_B")),
        "{broke:?}"
    );
    assert!(
        broke.iter().any(|s| s.starts_with("extra = torch.empty")),
        "{broke:?}"
    );
    let (r, _) = diff_runs(&["delta=100%"]);
    assert_eq!(r.code, 4, "the added line grows from nothing");
    let (r, _) = diff_runs(&["allocated_bytes.all.peak=6MiB"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (r, _) = diff_runs(&["reserved_bytes.all.peak=1MiB"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("is not compared"), "{}", r.stderr);
}
