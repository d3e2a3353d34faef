//! Compiled code (issue 25): a torch.compile'd graph's buffers at the source lines their FX
//! nodes came from, in the peak and in `-f` tables of functions that ran compiled, forward and
//! backward, across a graph break, after an edit above the compiled code (inductor's cache
//! keeps the old line numbers), and with the program's output unchanged.
use crate::common::*;
use serde_json::Value;

/// A 128x128 float32 matrix: every buffer of the fixture's matmuls.
const MATRIX: i64 = 128 * 128 * 4;

fn compiled_lines(report: &Value, qualname: &str) -> Vec<(u64, u64, i64, i64)> {
    function(report, qualname)["compiled"]["lines"]
        .as_array()
        .unwrap_or_else(|| panic!("{qualname} has no compiled lines: {report:#}"))
        .iter()
        .map(|l| {
            (
                l["line"].as_u64().unwrap(),
                l["allocations"].as_u64().unwrap(),
                l["allocated_bytes"].as_i64().unwrap(),
                l["backward_allocated_bytes"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_compiled_graphs_buffers_are_at_the_lines_their_nodes_came_from_exactly() {
    let (r, report) = profile(&[], &["compiled_lines.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let peak = &report["peak"];
    let at = |line: u64| {
        peak["sites"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["line"] == line && s["function"] == "chain")
            .unwrap_or_else(|| panic!("no site at chain's line {line}: {peak:#}"))
    };
    // x, y and z of `chain`, live when the compiled call returned: one buffer each, at its own
    // line, marked compiled, reached from the line that called the compiled function.
    for (line, text) in [(16, "x = a @ b"), (17, "y = x @ b"), (18, "z = y @ b")] {
        let s = at(line);
        assert_eq!(s["source"], text, "{s}");
        assert_eq!(s["compiled"], true, "{s}");
        assert_eq!(s["context"]["line"], 53, "{s}");
        assert_eq!(s["context"]["source"], "kept = compiled_chain(a, b)", "{s}");
        if line > 16 || device_flag() == "cpu" {
            // (On a GPU the first matmul's line may also hold cuBLAS's workspace.)
            assert_eq!(
                (s["bytes"].as_i64(), s["blocks"].as_u64()),
                (Some(MATRIX), Some(1))
            );
        }
    }
    for s in peak["sites"].as_array().unwrap() {
        assert!(
            !s["file"].as_str().unwrap().contains("torchinductor"),
            "{s}"
        );
    }
    assert_eq!(report["warnings"], serde_json::json!([]), "{report:#}");
}

#[test]
fn a_function_that_ran_compiled_gets_its_lines_forward_backward_and_across_a_graph_break() {
    let args = [
        "-f",
        "chain",
        "-f",
        "broken",
        "-f",
        "Net.forward",
        "compiled_lines.py",
        "--graph-break",
        "--module",
    ];
    let (r, report) = profile(&[], &args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // No "targeted but never ran": they ran compiled.
    assert_eq!(report["warnings"], serde_json::json!([]), "{report:#}");
    let chain = compiled_lines(&report, "chain");
    let lines: Vec<u64> = chain.iter().map(|l| l.0).collect();
    assert_eq!(lines, [16, 17, 18]);
    for l in &chain[1..] {
        assert_eq!(*l, (l.0, 1, MATRIX, 0), "{chain:?}");
    }
    let chain_fn = function(&report, "chain");
    assert_eq!(chain_fn["calls"], 0, "no eager call");
    // Its own peak: reached when its last buffer was allocated, all three live then.
    let reached = &chain_fn["peak"]["reached"];
    assert_eq!(
        (&reached["site"]["line"], &reached["compiled"]),
        (&18.into(), &true.into())
    );
    for l in chain_fn["compiled"]["lines"].as_array().unwrap() {
        if l["line"] != 16 || device_flag() == "cpu" {
            assert_eq!(l["peak_live_bytes"], MATRIX, "{l}");
        }
    }
    // Both graphs of `broken`, before and after its graph break.
    let broken = compiled_lines(&report, "broken");
    let lines: Vec<u64> = broken.iter().map(|l| l.0).collect();
    assert_eq!(lines, [23, 25, 26], "{broken:?}");
    assert_eq!(
        broken[1].2, MATRIX,
        "the matmul (tanh fused into it): {broken:?}"
    );
    // Net.forward, compiled whole with its blocks: each line holds its block's buffers,
    // forward and backward (the backward graph's buffers at the forward line they
    // differentiate), in whole matrices.
    let net = compiled_lines(&report, "Net.forward");
    let lines: Vec<u64> = net.iter().map(|l| l.0).collect();
    assert_eq!(lines, [45, 46], "{net:?}");
    for (line, _, allocated, backward) in &net {
        assert!(
            *backward > 0 && *allocated > *backward,
            "line {line}: {net:?}"
        );
        assert_eq!(backward % MATRIX, 0, "line {line}: {net:?}");
    }
    // The table says what they are.
    let table = run(&args);
    assert!(
        table.stdout.contains("chain ran compiled (torch.compile)")
            && table
                .stdout
                .contains("compiled_lines.py:35 Block.forward [compiled]"),
        "{}",
        table.stdout
    );
}

#[test]
fn the_program_prints_the_same_under_memprof() {
    assert_prints_as_under_python(
        &["compiled_lines.py", "--graph-break", "--module"],
        &[&[], &["-f", "Net.forward"], &["--modules"]],
    );
}

#[test]
fn lines_moved_by_an_edit_or_a_checkout_elsewhere_are_found_though_inductors_cache_keeps_the_old_ones(
) {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("inductor-cache");
    let script = dir.path().join("moved.py");
    let body = "import torch\n\
                \n\
                def two(a, b):\n\
                \x20   x = a @ b\n\
                \x20   return x, torch.sin(x @ b)\n\
                \n\
                a = torch.randn(64, 64)\n\
                kept = torch.compile(two)(a, a)\n";
    let report_of = |script: &std::path::Path, text: &str| {
        std::fs::create_dir_all(script.parent().unwrap()).unwrap();
        std::fs::write(script, text).unwrap();
        let out = dir.path().join("r.json");
        let r = finish(
            memprof()
                .env("TORCHINDUCTOR_CACHE_DIR", &cache)
                .args(["--device", "cpu", "run", "-o"])
                .arg(&out)
                .arg("-f")
                .arg("two")
                .arg(script)
                .output()
                .expect("memprof starts"),
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert_eq!(v["warnings"], serde_json::json!([]), "{v:#}");
        compiled_lines(&v, "two")
            .iter()
            .map(|l| (l.0, l.2))
            .collect::<Vec<_>>()
    };
    let before = report_of(&script, body);
    // (sin is computed into the second matmul's buffer.)
    assert_eq!(
        before,
        [(4, 64 * 64 * 4), (5, 64 * 64 * 4)],
        "compiled fresh"
    );
    // Three lines above: the same graph, from the cache, with the old numbers in its map.
    let after = report_of(&script, &format!("# one\n# two\n# three\n{body}"));
    assert_eq!(
        after,
        [(7, 64 * 64 * 4), (8, 64 * 64 * 4)],
        "from the cache"
    );
    // Another checkout of the same code: the cache's traces name the first one's file.
    let elsewhere = dir.path().join("other-checkout").join("moved.py");
    let there = report_of(&elsewhere, body);
    assert_eq!(there, before, "from the cache, compiled in another folder");
}

/// Compiled modules' rows without the bytes allocated, which a cold compile's autotuning on a
/// GPU changes (it runs kernels on copies of their buffers).
fn without_allocations(rows: &[Value]) -> Vec<Value> {
    rows.iter()
        .map(|r| {
            let mut r = r.clone();
            let o = r.as_object_mut().unwrap();
            o.remove("allocations");
            o.remove("allocated_bytes");
            r
        })
        .collect()
}

/// `--modules` on fixtures/compiled_lines.py's compiled `Net` (two Blocks, each a bias-free
/// Linear and a ReLU, 2 steps), in a fresh inductor cache and then from it: the rows of the
/// compiled submodules.
fn compiled_modules(cache: &std::path::Path) -> (Vec<Value>, Value) {
    compiled_modules_of(cache, &root().join("fixtures").join("compiled_lines.py"))
}

fn compiled_modules_of(cache: &std::path::Path, script: &std::path::Path) -> (Vec<Value>, Value) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let r = finish(
        memprof()
            .env("TORCHINDUCTOR_CACHE_DIR", cache)
            .args(["--device", device_flag(), "run", "--modules"])
            .args(["--suggest-checkpoints", "1", "-o"])
            .arg(&out)
            .arg(script)
            .arg("--module")
            .output()
            .expect("memprof starts"),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let m = &v["modules"];
    (
        m["compiled_modules"]
            .as_array()
            .unwrap_or_else(|| panic!("no compiled modules: {m:#}"))
            .clone(),
        m["checkpoints"].clone(),
    )
}

#[test]
fn modules_of_a_compiled_model_are_its_submodules_with_the_bytes_aotautograd_saves() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("inductor-cache");
    let (rows, plan) = compiled_modules(&cache);
    let row = |module: &str, phase: &str| {
        rows.iter()
            .find(|r| r["module"] == module && r["phase"] == phase)
            .unwrap_or_else(|| panic!("no {phase} row of {module:?}: {rows:#?}"))
    };
    let int = |v: &Value| v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"));
    let names: Vec<(&str, &str, u64)> = rows
        .iter()
        .filter(|r| r["phase"] == "forward")
        .map(|r| {
            (
                r["module"].as_str().unwrap(),
                r["type"].as_str().unwrap(),
                r["depth"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("", "Net", 0),
            ("first", "Block", 1),
            ("first.proj", "Linear", 2),
            ("second", "Block", 1),
            ("second.proj", "Linear", 2)
        ],
        "only the model with modules (not `chain`, a function)"
    );
    assert!(rows.iter().all(|r| r["root"] == "Net" && r["calls"] == 2));
    // Saved for backward per step, as AOTAutograd's partitioner chose: the input h (a graph
    // input, counted for first.proj, which takes it in), the first ReLU's output and the second
    // ReLU's mask (bool); the weights are parameters.
    let mask = MATRIX / 4;
    assert_eq!(
        int(&row("", "forward")["saved_bytes"]),
        2 * (2 * MATRIX + mask)
    );
    assert_eq!(
        int(&row("first.proj", "forward")["saved_bytes"]),
        2 * MATRIX
    );
    assert_eq!(
        int(&row("first", "forward")["saved_bytes"])
            + int(&row("second", "forward")["saved_bytes"]),
        int(&row("", "forward")["saved_bytes"]),
        "everything saved was produced inside a block"
    );
    // Forward buffers: each projection's output (and the mask, with the second). (On a GPU
    // the first matmul may also allocate cuBLAS's workspace.)
    let fwd = |m: &str| int(&row(m, "forward")["allocated_bytes"]);
    if device_flag() == "cpu" {
        assert_eq!(fwd("first.proj"), 2 * MATRIX);
        assert_eq!(fwd(""), 2 * (2 * MATRIX + mask));
    } else {
        assert!(fwd("first.proj") >= 2 * MATRIX && fwd("") >= 2 * (2 * MATRIX + mask));
    }
    // Backward: each projection's weight gradient at least, and the model's whole graph.
    for m in ["first.proj", "second.proj"] {
        assert!(
            int(&row(m, "backward")["allocated_bytes"]) >= 2 * MATRIX,
            "{m}"
        );
        assert!(row(m, "forward").get("saved_bytes").is_some());
        assert!(row(m, "backward").get("saved_bytes").is_none());
    }
    assert!(
        int(&row("", "backward")["allocated_bytes"])
            >= int(&row("first", "backward")["allocated_bytes"])
                + int(&row("second", "backward")["allocated_bytes"])
    );
    // --suggest-checkpoints works inside the compiled model: one pass's saved bytes, split
    // between its blocks (or their projections, when a block saves nothing of its own: on the
    // CPU, whose C++ kernels name no nodes); the second takes in the first block's output.
    assert_eq!(plan["root"], "Net", "{plan:#}");
    assert_eq!(int(&plan["activation_bytes"]), 2 * MATRIX + mask);
    let segments = plan["segments"].as_array().unwrap();
    assert_eq!(segments.len(), 2, "{plan:#}");
    let (one, two) = (
        segments[0]["first"].as_str().unwrap(),
        segments[1]["first"].as_str().unwrap(),
    );
    assert!(
        one.starts_with("first") && two.starts_with("second"),
        "{plan:#}"
    );
    assert_eq!(int(&segments[1]["input_bytes"]), MATRIX);
    // The same from inductor's cache (no FX graphs of its own: names from dynamo's graph). On a
    // GPU a cold compile autotunes its kernels on copies of their buffers: the bytes allocated
    // may differ, the rows, runs and saved bytes may not.
    let (warm, warm_plan) = compiled_modules(&cache);
    assert_eq!(
        without_allocations(&warm),
        without_allocations(&rows),
        "from the cache"
    );
    if device_flag() == "cpu" {
        assert_eq!(warm, rows, "from the cache, to the byte");
    }
    assert_eq!(warm_plan, plan, "from the cache");
    // The table says where a compiled model's submodules are.
    let table = finish(
        memprof()
            .env("TORCHINDUCTOR_CACHE_DIR", &cache)
            .args(["--device", device_flag(), "run", "--modules"])
            .arg(root().join("fixtures").join("compiled_lines.py"))
            .arg("--module")
            .output()
            .expect("memprof starts"),
    );
    assert!(
        table
            .stdout
            .contains("its submodules are under Compiled modules below")
            && table.stdout.contains("     first.proj    Linear"),
        "{}",
        table.stdout
    );
}

#[test]
fn a_compiled_models_rows_are_the_same_from_a_cache_another_checkout_wrote() {
    // Inductor's cache key holds no file paths: a copy of the fixture in another folder, its
    // lines moved by one, fills the entries that the fixture then reads, with that copy's stack
    // traces in their line maps (which name the kernels' modules where inductor wrote no source
    // nodes, as for the CPU's C++ kernels). The rows must be those of the fixture's own compile.
    let fresh = tempfile::tempdir().unwrap();
    let (own, own_plan) = compiled_modules(&fresh.path().join("cache"));
    let elsewhere = tempfile::tempdir().unwrap();
    let copy = elsewhere.path().join("compiled_lines.py");
    let text = std::fs::read_to_string(root().join("fixtures").join("compiled_lines.py")).unwrap();
    std::fs::write(&copy, format!("# a checkout elsewhere\n{text}")).unwrap();
    let shared = elsewhere.path().join("cache");
    compiled_modules_of(&shared, &copy);
    let (rows, plan) = compiled_modules(&shared);
    if device_flag() == "cpu" {
        assert_eq!(rows, own, "from another checkout's cache entries");
    }
    assert_eq!(without_allocations(&rows), without_allocations(&own));
    assert_eq!(plan, own_plan);
}

/// Module calls in a graph that dynamo traces through memprof's `_call_impl` wrapper (forward
/// hooks keep it from going straight to `forward`) and in a non-strict export (modules run on
/// fake tensors while `torch.compiler.is_compiling()`) run as without memprof: dynamo finds no
/// graph break (it is told what the native `module_enter` answers in a graph), the outputs are
/// python's, and only the eager call is measured.
#[test]
fn module_calls_in_traced_graphs_and_a_non_strict_export_run_as_without_memprof() {
    assert_prints_as_under_python(&["compiled_hooked.py"], &[&["--modules"]]);
    let (r, report) = profile(&[], &["--modules", "compiled_hooked.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("graphs 1 breaks 0\n"), "{}", r.stdout);
    let rows = report["modules"]["modules"].as_array().unwrap();
    let sequential: Vec<_> = rows.iter().filter(|m| m["root"] == "Sequential").collect();
    assert_eq!(sequential.len(), 16, "{rows:#?}");
    for m in sequential {
        assert_eq!(m["calls"], 1, "{m}");
    }
}
