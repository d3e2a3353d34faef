//! memprof runs the script as `python script.py` would, and finds targets wherever they are.
use crate::common::*;

#[test]
fn the_script_sees_what_it_sees_under_python() {
    let expected = python_output(
        std::path::Path::new("like_python.py"),
        &["a", "-b", "--lr", "3e-4"],
    );
    assert_eq!(expected.code, 0, "{}", expected.stderr);
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.yaml");
    let got = run(&[
        "-o",
        report.to_str().unwrap(),
        "like_python.py",
        "a",
        "-b",
        "--lr",
        "3e-4",
    ]);
    assert_eq!(got.code, 0, "{}", got.stderr);
    assert_eq!(got.stdout, expected.stdout);
}

#[test]
fn a_run_without_targets_says_how_to_choose_them() {
    let r = run(&["exits.py", "0"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("warning: nothing was targeted: pass -f FUNCTION (-f '<module>' for the script's top-level lines), or decorate functions with @profile\n"),
        "{}",
        r.stdout
    );
}

#[test]
fn system_exit_codes_pass_through_and_atexit_runs() {
    for (arg, code, extra) in [
        ("none", 0, ""),
        ("3", 3, ""),
        ("0", 0, ""),
        ("goodbye", 1, "goodbye"),
    ] {
        let r = run(&["exits.py", arg]);
        assert_eq!(r.code, code, "sys.exit({arg}): {}", r.stderr);
        assert!(r.stdout.starts_with("atexit ran\n"), "{}", r.stdout);
        assert!(r.stderr.contains(extra), "{}", r.stderr);
        assert!(!r.stderr.contains("Traceback"), "{}", r.stderr);
    }
}

#[test]
fn dash_m_runs_a_module_like_python_dash_m() {
    let r = run(&["-f", "Worker.run", "-m", "mypkg", "z", "--flag"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.starts_with("module argv ['z', '--flag'] 3072\n"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("Function: Worker.run at line 9"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("+3.00 KiB"), "{}", r.stdout);
}

#[test]
fn targets_in_imported_modules_and_installed_packages() {
    let (r, report) = profile(
        &["allocated_bytes.all.current"],
        &[
            "-f",
            "mypkg.work:Worker.run",
            "-f",
            "torch.nn.modules.linear:Linear.forward",
            "decorated.py",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let linear = function(&report, "Linear.forward");
    assert_eq!(linear["calls"], 1);
    assert!(linear["file"]
        .as_str()
        .unwrap()
        .ends_with("torch/nn/modules/linear.py"));
    let (_, report) = profile(
        &["allocated_bytes.all.current"],
        &["-f", "mypkg.work:Worker.run", "uses_module.py"],
    );
    let worker = function(&report, "Worker.run");
    assert_eq!(worker["calls"], 2);
    assert_eq!(delta(line(worker, "buf = torch.empty")), 3 * KIB);
}

#[test]
fn methods_decorated_nested_and_at_profile_functions_are_found() {
    let (r, report) = profile(
        &["allocated_bytes.all.current"],
        &[
            "-f",
            "Net.forward",
            "-f",
            "outer.<locals>.inner",
            "decorated.py",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(function(&report, "Net.forward")["calls"], 1);
    assert_eq!(
        delta(line(
            function(&report, "outer.<locals>.inner"),
            "return torch.empty"
        )),
        KIB
    );
    let marked = function(&report, "marked");
    assert_eq!(marked["targets"], serde_json::json!(["@profile"]));
    assert_eq!(delta(line(marked, "return torch.empty")), 2 * KIB);
}

#[test]
fn a_file_qualified_target_and_a_bare_name() {
    let (_, report) = profile(
        &["allocated_bytes.all.current"],
        &["-f", "decorated.py:marked", "-f", "inner", "decorated.py"],
    );
    // The script's functions are matched when it is compiled, before `@profile` runs.
    assert_eq!(
        function(&report, "marked")["targets"],
        serde_json::json!(["decorated.py:marked", "@profile"])
    );
    assert_eq!(function(&report, "outer.<locals>.inner")["calls"], 1);
}

#[test]
fn unmatched_targets_warn_with_the_nearest_names_and_ambiguous_ones_profile_all() {
    let (r, report) = profile(
        &["allocated_bytes.all.current"],
        &[
            "-f",
            "forwrd",
            "-f",
            "run",
            "-f",
            "Linear.forward",
            "decorated.py",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let warnings: Vec<String> = serde_json::from_value(report["warnings"].clone()).unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w
                == "no function matched '-f forwrd'; nearest names: Net.forward, forward_like"),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("no function matched '-f Linear.forward'")),
        "{warnings:?}"
    );
    let table = run(&["-f", "forward", "-f", "nothing_like_it", "decorated.py"]);
    assert!(
        table
            .stdout
            .contains("warning: no function matched '-f nothing_like_it'\n"),
        "{}",
        table.stdout
    );
    // `-f forward` matches Net.forward only: forward_like is another name.
    assert!(
        table.stdout.contains("Function: Net.forward at line 21"),
        "{}",
        table.stdout
    );
    assert!(
        !table.stdout.contains("forward_like at"),
        "{}",
        table.stdout
    );
    let amb = run(&["-f", "inner", "nested.py"]);
    assert!(!amb.stdout.contains("matched 2"), "{}", amb.stdout);
}

#[test]
fn an_ambiguous_name_profiles_every_match_and_says_so() {
    let (_, report) = profile(
        &["allocated_bytes.all.current"],
        &["-f", "step", "-f", "lines.py:step", "-f", "rec", "lines.py"],
    );
    let warnings: Vec<String> = serde_json::from_value(report["warnings"].clone()).unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("no function matched '-f rec'")),
        "{warnings:?}"
    );
    let (_, report) = profile(
        &["allocated_bytes.all.current"],
        &["-f", "run", "ambiguous.py"],
    );
    let warnings: Vec<String> = serde_json::from_value(report["warnings"].clone()).unwrap();
    assert!(
        warnings.iter().any(|w| w.starts_with("'-f run' matched 2 functions, profiling all of them: A.run (ambiguous.py:5), B.run (ambiguous.py:10)")),
        "{warnings:?}"
    );
    assert_eq!(function(&report, "A.run")["calls"], 1);
    assert_eq!(function(&report, "B.run")["calls"], 1);
}

#[test]
fn dataloader_workers_started_by_spawn_run_the_venv_python() {
    let r = run(&["-f", "load", "spawn_workers.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.starts_with("batches [6.0, 22.0]\n"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("Function: load at line 6"),
        "{}",
        r.stdout
    );
}

/// The first line of stdout as the JSON list fixtures/argv.py prints.
fn script_argv(r: &Run) -> serde_json::Value {
    let first = r.stdout.lines().next().unwrap_or_default();
    serde_json::from_str(first).unwrap_or_else(|e| panic!("{e}: {}\n{}", r.stdout, r.stderr))
}

#[test]
fn everything_after_the_script_reaches_it_untouched() {
    let theirs = [
        "-f",
        "x",
        "--device",
        "3",
        "--format",
        "json",
        "-o",
        "out",
        "--modules",
        "--help",
        "--",
        "-m",
        "y",
        "--stat=z",
    ];
    // memprof's options before the subcommand (the helper's `--device D run`) ...
    let mut args = vec!["argv.py"];
    args.extend(theirs);
    let r = run(&args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(script_argv(&r), serde_json::json!(theirs));
    // ... and after it, in every spelling.
    let out = memprof()
        .args([
            "run",
            "--device",
            device_flag(),
            "--stat=allocated_bytes.all.current",
        ])
        .args(["-f", "nothing", "--format", "yaml", "argv.py"])
        .args(theirs)
        .output()
        .unwrap();
    let r = finish(out);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // A YAML report on standard output has it to itself: the script's line went to stderr.
    let printed = r.program_stderr().first().copied().unwrap_or_default();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(printed).unwrap(),
        serde_json::json!(theirs)
    );
    assert!(
        r.stdout.starts_with("schema: memprof.profile/1"),
        "memprof's own --format: {}",
        r.stdout
    );
    // `--` ends memprof's options: the next word is the script, even if it looks like one.
    let r = run(&["--", "argv.py", "--calls", "0"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(script_argv(&r), serde_json::json!(["--calls", "0"]));
    // After -m MODULE too.
    let r = run(&["-m", "mypkg", "--device", "3", "-f", "x"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .starts_with("module argv ['--device', '3', '-f', 'x'] 3072\n"),
        "{}",
        r.stdout
    );
}

#[test]
fn untargeted_code_never_reaches_the_hook() {
    // 60000 calls of an untargeted function around four calls of the target (one on a thread):
    // the hook sees the target's events and the next event of each caller, not the rest. On 3.11
    // that is the frame-evaluation hook taking the trace function off again; without it, every
    // call and line of `small` and `heavy` reached the trace function (over 100000 events).
    let (r, report) = profile(&[], &["-f", "rare", "untargeted.py"]);
    assert!(r.stdout.contains("sum 4"), "{}", r.stdout);
    let rare = function(&report, "rare");
    assert_eq!(hits(line(rare, "torch.zeros(256)")), 4);
    let events = report["metadata"]["hook_events"].as_u64().unwrap();
    assert!(events > 0 && events < 200, "{events} hook events");

    // Nothing targeted: no hook events at all.
    let (r, report) = profile(&[], &["-f", "no_such_function", "untargeted.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(report["metadata"]["hook_events"], 0);
}

#[test]
fn cpythons_own_sha2_module_gives_what_python_gives() {
    // With libpython linked statically on 3.12, memprof supplies `_sha2`'s SHA-2 core
    // (src/python/static_sha2.rs): every digest, copy and repeated digest must match python's.
    let expected = python_output(std::path::Path::new("builtin_hashes.py"), &[]);
    assert_eq!(expected.code, 0, "{}", expected.stderr);
    assert_eq!(expected.stdout.lines().count(), 4, "{}", expected.stdout);
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let got = run(&["-o", report.to_str().unwrap(), "builtin_hashes.py"]);
    assert_eq!(got.code, 0, "{}", got.stderr);
    assert_eq!(got.stdout, expected.stdout);
}

#[test]
fn libpython_is_linked_statically_where_the_python_installation_ships_the_archive() {
    // Asked of the venv's Python as the build asks it (build/libpython.rs), unless the build was
    // told to link the shared library.
    let probe = std::process::Command::new(python())
        .args([
            "-c",
            "import os, sysconfig as s\n\
             lib = s.get_config_var('LIBRARY') or ''\n\
             dirs = [s.get_config_var('LIBPL') or '', s.get_config_var('LIBDIR') or '']\n\
             print(lib.endswith('.a') and any(os.path.isfile(os.path.join(d, lib)) for d in dirs))",
        ])
        .output()
        .expect("python starts");
    let has_archive = String::from_utf8_lossy(&probe.stdout).trim() == "True";
    let want_static = has_archive && option_env!("MEMPROF_LIBPYTHON") != Some("shared");
    let version = memprof().arg("--version").output().expect("memprof starts");
    let version = String::from_utf8_lossy(&version.stdout).into_owned();
    assert_eq!(
        version.contains("libpython: static "),
        want_static,
        "{version}"
    );
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let got = run(&["-o", report.to_str().unwrap(), "builtin_hashes.py"]);
    assert_eq!(got.code, 0, "{}", got.stderr);
    // No libpython*.so in the process: the interpreter is the binary's own, as python3's is.
    assert_eq!(
        got.stderr.contains("libpython mapped: []"),
        want_static,
        "{}",
        got.stderr
    );
}

#[test]
fn the_memprof_binary_loads_neither_libtorch_nor_libpython_and_hands_run_over() {
    // What the loader would load for `memprof` (ldd's way): the commands that only read files
    // start without libtorch and without Python.
    let traced = finish(
        memprof()
            .env("LD_TRACE_LOADED_OBJECTS", "1")
            .output()
            .unwrap(),
    );
    assert_eq!(traced.code, 0, "{}", traced.stderr);
    assert!(traced.stdout.contains("libc.so"), "{}", traced.stdout);
    for heavy in ["libtorch", "libc10", "libpython"] {
        assert!(!traced.stdout.contains(heavy), "{heavy}: {}", traced.stdout);
    }
    let help = finish(memprof().args(["show", "--help"]).output().unwrap());
    assert_eq!(help.code, 0, "{}", help.stderr);
    // Without memprof-embedded beside it, `run` says what is missing (exit 2).
    let dir = tempfile::tempdir().unwrap();
    let alone = dir.path().join("memprof");
    std::fs::copy(memprof_binary(), &alone).unwrap();
    let r = finish(
        std::process::Command::new(&alone)
            .args(["run", "lines.py"])
            .current_dir(root().join("fixtures"))
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("memprof-embedded") && r.stderr.contains("hint:"),
        "{}",
        r.stderr
    );
}
