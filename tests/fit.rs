//! `memprof fit` (issue 23, its first part): a hand-made trace whose allocator outcome is worked
//! out by hand (analysis/allocator/tests.rs has the rules case by case) replayed through the
//! binary: where it runs out of memory, and the settings and sizes that make it fit.
use crate::common::*;

fn fit(args: &[&str]) -> Run {
    finish(memprof().arg("fit").args(args).output().unwrap())
}

#[test]
fn a_fragmented_trace_runs_out_where_worked_out_and_fits_on_a_larger_device() {
    // 40 MiB: x, y from segment A (20 MiB: 8 + 8 + 4 free), z in segment B; x and z freed; the
    // 24 MiB request finds 12 MiB free in A and 20 on the device once B is released: no 24 in
    // one piece. One retry, then out of memory with y's 8 MiB allocated and A's 20 reserved.
    let r = fit(&["traces/fragmentation.json", "--format", "json"]);
    assert_eq!(r.code, 5, "{}", r.stderr);
    let p = r.json();
    assert_eq!(p["fits"], false);
    assert_eq!(
        p["out_of_memory"],
        serde_json::json!({
            "event": 5, "at": "model.py:15", "requested_bytes": 25165824,
            "allocation_bytes": 25165824, "allocated_bytes": 8388608, "reserved_bytes": 20971520
        })
    );
    assert_eq!(p["predicted"]["num_alloc_retries"], 1);
    assert_eq!(p["predicted"]["reserved_bytes.all.peak"], 41943040);
    assert_eq!(p["measured"]["num_alloc_retries"], 1);
    // 44 MiB: 40 + 24 > 44, so B is freed (one retry) and the 24 MiB segment fits beside A:
    // 44 MiB reserved at the peak.
    let r = fit(&[
        "traces/fragmentation.json",
        "--memory",
        "44MiB",
        "--format",
        "json",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let p = r.json();
    assert_eq!(p["fits"], true);
    assert_eq!(p["predicted"]["reserved_bytes.all.peak"], 44 * 1024 * 1024);
    assert_eq!(p["predicted"]["num_alloc_retries"], 1);
    // The table says it in words.
    let r = fit(&["traces/fragmentation.json"]);
    assert!(
        r.stdout.contains(
            "fits: no — runs out of memory at event 5 (model.py:15): tried to allocate 24.00 MiB"
        ),
        "{}",
        r.stdout
    );
}

#[test]
fn bad_settings_and_traces_get_one_message_and_exit_2() {
    let r = fit(&[
        "traces/fragmentation.json",
        "--alloc-conf",
        "max_split_size_mb:8",
    ]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("max_split_size_mb:8 is too small"),
        "{}",
        r.stderr
    );
    let r = fit(&[
        "traces/fragmentation.json",
        "--alloc-conf",
        "expandable_segments:True",
    ]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("not modelled yet"), "{}", r.stderr);
    let r = fit(&["lines.py"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("is not a memprof allocation trace"),
        "{}",
        r.stderr
    );
    let r = fit(&["traces/fragmentation.json", "--memory", "lots"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("--memory lots is not a size"),
        "{}",
        r.stderr
    );
}
