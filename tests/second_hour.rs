//! What the second hour of real use broke (issue 36), one test per case done so far: a bare `-f`
//! name matching code in a site-packages folder that is not the venv's own (item 4); memprof's
//! probing of torch's attributes printing deprecation warnings into the program's stderr
//! (item 5); a function whose calls were all warm-up (item 8); `@memprof.profile()` inside a
//! script that `memprof run` profiles (item 9).
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
