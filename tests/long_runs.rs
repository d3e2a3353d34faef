//! Long runs: what grows step after step (fixtures/growing_steps.py). A loop that keeps a
//! detached 32 x 1024 float32 slice of each step's output is found at exactly 131072 bytes a
//! step under an activation peak hundreds of times larger, with the line that led there; a
//! steady loop with Adam (whose state and the first step's workspaces are made once) has
//! nothing growing; without an optimizer the steps are a targeted function's calls.
use crate::common::*;
use serde_json::Value;

const LEAK: i64 = 32 * 1024 * 4;

fn growth(report: &Value) -> &Value {
    &report["growth"]
}

#[test]
fn a_slice_kept_each_step_is_found_at_its_bytes_under_a_far_larger_peak() {
    let (r, report) = profile(&[], &["growing_steps.py", "leak", "12"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let g = growth(&report);
    assert_eq!(g["step"], "optimizer step");
    assert_eq!(g["steps"], 12);
    let sites = g["sites"].as_array().unwrap();
    assert_eq!(sites.len(), 1, "{g:#}");
    let s = &sites[0];
    assert_eq!(s["source"], "kept.append(out[:32].detach().clone())");
    assert_eq!(
        s["context"]["source"],
        "losses = [step() for _ in range(STEPS)]"
    );
    // Grown at each of the 11 steps after the baseline, the same rise each time.
    assert_eq!(
        (&s["bytes_per_step"], &s["least_bytes"], &s["most_bytes"]),
        (&LEAK.into(), &LEAK.into(), &LEAK.into())
    );
    assert_eq!((&s["steps"], &s["since_step"]), (&11.into(), &1.into()));
    assert_eq!(s["grown_bytes"], 11 * LEAK);
    assert_eq!(s["live_bytes"], 12 * LEAK);
    let peak = report["peak"]["allocated_bytes"].as_i64().unwrap();
    assert!(peak > 100 * LEAK, "the peak {peak} is far above the leak");

    // The table's section, only when something grows.
    let table = run(&["growing_steps.py", "leak", "12"]);
    assert!(
        table.stdout.contains(
            "Growing: 1 site whose live bytes rose at each optimizer step for the last 3 or more (12 so far)"
        ),
        "{}",
        table.stdout
    );
    assert!(
        table.stdout.contains("+128.00 KiB      11"),
        "{}",
        table.stdout
    );
}

#[test]
fn a_steady_loop_with_adam_grows_nothing() {
    let (r, report) = profile(&[], &["growing_steps.py", "steady", "12"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let g = growth(&report);
    assert_eq!(g["steps"], 12);
    assert_eq!(g["sites"], serde_json::json!([]), "{g:#}");
    let table = run(&["growing_steps.py", "steady", "12"]);
    assert!(!table.stdout.contains("Growing"), "{}", table.stdout);
}

#[test]
fn without_an_optimizer_the_steps_are_a_targets_calls() {
    let (r, report) = profile(&[], &["-f", "step", "growing_steps.py", "calls", "6"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let g = growth(&report);
    assert_eq!(g["step"], "call of step");
    assert_eq!(g["steps"], 6);
    assert_eq!(g["sites"][0]["bytes_per_step"], LEAK);
    assert_eq!(g["sites"][0]["steps"], 5);
    // No steps of either kind: no record.
    let (_, once) = profile(&[], &["growing_steps.py", "calls", "1"]);
    assert!(once.get("growth").is_none(), "{:#}", once["growth"]);
}
