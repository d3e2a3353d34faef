//! `--warmup N --calls M`: exactly the chosen calls are measured (call i of the fixture's step
//! allocates 2 (i + 1) MiB, so the bytes say which calls were), memprof stops its hooks once every
//! target had its calls, and the schedule applies to --modules and --tensors too.
use crate::common::*;

#[test]
fn warmup_and_calls_measure_exactly_the_chosen_calls_then_stop() {
    let (r, report) = profile(
        &["allocated_bytes.all.allocated"],
        &[
            "-f",
            "step",
            "-f",
            "after",
            "--warmup",
            "2",
            "--calls",
            "3",
            "schedule.py",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let step = function(&report, "step");
    assert_eq!(step["measured_calls"], serde_json::json!([3, 5]));
    let a = line(step, "a = torch.empty");
    assert_eq!(hits(a), 3);
    // Calls 3, 4 and 5 allocate 6, 8 and 10 MiB.
    assert_eq!(stat(a, "allocated_bytes.all.allocated"), 24 * MIB);
    assert_eq!(delta(a), 24 * MIB);
    let schedule = &report["metadata"]["schedule"];
    assert_eq!(schedule["warmup"], 2);
    assert_eq!(schedule["calls"], 3);
    // `after` never had its 3 calls, so the hooks stayed on: every call of step was seen.
    assert_eq!(step["calls"], 6);
    assert_eq!(schedule["stopped_early"], false);

    let (r, report) = profile(
        &["allocated_bytes.all.allocated"],
        &[
            "-f",
            "step",
            "--warmup",
            "2",
            "--calls",
            "3",
            "--tensors",
            "schedule.py",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let step = function(&report, "step");
    assert_eq!(
        step["calls"], 5,
        "the hooks stopped after the fifth call: the sixth was not seen"
    );
    assert_eq!(report["metadata"]["schedule"]["stopped_early"], true);
    let whens: Vec<&str> = report["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["when"].as_str().unwrap())
        .collect();
    assert_eq!(
        whens,
        ["end of step (call 3)", "end of step (call 5)"],
        "inventories of the measured calls only"
    );
}

#[test]
fn warmup_alone_measures_every_later_call() {
    let (r, report) = profile(
        &["allocated_bytes.all.allocated"],
        &["-f", "step", "--warmup", "4", "schedule.py"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let step = function(&report, "step");
    assert_eq!(step["measured_calls"], serde_json::json!([5, 6]));
    assert_eq!(
        stat(
            line(step, "a = torch.empty"),
            "allocated_bytes.all.allocated"
        ),
        22 * MIB
    );
    assert_eq!(report["metadata"]["schedule"]["stopped_early"], false);
}

#[test]
fn the_module_schedule_counts_root_calls_or_follows_the_targets() {
    // No -f: the root model's forward calls are counted; 2 measured after 1 skipped.
    let (r, report) = profile(
        &[],
        &["--modules", "--warmup", "1", "--calls", "2", "schedule.py"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let rows = report["modules"]["modules"].as_array().unwrap();
    let root = rows
        .iter()
        .find(|e| e["module"] == "" && e["phase"] == "forward")
        .unwrap();
    assert_eq!(root["calls"], 2);
    assert_eq!(report["metadata"]["schedule"]["stopped_early"], true);

    // With -f, module calls are measured inside the targets' measured calls.
    let (r, report) = profile(
        &[],
        &[
            "-f",
            "step",
            "--modules",
            "--warmup",
            "3",
            "--calls",
            "2",
            "schedule.py",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let rows = report["modules"]["modules"].as_array().unwrap();
    let linear = rows
        .iter()
        .find(|e| e["module"] == "0" && e["phase"] == "forward")
        .unwrap();
    assert_eq!(linear["calls"], 2);
}

#[test]
fn calls_must_be_positive() {
    let r = run(&["-f", "step", "--calls", "0", "schedule.py"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("--calls"), "{}", r.stderr);
}
