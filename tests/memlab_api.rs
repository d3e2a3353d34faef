//! pytorch_memlab's API in memprof (fixtures/memlab_api.py), through real Python and torch:
//! `@memprof.profile(every=N)` prints a table per N calls with those calls' exact Δ, in python
//! and under `memprof run`; warmup and calls schedule them as the command's flags do;
//! `memprof.courtesy()` moves every tensor the program reaches and back, keeping identities,
//! values, strides, views and the optimizer's state, the training going on with the same losses,
//! its report exact by category; storages autograd also holds stay and are named. (On the CPU
//! the move is CPU to fresh CPU storages; the H100 run is scripts/gpu-courtesy-check.py.)
use crate::common::*;
use serde_json::Value;

const MIB: i64 = 1024 * 1024;

fn fixture_run(args: &[&str]) -> Run {
    finish(
        python_with_memprof()
            .arg(fixture("memlab_api.py"))
            .args(args)
            .output()
            .expect("python starts"),
    )
}

/// The JSON after `TAG ` on its line of `stdout`.
fn tagged(stdout: &str, tag: &str) -> Value {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{tag} ")))
        .unwrap_or_else(|| panic!("no {tag} line in:\n{stdout}"));
    serde_json::from_str(line).unwrap()
}

/// The group headers `memprof: ...` in order.
fn headers(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| l.starts_with("memprof: "))
        .collect()
}

fn calls_lines(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter_map(|l| l.split(" · ").find(|p| p.starts_with("Calls: ")))
        .collect()
}

#[test]
fn every_n_prints_each_groups_table_with_those_calls_deltas() {
    let r = fixture_run(&["every"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        headers(&r.stdout),
        vec![
            "memprof: every.<locals>.step, calls 1–3",
            "memprof: every.<locals>.step, calls 4–6",
            "memprof: every.<locals>.step, call 7 (the program ended)",
        ],
        "{}",
        r.stdout
    );
    assert_eq!(
        calls_lines(&r.stdout),
        vec!["Calls: 3", "Calls: 3", "Calls: 1"]
    );
    // The second group's report: each line's hits and Δ over its three calls, exact.
    let group = tagged(&r.stdout, "GROUP");
    assert_eq!(group["calls"], 3);
    let lines = &group["lines"];
    assert_eq!(
        lines["a = torch.empty(MIB, dtype=torch.uint8, device=DEV)"],
        serde_json::json!([3, 3 * MIB])
    );
    assert_eq!(
        lines["b = torch.empty(2 * MIB, dtype=torch.uint8, device=DEV)"],
        serde_json::json!([3, 6 * MIB])
    );
    assert_eq!(lines["del a"], serde_json::json!([3, -3 * MIB]));
}

#[test]
fn warmup_and_calls_schedule_the_groups() {
    let r = fixture_run(&["schedule"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        headers(&r.stdout),
        vec![
            "memprof: schedule.<locals>.step, calls 2–3",
            "memprof: schedule.<locals>.step, calls 4–5",
        ],
        "{}",
        r.stdout
    );
    assert_eq!(calls_lines(&r.stdout), vec!["Calls: 2", "Calls: 2"]);
}

#[test]
fn every_n_under_memprof_run_prints_the_runs_lines_so_far() {
    let r = finish(
        memprof()
            .args(["--device", device_flag(), "run"])
            .arg(fixture("memlab_api.py"))
            .arg("every")
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let printed = headers(&r.stdout);
    assert_eq!(
        &printed[..2],
        &[
            "memprof: every.<locals>.step, calls 1–3 (so far in this memprof run)",
            "memprof: every.<locals>.step, calls 1–6 (so far in this memprof run)",
        ],
        "{}",
        r.stdout
    );
    // After the loop, the run's report so far: all 7 calls, each line's Δ over them.
    let group = tagged(&r.stdout, "GROUP");
    assert_eq!(group["calls"], 7);
    assert_eq!(
        group["lines"]["b = torch.empty(2 * MIB, dtype=torch.uint8, device=DEV)"],
        serde_json::json!([7, 14 * MIB])
    );
}

#[test]
fn courtesy_moves_every_tensor_and_back_and_the_training_goes_on() {
    let r = fixture_run(&["courtesy", "cpu"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let bare = fixture_run(&["none", "cpu"]);
    assert_eq!(bare.code, 0, "{}", bare.stderr);
    assert_eq!(tagged(&r.stdout, "LOSSES"), tagged(&bare.stdout, "LOSSES"));
    let after = tagged(&r.stdout, "AFTER");
    for key in [
        "same_objects",
        "values",
        "grads",
        "state",
        "meta",
        "view_shares",
        "view_equal",
    ] {
        assert_eq!(after[key], true, "{key}: {after:#}");
    }
    assert_eq!(tagged(&r.stdout, "DURING")["view_shares"], true);
    // Linear(256, 512), BatchNorm1d(512), Linear(512, 16) in float32, and Adam's two moments
    // and its step (a float32 scalar) per parameter; the BatchNorm's running mean and variance
    // and its int64 batch count.
    let params = (256 * 512 + 512 + 2 * 512 + 512 * 16 + 16) * 4;
    let report = tagged(&r.stdout, "REPORT");
    let moved = &report["moved_by_category"];
    assert_eq!(moved["parameters"], params);
    assert_eq!(moved["gradients"], params);
    assert_eq!(moved["optimizer_state"], 2 * params + 6 * 4);
    assert_eq!(moved["buffers"], 2 * 512 * 4 + 8);
    assert_eq!(report["kept"], serde_json::json!([]));
}

#[test]
fn courtesy_keeps_what_autograd_also_holds_and_the_backward_still_runs() {
    let r = fixture_run(&["graph"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let report = tagged(&r.stdout, "REPORT");
    let kept = report["kept"].as_array().unwrap();
    assert_eq!(kept.len(), 1, "{report:#}");
    assert!(kept[0]["reason"]
        .as_str()
        .unwrap()
        .starts_with("held also where Python cannot reach"));
    // ReLU's saved output (32 x 128 float32) and the last Linear's weight, saved transposed.
    assert_eq!(kept[0]["bytes"], 32 * 128 * 4 + 8 * 128 * 4);
    assert_eq!(tagged(&r.stdout, "SAME_GRADS"), true);
}
