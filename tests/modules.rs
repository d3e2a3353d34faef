//! `--modules` and `--suggest-checkpoints`: per-module forward and backward bytes pinned exactly on
//! a small MLP and a small CNN in fp32 and bf16 (fixtures/mlp.py, fixtures/cnn.py: every number
//! below is computed from their shapes), module names and depth on a nested model, the checkpoint
//! suggestion checked against a measured checkpointed run, and that the program behaves the same.
use crate::common::*;
use serde_json::Value;

/// `memprof run --modules --format json <args>`, the report's `modules` section.
fn modules(extra: &[&str], args: &[&str]) -> Value {
    let mut all = vec!["--modules"];
    all.extend(extra);
    all.extend(args);
    let (r, report) = profile(&[], &all);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("Traceback"), "{}", r.stderr);
    report["modules"].clone()
}

fn entry<'a>(m: &'a Value, module: &str, phase: &str) -> &'a Value {
    m["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["module"] == module && e["phase"] == phase)
        .unwrap_or_else(|| panic!("no {phase} row for {module:?} in {m:#}"))
}

/// Every call of `module`'s `phase` in the timeline.
fn calls<'a>(m: &'a Value, module: &str, phase: &str) -> Vec<&'a Value> {
    m["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["module"] == module && e["phase"] == phase)
        .collect()
}

/// A row's Δ is the sum of its calls' in the timeline (on CUDA the first call also holds
/// cuBLAS's workspace, so exact values are checked on the last call).
fn check_sums(m: &Value, module: &str, phase: &str) {
    let sum: i64 = calls(m, module, phase)
        .iter()
        .map(|e| int(&e["end_bytes"]) - int(&e["start_bytes"]))
        .sum();
    assert_eq!(
        int(&entry(m, module, phase)["delta_bytes"]),
        sum,
        "{phase} {module}"
    );
}

/// The last call of `module`'s `phase` in the timeline: (Δ, peak increase, saved).
fn last_call(m: &Value, module: &str, phase: &str) -> (i64, i64, Option<i64>) {
    let e = m["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|e| e["module"] == module && e["phase"] == phase)
        .unwrap_or_else(|| panic!("no {phase} call of {module:?}"));
    let start = e["start_bytes"].as_i64().unwrap();
    (
        e["end_bytes"].as_i64().unwrap() - start,
        e["peak_bytes"].as_i64().unwrap() - start,
        e["saved_bytes"].as_i64(),
    )
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// fixtures/mlp.py: Linear(128, 512) -> ReLU -> Linear(512, 256) on a batch of 64, 3 steps.
fn mlp_exact(dtype: &str, s: i64) {
    let (b, i, h, o) = (64, 128, 512, 256);
    let steps = 3;
    let m = modules(&[], &["mlp.py", dtype, "3"]);
    let (x, hidden, out) = (b * i * s, b * h * s, b * o * s);
    let p0 = (i * h + h) * s;
    let p2 = (h * o + o) * s;

    for (name, params) in [("", p0 + p2), ("0", p0), ("1", 0), ("2", p2)] {
        let fwd = entry(&m, name, "forward");
        assert_eq!(fwd["calls"], steps, "{name}");
        assert_eq!(int(&fwd["parameter_bytes"]), params, "{name}");
        let bwd = entry(&m, name, "backward");
        assert_eq!(bwd["calls"], steps, "{name}");
    }
    assert_eq!(entry(&m, "", "forward")["type"], "Sequential");
    assert_eq!(entry(&m, "0", "forward")["type"], "Linear");
    assert_eq!(entry(&m, "0", "forward")["depth"], 1);

    // Saved for backward: Linear 0 its input x (not its weight: a parameter); ReLU its output;
    // Linear 2 nothing new (its input is the ReLU's output, already saved).
    for (name, saved) in [("", x + hidden), ("0", x), ("1", hidden), ("2", 0)] {
        assert_eq!(
            int(&entry(&m, name, "forward")["saved_bytes"]),
            steps * saved,
            "saved by {name} summed over calls"
        );
        assert_eq!(last_call(&m, name, "forward").2, Some(saved), "{name}");
    }
    // Forward Δ: each layer's output; the root keeps the ReLU output (saved) and its own output,
    // Linear 0's output being freed when the ReLU's replaces it.
    for (name, delta) in [("", hidden + out), ("0", hidden), ("1", hidden), ("2", out)] {
        assert_eq!(
            last_call(&m, name, "forward").0,
            delta,
            "forward Δ of {name}"
        );
        check_sums(&m, name, "forward");
        check_sums(&m, name, "backward");
        if !on_cuda() {
            assert_eq!(
                int(&entry(&m, name, "forward")["delta_bytes"]),
                steps * delta,
                "{name}"
            );
        }
    }
    if s == 4 {
        // fp32 matmuls allocate nothing but their output (bf16 ones on the CPU convert). The
        // root peaks while the ReLU's output and its input both exist.
        for (name, peak) in [("", 2 * hidden), ("0", hidden), ("1", hidden), ("2", out)] {
            assert_eq!(
                last_call(&m, name, "forward").1,
                peak,
                "forward peak of {name}"
            );
        }
    }
    // Backward Δ: gradients of the weights arrive (they were None: zero_grad(set_to_none)),
    // saved activations and incoming gradients go.
    for (name, delta) in [
        ("", p0 + p2 - hidden - out),
        ("2", p2 + hidden - out),
        ("1", -hidden),
        ("0", p0 - hidden),
    ] {
        let (d, peak, _) = last_call(&m, name, "backward");
        assert_eq!(d, delta, "backward Δ of {name}");
        assert!(peak >= d.max(0), "{name}: peak increase {peak} below Δ {d}");
    }
    // Execution order: a pass's forward calls, outermost first, then its backward calls.
    let order: Vec<(String, String)> = m["timeline"].as_array().unwrap()[..8]
        .iter()
        .map(|e| {
            (
                e["phase"].as_str().unwrap().to_string(),
                e["module"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let phases: Vec<&str> = order.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(phases[..4], ["forward"; 4]);
    assert_eq!(phases[4..], ["backward"; 4]);
    let fwd: Vec<&str> = order[..4].iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(fwd, ["", "0", "1", "2"]);
    assert_eq!(order[7].1, "0", "the first layer's backward ends last");
}

#[test]
fn mlp_fp32_modules_forward_backward_and_saved_bytes_are_exact() {
    mlp_exact("float32", 4);
}

#[test]
fn mlp_bf16_modules_forward_backward_and_saved_bytes_are_exact() {
    mlp_exact("bfloat16", 2);
}

/// fixtures/cnn.py: Conv2d(4, 16, 3) -> ReLU(inplace) -> MaxPool2d(2) -> Flatten -> Linear(1024, 32)
/// on 8 images of 16x16, 3 steps.
fn cnn_exact(dtype: &str, s: i64) {
    let (b, c, hw, k, o) = (8, 4, 16, 16, 32);
    let steps = 3;
    let m = modules(&[], &["cnn.py", dtype, "3"]);
    let x = b * c * hw * hw * s;
    let conv = b * k * hw * hw * s;
    let pooled = b * k * (hw / 2) * (hw / 2) * s;
    // max_pool2d's indices are int64 whatever the dtype: what FairScale's tracker got wrong.
    let indices = b * k * (hw / 2) * (hw / 2) * 8;
    let fc = b * o * s;
    let conv_params = (k * c * 9 + k) * s;
    let fc_params = (k * (hw / 2) * (hw / 2) * o + o) * s;

    for (name, params) in [
        ("", conv_params + fc_params),
        ("0", conv_params),
        ("1", 0),
        ("2", 0),
        ("3", 0),
        ("4", fc_params),
    ] {
        let fwd = entry(&m, name, "forward");
        assert_eq!(fwd["calls"], steps, "{name}");
        assert_eq!(int(&fwd["parameter_bytes"]), params, "{name}");
    }
    // Saved: the convolution its input; the in-place ReLU its result (the convolution's output);
    // the pooling its indices (its input is that same storage); the linear layer its input.
    for (name, saved, delta) in [
        (
            "",
            x + conv + indices + pooled,
            conv + pooled + indices + fc,
        ),
        ("0", x, conv),
        ("1", conv, 0),
        ("2", indices, pooled + indices),
        ("3", 0, 0),
        ("4", pooled, fc),
    ] {
        let (d, _, sv) = last_call(&m, name, "forward");
        assert_eq!(sv, Some(saved), "saved by {name}");
        assert_eq!(d, delta, "forward Δ of {name}");
        check_sums(&m, name, "forward");
        assert_eq!(
            int(&entry(&m, name, "forward")["saved_bytes"]),
            steps * saved,
            "{name}"
        );
    }
    for name in ["", "0", "1", "2", "3", "4"] {
        assert_eq!(entry(&m, name, "backward")["calls"], steps, "{name}");
    }
}

#[test]
fn cnn_fp32_modules_saved_bytes_count_int64_indices_exactly() {
    cnn_exact("float32", 4);
}

#[test]
fn cnn_bf16_modules_saved_bytes_count_int64_indices_exactly() {
    cnn_exact("bfloat16", 2);
}

#[test]
fn modules_are_named_from_the_root_and_cut_to_a_depth() {
    let m = modules(&[], &["nested_model.py"]);
    let names: Vec<&str> = m["modules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["phase"] == "forward")
        .map(|e| e["module"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "",
            "stem",
            "blocks.0",
            "blocks.0.fc",
            "blocks.0.act",
            "blocks.1",
            "blocks.1.fc",
            "blocks.1.act",
            "head"
        ]
    );
    assert_eq!(entry(&m, "", "forward")["root"], "Net");
    // Depth counts the modules that were called: the ModuleList `blocks` never is, so
    // `blocks.1` is at depth 1 and `blocks.1.fc` at 2 (not 3, as the name's parts would say).
    assert_eq!(entry(&m, "blocks.1", "forward")["depth"], 1);
    assert_eq!(entry(&m, "blocks.1.fc", "forward")["depth"], 2);
    // Two forward passes (one under no_grad, which saves nothing and has no backward).
    assert_eq!(entry(&m, "head", "forward")["calls"], 2);
    assert_eq!(entry(&m, "head", "backward")["calls"], 1);
    // GELU saves its input: the fc output, 512 x 256 floats.
    assert_eq!(
        int(&entry(&m, "blocks.0.act", "forward")["saved_bytes"]),
        512 * 256 * 4
    );
    // A parent's numbers include its children's.
    let saved = |n: &str| int(&entry(&m, n, "forward")["saved_bytes"]);
    assert_eq!(
        saved("blocks.0"),
        saved("blocks.0.fc") + saved("blocks.0.act")
    );

    let cut = modules(&["--depth", "1"], &["nested_model.py"]);
    assert_eq!(cut["depth"], 1);
    assert!(cut["modules"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["depth"].as_u64().unwrap() <= 1));
    assert!(cut["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| !e["module"].as_str().unwrap().ends_with(".fc")));
    assert_eq!(entry(&cut, "blocks.1", "forward")["calls"], 2);

    // The table shows the tree, without -f and without a "nothing targeted" warning.
    let r = run(&["--modules", "--depth", "1", "nested_model.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("Net (root)"), "{}", r.stdout);
    assert!(r.stdout.contains("  blocks.0 "), "{}", r.stdout);
    assert!(!r.stdout.contains("blocks.0.fc"), "{}", r.stdout);
    // At depth 2 the blocks' children are in, and the top modules by saved activations are
    // those innermost calls, not the blocks that hold them.
    let r = run(&["--modules", "--depth", "2", "nested_model.py"]);
    assert!(r.stdout.contains("    blocks.0.fc "), "{}", r.stdout);
    let top = r
        .stdout
        .split("Top modules by saved activations")
        .nth(1)
        .unwrap_or_else(|| panic!("{}", r.stdout));
    assert!(top.contains("blocks.0.act (2 calls)"), "{top}");
    assert!(!top.contains("blocks.0 (2 calls)"), "{top}");
    assert!(!r.stdout.contains("nothing was targeted"), "{}", r.stdout);
    assert!(
        r.stdout.contains("Top modules by saved activations"),
        "{}",
        r.stdout
    );
}

#[test]
fn checkpoint_candidates_follow_the_depth() {
    let m = modules(
        &["--suggest-checkpoints", "1", "--depth", "1"],
        &["nested_model.py"],
    );
    let plan = &m["checkpoints"];
    assert_eq!(plan["root"], "Net");
    assert_eq!(
        plan["candidates"], 4,
        "stem, blocks.0, blocks.1, head: {plan:#}"
    );
    assert_eq!(plan["segments"].as_array().unwrap().len(), 2);
}

/// The suggestion on fixtures/checkpointed.py, applied with torch.utils.checkpoint and measured.
#[test]
fn suggested_checkpoints_lower_the_measured_peak_as_estimated() {
    let m = modules(&["--suggest-checkpoints", "2"], &["checkpointed.py"]);
    let plan = &m["checkpoints"];
    let segments = plan["segments"].as_array().unwrap();
    assert_eq!(segments.len(), 3);
    assert_eq!(plan["candidates"], 30, "15 Linear + 15 ReLU leaves");
    let saved = int(&plan["activation_bytes"]);
    let estimate = int(&plan["estimated_activation_bytes"]);
    // FairScale's objective: no other split has a smaller largest segment (checked exhaustively
    // over the candidates' measured sizes in the unit tests); here: the segments add up.
    let sum: i64 = segments.iter().map(|s| int(&s["saved_bytes"])).sum();
    assert_eq!(sum + int(&plan["outside_candidates_bytes"]), saved);
    let starts: Vec<&str> = segments[1..]
        .iter()
        .map(|s| s["first"].as_str().unwrap())
        .collect();

    // Measured: the peak of one training step above the memory before it, without and with the
    // suggested checkpoints.
    let measure = |split: Option<&str>| {
        let mut args = vec!["-f", "step", "checkpointed.py"];
        if let Some(s) = split {
            args.extend(["--split", s]);
        }
        let (r, report) = profile(
            &["allocated_bytes.all.peak", "allocated_bytes.all.current"],
            &args,
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        let f = function(&report, "step");
        let base = stat(line(f, "zero_grad"), "allocated_bytes.all.current");
        max_stat(f, "allocated_bytes.all.peak") - base
    };
    let before = measure(None);
    let split = starts.join(",");
    let after = measure(Some(&split));
    eprintln!(
        "checkpointed.py: saved {saved} B, estimate after {estimate} B; measured peak above the \
         step's start: {before} B without, {after} B with checkpoints at {split}"
    );
    assert!(
        after * 10 < before * 7,
        "checkpointing at {split} should cut the peak by 30%: {before} -> {after}"
    );
    // The estimate counts activations only: the measured peak adds backward's transient
    // gradients and recomputation's intermediates, so it is a lower bound, and the measured
    // saving reaches most of the estimated one (CPU 85%, H100 72% when this was written).
    assert!(
        after >= estimate,
        "estimate {estimate} B above measured {after} B"
    );
    let (promised, got) = (saved - estimate, before - after);
    assert!(
        got * 10 >= promised * 6,
        "checkpoints saved {got} B of the {promised} B estimated"
    );
}

#[test]
fn an_inplace_bug_still_fails_as_without_memprof() {
    let script = root().join("fixtures").join("inplace_bug.py");
    let plain = python_output(&script, &[]);
    assert_eq!(plain.code, 1);
    let r = run(&["--modules", "inplace_bug.py"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let phrase = "modified by an inplace operation";
    assert!(plain.stderr.contains(phrase), "{}", plain.stderr);
    assert!(r.stderr.contains(phrase), "{}", r.stderr);
    assert!(!r.stdout.contains("backward succeeded"));
}

#[test]
fn modules_and_tensors_do_not_change_what_the_program_computes() {
    for script in ["mlp.py", "cnn.py"] {
        let path = root().join("fixtures").join(script);
        let plain = python_output(&path, &["float32", "3"]);
        assert_eq!(plain.code, 0, "{}", plain.stderr);
        let dir = tempfile::tempdir().unwrap();
        let report = dir.path().join("report.yaml");
        let r = run(&[
            "--modules",
            "--tensors",
            "-f",
            "train_step",
            "-o",
            report.to_str().unwrap(),
            script,
            "float32",
            "3",
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(r.stdout, plain.stdout, "{script}");
    }
}

#[test]
fn torch_func_transforms_inside_a_forward_run_as_without_memprof() {
    // torch.func.grad refuses to run under a saved-tensors hook; memprof's steps aside.
    let m = modules(&[], &["func_grad.py"]);
    assert_eq!(entry(&m, "l", "forward")["calls"], 1);
    assert_prints_as_under_python(&["func_grad.py"], &[&["--modules"]]);
}

#[test]
fn a_compiled_model_runs_as_without_memprof_and_is_measured_as_one_module() {
    let plain = python_output(&root().join("fixtures").join("compiled_model.py"), &[]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let r = run(&[
        "--modules",
        "--format",
        "json",
        "-o",
        report.to_str().unwrap(),
        "compiled_model.py",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, plain.stdout);
    // Dynamo warns at a compiled model's call when there are global module hooks: memprof's own
    // must not make it (the program printed nothing), the program's own still do.
    let warning = "when there are global hooks";
    assert!(!plain.stderr.contains(warning), "{}", plain.stderr);
    assert!(!r.stderr.contains(warning), "{}", r.stderr);
    let fixture = root().join("fixtures").join("compiled_model.py");
    let hooked = python_output(&fixture, &["--global-hook"]);
    let hooked_memprof = run(&["--modules", "compiled_model.py", "--global-hook"]);
    assert_eq!(hooked_memprof.code, 0, "{}", hooked_memprof.stderr);
    assert_eq!(
        hooked_memprof.stdout.lines().next(),
        hooked.stdout.lines().next()
    );
    assert_eq!(
        hooked.stderr.matches(warning).count(),
        hooked_memprof.stderr.matches(warning).count()
    );
    assert!(hooked.stderr.contains(warning), "{}", hooked.stderr);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let m = &v["modules"];
    // The compiled graph runs the submodules inside it, unhooked: no Linear or ReLU rows (with
    // this backend the graph itself is a GraphModule call).
    let root = entry(m, "", "forward");
    assert_eq!(root["type"], "OptimizedModule");
    assert_eq!(root["calls"], 2);
    for e in m["modules"].as_array().unwrap() {
        let kind = e["type"].as_str().unwrap();
        assert!(kind == "OptimizedModule" || kind == "GraphModule", "{e:#}");
    }
}

#[test]
fn modules_leave_the_programs_own_checkpointing_alone() {
    // checkpointed.py calls torch.utils.checkpoint on segments outside any module: its
    // saved-tensors hooks are active when each segment (a root module) starts. A hook of memprof's
    // pushed over them would keep every activation: the step's peak must not change.
    let peak = |modules: bool| {
        let mut args = vec!["-f", "step"];
        if modules {
            args.push("--modules");
        }
        args.extend(["checkpointed.py", "--split", "10,18"]);
        let (r, report) = profile(&["allocated_bytes.all.peak"], &args);
        assert_eq!(r.code, 0, "{}", r.stderr);
        if modules {
            let warnings = report["warnings"].to_string();
            assert!(warnings.contains("saved-tensors hooks"), "{warnings}");
            // Recomputation in backward runs the segments' modules again, under their names.
            let m = &report["modules"];
            assert_eq!(
                entry(m, "0", "forward")["calls"],
                2,
                "the first segment's first layer: in forward, and again in backward"
            );
        }
        max_stat(function(&report, "step"), "allocated_bytes.all.peak")
    };
    assert_eq!(peak(true), peak(false));
}

#[test]
fn a_program_sees_its_module_calls_as_without_memprof() {
    // The traceback of an exception three modules deep, the program's own global module hooks
    // (run in order, seeing the outputs) and torch's hook dicts are the same under --modules.
    assert_prints_as_under_python(&["module_exceptions.py"], &[&["--modules"]]);
    // And the calls are measured: the failed call's modules each once, up to the one that raised.
    let m = modules(&[], &["module_exceptions.py"]);
    let rows: Vec<(&str, &str, &str, u64)> = m["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["root"].as_str().unwrap(),
                e["module"].as_str().unwrap(),
                e["phase"].as_str().unwrap(),
                e["calls"].as_u64().unwrap(),
            )
        })
        .collect();
    for (module, calls) in [("", 1), ("0", 1), ("1", 1), ("1.lin", 1), ("1.fails", 1)] {
        assert!(
            rows.contains(&("Sequential", module, "forward", calls)),
            "{rows:?}"
        );
    }
    // The module that warns: one call, no backward.
    for module in ["", "0"] {
        assert!(
            rows.contains(&("Sequential#2", module, "forward", 1)),
            "{rows:?}"
        );
    }
    for phase in ["forward", "backward"] {
        assert!(rows.contains(&("Sequential#3", "", phase, 1)), "{rows:?}");
    }
}

/// A forward with grad enabled and no backward (evaluation without no_grad): the graph and what
/// it saved die with the step's output, under --modules as under python. A ReLU keeps its own
/// output for backward; had the saved-tensors hook kept that output itself, output -> grad_fn
/// -> saved -> output would be a cycle that nothing frees, 8 MiB a step here.
#[test]
fn forward_passes_without_backward_free_what_they_saved() {
    let args = ["-f", "step", "growing_steps.py", "calls", "10"];
    let (plain, without) = profile(&[], &args);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    let mut with_modules = vec!["--modules"];
    with_modules.extend(args);
    let (r, with) = profile(&[], &with_modules);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, plain.stdout, "the program's output");
    // The same allocations, so the same peak to the byte; only the kept slice grows.
    assert_eq!(
        with["peak"]["allocated_bytes"],
        without["peak"]["allocated_bytes"]
    );
    let growing: Vec<&Value> = with["growth"]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["source"])
        .collect();
    assert_eq!(growing, ["kept.append(out[:32].detach().clone())"]);
    // Each step's ReLU saved its 512 x 4096 float32 output, counted as before.
    let relu = entry(&with["modules"], "1", "forward");
    assert_eq!(relu["saved_bytes"], 10 * 512 * 4096 * 4, "{relu:#}");
}

/// A model's parameters and buffers are state whatever happens to them between passes
/// (fixtures/saved_state_changes.py): a buffer replaced by a new object, storages swapped under
/// `.data`, the model converted in place and back, plain tensors standing in for its parameters
/// (`torch.func.functional_call`). memprof keeps a root's state from one call to the next while
/// the dicts holding it are unchanged (Python 3.12+ watches them); each change must be seen, or
/// the new objects would count as activations. Every pass saves the same 4,352 B.
#[test]
fn saved_bytes_leave_out_state_that_changes_between_passes() {
    let m = modules(&[], &["saved_state_changes.py"]);
    let roots: Vec<i64> = calls(&m, "", "forward")
        .iter()
        .map(|e| int(&e["saved_bytes"]))
        .collect();
    assert_eq!(roots, vec![4352; 6], "{m:#}");
    for (name, saved) in [("0", 2048), ("1", 1280), ("2", 1024)] {
        let e = entry(&m, name, "forward");
        assert_eq!(
            (int(&e["calls"]), int(&e["saved_bytes"])),
            (6, 6 * saved),
            "{name}"
        );
    }
}

/// `memprof run --modules` with saved bytes counted as `MEMPROF_SAVED_HOOKS` asks: "" (the
/// default: memprof's stand-in for SavedVariable's constructor, no hook), "hooks" (saved-tensors
/// hooks in C++, src/torch/cpp/saved_hooks.cpp) or "python" (hooks in Python): (the run, the
/// modules section).
fn modules_with_hooks(hooks: &str, args: &[&str]) -> (Run, Value) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.json");
    let r = finish(
        memprof()
            .env("MEMPROF_SAVED_HOOKS", hooks)
            .args([
                "--device",
                device_flag(),
                "run",
                "--modules",
                "--format",
                "json",
                "-o",
            ])
            .arg(&out)
            .args(args)
            .output()
            .expect("memprof starts"),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    (r, report["modules"].clone())
}

/// The three ways of counting saved bytes give every module row the same numbers: memprof's
/// stand-in for SavedVariable's constructor (the default), its C++ saved-tensors hooks and its
/// Python ones.
#[test]
fn saved_bytes_are_the_same_without_hooks_as_with_cpp_or_python_hooks() {
    // saved_foreign.py: parameters that the model does not own, and a view of one, are saved
    // and not counted (each is told by its Python type).
    let (_, m) = modules_with_hooks("", &["saved_foreign.py"]);
    assert_eq!(int(&entry(&m, "", "forward")["saved_bytes"]), 8192);
    assert_eq!(int(&entry(&m, "lin", "forward")["saved_bytes"]), 4096);
    for (script, dtype) in [
        ("mlp.py", "float32"),
        ("cnn.py", "bfloat16"),
        ("saved_foreign.py", ""),
        ("saved_state_changes.py", ""),
    ] {
        let rows = |m: &Value| -> Vec<(String, String, i64, i64, i64, i64)> {
            m["modules"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
                    let i = |k: &str| e[k].as_i64().unwrap_or(-1);
                    let (calls, saved) = (i("calls"), i("saved_bytes"));
                    (
                        s("module"),
                        s("phase"),
                        calls,
                        saved,
                        i("peak_bytes"),
                        i("delta_bytes"),
                    )
                })
                .collect()
        };
        let args: &[&str] = if dtype.is_empty() {
            &[script]
        } else {
            &[script, dtype, "3"]
        };
        let (_, stand_in) = modules_with_hooks("", args);
        let (_, cpp) = modules_with_hooks("hooks", args);
        let (_, python) = modules_with_hooks("python", args);
        assert_eq!(rows(&stand_in), rows(&cpp), "{script}");
        assert_eq!(rows(&stand_in), rows(&python), "{script}");
        assert!(
            rows(&stand_in).iter().any(|r| r.3 > 0),
            "{script}: nothing saved"
        );
    }
}

/// Autograd keeps the tensors it saves, and torch keeps the Python object of a kept tensor that
/// had one: a program that counts its tensor objects after forward passes, and looks at the
/// saved-tensors hooks its forward runs under (fixtures/saved_objects.py), sees under `--modules`
/// what it sees under python: no hook. With memprof's C++ hooks it would count the same objects
/// but see a hook; Python hooks hold a Python object for every saved tensor (the checks can
/// tell).
#[test]
fn a_forward_leaves_the_program_the_tensor_objects_python_leaves_it() {
    let plain = python_output(&root().join("fixtures").join("saved_objects.py"), &[]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    assert!(plain.stdout.contains("after forward 3"), "{}", plain.stdout);
    assert!(
        plain.stdout.contains("hooks seen in forward: none\n"),
        "{}",
        plain.stdout
    );
    let (stand_in, _) = modules_with_hooks("", &["saved_objects.py"]);
    assert_eq!(stand_in.stdout, plain.stdout);
    let (cpp_hooks, _) = modules_with_hooks("hooks", &["saved_objects.py"]);
    let counts = |out: &str| -> String {
        out.lines()
            .filter(|l| l.contains("tensor objects"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(counts(&cpp_hooks.stdout), counts(&plain.stdout));
    assert!(
        cpp_hooks
            .stdout
            .contains("hooks seen in forward: saved_pack and saved_unpack"),
        "{}",
        cpp_hooks.stdout
    );
    let (python_hooks, _) = modules_with_hooks("python", &["saved_objects.py"]);
    assert_ne!(python_hooks.stdout, plain.stdout);
}

/// torch's own error from inside SavedVariable's constructor (an inference tensor saved for
/// backward, fixtures/inference_saved.py) passes through memprof's stand-in for it: the program
/// catches it and goes on as under python.
#[test]
fn an_error_saving_a_tensor_reaches_the_program_as_without_memprof() {
    let plain = python_output(&root().join("fixtures").join("inference_saved.py"), &[]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    assert!(
        plain
            .stdout
            .contains("error: Inference tensors cannot be saved"),
        "{}",
        plain.stdout
    );
    let (r, m) = modules_with_hooks("", &["inference_saved.py"]);
    assert_eq!(r.stdout, plain.stdout);
    // What the second call saved: its 2 x 4 float32 input (the weight is a parameter); the
    // first call's inference tensor was never saved.
    let root = entry(&m, "", "forward");
    assert_eq!(
        (int(&root["calls"]), int(&root["saved_bytes"])),
        (2, 32),
        "{m:#}"
    );
}

/// Compiled autograd (fixtures/compiled_autograd.py) unpacks the tensors memprof counted as
/// tensors saved without a hook (with the stand-in there is none; the C++ hooks give it none to
/// trace): the gradients are python's, dynamo is asked to trace nothing of memprof's (the
/// Python hooks made it warn that it cannot trace `_memprof.saved_unpack`), and the forward rows
/// count what each module saved. (The backward rows are missing there: the C++ gradient hooks
/// are left out of the compiled backward, docs/limits.md.)
#[test]
fn a_backward_under_compiled_autograd_runs_as_without_memprof() {
    let plain = python_output(&root().join("fixtures").join("compiled_autograd.py"), &[]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    for hooks in ["", "hooks"] {
        let (r, m) = modules_with_hooks(hooks, &["compiled_autograd.py"]);
        assert_eq!(r.stdout, plain.stdout, "{hooks}");
        assert!(!r.stderr.contains("_memprof"), "{hooks}: {}", r.stderr);
        for (module, saved) in [("", 5120), ("0", 1024), ("1", 2048), ("2", 2048)] {
            assert_eq!(
                int(&entry(&m, module, "forward")["saved_bytes"]),
                saved,
                "{hooks} {module}"
            );
        }
    }
}

/// The lines of `targets` and the module rows of `--modules`, each measured alone and with the
/// other: the same.
fn lines_and_modules_read_alike(targets: &[&str], script: &[&str]) {
    let functions: Vec<&str> = targets.iter().skip(1).step_by(2).copied().collect();
    let lines_of = |extra: &[&str]| -> Vec<Value> {
        let mut args = targets.to_vec();
        args.extend(extra);
        args.extend(script);
        let (r, report) = profile(&["allocated_bytes.all.peak"], &args);
        assert_eq!(r.code, 0, "{}", r.stderr);
        functions
            .iter()
            .flat_map(|f| function(&report, f)["lines"].as_array().unwrap().clone())
            .map(|l| serde_json::json!([l["line"], l["hits"], l["delta_bytes"], l["stats"]]))
            .collect()
    };
    let alone = lines_of(&[]);
    assert!(
        alone
            .iter()
            .any(|l| l[3]["allocated_bytes.all.peak"].as_i64() > Some(0)),
        "{alone:?}"
    );
    assert_eq!(lines_of(&["--modules"]), alone, "{targets:?} {script:?}");
    let rows_of = |extra: &[&str]| -> Vec<Value> {
        let mut args = extra.to_vec();
        args.extend(script);
        let m = modules(&[], &args);
        m["modules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                serde_json::json!([
                    e["module"],
                    e["phase"],
                    e["calls"],
                    e["delta_bytes"],
                    e["peak_bytes"],
                    e["peak_increase_bytes"],
                    e["saved_bytes"]
                ])
            })
            .collect()
    };
    let rows = rows_of(&[]);
    assert!(rows.len() >= 8, "{rows:?}");
    assert_eq!(rows_of(targets), rows, "{targets:?} {script:?}");
}

/// Lines and module calls read one allocator, and each reading restarts its maximum: a line's
/// peak around module calls (fixtures/mlp.py's train_step) and a module call's peak around the
/// lines inside it (fixtures/lines_in_modules.py's Block.forward, whose temporary lives and
/// dies inside one line) are each taken where the other restarted it. Nothing else allocates
/// in these fixtures, so each reads the same measured with the other as alone.
#[test]
fn lines_and_module_calls_measured_together_read_what_each_reads_alone() {
    lines_and_modules_read_alike(&["-f", "train_step"], &["mlp.py", "float32", "3"]);
    lines_and_modules_read_alike(
        &["-f", "Net.forward", "-f", "Block.forward"],
        &["lines_in_modules.py"],
    );
}

/// `module_enter` and `module_exit`, made by hand as METH_FASTCALL functions
/// (src/python/ext/module_calls_fast.rs): their text signatures (dynamo's `substitute_in_graph`
/// reads them) and the TypeErrors a wrong call gets, worded as CPython words a function's.
#[test]
fn the_module_call_hooks_take_their_arguments_as_a_python_function_would() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("hooks.py");
    std::fs::write(
        &script,
        "import inspect, sys, torch\n\
         native = sys.modules['_memprof']\n\
         torch.nn.Linear(2, 2)(torch.ones(2))\n\
         print(inspect.signature(native.module_enter), inspect.signature(native.module_exit))\n\
         for call in (lambda: native.module_enter(1), lambda: native.module_exit(1, 2, 3),\n\
         \x20            lambda: native.module_enter(torch.nn.ReLU(), [1])):\n\
         \x20   try:\n\
         \x20       call()\n\
         \x20   except TypeError as e:\n\
         \x20       print('TypeError:', e)\n",
    )
    .unwrap();
    let r = run(&["--modules", script.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let printed: Vec<&str> = r.stdout.lines().take(4).collect();
    assert_eq!(
        printed,
        [
            "(module, args) (module, output)",
            "TypeError: module_enter() takes 2 positional arguments but 1 was given",
            "TypeError: module_exit() takes 2 positional arguments but 3 were given",
            "TypeError: module_enter(): args must be a tuple",
        ],
        "{}",
        r.stdout
    );
}
