//! `--tensors`: the live-tensor inventory pinned exactly on the MLP and the CNN trained with Adam
//! in fp32 and bf16 (parameters, gradients, Adam state, the step's own tensors), named from the
//! model, the optimizer and the targeted frame; at an exception; without keeping anything alive.
use crate::common::*;
use serde_json::Value;

fn inventories(args: &[&str]) -> (Run, Vec<Value>) {
    let mut all = vec!["--tensors"];
    all.extend(args);
    let (r, report) = profile(&[], &all);
    let list = report["tensors"]
        .as_array()
        .unwrap_or_else(|| panic!("no tensors section: {report:#}\n{}", r.stderr))
        .clone();
    (r, list)
}

fn category(inv: &Value, name: &str) -> i64 {
    inv["categories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["category"] == name)
        .unwrap_or_else(|| panic!("no {name} in {inv:#}"))["bytes"]
        .as_i64()
        .unwrap()
}

fn named<'a>(inv: &'a Value, name: &str) -> &'a Value {
    inv["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| {
            t["name"]
                .as_str()
                .is_some_and(|n| n.split(", ").any(|part| part == name))
        })
        .unwrap_or_else(|| panic!("no tensor named {name} in {inv:#}"))
}

/// Checks the inventory at the end of train_step's third call; `params` lists the parameter
/// sizes in elements, `other` the step's own tensors (inputs, targets, output) in bytes.
fn check_training(script: &str, dtype: &str, s: i64, params: &[i64], other: i64) {
    let (r, invs) = inventories(&["-f", "train_step", script, dtype, "3"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The first call's and the latest call's.
    let calls: Vec<u64> = invs.iter().map(|i| i["call"].as_u64().unwrap()).collect();
    assert_eq!(calls, [1, 3]);
    let inv = &invs[1];
    assert_eq!(inv["when"], "end of train_step (call 3)");
    assert_eq!(inv["raised"], false);
    let p: i64 = params.iter().sum::<i64>() * s;
    assert_eq!(category(inv, "parameters"), p);
    assert_eq!(category(inv, "gradients"), p);
    assert_eq!(category(inv, "buffers"), 0);
    // Adam: exp_avg and exp_avg_sq like each parameter, and a float32 `step` per parameter,
    // which Adam keeps on the CPU (so on the device only when that is the CPU).
    let steps = if on_cuda() {
        0
    } else {
        4 * params.len() as i64
    };
    assert_eq!(category(inv, "optimizer_state"), 2 * p + steps);
    // x, y, out, loss (a scalar, shared with the detached value being returned), and the
    // previous call's returned loss, still bound in __main__.
    assert_eq!(category(inv, "other"), other + 2 * s);
    let tensors = inv["tensor_bytes"].as_i64().unwrap();
    assert_eq!(tensors, 4 * p + steps + other + 2 * s);
    let allocated = inv["allocated_bytes"].as_i64().unwrap();
    assert_eq!(inv["gap_bytes"].as_i64().unwrap(), allocated - tensors);
    if on_cuda() {
        // Allocator rounding (scalars take 512 B) and cuBLAS workspaces hold the rest.
        assert!(allocated >= tensors, "{inv:#}");
    } else {
        assert_eq!(
            allocated, tensors,
            "on the CPU every allocated byte is a tensor's"
        );
    }
    let w = named(inv, "0.weight");
    assert_eq!(w["category"], "parameters");
    assert_eq!(w["bytes"].as_i64().unwrap(), params[0] * s);
    assert_eq!(w["dtype"], dtype);
    assert_eq!(named(inv, "0.weight.grad")["category"], "gradients");
    let m = named(inv, "optimizer.state[0.weight].exp_avg");
    assert_eq!(m["category"], "optimizer_state");
    assert_eq!(m["bytes"].as_i64().unwrap(), params[0] * s);
    assert_eq!(named(inv, "train_step:x")["category"], "other");
    // The step's output is named by its variable and by the targeted line that allocated it;
    // x came from outside any targeted line.
    let source = std::fs::read_to_string(root().join("fixtures").join(script)).unwrap();
    let line = source
        .lines()
        .position(|l| l.trim() == "out = model(x)")
        .unwrap()
        + 1;
    let created = named(inv, "train_step:out")["created_at"].as_str().unwrap();
    assert!(
        created.ends_with(&format!("{script}:{line} (train_step)")),
        "{created}"
    );
    assert!(named(inv, "train_step:x")["created_at"].is_null());
    assert_eq!(
        named(inv, "train_step:loss")["tensors"],
        2,
        "loss and its detached view"
    );
    // After the first step the optimizer state exists too.
    assert_eq!(category(&invs[0], "optimizer_state"), 2 * p + steps);
    assert_eq!(category(&invs[0], "other"), other + s);
}

#[test]
fn mlp_inventory_is_exact_in_fp32() {
    let (b, i, h, o) = (64, 128, 512, 256);
    let params = [i * h, h, h * o, o];
    check_training("mlp.py", "float32", 4, &params, (b * i + 2 * b * o) * 4);
}

#[test]
fn mlp_inventory_is_exact_in_bf16() {
    let (b, i, h, o) = (64, 128, 512, 256);
    let params = [i * h, h, h * o, o];
    check_training("mlp.py", "bfloat16", 2, &params, (b * i + 2 * b * o) * 2);
}

#[test]
fn cnn_inventory_is_exact_in_fp32_and_bf16() {
    let (b, c, hw, k, o) = (8, 4, 16, 16, 32);
    let params = [k * c * 9, k, k * (hw / 2) * (hw / 2) * o, o];
    for (dtype, s) in [("float32", 4), ("bfloat16", 2)] {
        check_training(
            "cnn.py",
            dtype,
            s,
            &params,
            (b * c * hw * hw + 2 * b * o) * s,
        );
    }
}

#[test]
fn an_exception_gets_an_inventory_and_nothing_is_kept_alive() {
    let mib = 1024 * 1024;
    let (r, invs) = inventories(&[
        "-f",
        "make_and_drop",
        "-f",
        "fails",
        "inventory_edges.py",
        "--raise",
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    // The inventory held the 1 MiB tensor of each call while it ran, and let it go.
    assert!(
        r.stdout.contains("alive after the calls: 0"),
        "{}",
        r.stdout
    );
    let ends: Vec<&Value> = invs
        .iter()
        .filter(|i| i["function"] == "make_and_drop")
        .collect();
    assert_eq!(ends.len(), 2);
    for inv in ends {
        assert_eq!(named(inv, "make_and_drop:t")["bytes"], mib);
        assert_eq!(category(inv, "other") % 4096, 0);
    }
    let failed = invs
        .iter()
        .find(|i| i["function"] == "fails")
        .expect("an inventory where the exception left fails()");
    assert_eq!(failed["raised"], true);
    assert_eq!(failed["when"], "an exception left fails (call 1)");
    assert_eq!(named(failed, "fails:doomed")["bytes"], 2 * mib);
    assert!(
        r.stderr.contains("ValueError: failed holding"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("memprof inventory"), "{}", r.stderr);
}

#[test]
fn the_table_sets_categories_against_the_allocator() {
    let r = run(&["-f", "train_step", "--tensors", "mlp.py", "float32", "2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for needle in [
        "Live tensors at end of train_step (call 2):",
        "optimizer state",
        "allocated_bytes.all.current",
        "gap",
        "optimizer.state[2.weight].exp_avg_sq",
    ] {
        assert!(r.stdout.contains(needle), "{needle} missing:\n{}", r.stdout);
    }
}

#[test]
fn an_out_of_memory_error_gets_an_inventory_of_what_was_live() {
    let (r, invs) = inventories(&["-f", "grow", "oom.py"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    if on_cuda() {
        assert!(r.stderr.contains("OutOfMemoryError"), "{}", r.stderr);
    }
    assert_eq!(invs.len(), 1, "{invs:#?}");
    let inv = &invs[0];
    assert_eq!(inv["raised"], true);
    assert_eq!(inv["when"], "an exception left grow (call 1)");
    let small = named(inv, "grow:small");
    assert_eq!(small["bytes"], 1024);
    assert!(small["created_at"]
        .as_str()
        .unwrap()
        .ends_with("oom.py:10 (grow)"));
    assert_eq!(category(inv, "other"), 1024);
}

#[test]
fn tied_weights_and_views_count_once() {
    let (r, invs) = inventories(&["-f", "look", "tied.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let inv = &invs[0];
    // One 256 x 128 float weight under both names.
    let w = named(inv, "emb.weight");
    assert_eq!(w["name"], "emb.weight, out.weight");
    assert_eq!(w["bytes"], 256 * 128 * 4);
    assert_eq!(category(inv, "parameters"), 256 * 128 * 4);
    // buf, rows and flat: one storage, three tensors.
    let buf = named(inv, "look:buf");
    assert_eq!(buf["name"], "look:buf, look:rows, look:flat");
    assert_eq!(buf["bytes"], 64 * 128 * 4);
    assert_eq!(buf["tensors"], 3);
    assert_eq!(category(inv, "other"), 64 * 128 * 4);
}

/// inventory_steps.py's inventories (the first call's and the latest), taken as memprof takes
/// them and again with a walk of every object at every call (`MEMPROF_TENSORS_WALK=always`).
fn inventories_both_ways(steps: &str, keep_at: &str) -> (Vec<Value>, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let take = |walk: &str| {
        let out = dir.path().join(format!("report{walk}.json"));
        let r = finish(
            memprof()
                .env("MEMPROF_TENSORS_WALK", walk)
                .args([
                    "--device",
                    device_flag(),
                    "run",
                    "-f",
                    "train_step",
                    "--tensors",
                ])
                .args(["--format", "json", "-o", out.to_str().unwrap()])
                .args(["inventory_steps.py", steps, keep_at])
                .output()
                .expect("memprof starts"),
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        read_json(&out)["tensors"].as_array().unwrap().clone()
    };
    (take(""), take("always"))
}

/// The inventories without their `walked`, which says how each was taken.
fn contents(invs: &[Value]) -> Vec<Value> {
    invs.iter()
        .map(|i| {
            let mut i = i.clone();
            i.as_object_mut().unwrap().remove("walked");
            i
        })
        .collect()
}

const KEPT_BYTES: i64 = 32 * 256 * 4;

fn kept_row(inv: &Value) -> &Value {
    inv["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| {
            t["created_at"]
                .as_str()
                .is_some_and(|c| c.ends_with("inventory_steps.py:23 (train_step)"))
        })
        .unwrap_or_else(|| panic!("the kept copy is not listed: {inv:#}"))
}

#[test]
fn later_inventories_walk_no_objects_and_say_what_a_walk_would() {
    // The copy is kept at call 3: that call's inventory walks (a block no name holds is new);
    // call 6's walks nothing, and still lists the copy, which only a walk could find.
    let (invs, walked) = inventories_both_ways("6", "3");
    let calls: Vec<u64> = invs.iter().map(|i| i["call"].as_u64().unwrap()).collect();
    assert_eq!(calls, [1, 6]);
    assert_eq!(invs[0]["walked"], true);
    assert_eq!(invs[1]["walked"], false, "{:#}", invs[1]);
    assert_eq!(walked[1]["walked"], true);
    let kept = kept_row(&invs[1]);
    assert_eq!(kept["bytes"], KEPT_BYTES);
    assert!(kept["storages"].is_null(), "one storage: {kept:#}");
    assert!(kept["name"].is_null(), "{kept:#}");
    assert_eq!(contents(&invs), contents(&walked));
    // The steady part named without a walk: the weights, their gradients and momentum.
    let params = (256 * 256 + 256) * 4;
    assert_eq!(category(&invs[1], "parameters"), params);
    assert_eq!(category(&invs[1], "gradients"), params);
    assert_eq!(category(&invs[1], "optimizer_state"), params);
}

#[test]
fn a_tensor_kept_where_no_name_reaches_makes_the_inventory_walk() {
    let (invs, walked) = inventories_both_ways("4", "2,4");
    assert_eq!(invs[1]["call"], 4);
    assert_eq!(invs[1]["walked"], true, "{:#}", invs[1]);
    let kept = kept_row(&invs[1]);
    assert_eq!(kept["bytes"], 2 * KEPT_BYTES);
    assert_eq!(kept["storages"], 2);
    assert_eq!(contents(&invs), contents(&walked));
}
