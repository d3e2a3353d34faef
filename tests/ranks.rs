//! Multi-rank runs under a real `torchrun --nproc-per-node 2` (gloo, CPU): each rank's own report
//! file with its rank, no overwrite, only rank 0 printing (or every rank with --all-ranks),
//! `memprof merge` exact on a fixture where each rank allocates a different known amount, and
//! `--collectives` exact for all_reduce, all_gather and broadcast of known tensors.
use crate::common::*;
use serde_json::Value;
use std::path::Path;

/// A merged line's spread of `key` (`delta_bytes`, a stat, or `collectives.KIND`).
fn spread<'a>(line: &'a Value, key: &str) -> &'a Value {
    let v = match key.split_once('.') {
        Some(("collectives", kind)) => &line["collectives"][kind],
        _ if key == "delta_bytes" => &line["delta_bytes"],
        _ => &line["stats"][key],
    };
    assert!(v.is_object(), "{key} missing in {line:#}");
    v
}

fn assert_spread(line: &Value, key: &str, max: i64, min: i64, max_rank: u64) {
    let s = spread(line, key);
    assert_eq!(s["max"], max, "{key} max in {line:#}");
    assert_eq!(s["min"], min, "{key} min in {line:#}");
    assert_eq!(s["max_rank"], max_rank, "{key} max_rank in {line:#}");
    assert_eq!(s["imbalance"], max - min, "{key} imbalance in {line:#}");
}

fn ranks_fixture() -> String {
    fixture("ranks.py")
}

#[test]
fn each_rank_keeps_its_report_and_only_rank_0_prints() {
    let dir = tempfile::tempdir().unwrap();
    let r = torchrun(2, dir.path(), &["-f", "step", &ranks_fixture()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout.matches("Function: step").count(),
        1,
        "only rank 0 prints:\n{}",
        r.stdout
    );
    assert!(r.stdout.contains("rank 0 of 2"), "{}", r.stdout);
    assert!(!r.stdout.contains("rank 1 of 2"), "{}", r.stdout);
    assert!(
        r.stderr.contains("memprof merge memprof.rank*.json"),
        "{}",
        r.stderr
    );
    for rank in 0..2u64 {
        let report = read_json(&dir.path().join(format!("memprof.rank{rank}.json")));
        let p = &report["metadata"]["process"];
        assert_eq!(p["rank"], rank);
        assert_eq!(p["local_rank"], rank);
        assert_eq!(p["world_size"], 2);
        assert!(!p["host"].as_str().unwrap().is_empty());
        assert_eq!(report["metadata"]["device"]["type"], "cpu");
        // Rank r allocates (r + 1) MiB on this line, twice.
        let a = line(function(&report, "step"), "a = torch.empty");
        assert_eq!(delta(a), 2 * (rank as i64 + 1) * MIB);
    }
}

#[test]
fn a_plain_path_gets_the_rank_and_a_template_is_filled() {
    let dir = tempfile::tempdir().unwrap();
    let r = torchrun(
        2,
        dir.path(),
        &[
            "-f",
            "step",
            "--format",
            "json",
            "-o",
            "ddp.json",
            &ranks_fixture(),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        !r.stdout.contains("Function:"),
        "-o writes files only:\n{}",
        r.stdout
    );
    assert!(
        r.stderr.contains("rank 1 writes ddp.rank1.json"),
        "the inserted rank is said:\n{}",
        r.stderr
    );
    assert!(
        !dir.path().join("ddp.json").exists(),
        "no rank writes the plain path"
    );
    for rank in 0..2u64 {
        let report = read_json(&dir.path().join(format!("ddp.rank{rank}.json")));
        assert_eq!(report["metadata"]["process"]["rank"], rank);
    }

    let r = torchrun(
        2,
        dir.path(),
        &[
            "-f",
            "step",
            "--format",
            "yaml",
            "-o",
            "r{rank}-of-{world_size}.yaml",
            &ranks_fixture(),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    for rank in 0..2 {
        let text = std::fs::read_to_string(dir.path().join(format!("r{rank}-of-2.yaml"))).unwrap();
        assert!(text.contains(&format!("rank: {rank}")), "{text}");
    }
}

#[test]
fn all_ranks_prints_every_ranks_report_with_its_rank() {
    let dir = tempfile::tempdir().unwrap();
    let r = torchrun(
        2,
        dir.path(),
        &["-f", "step", "--all-ranks", &ranks_fixture()],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout.matches("Function: step").count(),
        2,
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("Device: cpu · rank 0 of 2"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("Device: cpu · rank 1 of 2"),
        "{}",
        r.stdout
    );
}

#[test]
fn merge_gives_each_lines_max_min_rank_and_imbalance_and_collectives_are_exact() {
    let dir = tempfile::tempdir().unwrap();
    let stats = "allocated_bytes.all.current,allocated_bytes.all.allocated";
    let r = torchrun(
        2,
        dir.path(),
        &[
            "--stat",
            stats,
            "-f",
            "step",
            "--collectives",
            "--format",
            "json",
            "-o",
            "r.json",
            &ranks_fixture(),
            "--steps",
            "3",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let kib = KIB;
    // Each rank's own collectives, from the tensors' sizes (3 calls of step, world size 2).
    for rank in 0..2 {
        let report = read_json(&dir.path().join(format!("r.rank{rank}.json")));
        let step = function(&report, "step");
        let c = |needle: &str| line(step, needle)["collectives"].clone();
        assert_eq!(
            c("dist.all_reduce(t)"),
            serde_json::json!({"all_reduce": 3 * 256 * kib})
        );
        assert_eq!(
            c("all_gather_into_tensor(out, t)"),
            serde_json::json!({"all_gather": 3 * 512 * kib}),
            "the gathered output: world size x the input"
        );
        assert_eq!(
            c("dist.all_gather(parts, t)"),
            serde_json::json!({"all_gather": 3 * 512 * kib})
        );
        assert_eq!(
            c("dist.broadcast(t, src=0)"),
            serde_json::json!({"broadcast": 3 * 256 * kib})
        );
        assert_eq!(c("a = torch.empty"), Value::Null, "no collective there");
        assert!(report["metadata"]["collectives"]
            .as_str()
            .unwrap()
            .contains("NCCL"));
    }

    let files = [
        dir.path().join("r.rank1.json"),
        dir.path().join("r.rank0.json"),
    ];
    let out = memprof()
        .arg("merge")
        .args(["--format", "json"])
        .args(&files)
        .output()
        .unwrap();
    let merged = finish(out);
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    let m = merged.json();
    assert_eq!(m["schema"], "memprof.merged/1");
    assert_eq!(m["metadata"]["world_size"], 2);
    assert_eq!(m["metadata"]["ranks"][0]["rank"], 0, "ranks in order");
    let step = function(&m, "step");
    assert_eq!(step["calls"]["max"], 3);
    let a = line(step, "a = torch.empty");
    // Rank r allocates (r + 1) MiB per call: rank 1 holds the max.
    assert_spread(a, "delta_bytes", 6 * MIB, 3 * MIB, 1);
    assert_spread(a, "allocated_bytes.all.allocated", 6 * MIB, 3 * MIB, 1);
    let t = line(step, "t = torch.ones");
    assert_spread(
        t,
        "allocated_bytes.all.allocated",
        3 * 256 * kib,
        3 * 256 * kib,
        0,
    );
    let ar = line(step, "dist.all_reduce(t)");
    assert_spread(
        ar,
        "collectives.all_reduce",
        3 * 256 * kib,
        3 * 256 * kib,
        0,
    );
    let del = line(step, "del a");
    assert_spread(del, "delta_bytes", -3 * MIB, -6 * MIB, 0);

    // The table: the rank of each max is named; `show` with several files merges too.
    let table = finish(memprof().arg("show").args(&files).output().unwrap());
    assert_eq!(table.code, 0, "{}", table.stderr);
    assert!(
        table.stdout.contains("merged: 2 of 2 ranks"),
        "{}",
        table.stdout
    );
    assert!(table.stdout.contains("+6.00 MiB (r1)"), "{}", table.stdout);
    // --stat keeps some columns; a stat the reports lack is an error.
    let narrow = finish(
        memprof()
            .args(["--stat", "allocated_bytes.all.current", "merge"])
            .args(&files)
            .output()
            .unwrap(),
    );
    assert_eq!(narrow.code, 0, "{}", narrow.stderr);
    assert!(
        !narrow.stdout.contains("allocated_bytes.all.allocated"),
        "{}",
        narrow.stdout
    );
    let bad = finish(
        memprof()
            .args(["--stat", "reserved_bytes.all.peak", "merge"])
            .args(&files)
            .output()
            .unwrap(),
    );
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr
            .contains("did not measure 'reserved_bytes.all.peak'"),
        "{}",
        bad.stderr
    );
}

/// One process run as rank `rank` of 2 (the launcher's environment only), writing `out`.
fn report_as_rank(dir: &Path, rank: u32, script: &str, stat: &str, out: &str) {
    let r = finish(
        as_rank(rank, 2)
            .args(["--device", "cpu", "--stat", stat, "run", "-f", "step", "-o"])
            .arg(dir.join(out))
            .args(["--format", "json", script, "x"])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
}

#[test]
fn merge_refuses_reports_that_are_not_the_ranks_of_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cur = "allocated_bytes.all.current";
    report_as_rank(d, 0, "lines.py", cur, "a.json");
    report_as_rank(d, 1, "lines.py", "allocated_bytes.all.peak", "b.json");
    report_as_rank(d, 1, "nested.py", cur, "c.json");
    report_as_rank(d, 0, "lines.py", cur, "d.json");
    let merge = |files: &[&str]| {
        finish(
            memprof()
                .arg("merge")
                .args(files.iter().map(|f| d.join(f)))
                .output()
                .unwrap(),
        )
    };
    let r = merge(&["a.rank0.json", "b.rank1.json"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("measured different stats"),
        "{}",
        r.stderr
    );
    let r = merge(&["a.rank0.json", "c.rank1.json"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("different scripts"), "{}", r.stderr);
    assert!(r.stderr.contains("nested.py"), "{}", r.stderr);
    let r = merge(&["a.rank0.json", "d.rank0.json"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("both reports of rank 0"), "{}", r.stderr);
}

fn multigpu_fixture(name: &str) -> String {
    root()
        .join("fixtures")
        .join("multigpu")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// The forward row of `module` in a report's module section.
fn forward_row<'a>(report: &'a Value, module: &str) -> &'a Value {
    report["modules"]["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["module"] == module && e["phase"] == "forward")
        .unwrap_or_else(|| panic!("no forward row of {module:?}"))
}

/// `torchrun` of `memprof run -f train_step --modules --collectives FLAGS -o f.json fsdp.py DIR
/// --small SCRIPT_FLAGS` on two CPU ranks, in `dir`.
fn fsdp_under_memprof(dir: &Path, flags: &[&str], script_flags: &[&str]) -> Run {
    let d = dir.to_string_lossy().into_owned();
    let fixture = multigpu_fixture("fsdp.py");
    let mut args = vec!["-f", "train_step", "--modules", "--collectives"];
    args.extend(flags);
    args.extend(["--format", "json", "-o", "f.json", &fixture, &d, "--small"]);
    args.extend(script_flags);
    torchrun(2, dir, &args)
}

#[test]
fn fsdp2_gathers_and_scatters_what_the_program_computes_and_shards_count_locally() {
    let dir = tempfile::tempdir().unwrap();
    let r = fsdp_under_memprof(dir.path(), &["--tensors"], &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for rank in 0..2 {
        let truth = read_json(&dir.path().join(format!("truth.rank{rank}.json")));
        let report = read_json(&dir.path().join(format!("f.rank{rank}.json")));
        assert_fsdp2_collectives(&report, &truth);
        // FSDP2 gathers each layer's parameters after the root call began and frees them after
        // the layer's forward: they are parameters, not saved activations, so each Linear of
        // the MLP saves its input alone (float32, batch 2 x 16 tokens, 64 and 256 features),
        // over 2 calls, and every layer saves the same.
        assert_eq!(
            forward_row(&report, "layers.1.mlp.0")["saved_bytes"],
            2 * 2 * 16 * 64 * 4
        );
        assert_eq!(
            forward_row(&report, "layers.1.mlp.2")["saved_bytes"],
            2 * 2 * 16 * 256 * 4
        );
        let layer_saved = forward_row(&report, "layers.0")["saved_bytes"].clone();
        for layer in 1..4 {
            assert_eq!(
                forward_row(&report, &format!("layers.{layer}"))["saved_bytes"],
                layer_saved
            );
        }
        let total = truth["total_unsharded_bytes"].as_i64().unwrap();
        // --tensors: the parameters are the local shards, of the full size.
        let inventory = &report["tensors"][0];
        let params = inventory["categories"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["category"] == "parameters")
            .unwrap();
        assert_eq!(
            params["bytes"], truth["local_parameter_bytes"],
            "{inventory:#}"
        );
        assert_eq!(params["unsharded_bytes"], total);
    }
}

/// FSDP2's collectives in a `-f train_step --modules --collectives` report of fsdp.py, against
/// what the program computed (its truth): each layer's forward gathers its full parameters once
/// per call (2 calls), its parameters count by the local shard with the full size beside them,
/// and per line, exactly, the forward gathers everything and backward gathers the layers again
/// (the root keeps its own) and reduce-scatters every gradient.
fn assert_fsdp2_collectives(report: &Value, truth: &Value) {
    let total = truth["total_unsharded_bytes"].as_i64().unwrap();
    let mut layers_total = 0;
    for (name, full) in truth["layer_unsharded_bytes"].as_object().unwrap() {
        let full = full.as_i64().unwrap();
        layers_total += full;
        let row = forward_row(report, name);
        assert_eq!(
            row["collectives"]["all_gather"],
            2 * full,
            "{name}: {row:#}"
        );
        assert_eq!(
            row["parameter_bytes"], truth["layer_local_bytes"][name],
            "{name}"
        );
        assert_eq!(row["unsharded_parameter_bytes"], full, "{name}");
    }
    let root = forward_row(report, "");
    assert_eq!(root["parameter_bytes"], truth["local_parameter_bytes"]);
    assert_eq!(root["unsharded_parameter_bytes"], total);
    assert_eq!(root["collectives"]["all_gather"], 2 * total);
    let step = function(report, "train_step");
    let fwd = &line(step, "logits = model(tokens)")["collectives"];
    assert_eq!(fwd, &serde_json::json!({"all_gather": 2 * total}));
    let bwd = &line(step, "loss.backward()")["collectives"];
    assert_eq!(
        bwd,
        &serde_json::json!({"all_gather": 2 * layers_total, "reduce_scatter": 2 * total})
    );
}

#[test]
fn compiled_fsdp2_blocks_run_as_without_memprof_and_gather_and_scatter_per_block() {
    // Each block torch.compile'd and then sharded, as torchtitan does: fully_shard's hooks on
    // the compiled wrappers gather and reduce-scatter outside the graphs. The program's losses
    // are the same with and without memprof on both ranks; the collectives are the eager run's.
    let fixture = multigpu_fixture("fsdp.py");
    let bare_dir = tempfile::tempdir().unwrap();
    let b = bare_dir.path().to_string_lossy().into_owned();
    let bare = torchrun_python(2, bare_dir.path(), &[&fixture, &b, "--small", "--compile"]);
    assert_eq!(bare.code, 0, "{}", bare.stderr);
    let dir = tempfile::tempdir().unwrap();
    let r = fsdp_under_memprof(dir.path(), &[], &["--compile"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        !r.stderr.contains("when there are global hooks"),
        "{}",
        r.stderr
    );
    for rank in 0..2 {
        let truth = read_json(&dir.path().join(format!("truth.rank{rank}.json")));
        let bare_truth = read_json(&bare_dir.path().join(format!("truth.rank{rank}.json")));
        assert_eq!(truth["losses"], bare_truth["losses"], "rank {rank}");
        assert_eq!(truth["losses"].as_array().unwrap().len(), 2);
        let report = read_json(&dir.path().join(format!("f.rank{rank}.json")));
        assert_fsdp2_collectives(&report, &truth);
        assert_eq!(
            forward_row(&report, "layers.0")["type"],
            "FSDPOptimizedModule"
        );
        // The four blocks run one compiled graph (their parameters are its inputs): its rows
        // are the Block's submodules, over 4 blocks x 2 steps.
        let compiled = report["modules"]["compiled_modules"].as_array().unwrap();
        let row = |module: &str, phase: &str| {
            compiled
                .iter()
                .find(|e| e["root"] == "Block" && e["module"] == module && e["phase"] == phase)
                .unwrap_or_else(|| panic!("no compiled {phase} row of {module:?}: {compiled:#?}"))
        };
        assert_eq!(row("", "forward")["calls"], 8);
        assert_eq!(row("", "backward")["calls"], 8);
        // What the compiled graph saved over its 8 runs (AOTAutograd's saved results) is what
        // the saved-tensors hook saw the four sharded blocks save over their 2 calls each.
        let blocks_saved: i64 = (0..4)
            .map(|layer| {
                forward_row(&report, &format!("layers.{layer}"))["saved_bytes"]
                    .as_i64()
                    .unwrap()
            })
            .sum();
        assert!(blocks_saved > 0);
        assert_eq!(row("", "forward")["saved_bytes"], blocks_saved);
        for module in ["norm1", "attn", "norm2", "mlp", "mlp.0", "mlp.2"] {
            assert_eq!(row(module, "forward")["calls"], 8, "{module}");
        }
    }
}

#[test]
fn ddp_all_reduces_every_gradient_once_per_backward() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_string_lossy().into_owned();
    let r = torchrun(
        2,
        dir.path(),
        &[
            "-f",
            "train_step",
            "--collectives",
            "--format",
            "json",
            "-o",
            "d.json",
            &multigpu_fixture("ddp.py"),
            &d,
            "--small",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    for rank in 0..2 {
        let truth = read_json(&dir.path().join(format!("truth.rank{rank}.json")));
        let report = read_json(&dir.path().join(format!("d.rank{rank}.json")));
        let step = function(&report, "train_step");
        // DDP's reducer all-reduces its gradient buckets from C++, on autograd's thread: every
        // step's, from the first (its first all-reduce was sometimes missed while the shim was
        // built without libtorch's NDEBUG).
        let bwd = &line(step, "loss.backward()")["collectives"];
        let params = truth["parameter_bytes"].as_i64().unwrap();
        let calls = step["calls"].as_i64().unwrap();
        assert_eq!(calls, 3);
        assert_eq!(bwd, &serde_json::json!({"all_reduce": calls * params}));
    }
}

#[test]
fn with_no_flags_each_rank_explains_its_own_peak_and_merge_names_the_rank_of_the_max() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_string_lossy().into_owned();
    let r = torchrun(
        2,
        dir.path(),
        &["-o", "p.json", &multigpu_fixture("ddp.py"), &d, "--small"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The batch each rank trains on: rank 1's is 4x rank 0's (16 x 1024 float32 inputs).
    let batch_bytes = |rank: i64| 16 * (if rank == 1 { 4 } else { 1 }) * 1024 * 4;
    let at_x = |peak: &Value| -> Value {
        peak["sites"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["source"] == "x = torch.randn(batch, 1024, device=device)")
            .cloned()
            .unwrap_or_else(|| panic!("no site for x: {peak:#}"))
    };
    for rank in 0..2 {
        let report = read_json(&dir.path().join(format!("p.rank{rank}.json")));
        assert_eq!(report["metadata"]["process"]["rank"], rank);
        let peak = &report["peak"];
        assert_sums_to_the_peak(peak);
        assert_eq!(at_x(peak)["bytes"], batch_bytes(rank), "rank {rank}");
    }
    let out = memprof()
        .arg("merge")
        .args(["--format", "json"])
        .arg(dir.path().join("p.rank0.json"))
        .arg(dir.path().join("p.rank1.json"))
        .output()
        .unwrap();
    let merged = finish(out);
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    let peak = &merged.json()["peak"];
    let x = at_x(peak);
    assert_eq!(
        (
            &x["bytes"]["max"],
            &x["bytes"]["min"],
            &x["bytes"]["max_rank"]
        ),
        (&batch_bytes(1).into(), &batch_bytes(0).into(), &1.into()),
        "{x:#}"
    );
    assert_eq!(peak["ranks"].as_array().unwrap().len(), 2);
    // The rank of the max is the rank whose own peak is higher. (Which one that is varies on
    // the CPU: gloo's threads allocate CPU tensors too, and rank 1's larger batch is only
    // 192 KiB more.)
    let own: Vec<i64> = (0..2)
        .map(|rank| {
            read_json(&dir.path().join(format!("p.rank{rank}.json")))["peak"]["allocated_bytes"]
                .as_i64()
                .unwrap()
        })
        .collect();
    let max_rank = i64::from(own[1] > own[0]);
    assert_eq!(
        (
            &peak["allocated_bytes"]["max"],
            &peak["allocated_bytes"]["max_rank"]
        ),
        (&own[max_rank as usize].into(), &max_rank.into()),
        "{peak:#}"
    );
}
