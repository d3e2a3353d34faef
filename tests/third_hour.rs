//! What a third hour of real use found in the words and suggestions (issue 48, item 8): the
//! usual class named first among a package's same-named methods, no library constructor offered
//! as the next target, a worker's report without the parent's "never ran", checkpointing that
//! does not pay said so, a growing container as one inventory row, a renamed script's diff.
use crate::common::*;

#[test]
fn a_bare_method_name_lists_the_class_its_package_exports_first() {
    let r = run(&["-f", "Linear.forward", "mlp.py"]);
    let warning = r
        .stdout
        .lines()
        .chain(r.stderr.lines())
        .find(|l| l.contains("no function matched '-f Linear.forward'"))
        .unwrap_or_else(|| panic!("{}", r.stderr));
    let first = warning.split("-f ").nth(2).unwrap_or_default();
    assert!(
        first.starts_with("torch.nn.modules.linear:Linear.forward"),
        "{warning}"
    );
}

#[test]
fn the_next_target_is_never_a_librarys_constructor() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("generate.py");
    std::fs::write(
        &script,
        "import torch\nfrom transformers import GPT2Config, GPT2LMHeadModel\n\
         model = GPT2LMHeadModel(GPT2Config(vocab_size=512, n_positions=64, n_embd=128, n_layer=2, n_head=2))\n\
         out = model.generate(torch.ones(1, 8, dtype=torch.long), max_new_tokens=4, do_sample=False, pad_token_id=0)\n",
    )
    .unwrap();
    let r = finish(
        memprof()
            .args(["--device", "cpu", "run"])
            .arg(&script)
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let next = r
        .stdout
        .lines()
        .find(|l| l.starts_with("line by line, next:"))
        .unwrap_or_else(|| panic!("{}", r.stdout));
    assert!(!next.contains("__init__"), "{next}");
    assert!(next.contains("-f '<module>'"), "{next}");
}

#[test]
fn a_workers_report_does_not_say_the_parents_targets_never_ran() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let r = run(&[
        "-f",
        "my_collate",
        "-f",
        "Items.__len__",
        "-o",
        out.to_str().unwrap(),
        "children_loader.py",
        "fork",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let kept: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains(".child"))
        .collect();
    assert_eq!(kept.len(), 2, "{kept:?}");
    for child in kept {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&child).unwrap()).unwrap();
        let warnings = v["warnings"].to_string();
        assert!(
            !warnings.contains("never ran"),
            "{}: {warnings}",
            child.display()
        );
        assert!(function(&v, "my_collate")["calls"].as_u64() > Some(0));
    }
}

#[test]
fn a_checkpoint_plan_that_saves_nothing_says_so() {
    let r = run(&["--modules", "--suggest-checkpoints", "1", "mlp.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("Checkpointing does not pay here: the estimate (256.00 KiB) is not below what is saved now (160.00 KiB)"),
        "{}",
        r.stdout
    );
    // Where it pays, no such line.
    let r = run(&["--modules", "--suggest-checkpoints", "1", "nested_model.py"]);
    assert!(!r.stdout.contains("does not pay"), "{}", r.stdout);
}

#[test]
fn a_container_that_grows_is_one_inventory_row_named_by_it() {
    let (r, v) = profile(&[], &["-f", "train", "--tensors", "growing_cache.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The inventory at the end of train's call (the last of the run's).
    let inventories = v["tensors"].as_array().unwrap_or_else(|| panic!("{v:#}"));
    let rows = inventories.last().unwrap()["tensors"].as_array().unwrap();
    let cache = rows
        .iter()
        .find(|t| t["name"] == "train:cache[…]")
        .unwrap_or_else(|| panic!("{rows:#?}"));
    assert_eq!(cache["storages"], 8);
    assert_eq!(cache["bytes"], 8 * 128 * KIB);
    assert_eq!(cache["shape"], serde_json::json!([32, 1024]));
}

#[test]
fn a_renamed_copy_of_the_script_diffs_site_by_site() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("mlp_v2.py");
    std::fs::copy(fixture("mlp.py"), &copy).unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    assert_eq!(run(&["-o", a.to_str().unwrap(), "mlp.py"]).code, 0);
    let r = run(&["-o", b.to_str().unwrap(), copy.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let diff = finish(
        memprof()
            .args(["diff", "--format", "json"])
            .arg(&a)
            .arg(&b)
            .output()
            .unwrap(),
    );
    assert_eq!(diff.code, 0, "{}", diff.stderr);
    let sites = diff.json()["peak"]["sites"].clone();
    let sites = sites.as_array().unwrap();
    assert!(!sites.is_empty());
    // Every site of one run found in the other: none only new, none only gone.
    for s in sites {
        assert!(
            s["bytes"]["base"].is_i64() && s["bytes"]["new"].is_i64(),
            "{s:#}"
        );
    }
}
