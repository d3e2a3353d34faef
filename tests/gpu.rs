//! Checks that only mean something on a GPU (`MEMPROF_TEST_DEVICE=cuda`): memprof's numbers
//! against torch's own, and the program's own readings with and without memprof.
use crate::common::*;
use serde_json::Value;

/// The fixture's readings (one object per step) and torch's stat keys.
fn readings(stdout: &str) -> (Vec<Value>, Vec<String>) {
    let mut lines = stdout.lines();
    let readings = serde_json::from_str(lines.next().unwrap()).unwrap();
    let keys = lines
        .find_map(|l| l.strip_prefix("KEYS "))
        .map(|k| serde_json::from_str(k).unwrap())
        .unwrap();
    (readings, keys)
}

#[test]
fn cuda_numbers_agree_with_torch_and_the_program_observes_the_same() {
    if !on_cuda() {
        eprintln!("skipped: set MEMPROF_TEST_DEVICE=cuda on a GPU machine");
        return;
    }
    let plain = python_output(std::path::Path::new("observe.py"), &[]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    let (want, keys) = readings(&plain.stdout);

    let (r, report) = profile(
        &[
            "allocated_bytes.all.peak",
            "reserved_bytes.all.peak",
            "allocated_bytes.all.current",
        ],
        &["-f", "train_step", "observe.py"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (got, _) = readings(&r.stdout);
    assert_eq!(got, want, "the program's own readings differ under memprof");
    assert_eq!(report["metadata"]["peak_resets"], Value::Null);

    // memprof's largest per-line peak is torch's max_memory_allocated over the call (the script
    // resets the peak right before each call), and the stat keys are torch's own.
    let step = function(&report, "train_step");
    let max_line_peak = max_stat(step, "allocated_bytes.all.peak");
    let torch_peak = want
        .iter()
        .map(|w| w["max_memory_allocated"].as_i64().unwrap())
        .max()
        .unwrap();
    assert_eq!(max_line_peak, torch_peak, "{step:#}");
    assert_eq!(step["peak_allocated_bytes"].as_i64(), Some(torch_peak));
    // The lines' Δ add up to the change of memory_allocated() across the calls.
    let delta_sum = delta_sum(step);
    let torch_delta: i64 = want
        .iter()
        .map(|w| w["memory_allocated_delta"].as_i64().unwrap())
        .sum();
    assert_eq!(delta_sum, torch_delta, "{step:#}");
    let listed = finish(memprof().arg("stats").output().unwrap()).stdout;
    let mut ours: Vec<String> = listed
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    ours.sort();
    assert_eq!(
        ours, keys,
        "memprof's CUDA keys are torch.cuda.memory_stats()'s"
    );
}

#[test]
fn a_peak_that_needs_resets_says_so_in_the_header() {
    if !on_cuda() {
        return;
    }
    let (r, report) = profile(
        &["active_bytes.all.peak", "num_alloc_retries"],
        &["-f", "train_step", "observe.py"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let note = report["metadata"]["peak_resets"].as_str().unwrap();
    assert!(
        note.starts_with("active_bytes.all.peak cannot be measured from the allocator's reports"),
        "{note}"
    );
    let step = function(&report, "train_step");
    assert!(max_stat(step, "active_bytes.all.peak") > 0);
}

#[test]
fn a_cuda_graphs_private_pool_is_its_own_category_at_the_line_that_captured_it_and_replays_are_counted(
) {
    if !on_cuda() {
        eprintln!("skipped: set MEMPROF_TEST_DEVICE=cuda on a GPU machine");
        return;
    }
    let plain = python_output(std::path::Path::new("cuda_graph.py"), &[]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    let (r, report) = profile(&[], &["cuda_graph.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, plain.stdout, "the program's own readings differ");
    let sites = report["peak"]["sites"].as_array().unwrap();
    let captured = sites
        .iter()
        .find(|s| s["source"] == "static_out = static_in * 3  # 4 MiB in the graph's private pool")
        .unwrap_or_else(|| panic!("no site for the captured line: {sites:#?}"));
    assert_eq!(captured["bytes"], 4 * MIB, "{captured}");
    assert_eq!(
        captured["categories"]["cuda_graph_pool"],
        4 * MIB,
        "{captured}"
    );
    // Freed before the end, but live at the peak: its pool's all the same.
    let temporary = sites
        .iter()
        .find(|s| {
            s["source"]
                .as_str()
                .unwrap()
                .starts_with("temporary_out = static_in * 4")
        })
        .unwrap_or_else(|| panic!("no site for the second capture: {sites:#?}"));
    assert_eq!(
        temporary["categories"]["cuda_graph_pool"],
        4 * MIB,
        "{temporary}"
    );
    assert_eq!(report["peak"]["cuda_graph_replays"], 2);
    let table = run(&["cuda_graph.py"]);
    assert!(
        table
            .stdout
            .contains("CUDA graphs were replayed 2 times: a replay allocates nothing"),
        "{}",
        table.stdout
    );
    let warm = sites
        .iter()
        .find(|s| {
            s["source"]
                .as_str()
                .unwrap()
                .starts_with("warm = static_in * 2")
        })
        .unwrap();
    assert!(
        warm["categories"].get("cuda_graph_pool").is_none(),
        "{warm}"
    );
}

#[test]
fn a_reduce_overhead_models_modules_say_what_went_to_its_cuda_graph_pool_and_replays_allocate_nothing(
) {
    if !on_cuda() {
        eprintln!("skipped: set MEMPROF_TEST_DEVICE=cuda on a GPU machine");
        return;
    }
    // examples/compiled_step.py's MLP under mode="reduce-overhead", three steps (whose readings
    // scripts/compiled_check.py compares with and without memprof in every mode).
    let step = root().join("examples").join("compiled_step.py");
    let step = step.to_string_lossy();
    let (r, report) = profile(&[], &["--modules", &step, "--model", "mlp"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let rows = report["modules"]["compiled_modules"]
        .as_array()
        .unwrap_or_else(|| panic!("no compiled modules: {report:#}"));
    let root = rows
        .iter()
        .find(|r| r["module"] == "" && r["phase"] == "forward")
        .unwrap();
    // CUDA-graph trees warm up and record in the graph's pool: everything the graph's code
    // allocated went there; replays ran none of it.
    let allocated = root["allocated_bytes"].as_i64().unwrap();
    assert!(allocated > 0, "{root}");
    assert_eq!(root["pool_bytes"].as_i64(), Some(allocated), "{root}");
    assert!(
        report["peak"]["cuda_graph_replays"].as_u64().unwrap_or(0) > 0,
        "{:#}",
        report["peak"]
    );
}
