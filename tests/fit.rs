//! `memprof fit` (issue 23, its first part): a hand-made trace whose allocator outcome is worked
//! out by hand (analysis/allocator/tests.rs has the rules case by case) replayed through the
//! binary: where it runs out of memory, and the settings and sizes that make it fit.
use crate::common::*;

fn fit(args: &[&str]) -> Run {
    finish(memprof().arg("fit").args(args).output().unwrap())
}

/// `memprof fit ARGS --format json`, which must exit with `code`: its prediction.
fn fit_json(args: &[&str], code: i32) -> serde_json::Value {
    let r = fit(&[args, &["--format", "json"]].concat());
    assert_eq!(r.code, code, "{}", r.stderr);
    r.json()
}

/// `memprof run --trace FILE ARGS...` (exit 0): the run's report, the trace, and its path.
fn record_trace(
    dir: &tempfile::TempDir,
    args: &[&str],
) -> (serde_json::Value, serde_json::Value, String) {
    let trace = dir.path().join("trace.json");
    let trace_text = trace.to_string_lossy().into_owned();
    let (r, report) = profile(&[], &[&["--trace", &trace_text], args].concat());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("trace written to"), "{}", r.stderr);
    (report, read_json(&trace), trace_text)
}

#[test]
fn a_fragmented_trace_runs_out_where_worked_out_and_fits_on_a_larger_device() {
    // 40 MiB: x, y from segment A (20 MiB: 8 + 8 + 4 free), z in segment B; x and z freed; the
    // 24 MiB request finds 12 MiB free in A and 20 on the device once B is released: no 24 in
    // one piece. One retry, then out of memory with y's 8 MiB allocated and A's 20 reserved.
    let p = fit_json(&["traces/fragmentation.json"], 5);
    assert_eq!(p["fits"], false);
    assert_eq!(
        p["out_of_memory"],
        serde_json::json!({
            "event": 5, "at": "model.py:15", "requested_bytes": 25165824,
            "allocation_bytes": 25165824, "allocated_bytes": 8388608, "reserved_bytes": 20971520,
            "live": [{"at": "model.py:11", "bytes": 8388608, "blocks": 1}]
        })
    );
    assert_eq!(p["predicted"]["num_alloc_retries"], 1);
    assert_eq!(p["predicted"]["reserved_bytes.all.peak"], 41943040);
    assert_eq!(p["measured"]["num_alloc_retries"], 1);
    // 44 MiB: 40 + 24 > 44, so B is freed (one retry) and the 24 MiB segment fits beside A:
    // 44 MiB reserved at the peak.
    let p = fit_json(&["traces/fragmentation.json", "--memory", "44MiB"], 0);
    assert_eq!(p["fits"], true);
    assert_eq!(p["predicted"]["reserved_bytes.all.peak"], 44 * 1024 * 1024);
    assert_eq!(p["predicted"]["num_alloc_retries"], 1);
    // Expandable segments grow one segment by pages: the free 24 MiB stays in one piece, and
    // the same 40 MiB holds it (analysis/allocator/tests.rs works it out page by page).
    let p = fit_json(
        &[
            "traces/fragmentation.json",
            "--alloc-conf",
            "expandable_segments:True",
        ],
        0,
    );
    assert_eq!(p["fits"], true);
    assert_eq!(p["predicted"]["reserved_bytes.all.peak"], 40 << 20);
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
fn the_runs_own_segment_events_are_read_past_and_memory_outside_the_allocator_is_shown() {
    // The fragmentation trace as a CUDA run writes it: the allocator's own segment events
    // between the allocations (where the run made them, here on 80 MiB) and what was in use
    // outside the allocator at its end. The replay is the model's alone: the same outcome.
    let dir = tempfile::tempdir().unwrap();
    let mut t: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("fixtures/traces/fragmentation.json")).unwrap(),
    )
    .unwrap();
    let events = t["events"].as_array_mut().unwrap();
    events.insert(
        0,
        serde_json::json!({"segment_alloc": 20971520, "stream": 0}),
    );
    events.insert(
        4,
        serde_json::json!({"segment_alloc": 20971520, "stream": 0}),
    );
    events.push(serde_json::json!({"segment_free": 20971520}));
    t["measured"]["outside_allocator_bytes"] = serde_json::json!(536870912);
    let path = dir.path().join("trace.json");
    std::fs::write(&path, t.to_string()).unwrap();
    let path = path.to_string_lossy().into_owned();
    let p = fit_json(&[&path], 5);
    assert_eq!(p["events"], 8);
    assert_eq!(p["out_of_memory"]["event"], 5);
    assert_eq!(p["out_of_memory"]["at"], "model.py:15");
    assert_eq!(p["predicted"]["num_alloc_retries"], 1);
    assert_eq!(p["measured"]["outside_allocator_bytes"], 536870912);
    let r = fit(&[&path]);
    assert!(
        r.stdout
            .contains("outside the caching allocator at the end of the traced run: 512.00 MiB"),
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
        "expandable_segments:yes",
    ]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("is not True or False"), "{}", r.stderr);
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

#[test]
fn a_run_records_its_trace_and_its_replay_gives_the_runs_allocated_peak() {
    let dir = tempfile::tempdir().unwrap();
    let (report, t, trace_text) = record_trace(&dir, &["lines.py"]);
    // The sizes asked for: tensor bytes on the CPU, the CUDA allocator's own trace entries on
    // a GPU (not its blocks).
    assert_eq!(t["sizes"], "requested", "{}", t["sizes"]);
    let events = t["events"].as_array().unwrap();
    // step's three allocations, in order, at their lines (the fixture's sizes are multiples of
    // 512 B, and of 2 MiB above 1 MiB: the same on the CPU and in CUDA's blocks).
    let allocs: Vec<(u64, String)> = events
        .iter()
        .filter(|e| e["alloc"].is_u64())
        .take(3)
        .map(|e| {
            let at = e["at"].as_str().unwrap();
            (
                e["size"].as_u64().unwrap(),
                at.rsplit('/').next().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        allocs,
        [
            (4 << 20, "lines.py:14".to_string()),
            (256 << 10, "lines.py:15".to_string()),
            (4 << 20, "lines.py:16".to_string())
        ]
    );
    // Every free is of an allocation made before it; on CUDA the allocator's own segment
    // events come between them (a cudaMalloc before the first allocation).
    let mut live = std::collections::HashSet::new();
    let mut segments = 0;
    for e in events {
        if let Some(id) = e["alloc"].as_u64() {
            assert!(live.insert(id), "{e}");
        } else if let Some(id) = e["free"].as_u64() {
            assert!(live.remove(&id), "{e}");
        } else {
            assert!(
                e["segment_alloc"].is_u64() || e["segment_free"].is_u64(),
                "{e}"
            );
            segments += 1;
        }
    }
    assert_eq!(segments > 0, on_cuda(), "segment events: {segments}");
    if on_cuda() {
        assert!(events[0]["segment_alloc"].is_u64(), "{}", events[0]);
    }
    // Replayed with room to spare, the model's allocated peak is the run's.
    let p = fit_json(&[&trace_text, "--memory", "1GiB"], 0);
    assert_eq!(
        p["predicted"]["allocated_bytes.all.peak"], report["peak"]["allocated_bytes"],
        "{p:#}"
    );
}

#[test]
fn with_modules_each_allocation_names_the_module_whose_forward_made_it() {
    // fixtures/mlp.py: batch 64, Linear(128, 512), ReLU, Linear(512, 256) in fp32: the forward's
    // outputs are 64 x 512 x 4, the same again, and 64 x 256 x 4 bytes. The last step's (the
    // first forward on CUDA also allocates cuBLAS's workspace, in the first Linear).
    let dir = tempfile::tempdir().unwrap();
    let (_, t, _) = record_trace(&dir, &["--modules", "mlp.py"]);
    let mut last_step: Vec<(u64, &str)> = t["events"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .filter_map(|e| Some((e["size"].as_u64()?, e["module"].as_str()?)))
        .take(3)
        .collect();
    last_step.reverse();
    assert_eq!(
        last_step,
        [
            (131072, "Sequential.0"),
            (131072, "Sequential.1"),
            (65536, "Sequential.2")
        ]
    );
}

#[test]
fn traces_at_two_batch_sizes_predict_another_and_find_the_largest_that_fits() {
    // A step at batch b: 4 MiB of weights kept, an activation and an output of 2b MiB. At 8 on
    // 40 MiB: the weights' 20 MiB segment lends its 16 free MiB to the activation, the output
    // gets 16 MiB: 36 MiB reserved. At 9, 20 + 18 + 18 > 40 with nothing to free: out of memory
    // at the output's line. So the largest batch is 8 (worked out in
    // analysis/allocator/tests.rs too).
    let both = [
        "traces/batch2.json",
        "traces/batch4.json",
        "--batches",
        "2,4",
    ];
    let p = fit_json(
        &[&both[..], &["--max-batch", "--memory", "40MiB"]].concat(),
        0,
    );
    assert_eq!((&p["max_batch"], &p["batch"]), (&8.into(), &8.into()));
    assert_eq!(p["predicted"]["reserved_bytes.all.peak"], 36 << 20);
    let p = fit_json(
        &[&both[..], &["--scale", "9", "--memory", "40MiB"]].concat(),
        5,
    );
    assert_eq!(p["out_of_memory"]["at"], "model.py:3");
    assert_eq!(p["out_of_memory"]["requested_bytes"], 18 << 20);
    let r = fit(&[&both[..], &["--scale", "9", "--memory", "40MiB"]].concat());
    assert!(
        r.stdout
            .contains("at batch 9, synthesized from the traces at batch 2, 4"),
        "{}",
        r.stdout
    );
    // Without the batch sizes, or with one trace: what to add.
    let r = fit(&[
        "traces/batch2.json",
        "traces/batch4.json",
        "--scale",
        "9",
        "--memory",
        "1GiB",
    ]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("--batches gives each trace's batch size"),
        "{}",
        r.stderr
    );
    let r = fit(&[
        "traces/batch2.json",
        "--batches",
        "2",
        "--scale",
        "9",
        "--memory",
        "1GiB",
    ]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("two or three batch sizes"),
        "{}",
        r.stderr
    );
}

/// `memprof run --device cpu --trace FILE fit_conv_loader.py BATCH` (exit 0): the trace's path.
fn trace_conv_loader(dir: &tempfile::TempDir, batch: u32) -> String {
    let trace = dir.path().join(format!("b{batch}.json"));
    let r = finish(
        memprof()
            .args(["run", "--device", "cpu", "--trace"])
            .arg(&trace)
            .arg(fixture("fit_conv_loader.py"))
            .arg(batch.to_string())
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    trace.to_string_lossy().into_owned()
}

#[test]
fn a_conv_net_fed_by_dataloader_workers_scales_to_a_third_batch_within_two_percent() {
    // The workers hand the main process its batches in their own time, so the traces at 8 and
    // 16 differ by more than their sizes (a batch received sooner in one of them): they are
    // matched by line and stream in order, and batch 32 predicted from them is checked against
    // the trace at 32 replayed on the same device.
    let dir = tempfile::tempdir().unwrap();
    let traces: Vec<String> = [8, 16, 32]
        .iter()
        .map(|&b| trace_conv_loader(&dir, b))
        .collect();
    let args: Vec<&str> = traces.iter().map(String::as_str).collect();
    let p = fit_json(
        &[
            &args[..],
            &["--batches", "8,16,32", "--scale", "32", "--memory", "8GiB"],
        ]
        .concat(),
        0,
    );
    let check = &p["check"];
    assert_eq!(check["batch"], 32, "{p:#}");
    for key in ["allocated_bytes.all.peak", "reserved_bytes.all.peak"] {
        let predicted = check["predicted"][key].as_f64().unwrap();
        let traced = check["traced"][key].as_f64().unwrap();
        assert!(
            (predicted - traced).abs() <= 0.02 * traced,
            "{key}: predicted {predicted}, the trace at 32 replayed {traced}"
        );
    }
    // The largest batch from the same traces.
    let p = fit_json(
        &[
            &args[..2],
            &["--batches", "8,16", "--max-batch", "--memory", "256MiB"],
        ]
        .concat(),
        0,
    );
    assert!(p["max_batch"].as_u64().unwrap() > 32, "{p:#}");
    let r = fit(&[
        &args[..],
        &["--batches", "8,16,32", "--scale", "32", "--memory", "8GiB"],
    ]
    .concat());
    assert!(
        r.stdout
            .contains("check: the third trace's batch 32 predicted from the first two"),
        "{}",
        r.stdout
    );
}
