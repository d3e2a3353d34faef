//! Bad input: one clear message naming the problem and the fix, exit code 2, never a panic.
use crate::common::*;

fn bad(args: &[&str]) -> Run {
    let r = finish(memprof().args(args).output().unwrap());
    assert_eq!(r.code, 2, "memprof {args:?}: {}{}", r.stdout, r.stderr);
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    r
}

#[test]
fn a_missing_script() {
    let r = bad(&["run", "nope.py"]);
    assert_eq!(
        r.stderr,
        "memprof: error: can't open file 'nope.py': No such file or directory\n\
         hint: pass the path of a Python script, or `-m package.module`\n"
    );
}

#[test]
fn a_syntax_error_is_shown_as_python_shows_it() {
    let r = bad(&["--device", "cpu", "run", "-f", "broken", "bad_syntax.py"]);
    assert!(r.stderr.starts_with("  File \""), "{}", r.stderr);
    assert!(r.stderr.contains("bad_syntax.py\", line 1\n    def broken(:\n               ^\nSyntaxError: invalid syntax\n"), "{}", r.stderr);
    assert!(r.stderr.contains("memprof: error: "), "{}", r.stderr);
    assert!(
        !r.stderr.contains("<memprof>"),
        "memprof's own frames are not shown: {}",
        r.stderr
    );
}

#[test]
fn bad_flags() {
    let r = bad(&["run", "--bogus", "lines.py"]);
    assert!(
        r.stderr.contains("unexpected argument '--bogus'"),
        "{}",
        r.stderr
    );
    let r = bad(&["run"]);
    assert!(r.stderr.contains("<SCRIPT>"), "{}", r.stderr);
    let r = bad(&["run", "--depth", "2", "lines.py"]);
    assert_eq!(
        r.stderr,
        "memprof: error: --depth shapes the module report, which is off\n\
         hint: add --modules (or --suggest-checkpoints N)\n"
    );
    let r = bad(&["run", "--modules", "--depth", "0", "lines.py"]);
    assert!(r.stderr.contains("--depth"), "{}", r.stderr);
    let r = bad(&["run", "--suggest-checkpoints", "x", "lines.py"]);
    assert!(r.stderr.contains("--suggest-checkpoints"), "{}", r.stderr);
    let r = bad(&["run", "--format", "xml", "lines.py"]);
    assert!(
        r.stderr.contains("possible values: table, yaml, json"),
        "{}",
        r.stderr
    );
}

#[test]
fn an_unknown_stat_names_the_closest_keys() {
    let r = bad(&[
        "--device",
        "cpu",
        "--stat",
        "allocated.all.peak",
        "run",
        "lines.py",
    ]);
    assert_eq!(
        r.stderr,
        "memprof: error: unknown stat 'allocated.all.peak' for --device cpu\n\
         hint: closest keys: allocation.all.peak, allocated_bytes.all.peak, allocation.all.freed (`memprof stats` lists them all)\n"
    );
    let r = bad(&[
        "--device",
        "cpu",
        "run",
        "--stat",
        "reserved_bytes.all.peak",
        "lines.py",
    ]);
    assert!(
        r.stderr
            .contains("'reserved_bytes.all.peak' exists only on a CUDA device"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_device_that_does_not_exist_lists_those_that_do() {
    let r = bad(&["--device", "7", "run", "lines.py"]);
    if on_cuda() {
        assert!(
            r.stderr
                .contains("'--device 7' does not exist: this machine has "),
            "{}",
            r.stderr
        );
        assert!(r.stderr.contains("cuda:0"), "{}", r.stderr);
    } else {
        assert_eq!(
            r.stderr,
            "memprof: error: '--device 7' does not exist: this machine has no CUDA device\n\
             hint: pass --device cpu, or run on a machine with a GPU\n"
        );
    }
    let r = bad(&["run", "--device", "gpu", "lines.py"]);
    assert!(
        r.stderr.contains("'--device gpu' is not a device"),
        "{}",
        r.stderr
    );
}

#[test]
fn an_unwritable_output_fails_before_the_script_runs() {
    let r = bad(&["run", "-o", "/nonexistent-dir/r.yaml", "lines.py"]);
    assert!(
        r.stderr
            .contains("the directory '/nonexistent-dir' does not exist"),
        "{}",
        r.stderr
    );
    assert!(r.stdout.is_empty(), "the script did not run: {}", r.stdout);
}

#[test]
fn a_python_without_torch_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let venv = dir.path().join("venv");
    let made = std::process::Command::new(python())
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(made.success());
    let r = finish(
        memprof()
            .env("VIRTUAL_ENV", &venv)
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", venv.join("bin").display()),
            )
            .args(["run", "lines.py"])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    let python = venv.join("bin").join("python");
    assert!(
        r.stderr.starts_with(&format!(
            "memprof: error: this Python ({}) has no torch; memprof needs torch 2.9 to 2.15\n",
            python.display()
        )),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("hint: activate the virtualenv that has your torch, or `pip install torch`"),
        "{}",
        r.stderr
    );
}

/// A torch outside 2.9 to 2.15 is refused before anything of it is loaded, naming the range
/// and the way to build memprof against it. (The "torch" is a package whose version.py says
/// 2.8.0, first on the path: the version is all that memprof reads before refusing.)
#[test]
fn a_torch_memprof_does_not_support_is_refused_naming_the_range() {
    for version in ["2.8.0", "2.16.0+cu130"] {
        let dir = tempfile::tempdir().unwrap();
        let torch = dir.path().join("torch");
        std::fs::create_dir(&torch).unwrap();
        std::fs::write(
            torch.join("__init__.py"),
            "raise ImportError('not imported')\n",
        )
        .unwrap();
        std::fs::write(
            torch.join("version.py"),
            format!("__version__ = '{version}'\n"),
        )
        .unwrap();
        let r = finish(
            memprof()
                .env("PYTHONPATH", dir.path())
                .args(["run", "lines.py"])
                .output()
                .unwrap(),
        );
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert_eq!(
            r.stderr.lines().next().unwrap_or(""),
            format!(
                "memprof: error: the script's torch is {version}; memprof supports torch 2.9 to 2.15"
            ),
            "{}",
            r.stderr
        );
        assert!(
            r.stderr.contains(
                "hint: install a torch from 2.9 to 2.15 (memprof never changes your torch), or \
                 build memprof from source against this one: `pip install --no-build-isolation \
                 --no-binary torch-memprof torch-memprof` (docs/install.md)"
            ),
            "{}",
            r.stderr
        );
    }
}

#[test]
fn show_refuses_what_is_not_a_report() {
    let r = bad(&["show", "lines.py"]);
    assert!(
        r.stderr
            .starts_with("memprof: error: 'lines.py' is not a memprof report"),
        "{}",
        r.stderr
    );
    let r = bad(&["show", "missing.yaml"]);
    assert!(
        r.stderr
            .starts_with("memprof: error: cannot read 'missing.yaml'"),
        "{}",
        r.stderr
    );
}
