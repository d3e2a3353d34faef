//! `memprof run --simulate-gpu NAME` (issue 52): a program run without a GPU as if on one,
//! through the real binary on real torch, on a loop whose every allocation is known
//! (fixtures/simulated.py): what the program sees, the trace's allocations at their sizes,
//! lines and categories, the predicted peak worked out by hand, a GPU too small, another batch
//! size from two simulated traces, and the mistakes.
use crate::common::*;
use serde_json::Value;

const WORKSPACE_SM90: i64 = 32 << 20;
const WORKSPACE_SM80: i64 = 4096 * 1024 * 2 + 16 * 1024 * 8;
/// cuBLASLt's, for a product with a bias (the Linear layers' forward).
const WORKSPACE_LT: i64 = 1 << 20;
/// 128 -> 512 -> 256: the weights and biases, in the order `.to("cuda")` moves them.
const PARAMETERS: [i64; 4] = [512 * 128 * 4, 512 * 4, 256 * 512 * 4, 256 * 4];
const PARAMETER_BYTES: i64 = 262144 + 2048 + 524288 + 1024;

/// The line of fixtures/simulated.py that holds `needle`, as the trace names it.
fn at(needle: &str) -> String {
    let text = std::fs::read_to_string(fixture("simulated.py")).unwrap();
    let n = text
        .lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle}"));
    format!("simulated.py:{}", n + 1)
}

/// `memprof run --simulate-gpu GPU --trace T --format json -o P simulated.py ARGS`: the run,
/// its prediction and its trace.
fn simulate(gpu: &str, args: &[&str], code: i32) -> (Run, Value, Value) {
    simulate_script(gpu, "simulated.py", args, code)
}

/// The same for another fixture: `memprof run --simulate-gpu GPU ... SCRIPT ARGS`.
fn simulate_script(gpu: &str, script: &str, args: &[&str], code: i32) -> (Run, Value, Value) {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.json");
    let prediction = dir.path().join("prediction.json");
    let r = finish(
        memprof()
            .args(["run", "--simulate-gpu", gpu, "--trace"])
            .arg(&trace)
            .args(["--format", "json", "-o"])
            .arg(&prediction)
            .arg(script)
            .args(args)
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, code, "{}\n{}", r.stdout, r.stderr);
    (r, read_json(&prediction), read_json(&trace))
}

/// A prediction's notes, as `FILE:LINE: what`.
fn notes(prediction: &Value) -> Vec<String> {
    prediction["simulated"]["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            format!(
                "{}: {}",
                n["at"].as_str().unwrap(),
                n["what"].as_str().unwrap()
            )
        })
        .collect()
}

fn read_json(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{} was not written: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// `memprof run ARGS` in fixtures/: its exit code and output.
fn memprof_run(args: &[&str]) -> Run {
    finish(memprof().arg("run").args(args).output().unwrap())
}

/// The trace's allocations: (size, line, category).
fn allocations(trace: &Value) -> Allocations {
    trace["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e.get("alloc").is_some())
        .map(|e| {
            (
                e["size"].as_i64().unwrap(),
                e["at"].as_str().unwrap().to_string(),
                e["category"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The allocated peak of a trace replayed by hand: each allocation's block is its size rounded
/// up to 512 bytes.
fn allocated_peak(trace: &Value) -> i64 {
    let mut live = std::collections::HashMap::new();
    let (mut now, mut peak) = (0i64, 0i64);
    for e in trace["events"].as_array().unwrap() {
        if let Some(id) = e.get("alloc") {
            let block = (e["size"].as_i64().unwrap() + 511) / 512 * 512;
            live.insert(id.as_i64().unwrap(), block.max(512));
            now += block.max(512);
            peak = peak.max(now);
        } else {
            now -= live.remove(&e["free"].as_i64().unwrap()).unwrap();
        }
    }
    peak
}

#[test]
fn a_simulated_h100_run_sees_the_gpu_and_predicts_the_peak_worked_out_by_hand() {
    let (r, p, trace) = simulate("H100", &[], 0);
    // The program sees one H100, its tensors on cuda:0, and its own memory readings.
    let out: Vec<&str> = r.stderr.lines().chain(r.stdout.lines()).collect();
    for line in [
        "available True 1",
        "device NVIDIA H100 80GB HBM3 85017493504 9 0",
        "tensors cuda:0 True torch.Size([64, 256]) torch.float32",
        "max_memory_allocated 70821888",
        "loss 0.0",
    ] {
        assert!(out.contains(&line), "{line} not in {out:?}");
    }
    let all = allocations(&trace);
    // The parameters, moved once each, at model.to's line.
    let params: Vec<i64> = all
        .iter()
        .filter(|a| a.2 == "parameters")
        .map(|a| a.0)
        .collect();
    assert_eq!(params, PARAMETERS);
    assert!(all[..4].iter().all(|a| a.1 == at("model = nn.Sequential")));
    assert_eq!(
        all[4],
        (64 * 128 * 4, at("x = torch.randn"), "inputs".into())
    );
    assert_eq!(
        all[5],
        (64 * 256 * 4, at("y = torch.randn"), "inputs".into())
    );
    // cuBLAS's workspace, H100's 32 MiB, once for the program's thread (the first forward's
    // matrix product) and once for autograd's (the first backward's); cuBLASLt's 1 MiB after
    // the first, for the Linear layer's product with a bias.
    let workspaces: Vec<(i64, String)> = all
        .iter()
        .filter(|a| a.2 == "workspaces")
        .map(|a| (a.0, a.1.clone()))
        .collect();
    assert_eq!(
        workspaces,
        [
            (WORKSPACE_SM90, at("out = model(x)")),
            (WORKSPACE_LT, at("out = model(x)")),
            (WORKSPACE_SM90, at("loss.backward()"))
        ]
    );
    // SGD's momentum buffers, one per parameter, at the step that made them; the gradients,
    // one per parameter in each of the two backward passes.
    let state: Vec<i64> = all
        .iter()
        .filter(|a| a.2 == "optimizer state")
        .map(|a| a.0)
        .collect();
    assert_eq!(state, PARAMETERS);
    let grads = all.iter().filter(|a| a.2 == "gradients").count();
    assert_eq!(grads, 8);
    // The peak, in the second backward pass: the workspaces, the parameters, their gradients
    // and momentum, an autograd temporary (the gradient into the ReLU, 64 x 512 floats), x, y,
    // the output the program holds (64 x 256), the loss and its gradient's seed (512 B each).
    let by_hand = 2 * WORKSPACE_SM90
        + WORKSPACE_LT
        + 3 * PARAMETER_BYTES
        + 64 * 512 * 4
        + 64 * 128 * 4
        + 64 * 256 * 4
        + 64 * 256 * 4
        + 2 * 512;
    assert_eq!(by_hand, 70821888);
    assert_eq!(allocated_peak(&trace), by_hand);
    assert_eq!(p["predicted"]["allocated_bytes.all.peak"], by_hand);
    // Reserved: each cuBLAS workspace a 32 MiB segment of its own; every other block is at most
    // 1 MiB, in the small pool's 2 MiB segments, and the 3.6 MiB of them at the peak fit in two.
    assert_eq!(
        p["predicted"]["reserved_bytes.all.peak"],
        (32 + 32 + 2 + 2) << 20
    );
    assert_eq!(p["fits"], true);
    assert_eq!(p["memory_bytes"], 85017493504i64 - 808255488);
    assert_eq!(p["simulated"]["gpu"], "NVIDIA H100 80GB HBM3");
    let places: Vec<&str> = p["simulated"]["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["at"].as_str().unwrap())
        .collect();
    assert_eq!(places, [at("loss.item()"), at("torch.isnan")]);
    // The peak by line and category sums to it.
    let rows = p["peak_live"].as_array().unwrap();
    let sum: i64 = rows.iter().map(|r| r["bytes"].as_i64().unwrap()).sum();
    assert_eq!(sum, by_hand);
    assert!(rows.contains(&serde_json::json!({
        "at": at("model = nn.Sequential"), "bytes": PARAMETER_BYTES, "blocks": 4,
        "category": "parameters"})));
}

#[test]
fn an_a100_has_its_own_workspace_and_a_30_gib_tensor_does_not_fit_an_l4() {
    let (_, p, trace) = simulate("a100-40gb", &[], 0);
    let workspaces: Vec<i64> = allocations(&trace)
        .iter()
        .filter(|a| a.2 == "workspaces")
        .map(|a| a.0)
        .collect();
    assert_eq!(workspaces, [WORKSPACE_SM80, WORKSPACE_LT, WORKSPACE_SM80]);
    assert_eq!(p["simulated"]["gpu"], "NVIDIA A100-SXM4-40GB");
    // 30 GiB in one tensor: an H100 holds it, an L4 does not (exit 5, as memprof fit's).
    let (_, p, _) = simulate("H100", &["64", "big"], 0);
    assert_eq!(p["fits"], true);
    let (_, p, _) = simulate("L4", &["64", "big"], 5);
    assert_eq!(p["fits"], false);
    assert_eq!(p["out_of_memory"]["requested_bytes"], 30i64 << 30);
    assert_eq!(p["out_of_memory"]["at"], at("big = torch.empty"));
    // The table says so.
    let r = memprof_run(&["--simulate-gpu", "L4", "simulated.py", "64", "big"]);
    assert_eq!(r.code, 5, "{}", r.stderr);
    assert!(
        r.stdout.contains("simulated: NVIDIA L4") && r.stdout.contains("fits: no"),
        "{}",
        r.stdout
    );
}

#[test]
fn two_simulated_batch_sizes_predict_a_third_as_simulating_it_does() {
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for batch in ["64", "128", "512"] {
        let (_, _, trace) = simulate("H100", &[batch], 0);
        let path = dir.path().join(format!("b{batch}.json"));
        std::fs::write(&path, trace.to_string()).unwrap();
        paths.push(path.to_string_lossy().into_owned());
    }
    let r = finish(
        memprof()
            .args([
                "fit",
                &paths[0],
                &paths[1],
                "--batches",
                "64,128",
                "--scale",
                "512",
            ])
            .args(["--format", "json"])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let scaled = r.json();
    let r = finish(
        memprof()
            .args(["fit", &paths[2], "--format", "json"])
            .output()
            .unwrap(),
    );
    let simulated = r.json();
    for key in ["allocated_bytes.all.peak", "reserved_bytes.all.peak"] {
        assert_eq!(
            scaled["predicted"][key], simulated["predicted"][key],
            "{key}"
        );
    }
}

#[test]
fn an_unknown_gpu_and_modes_that_need_a_real_one_are_refused_before_the_program_runs() {
    let r = memprof_run(&["--simulate-gpu", "H300", "simulated.py"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("--simulate-gpu H300: not a GPU memprof can simulate")
            && r.stderr
                .contains("H100, H200, A100-80GB, A100-40GB, L4, RTX4090"),
        "{}",
        r.stderr
    );
    assert!(
        !r.stdout.contains("available"),
        "the program ran: {}",
        r.stdout
    );
    let r = memprof_run(&["--simulate-gpu", "H100", "--modules", "simulated.py"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("--modules measures a real one"),
        "{}",
        r.stderr
    );
    let r = memprof_run(&["--simulate-gpu", "H100", "-f", "step", "simulated.py"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("and -f measures a real one"),
        "{}",
        r.stderr
    );
}

#[test]
fn what_training_programs_do_beside_the_step_runs_and_says_where_values_were_stood_in_for() {
    let dir = tempfile::tempdir().unwrap();
    let prediction = dir.path().join("prediction.json");
    let r = finish(
        memprof()
            .args(["run", "--simulate-gpu", "H100", "-o"])
            .arg(&prediction)
            .arg("simulated_patterns.py")
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    for line in [
        "checkpoint (32, 64) cuda:0",
        // The boolean mask's size at its largest: every one of 32 x 64 elements selected.
        "mask (2048,)",
        "loader (16, 64) cuda:0",
        "stream (32, 64) True",
        "rng torch.uint8",
        "scaler torch.float32",
        "checkpoint saved and loaded cuda:0",
        // Tensors a thread of the program made on the GPU and moved there.
        "thread [((8, 64), 'cuda:0'), ((8, 64), 'cuda:0'), ((4,), 'cuda:0')]",
        "values (32, 64) 0.0",
    ] {
        assert!(r.stdout.lines().any(|l| l == line), "{line}:\n{}", r.stdout);
    }
    // No warning said from memprof's own frames.
    assert!(!r.stderr.contains("<memprof"), "{}", r.stderr);
    let p = read_json(&prediction);
    let text = std::fs::read_to_string(fixture("simulated_patterns.py")).unwrap();
    let line_of = |needle: &str| {
        let n = text.lines().position(|l| l.contains(needle)).unwrap();
        format!("simulated_patterns.py:{}", n + 1)
    };
    let notes: Vec<(String, String)> = p["simulated"]["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["at"].as_str().unwrap().to_string(),
                n["what"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        notes.contains(&(
            line_of("selected = y[y > 0]"),
            "a size that depends on values (index.Tensor): every element counted as nonzero, \
             the largest size"
                .into()
        )),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|(at, what)| at == &line_of("print(\"values\"") && what.contains("zeros")),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|(at, what)| at == &line_of("torch.save(") && what.starts_with("torch.save")),
        "{notes:?}"
    );
}

#[test]
fn an_nccl_process_group_without_simulated_ranks_stops_the_program_with_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("ranks.py");
    std::fs::write(
        &script,
        "import os, torch, torch.distributed as dist\n\
         os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT='29517')\n\
         x = torch.empty(1 << 20, device='cuda')\n\
         dist.init_process_group('nccl', rank=0, world_size=1)\n",
    )
    .unwrap();
    let r = finish(
        memprof()
            .args(["run", "--simulate-gpu", "H100"])
            .arg(&script)
            .output()
            .unwrap(),
    );
    // The program's own error (exit 1), not an abort inside NCCL; the prediction of what ran.
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains(
            "RuntimeError: memprof --simulate-gpu: an NCCL process group needs --simulate-ranks N"
        ),
        "{}",
        r.stderr
    );
    assert!(
        r.stdout.contains("fits: yes")
            && r.stdout.contains(&format!(
                "4.00 MiB      1 block   inputs                 {}:3",
                script.display()
            ))
            && r.stdout
                .contains("ranks.py:4: torch.distributed: an NCCL process group"),
        "{}",
        r.stdout
    );
    // --simulate-ranks alone: a usage error before anything runs.
    let r = memprof_run(&["--simulate-ranks", "4", "simulated.py"]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("--simulate-ranks"), "{}", r.stderr);
    assert!(!r.stdout.contains("available"), "{}", r.stdout);
}

/// A trace's allocations: (size, line, category).
type Allocations = Vec<(i64, String, String)>;

/// `memprof run --simulate-gpu H100 --simulate-ranks 4 simulated_ranks.py KIND`: its output,
/// its predicted allocated peak, its trace's allocations and its notes (the trace and the
/// prediction both say it was one of 4 ranks).
fn simulate_rank(kind: &str) -> (Run, i64, Allocations, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.json");
    let prediction = dir.path().join("prediction.json");
    let r = finish(
        memprof()
            .args([
                "run",
                "--simulate-gpu",
                "H100",
                "--simulate-ranks",
                "4",
                "--trace",
            ])
            .arg(&trace)
            .args(["--format", "json", "-o"])
            .arg(&prediction)
            .args(["simulated_ranks.py", kind])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let trace = read_json(&trace);
    assert_eq!(trace["simulated"]["ranks"], 4);
    let prediction = read_json(&prediction);
    assert_eq!(prediction["simulated"]["ranks"], 4);
    let peak = prediction["predicted"]["allocated_bytes.all.peak"]
        .as_i64()
        .unwrap();
    let notes = prediction["simulated"]["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["what"].as_str().unwrap().to_string())
        .collect();
    (r, peak, allocations(&trace), notes)
}

/// The line of fixtures/simulated_ranks.py that holds `needle`, as the trace names it.
fn rank_line(needle: &str) -> String {
    let text = std::fs::read_to_string(fixture("simulated_ranks.py")).unwrap();
    let n = text.lines().position(|l| l.contains(needle)).unwrap();
    format!("simulated_ranks.py:{}", n + 1)
}

/// The program's printed reading `name`.
fn reading(r: &Run, name: &str) -> i64 {
    let line = r.stdout.lines().find(|l| l.starts_with(name)).unwrap();
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn fsdp2_runs_as_rank_0_of_4_with_a_quarter_of_each_layer() {
    let (r, predicted_peak, allocations, _) = simulate_rank("fsdp");
    // torchrun's environment and a process group of 4; parameters sharded, on the GPU.
    assert!(r.stdout.contains("world 0 4 0 4\n"), "{}", r.stdout);
    assert!(
        r.stdout.contains("parameters DTensor cuda:0 True\n"),
        "{}",
        r.stdout
    );
    // Each 4 MiB layer moved to the GPU, then a 1 MiB shard of it kept: four shards, made at
    // the loop's fully_shard line.
    assert_eq!(reading(&r, "after wrapping"), 4 << 20);
    let shard_line = rank_line("fully_shard(layer)");
    let at_shard: Vec<_> = allocations.iter().filter(|a| a.1 == shard_line).collect();
    assert_eq!(
        at_shard.iter().filter(|a| a.0 == 4 << 20).count(),
        4,
        "{at_shard:?}"
    );
    assert_eq!(
        at_shard
            .iter()
            .filter(|a| a.0 == 1 << 20 && a.2 == "parameters")
            .count(),
        4,
        "{at_shard:?}"
    );
    // After two steps: the shards (4 MiB), AdamW's two states of each shard (8 MiB), the input
    // (1 MiB) and cuBLAS's workspaces of the program's thread and autograd's (2 x 32 MiB).
    assert_eq!(
        reading(&r, "after steps"),
        (4 << 20) + (8 << 20) + (1 << 20) + 2 * WORKSPACE_SM90
    );
    // The program's own peak reading is the replay's, and what rank 0 of a real torchrun of
    // this program on 4 x H200 read (torch 2.11).
    assert_eq!(reading(&r, "max_memory_allocated"), predicted_peak);
    assert_eq!(reading(&r, "max_memory_allocated"), 102_761_472);
}

#[test]
fn fsdp2_over_compiled_blocks_runs_inductors_code_on_the_shards() {
    // Each layer torch.compile'd, then sharded (torchtitan's order): dynamo traces through
    // FSDP2's hooks, its graphs (dynamic shapes among them) compiled for the simulated GPU,
    // none run eagerly instead; the rank's readings as without compiling, and its peak its own.
    let (r, predicted_peak, _, notes) = simulate_rank("fsdp_compiled");
    assert_eq!(reading(&r, "after wrapping"), 4 << 20);
    assert_eq!(
        reading(&r, "after steps"),
        (4 << 20) + (8 << 20) + (1 << 20) + 2 * WORKSPACE_SM90
    );
    assert_eq!(reading(&r, "max_memory_allocated"), predicted_peak);
    assert_eq!(
        notes,
        ["torch.compile: inductor's code for the simulated GPU (its buffers; no kernel runs)"]
    );
}

#[test]
fn fsdp1_runs_as_rank_0_of_4_with_a_quarter_of_its_flat_parameter() {
    let (r, predicted_peak, allocations, _) = simulate_rank("fsdp1");
    assert!(r.stdout.contains("world 0 4 0 4\n"), "{}", r.stdout);
    // The model moved to the GPU (four 4 MiB layers), flattened into one 16 MiB parameter and a
    // quarter of it kept, at the line that wrapped it.
    assert_eq!(reading(&r, "after wrapping"), 4 << 20);
    let wrap_line = rank_line("FullyShardedDataParallel(model");
    assert!(
        allocations.contains(&(4 << 20, wrap_line.clone(), "parameters".into())),
        "{allocations:?}"
    );
    assert_eq!(reading(&r, "max_memory_allocated"), predicted_peak);
    // No warning said to the program that a GPU run would not say (a fake tensor's address).
    assert!(!r.stderr.contains("data pointer"), "{}", r.stderr);
}

#[test]
fn ddp_runs_as_rank_0_of_4_with_its_gradient_buckets() {
    let (r, predicted_peak, allocations, _) = simulate_rank("ddp");
    assert!(r.stdout.contains("world 0 4 0 4\n"), "{}", r.stdout);
    // (A simulated parameter is torch's fake tensor marked as a parameter: isinstance holds.)
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with("parameters ") && l.ends_with(" cuda:0 True")),
        "{}",
        r.stdout
    );
    // The parameters (16 MiB) and DDP's first bucket, all of them in one (16 MiB), made by
    // its reducer at the line that wrapped the model: named gradients.
    assert_eq!(reading(&r, "after wrapping"), 32 << 20);
    let ddp_line = rank_line("DistributedDataParallel(");
    assert!(
        allocations.contains(&(16 << 20, ddp_line.clone(), "gradients".into())),
        "{allocations:?}"
    );
    // After two steps: the parameters, the buckets as rebuilt before the second forward (the
    // first step's are held to the second backward, as NCCL's works hold them), AdamW's state
    // (32 MiB), the input and the two cuBLAS workspaces.
    assert_eq!(
        reading(&r, "after steps"),
        (16 << 20) + (16 << 20) + (32 << 20) + (1 << 20) + 2 * WORKSPACE_SM90
    );
    // The peak (AdamW's first step: its state, its foreach temporaries of all four layers at
    // once), the replay's and what rank 0 of a real torchrun of this program on 4 x H200 read.
    assert_eq!(reading(&r, "max_memory_allocated"), predicted_peak);
    assert_eq!(reading(&r, "max_memory_allocated"), 168_820_736);
}

/// `memprof run --simulate-gpu H100 --trace T simulated_compiled.py ARGS`: the run, the notes
/// of its prediction, and the trace's allocations.
fn simulate_compiled(args: &[&str]) -> (Run, Vec<String>, Allocations) {
    let (r, prediction, trace) = simulate_script("H100", "simulated_compiled.py", args, 0);
    (r, notes(&prediction), allocations(&trace))
}

/// The line of fixtures/simulated_compiled.py that holds `needle`, as the trace names it.
fn compiled_at(needle: &str) -> String {
    let text = std::fs::read_to_string(fixture("simulated_compiled.py")).unwrap();
    let n = text.lines().position(|l| l.contains(needle)).unwrap();
    format!("simulated_compiled.py:{}", n + 1)
}

#[test]
fn a_compiled_model_allocates_the_buffers_of_inductors_code_for_the_simulated_gpu() {
    let chain = compiled_at("return ((x * 2 + 1)");
    let sizes_at = |allocs: &[(i64, String, String)], line: &str| -> Vec<i64> {
        allocs.iter().filter(|a| a.1 == line).map(|a| a.0).collect()
    };
    // Eagerly each step of the chain is a 4 MiB tensor; inductor fuses the chain and its sum
    // into one kernel, whose 4 KiB output is the only buffer (one a call).
    let (eager, _, allocs) = simulate_compiled(&["--eager"]);
    assert_eq!(
        sizes_at(&allocs, &chain)
            .iter()
            .filter(|&&s| s == 4 << 20)
            .count(),
        8,
        "{allocs:?}"
    );
    assert!(
        eager.stdout.contains("max_memory_allocated 16781312"),
        "{}",
        eager.stdout
    );
    let (r, notes, allocs) = simulate_compiled(&[]);
    assert_eq!(sizes_at(&allocs, &chain), [4096, 4096], "{allocs:?}");
    // Nothing said from memprof's frames, nor about a fake tensor's data.
    assert!(
        !r.stderr.contains("<memprof") && !r.stderr.contains("FakeTensor"),
        "{}",
        r.stderr
    );
    // x and w, and the second call's output made while the first's is still held.
    assert!(
        r.stdout.contains("max_memory_allocated 8396800"),
        "{}",
        r.stdout
    );
    let compiled = compiled_at("fn = torch.compile(fn");
    assert_eq!(
        notes,
        [format!(
            "{compiled}: torch.compile: inductor's code for the simulated GPU (its buffers; \
             no kernel runs)"
        )]
    );
    // Training: every buffer at a line of the program (the generated code's lines are mapped
    // back to the source lines their FX nodes came from), and autograd's zeros for `h`, which
    // the loss does not use, handed to the compiled backward at `loss.backward()`, as on the
    // GPU: 4 MiB a step.
    let (r, _, allocs) = simulate_compiled(&["--train"]);
    assert!(
        r.stdout
            .contains("h (1024, 1024) cuda:0 grad (1024, 1024) cuda:0"),
        "{}",
        r.stdout
    );
    assert!(
        allocs
            .iter()
            .all(|a| a.1.starts_with("simulated_compiled.py:")),
        "{allocs:?}"
    );
    let backward = compiled_at("loss.backward()");
    let zeros = allocs
        .iter()
        .filter(|a| a.1 == backward && a.0 == 4 << 20 && a.2 == "autograd temporaries")
        .count();
    assert_eq!(zeros, 2, "{allocs:?}");
    // A kernel that writes what it reads is tuned at its first launch on clones of both its
    // x arguments (under the 16 MiB peak made first), as an H200 did: two 4 MiB clones
    // together, given back; nothing at the second call.
    let (_, _, allocs) = simulate_compiled(&["--inplace"]);
    let bump = compiled_at("    x.mul_(2)");
    let events: Vec<i64> = allocs.iter().filter(|a| a.1 == bump).map(|a| a.0).collect();
    assert_eq!(events, [4 << 20, 4 << 20], "{allocs:?}");
    // CUDA graphs are not simulated: the graphs' buffers are, and the note says what is not.
    let (_, notes, allocs) = simulate_compiled(&["--mode", "reduce-overhead"]);
    assert_eq!(sizes_at(&allocs, &chain), [4096, 4096], "{allocs:?}");
    assert!(
        notes[0].ends_with("mode 'reduce-overhead': its CUDA graphs are not simulated"),
        "{notes:?}"
    );
}

/// The trace of `memprof run --simulate-gpu GPU --trace T simulated_conv.py BATCH`: its
/// allocations and the notes of its prediction.
fn simulate_conv(gpu: &str, batch: &str) -> (Allocations, Vec<String>) {
    let (_, prediction, trace) = simulate_script(gpu, "simulated_conv.py", &[batch], 0);
    (allocations(&trace), notes(&prediction))
}

#[test]
fn cudnn_lends_each_convolution_the_workspace_measured_on_the_gpu() {
    let text = std::fs::read_to_string(fixture("simulated_conv.py")).unwrap();
    let line = |needle: &str| {
        let n = text.lines().position(|l| l.contains(needle)).unwrap();
        format!("simulated_conv.py:{}", n + 1)
    };
    let (forward, backward) = (line("y = conv(x)"), line("y.sum().backward()"));
    let output = 32 * 64 * 56 * 56 * 4;
    // Batch 32 was measured on the H200 (cudnn_sm90.py): each call's output, then its plan's
    // workspace, lent and given back within the call.
    let (allocs, notes) = simulate_conv("H100", "32");
    let from = allocs.iter().position(|a| a.1 == forward).unwrap();
    let calls: Vec<(i64, &str, &str)> = allocs[from..]
        .iter()
        .filter(|a| a.0 > 4)
        .map(|a| (a.0, a.1.as_str(), a.2.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            (output, forward.as_str(), "activations"),
            (25837584, forward.as_str(), "workspaces"),
            (output, backward.as_str(), "autograd temporaries"),
            (51527696, backward.as_str(), "workspaces"),
            (64 * 64 * 9 * 4, backward.as_str(), "autograd temporaries"),
            (53592743, backward.as_str(), "workspaces"),
        ]
    );
    assert!(notes.is_empty(), "{notes:?}");
    // Batch 40 was not: the layer's at batch 48 (as near as 32; the larger is taken), scaled
    // by 40/48, and the prediction says so at both lines.
    let (allocs, notes) = simulate_conv("H100", "40");
    let workspaces: Vec<i64> = allocs
        .iter()
        .filter(|a| a.2 == "workspaces")
        .map(|a| a.0)
        .collect();
    assert_eq!(
        workspaces,
        [77217939 * 40 / 48, 77217939 * 40 / 48, 79282855 * 40 / 48]
    );
    let estimated = "cuDNN's convolution workspace: estimated from this layer's at batch 48, \
                     scaled by the batch";
    assert_eq!(
        notes,
        [
            format!("{forward}: {estimated}"),
            format!("{backward}: {estimated}")
        ]
    );
    // Nothing measured on an A100: none counted, said.
    let (allocs, notes) = simulate_conv("A100", "32");
    assert!(allocs.iter().all(|a| a.2 != "workspaces"), "{allocs:?}");
    assert!(
        notes[0].ends_with("none measured on this GPU's architecture (none counted)"),
        "{notes:?}"
    );
}
