//! What the second hour of real use broke (issue 36), a test per case: a pytest limit whose
//! verdict depended on the tests before it (item 1); in-process reports whose peaks contradicted
//! each other (item 2); a bare `-f` name matching code in a site-packages folder that is not the
//! venv's own (item 4); memprof's probing of torch's attributes printing deprecation warnings
//! into the program's stderr (item 5); a function whose calls were all warm-up (item 8);
//! `@memprof.profile()` inside a script that `memprof run` profiles (item 9); the Modules table
//! past a terminal's edge, and the peak table losing its Category first (item 7); the words of
//! side files' errors, of help texts, and of `diff`'s headline (item 10); "next:" suggestions
//! that could not be used (item 6); targeted functions in child processes, spawned and forked,
//! reported as never run (item 3).
use crate::common::*;
use std::path::Path;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// A layered venv reaches another environment's packages through a `.pth` (a sys.path entry
/// outside this venv's own site-packages): their functions are installed code, not the script's.
#[test]
fn a_bare_name_leaves_installed_code_in_any_site_packages_alone() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("base-env/lib/python3/site-packages");
    std::fs::create_dir_all(&other).unwrap();
    write(
        &other,
        "trainlib.py",
        "import torch\nclass Optim:\n    def step(self):\n        return torch.ones(8)\n",
    );
    let script = write(
        dir.path(),
        "s.py",
        "import torch, trainlib\ndef step():\n    return torch.ones(16)\n\
         trainlib.Optim().step()\nstep()\n",
    );
    let out = dir.path().join("r.json");
    let r = finish(
        memprof()
            .env("PYTHONPATH", &other)
            .args(["--device", "cpu", "run", "-f", "step", "-o"])
            .arg(&out)
            .arg(&script)
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let report = read_json(&out);
    let names: Vec<&str> = report["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["qualname"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["step"], "{report}");
    assert!(
        report["warnings"].as_array().unwrap().is_empty(),
        "{}",
        report["warnings"]
    );
}

/// `-f` that matches nothing makes memprof look through the loaded modules for the name; torch's
/// deprecated `torch.distributed.reduce_op` warns on any attribute read, and those warnings went
/// to the program's stderr.
#[test]
fn looking_for_a_name_prints_nothing_into_the_programs_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let script = write(
        dir.path(),
        "s.py",
        "import sys, torch, torch.distributed\ndef f():\n    return torch.ones(4)\nf()\n",
    );
    let bare = python_output(Path::new(&script), &[]);
    assert!(
        bare.code == 0 && !bare.stderr.contains("Warning"),
        "{}",
        bare.stderr
    );
    let out = dir.path().join("r.json");
    let r = run(&[
        "-f",
        "no_such_function",
        "-o",
        &out.to_string_lossy(),
        &script,
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        !r.stderr.contains("Warning") && !r.stderr.contains("<memprof>"),
        "{}",
        r.stderr
    );
    let warnings = read_json(&out)["warnings"].to_string();
    assert!(
        warnings.contains("no function matched '-f no_such_function'"),
        "{warnings}"
    );
}

/// `--warmup 5 --calls 2` on a function called 3 times: every call was warm-up; the report
/// says so instead of an empty table with no word.
#[test]
fn a_function_whose_calls_were_all_warm_up_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let script = write(
        dir.path(),
        "s.py",
        "import torch\ndef step():\n    return torch.ones(4)\nfor _ in range(3):\n    step()\n",
    );
    let out = dir.path().join("r.json");
    let r = run(&[
        "-f",
        "step",
        "--warmup",
        "5",
        "--calls",
        "2",
        "-o",
        &out.to_string_lossy(),
        &script,
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let warnings = read_json(&out)["warnings"].clone();
    assert!(
        warnings.as_array().unwrap().iter().any(|w| {
            let w = w.as_str().unwrap();
            w.starts_with("step (")
                && w.contains("ran 3 times, all within --warmup 5: no call was measured")
        }),
        "{warnings}"
    );
}

/// A script written for the in-process API, run under `memprof run`: `@memprof.profile()` acts
/// as `@profile` (the function joins the run's targets) instead of stopping the script.
#[test]
fn the_decorator_under_memprof_run_targets_the_function() {
    let dir = tempfile::tempdir().unwrap();
    let script = write(
        dir.path(),
        "s.py",
        "import memprof, torch\n@memprof.profile()\ndef step():\n    x = torch.ones(1024)\n    return x\n\
         step(); step()\nprint('done')\n",
    );
    let out = dir.path().join("r.json");
    let r = finish(
        memprof()
            .env("PYTHONPATH", root().join("src").join("wheel"))
            .args(["--device", "cpu", "run", "-o"])
            .arg(&out)
            .arg(&script)
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("done"), "{}", r.stdout);
    let report = read_json(&out);
    let step = function(&report, "step");
    assert_eq!(step["calls"], 2, "{step}");
    assert_eq!(delta(line(step, "x = torch.ones(1024)")), 2 * 4096);
}

/// A suite that caches a model in one test, then a test over its limit, and one that frees the
/// cache before going over: each verdict and its numbers are the same in the suite as alone.
const ORDERED_TESTS: &str = r#"
import pytest, torch

MiB = 1024 * 1024
DEV = "cuda" if torch.cuda.is_available() else "cpu"
CACHE = {}

@pytest.mark.limit_device_memory("1 GiB")
def test_1_caches_a_model():
    CACHE["model"] = torch.ones(4 * MiB, device=DEV)      # 16 MiB, kept

@pytest.mark.limit_device_memory("20 MiB")
def test_2_over():
    x = torch.ones(8 * MiB, device=DEV)                   # 32 MiB
    del x

@pytest.mark.limit_device_memory("20 MiB")
def test_3_frees_the_cache_then_over():
    CACHE.clear()
    x = torch.ones(8 * MiB, device=DEV)                   # 32 MiB
"#;

#[test]
fn a_pytest_limit_gives_the_same_verdict_alone_and_after_other_tests() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "test_order.py", ORDERED_TESTS);
    let suite = pytest(dir.path(), &["test_order.py"]);
    let text = format!("{}{}", suite.stdout, suite.stderr);
    assert!(text.contains("2 failed, 1 passed"), "{text}");
    let over = |name: &str| format!("{name}: device peak 32.00 MiB (33554432 B) on ");
    for name in ["test_2_over", "test_3_frees_the_cache_then_over"] {
        assert!(text.contains(&over(name)), "{name} in the suite:\n{text}");
        let alone = pytest(dir.path(), &[&format!("test_order.py::{name}")]);
        let alone_text = format!("{}{}", alone.stdout, alone.stderr);
        assert!(alone_text.contains("1 failed"), "{alone_text}");
        assert!(
            alone_text.contains(&over(name)),
            "{name} alone:\n{alone_text}"
        );
    }
    // The absolute peak says what was there before, and "what held it" shows it as such.
    assert!(
        text.contains(
            "(the device's allocated_bytes.all.peak during the test: 48.00 MiB, with 16.00 MiB \
             allocated when it started)"
        ),
        "{text}"
    );
    assert!(
        text.contains("16.00 MiB  (live from before the test: not the test's)"),
        "{text}"
    );
}

/// A tensor kept from an earlier session, then a session whose function adds 8 MiB: the
/// function's peak, the report's peak and the table agree, and `peak_above_start` is what the
/// session added.
#[test]
fn an_in_process_report_has_one_peak_counting_what_was_live_before() {
    let dir = tempfile::tempdir().unwrap();
    let script = write(
        dir.path(),
        "s.py",
        r#"import json, torch, memprof
MiB = 1024 * 1024
DEV = "cuda" if torch.cuda.is_available() else "cpu"
with memprof.profile():
    kept = torch.ones(MiB, device=DEV)          # 4 MiB, kept
def add():
    y = torch.ones(2 * MiB, device=DEV)         # 8 MiB
    return y.sum()
with memprof.profile(add) as r:
    add()
peak = r.peak
print(json.dumps({
    "function": r.function("add")["peak_allocated_bytes"],
    "function_peak": r.function("add")["peak"]["allocated_bytes"],
    "peak": peak["allocated_bytes"],
    "parts": sum(s["bytes"] for s in peak["sites"]) + peak["unseen_bytes"],
    "unseen": peak["unseen_bytes"],
    "start": r.allocated_at_start,
    "above": r.peak_above_start,
    "table": r.table(200),
}))
"#,
    );
    let r = finish(
        python_with_memprof()
            .arg(&script)
            .output()
            .expect("python starts"),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    let mib = 1024 * 1024;
    assert_eq!(out["start"], 4 * mib, "{out}");
    assert_eq!(out["unseen"], 4 * mib, "{out}");
    let peak = out["peak"].as_i64().unwrap();
    assert_eq!(out["function"], peak, "{out}");
    assert_eq!(out["function_peak"], peak, "{out}");
    assert_eq!(out["parts"], peak, "{out}");
    let above = out["above"].as_i64().unwrap();
    assert_eq!(peak, 4 * mib + above, "{out}");
    // The sum's scalar and its temporaries: a few bytes on the CPU, blocks of 512 on CUDA.
    assert!((8 * mib..8 * mib + 64 * 1024).contains(&above), "{out}");
    let table = out["table"].as_str().unwrap();
    assert!(
        table.contains("Peak allocated_bytes.all.peak: 12.00 MiB"),
        "{table}"
    );
    assert!(table.contains("Peak: 12.00 MiB allocated"), "{table}");
    // The script's own file is the user's code in-process too: nothing to suggest but `add`,
    // which is targeted already.
    assert!(!table.contains("line by line, next"), "{table}");
    let before = table
        .lines()
        .find(|l| l.contains("(live from before)"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        before.trim_start().starts_with("4.00 MiB    33.3%"),
        "{table}"
    );
}

/// On a terminal every table of `--modules` fits its width, the columns that make way named
/// under it; the peak table keeps its Category down to 80 columns (Blocks and Share go first).
#[test]
fn the_modules_and_peak_tables_fit_a_terminal_and_keep_the_category() {
    let args = [
        "--device",
        device_flag(),
        "run",
        "--modules",
        "--suggest-checkpoints",
        "2",
        "nested_model.py",
    ];
    let widest = |text: &str| text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    for cols in [80u16, 120] {
        let text = on_a_terminal(cols, &[], &args);
        assert!(text.contains("Fwd peak +"), "{text}");
        assert!(text.contains("Checkpoint suggestion"), "{text}");
        assert!(widest(&text) <= cols as usize, "{cols} columns:\n{text}");
        let peak_header = text
            .lines()
            .find(|l| l.trim_start().starts_with("Bytes"))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(peak_header.contains("Category"), "{cols} columns:\n{text}");
        assert!(text.contains("parameters"), "{cols} columns:\n{text}");
    }
    let narrow = on_a_terminal(80, &[], &args);
    assert!(
        narrow.contains("(left out to fit 80 columns: Type, Calls, Bwd Δ, Fwd Δ;"),
        "{narrow}"
    );
    assert!(
        narrow.contains("(left out to fit 80 columns: Blocks, Share;"),
        "{narrow}"
    );
}

/// A side file that cannot be written is named as what it is, with its own option in the hint.
#[test]
fn an_unwritable_side_file_is_named_with_its_own_option() {
    let dir = tempfile::tempdir().unwrap();
    let script = write(dir.path(), "s.py", "print('the script ran')\n");
    for (flag, file, what) in [
        ("--plot", "p.svg", "the plot"),
        ("--trace", "t.json", "the trace"),
        ("--history", "h.pickle", "the history"),
        ("-o", "r.json", "the report"),
    ] {
        let path = dir.path().join("no-such-dir").join(file);
        let r = run(&[flag, path.to_str().unwrap(), &script]);
        assert_eq!(r.code, 2, "{flag}: {}", r.stderr);
        assert!(!r.stdout.contains("the script ran"), "{flag}");
        assert!(
            r.stderr.contains(&format!(
                "cannot write {what} to '{}': the directory",
                path.display()
            )),
            "{flag}: {}",
            r.stderr
        );
        assert!(
            r.stderr.contains(&format!(
                "hint: create the directory first, or pass another {flag} path"
            )),
            "{flag}: {}",
            r.stderr
        );
    }
}

/// Help says what each option does where it does something: no `--device`/`--stat` for the
/// subcommands that read files (and given there, an error rather than silence), `--max-increase`
/// per function as `diff` checks it, `--max`'s `delta_per_call`.
#[test]
fn help_lists_the_options_a_subcommand_reads_and_says_what_they_compare() {
    let help = |sub: &str| {
        let r = finish(memprof().args([sub, "--help"]).output().unwrap());
        assert_eq!(r.code, 0, "{}", r.stderr);
        r.stdout
    };
    for sub in ["fit", "diff", "plot", "stats"] {
        let text = help(sub);
        assert!(
            !text.contains("--device") && !text.contains("--stat "),
            "{sub}:\n{text}"
        );
    }
    let run_help = help("run");
    assert!(
        run_help.contains("--device") && run_help.contains("--stat"),
        "{run_help}"
    );
    assert!(run_help.contains("`delta_per_call`"), "{run_help}");
    let diff_help = help("diff")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        diff_help.contains("when a function's KEY (`delta` or a stat) grew"),
        "{diff_help}"
    );
    for args in [
        &["--device", "1", "diff", "a.json", "b.json"][..],
        &["--stat", "allocated_bytes.all.peak", "fit", "t.json"][..],
    ] {
        let r = finish(memprof().args(args).output().unwrap());
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("means nothing to `memprof "),
            "{}",
            r.stderr
        );
    }
    // After the subcommand, clap itself refuses it; after `run`, both are run's own.
    let r = finish(
        memprof()
            .args(["diff", "--device", "1", "a", "b"])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
}

/// `diff`'s headline is the allocator's largest increase, not the process's RSS (which grew
/// more here: a 64 MiB bytes object).
#[test]
fn the_diffs_headline_is_the_allocators_increase_before_host_rss() {
    let dir = tempfile::tempdir().unwrap();
    let body = |extra: &str, mib: u32| {
        format!(
            "import os, torch\nDEV = os.environ.get('MEMPROF_TEST_DEVICE', 'cpu')\nkept = []\n\
             def step():\n    x = torch.ones({mib} * 262144, device=DEV)\n{extra}    return x.sum()\n\
             step()\n"
        )
    };
    let base = write(dir.path(), "base.py", &body("", 4));
    let new = write(
        dir.path(),
        "new.py",
        &body("    kept.append(b'x' * (64 << 20))\n", 8),
    );
    let mut reports = Vec::new();
    for (name, script) in [("base", &base), ("new", &new)] {
        let out = dir.path().join(format!("{name}.json"));
        let r = finish(
            memprof()
                .args(["--device", device_flag()])
                .args(["--stat", "allocated_bytes.all.peak"])
                .args(["--stat", "host_rss_bytes.current"])
                .args(["run", "-f", "step", "-o"])
                .arg(&out)
                .arg(script)
                .output()
                .unwrap(),
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        reports.push(out);
    }
    let r = finish(memprof().arg("diff").args(&reports).output().unwrap());
    assert_eq!(r.code, 0, "{}", r.stderr);
    let headline = r
        .stdout
        .lines()
        .find(|l| l.starts_with("largest increase:"))
        .unwrap_or_else(|| panic!("{}", r.stdout));
    assert!(
        headline.starts_with("largest increase: step")
            && !headline.contains("host_rss")
            && headline.contains("(+4.00 MiB"),
        "{}",
        r.stdout
    );
}

/// The peak's "next" names functions `-f` finds: a library's as `package.module:Qual.name`, a
/// dataclass's generated `__init__` (from `<string>`) by its caller, a generator expression by
/// its function; a site with a sliver of the peak is not offered; and `--modules` when the
/// library's code holds most of it. Each offered target then runs, with no warning.
#[test]
fn the_next_suggestions_name_functions_that_f_finds() {
    let dir = tempfile::tempdir().unwrap();
    let site_packages = dir.path().join("env/lib/python3/site-packages");
    let lib = site_packages.join("biglib");
    std::fs::create_dir_all(&lib).unwrap();
    write(&lib, "__init__.py", "");
    write(
        &lib,
        "layers.py",
        "import os, torch\nDEV = os.environ.get('MEMPROF_TEST_DEVICE', 'cpu')\n\n\
         class Attention:\n    def forward(self):\n\
         \x20       scores = torch.ones(4 * 1024 * 1024, device=DEV)   # 16 MiB\n\
         \x20       return (scores + 1).sum()                          # 16 MiB more\n",
    );
    let script = write(
        dir.path(),
        "s.py",
        r#"import dataclasses, functools, os
import torch
from biglib.layers import Attention
DEV = os.environ.get("MEMPROF_TEST_DEVICE", "cpu")


@dataclasses.dataclass
class Batch:
    ids: torch.Tensor = dataclasses.field(
        default_factory=functools.partial(torch.zeros, 1024 * 1024, device=DEV))   # 4 MiB


class RandDS:
    def __init__(self):
        self.data = torch.ones(16 * 1024, device=DEV)            # 64 KiB: 0.2% of the peak


def make_batch():
    return Batch()


def gather():
    return tuple(torch.ones(256 * 1024, device=DEV) for _ in range(2))   # 2 MiB


def main():
    ds = RandDS()
    batch = make_batch()
    parts = gather()
    return Attention().forward()


main()
"#,
    );
    let out = dir.path().join("r.json");
    let r = finish(
        memprof()
            .env("PYTHONPATH", &site_packages)
            .args(["--device", device_flag(), "run", "-o"])
            .arg(&out)
            .arg(&script)
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let peak = read_json(&out)["peak"].clone();
    let next = ["biglib.layers:Attention.forward", "make_batch", "gather"];
    assert_eq!(peak["next_targets"], serde_json::json!(next), "{peak}");
    assert_eq!(peak["next_modules"], true, "{peak}");
    let shown = finish(memprof().arg("show").arg(&out).output().unwrap());
    assert!(
        shown.stdout.contains(&format!(
            "line by line, next: memprof run --modules -f {} -f {} -f {} {script}",
            next[0], next[1], next[2]
        )),
        "{}",
        shown.stdout
    );
    // What was offered works: each function found, run, measured; nothing more offered.
    let again = dir.path().join("again.json");
    let mut cmd = memprof();
    cmd.env("PYTHONPATH", &site_packages)
        .args(["--device", device_flag(), "run", "--modules"]);
    for t in next {
        cmd.args(["-f", t]);
    }
    let r = finish(cmd.arg("-o").arg(&again).arg(&script).output().unwrap());
    assert_eq!(r.code, 0, "{}", r.stderr);
    let report = read_json(&again);
    let ran: Vec<(String, u64)> = report["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["qualname"].as_str().unwrap().to_string(),
                f["calls"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ran,
        [
            ("Attention.forward".to_string(), 1),
            ("make_batch".to_string(), 1),
            ("gather".to_string(), 1)
        ],
        "{report}"
    );
    assert_eq!(report["warnings"], serde_json::json!([]), "{report}");
    assert!(report["peak"]["next_targets"].is_null(), "{report}");
}

/// The functions of a report's child processes: (qualname, its process, each line's Δ).
fn child_functions(report: &serde_json::Value) -> Vec<(String, String, Vec<Option<i64>>)> {
    let mut out: Vec<(String, String, Vec<Option<i64>>)> = report["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["qualname"].as_str().unwrap().to_string(),
                f["process"].as_str().unwrap_or("").to_string(),
                f["lines"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|l| l["delta_bytes"].as_i64())
                    .collect(),
            )
        })
        .collect();
    out.sort_by(|a, b| a.2.cmp(&b.2));
    out
}

fn children_of(report: &serde_json::Value) -> Vec<serde_json::Value> {
    report["children"].as_array().cloned().unwrap_or_default()
}

/// `-f worker` under torch.multiprocessing.spawn: each spawned child measured, its lines exact,
/// in the parent's report and in its own beside it; no "never ran".
#[test]
fn a_function_in_spawned_children_is_measured_in_each() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let r = finish(
        memprof()
            .args(["--device", "cpu", "run", "-f", "worker", "-o"])
            .arg(&out)
            .arg("children_spawn.py")
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("spawned done"), "{}", r.stdout);
    let report = read_json(&out);
    assert_eq!(report["warnings"], serde_json::json!([]), "{report}");
    let mib = 1 << 20;
    let functions = child_functions(&report);
    assert_eq!(functions.len(), 2, "{report}");
    for ((name, process, deltas), x) in functions.iter().zip([4 * mib, 8 * mib]) {
        assert_eq!(name, "worker");
        assert!(
            process.starts_with("child process ") && process.ends_with(" (spawn)"),
            "{process}"
        );
        // def, x = ..., y = x + 1, return (which frees both).
        assert_eq!(deltas, &[None, Some(x), Some(x), Some(-2 * x)], "{report}");
    }
    let children = children_of(&report);
    assert_eq!(children.len(), 2, "{report}");
    for c in &children {
        assert_eq!(c["start"], "spawn");
        assert_eq!(c["functions"], serde_json::json!(["worker"]));
        let kept = c["report"].as_str().unwrap();
        let own = read_json(Path::new(kept));
        assert_eq!(own["metadata"]["process"]["child"]["start"], "spawn");
        assert_eq!(own["metadata"]["process"]["pid"], c["pid"]);
        let peak = c["peak_bytes"].as_i64().unwrap();
        assert!(peak >= 2 * 4 * mib && peak < 2 * 8 * mib + 4096, "{c}");
    }
}

/// `-f my_collate` with DataLoader workers, forked (Linux's default) and spawned: each worker's
/// collate calls are measured, exactly; the table says where they ran.
#[test]
fn a_collate_function_in_dataloader_workers_is_measured_forked_or_spawned() {
    for start in ["fork", "spawn"] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("r.json");
        let r = finish(
            memprof()
                .args(["--device", "cpu", "run", "-f", "my_collate", "-o"])
                .arg(&out)
                .args(["children_loader.py", start])
                .output()
                .unwrap(),
        );
        assert_eq!(r.code, 0, "{start}: {}", r.stderr);
        assert!(
            r.stdout.contains("sums [12288.0, 45056.0]"),
            "{start}: the program's own output: {}",
            r.stdout
        );
        let report = read_json(&out);
        assert_eq!(
            report["warnings"],
            serde_json::json!([]),
            "{start}: {report}"
        );
        let functions = child_functions(&report);
        assert_eq!(functions.len(), 2, "{start}: {report}");
        for (name, process, deltas) in &functions {
            assert_eq!(name, "my_collate");
            assert!(process.ends_with(&format!(" ({start})")), "{process}");
            // One batch each: the stack is 16 KiB; the return frees it as it returns its double.
            assert_eq!(deltas, &[None, Some(16384), Some(0)], "{start}: {report}");
        }
        let children = children_of(&report);
        assert_eq!(children.len(), 2, "{start}: {report}");
        let shown = finish(memprof().arg("show").arg(&out).output().unwrap());
        assert!(
            shown.stdout.contains(" · in child process "),
            "{}",
            shown.stdout
        );
        assert!(shown.stdout.contains("Child processes"), "{}", shown.stdout);
    }
}

/// Children memprof cannot follow are named, and a target that never ran in the parent is said
/// to have maybe run there: forkserver's children, and spawned children when the native library
/// is not installed beside the binary.
#[test]
fn children_that_cannot_be_followed_are_named() {
    let r = finish(
        memprof()
            .args([
                "--device",
                "cpu",
                "run",
                "-f",
                "my_collate",
                "--format",
                "json",
            ])
            .args(["children_loader.py", "forkserver"])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let report: serde_json::Value =
        serde_json::from_str(&r.stdout[r.stdout.find('{').unwrap()..]).unwrap();
    let children = children_of(&report);
    assert_eq!(children.len(), 2, "{report}");
    assert!(children
        .iter()
        .all(|c| c["start"] == "forkserver" && c["outcome"] == "not followed"));
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains("but never ran in this process; 2 child processes could not be followed"),
        "{warnings}"
    );
    // The binaries alone (with memprof's torch libraries, which they load), without the native
    // library a spawned child loads.
    let bin = tempfile::tempdir().unwrap();
    for name in ["memprof", "memprof-embedded"] {
        std::fs::copy(memprof_binary().with_file_name(name), bin.path().join(name)).unwrap();
    }
    let shims = bin.path().join("torch_shims");
    std::fs::create_dir(&shims).unwrap();
    for library in std::fs::read_dir(memprof_binary().with_file_name("torch_shims")).unwrap() {
        let library = library.unwrap().path();
        std::fs::copy(&library, shims.join(library.file_name().unwrap())).unwrap();
    }
    let r = finish(
        in_the_venv(std::process::Command::new(bin.path().join("memprof")))
            .env_remove("MEMPROF_NATIVE")
            .args(["--device", "cpu", "run", "-f", "worker", "--format", "json"])
            .arg("children_spawn.py")
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let report: serde_json::Value =
        serde_json::from_str(&r.stdout[r.stdout.find('{').unwrap()..]).unwrap();
    let children = children_of(&report);
    assert_eq!(children.len(), 2, "{report}");
    assert!(
        children[0]["note"]
            .as_str()
            .unwrap()
            .contains("native library"),
        "{report}"
    );
}
