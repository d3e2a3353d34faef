//! `-f '<module>'`: a module's top-level code (Python's name for it) profiled like a function's,
//! as a training loop written at module level needs (issue 22).
use crate::common::*;

const KIB: i64 = 1024;
const MIB: i64 = 1024 * KIB;
const STATS: &[&str] = &["allocated_bytes.all.current", "allocated_bytes.all.peak"];

#[test]
fn a_module_level_loop_gets_its_lines_with_exact_bytes() {
    let (r, report) = profile(STATS, &["-f", "<module>", "module_loop.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("steps 3 1048576"), "{}", r.stdout);
    let functions = report["functions"].as_array().expect("functions");
    assert_eq!(
        functions.len(),
        1,
        "only the script's top level: {functions:?}"
    );
    let m = function(&report, "<module>");
    assert!(m["file"].as_str().unwrap().ends_with("module_loop.py"));
    assert_eq!(m["calls"], 1);

    let weights = line(m, "weights = torch.empty");
    assert_eq!((hits(weights), delta(weights)), (1, 2 * MIB));
    let loop_head = line(m, "for step in range(3)");
    assert_eq!((hits(loop_head), delta(loop_head)), (4, 0));
    let x = line(m, "x = torch.empty");
    assert_eq!((hits(x), delta(x)), (3, 12 * MIB));
    let append = line(m, "keep.append");
    assert_eq!((hits(append), delta(append)), (3, 3 * 512 * KIB));
    let del = line(m, "del x");
    assert_eq!((hits(del), delta(del)), (3, -12 * MIB));
    // The imported helper's top-level 1 MiB belongs to the import line.
    let import = line(m, "from module_helper import");
    assert_eq!((hits(import), delta(import)), (1, MIB));
    // The third `x` comes on top of the weights and two kept tensors: 4 + 1 MiB above the level
    // the weights line left.
    let after_weights = stat(weights, "allocated_bytes.all.current");
    assert_eq!(
        stat(x, "allocated_bytes.all.peak") - after_weights,
        4 * MIB + 2 * 512 * KIB
    );
    assert_eq!(delta_sum(m), 2 * MIB + MIB + 3 * 512 * KIB);
}

#[test]
fn a_scoped_module_target_names_that_module_only() {
    // By file, the script's own top level.
    let script = fixture("module_loop.py");
    let by_path = format!("{script}:<module>");
    let (r, report) = profile(STATS, &["-f", &by_path, "module_loop.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        delta(line(function(&report, "<module>"), "x = torch.empty")),
        12 * MIB
    );
    // By module name, an imported module's top level.
    let (r, report) = profile(STATS, &["-f", "module_helper:<module>", "module_loop.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let helper = function(&report, "<module>");
    assert!(helper["file"]
        .as_str()
        .unwrap()
        .ends_with("module_helper.py"));
    assert_eq!(delta(line(helper, "_table = torch.empty")), MIB);
    assert_eq!(report["functions"].as_array().unwrap().len(), 1);
}

#[test]
fn a_bare_module_target_names_the_main_module_under_dash_m() {
    let (r, report) = profile(STATS, &["-f", "<module>", "-m", "module_loop"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let m = function(&report, "<module>");
    assert!(m["file"].as_str().unwrap().ends_with("module_loop.py"));
    assert_eq!(delta(line(m, "keep.append")), 3 * 512 * KIB);
    // A package's `__main__` is its main module too.
    let (r, report) = profile(STATS, &["-f", "<module>", "-m", "mypkg"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        report["functions"].as_array().unwrap().len(),
        1,
        "the package's __init__ is imported on the way, and is not the main module"
    );
    let m = function(&report, "<module>");
    assert!(m["file"].as_str().unwrap().ends_with("__main__.py"));
    assert_eq!(delta(line(m, "print(\"module argv\"")), 0);
}
