//! What the first hour of real use broke (issue 20), one test per case: `-o` onto devices, FIFOs
//! and symlinks; tracebacks of chained exceptions; threads' Δ; SIGTERM; where and how reports are
//! written (format from the extension, `os.chdir`, unwritable paths, `os._exit`); the script forms
//! python accepts; finding a function in an installed package; a program's own trace function.
//! (Budgets and diffs that checked nothing or compared the wrong thing: tests/budgets.rs; depth
//! over called modules: tests/modules.rs; terminal width: tests/output.rs; PNG text: tests/plot.rs.)
use crate::common::*;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;

/// A script in `dir` with a targeted `step` that keeps 4 MiB.
fn step_script(dir: &Path, extra: &str) -> String {
    let script = dir.join("s.py");
    std::fs::write(
        &script,
        format!(
            "import os, torch\nDEV = os.environ.get('MEMPROF_TEST_DEVICE', 'cpu')\n\
             def step():\n    return torch.empty(1024 * 1024, device=DEV)\nkeep = step()\n{extra}"
        ),
    )
    .unwrap();
    script.to_string_lossy().into_owned()
}

fn run_in(dir: &Path, args: &[&str]) -> Run {
    finish(
        memprof()
            .current_dir(dir)
            .args(["--device", device_flag(), "run"])
            .args(args)
            .output()
            .unwrap(),
    )
}

/// A temporary directory for one run (its TMPDIR), to see what the run leaves there.
fn own_tmpdir(dir: &Path) -> std::path::PathBuf {
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    tmp
}

/// The folders for children's reports a run left in its TMPDIR (a run that ends, however it
/// ends, leaves none).
fn children_folders_left(tmp: &Path) -> Vec<String> {
    std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("memprof-children-"))
        .collect()
}

#[test]
fn output_onto_a_fifo_a_symlink_or_a_device_writes_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let script = step_script(dir.path(), "");
    // A FIFO is written in place: its reader gets the report, and it stays a FIFO.
    let fifo = dir.path().join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // Held open for reading and writing (which never blocks on Linux), so that the reader's open
    // returns at once and the reader sees the end only once this is dropped: the test cannot
    // hang, whatever memprof does with the path.
    let keeper = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let r = run_in(
        dir.path(),
        &["-f", "step", "--format", "json", "-o", "pipe", &script],
    );
    drop(keeper);
    let got = reader.join().unwrap();
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(got.contains("\"schema\": \"memprof.profile/1\""), "{got}");
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());

    // A symlink stays a link; its target gets the report.
    let target = dir.path().join("real.json");
    std::fs::write(&target, "old").unwrap();
    std::os::unix::fs::symlink("real.json", dir.path().join("link.json")).unwrap();
    let r = run_in(dir.path(), &["-f", "step", "-o", "link.json", &script]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let link = std::fs::symlink_metadata(dir.path().join("link.json")).unwrap();
    assert!(link.file_type().is_symlink());
    assert!(std::fs::read_to_string(&target)
        .unwrap()
        .contains("memprof.profile/1"));

    // A character device (a null device made here, never the machine's /dev/null) stays one.
    let null = dir.path().join("null");
    let made = std::process::Command::new("mknod")
        .arg(&null)
        .args(["c", "1", "3"])
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !made {
        eprintln!("skipped the character device: mknod needs root (CAP_MKNOD) here");
        return;
    }
    let r = run_in(dir.path(), &["-f", "step", "-o", "null", &script]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(std::fs::metadata(&null)
        .unwrap()
        .file_type()
        .is_char_device());
    // It still reads as empty, as a null device does.
    assert_eq!(std::fs::read(&null).unwrap(), b"");
}

#[test]
fn chained_exceptions_keep_every_frame_of_pythons_traceback() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("rr.py");
    std::fs::write(
        &script,
        "import json\ndef inner():\n    raise ValueError('inner')\ndef outer():\n    try:\n        inner()\n    except ValueError:\n        raise RuntimeError('outer')\ndef hidden():\n    try:\n        json.loads('{')\n    except ValueError:\n        raise KeyError('x') from None\nimport sys\nif sys.argv[1] == 'outer':\n    outer()\nelse:\n    hidden()\n",
    )
    .unwrap();
    for case in ["outer", "hidden"] {
        let python = python_output(&script, &[case]);
        let r = run_in(
            dir.path(),
            &[
                "-f",
                "outer",
                "-f",
                "hidden",
                script.to_str().unwrap(),
                case,
            ],
        );
        assert_eq!((r.code, python.code), (1, 1));
        assert!(
            r.stderr.contains(python.stderr.trim_end()),
            "{case}: python printed\n{}\nmemprof printed\n{}",
            python.stderr,
            r.stderr
        );
        assert!(
            r.stderr.contains("line 16, in <module>") || r.stderr.contains("line 18, in <module>"),
            "{}",
            r.stderr
        );
    }
}

#[test]
fn threads_count_their_own_allocations_in_a_lines_delta() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("thr.py");
    std::fs::write(
        &script,
        "import os, threading, torch\nDEV = os.environ.get('MEMPROF_TEST_DEVICE', 'cpu')\nbar = threading.Barrier(4)\nkeep = []\nlock = threading.Lock()\ndef work():\n    t = torch.empty(1024 * 1024, device=DEV)\n    bar.wait()\n    lock.acquire(); keep.append(t); lock.release()\n    bar.wait()\nths = [threading.Thread(target=work) for _ in range(4)]\nfor t in ths: t.start()\nfor t in ths: t.join()\n",
    )
    .unwrap();
    for _ in 0..3 {
        let (r, report) = profile(&[], &["-f", "work", script.to_str().unwrap()]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let work = function(&report, "work");
        assert_eq!(delta(line(work, "t = torch.empty")), 16 * MIB, "{work:#}");
        for waits in work["lines"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["source"].as_str().unwrap().contains("bar.wait()"))
        {
            assert_eq!(delta(waits), 0, "{work:#}");
        }
        // The function's Δ is what the four calls kept, 16 MiB, not four times the process's.
        assert_eq!(delta_sum(work), 16 * MIB, "{work:#}");
    }
}

/// A script that catches KeyboardInterrupt forever, so only a real SIGTERM ends it.
fn stubborn(dir: &Path) -> std::path::PathBuf {
    let script = dir.join("stubborn.py");
    std::fs::write(
        &script,
        "import time\ndef loop():\n    while True:\n        try:\n            time.sleep(0.01)\n        except KeyboardInterrupt:\n            pass\nprint('ready', flush=True)\nloop()\n",
    )
    .unwrap();
    script
}

fn terminate(mut cmd: std::process::Command) -> std::process::ExitStatus {
    use std::io::BufRead;
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first, "ready\n");
    std::thread::sleep(std::time::Duration::from_millis(200));
    // SAFETY: signals our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    // A process that turns SIGTERM into a catchable exception lives on under this script: give
    // it 20 seconds, then end it and fail.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running 20 s after SIGTERM: the script caught it");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn sigterm_kills_as_under_python_after_writing_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let script = stubborn(dir.path());
    let mut python = std::process::Command::new(python());
    python.arg(&script);
    let under_python = terminate(python);
    assert_eq!(under_python.signal(), Some(libc::SIGTERM));

    let report = dir.path().join("r.json");
    let tmp = own_tmpdir(dir.path());
    let mut cmd = memprof();
    cmd.env("TMPDIR", &tmp)
        .args(["--device", "cpu", "run", "-f", "loop", "-o"])
        .arg(&report)
        .arg(&script)
        .stderr(Stdio::null());
    let status = terminate(cmd);
    assert_eq!(
        status.signal(),
        Some(libc::SIGTERM),
        "memprof must die of SIGTERM as python does (the shell's 143), not exit {:?}",
        status.code()
    );
    assert_eq!(children_folders_left(&tmp), Vec::<String>::new());
    let v = read_json(&report);
    assert_eq!(v["metadata"]["outcome"]["status"], "terminated");
    assert_eq!(v["metadata"]["outcome"]["exit_code"], 143);
    assert!(hits(line(function(&v, "loop"), "time.sleep(0.01)")) > 0);
    // Written without Python's help, it names the versions as every other report does.
    let versions = python_output(
        std::path::Path::new("-c"),
        &["import platform, torch; print(platform.python_version(), torch.__version__)"],
    );
    assert_eq!(
        format!(
            "{} {}\n",
            v["metadata"]["python_version"].as_str().unwrap(),
            v["metadata"]["torch_version"].as_str().unwrap()
        ),
        versions.stdout
    );
}

#[test]
fn the_format_follows_the_extension_of_o() {
    let dir = tempfile::tempdir().unwrap();
    let script = step_script(dir.path(), "");
    for (name, starts) in [
        ("r.json", "{"),
        ("r.yaml", "schema:"),
        ("r.yml", "schema:"),
        ("r.txt", "memprof "),
    ] {
        let r = run_in(dir.path(), &["-f", "step", "-o", name, &script]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let text = std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert!(text.starts_with(starts), "{name}: {text}");
    }
    // What `memprof show` reads back.
    let r = finish(
        memprof()
            .current_dir(dir.path())
            .args(["show", "r.json"])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    // --format still wins.
    let r = run_in(
        dir.path(),
        &["-f", "step", "--format", "yaml", "-o", "y.json", &script],
    );
    assert_eq!(r.code, 0);
    assert!(std::fs::read_to_string(dir.path().join("y.json"))
        .unwrap()
        .starts_with("schema:"));
}

#[test]
fn paths_are_resolved_before_the_script_changes_directory() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let script = step_script(
        dir.path(),
        &format!("os.chdir({:?})\nstep()\n", elsewhere.path()),
    );
    let r = run_in(
        dir.path(),
        &["-f", "step", "-o", "rel.json", "--plot", "rel.svg", &script],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    for name in ["rel.json", "rel.svg"] {
        assert!(dir.path().join(name).is_file(), "{name}: {}", r.stderr);
        assert!(!elsewhere.path().join(name).exists(), "{name}");
    }
    assert!(
        r.stderr.contains(&format!(
            "report written to {}",
            dir.path().join("rel.json").display()
        )),
        "{}",
        r.stderr
    );
}

#[test]
fn an_unwritable_directory_is_found_before_the_script_starts() {
    let dir = tempfile::tempdir().unwrap();
    let script = step_script(dir.path(), "print('the script ran')\n");
    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    // Root passes permission checks; an immutable directory stops even root.
    let immutable = std::process::Command::new("chattr")
        .args(["+i"])
        .arg(&locked)
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !immutable {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
    }
    let r = run_in(dir.path(), &["-f", "step", "-o", "locked/r.json", &script]);
    let r_plot = run_in(
        dir.path(),
        &["-f", "step", "--plot", "locked/p.svg", &script],
    );
    if immutable {
        let _ = std::process::Command::new("chattr")
            .args(["-i"])
            .arg(&locked)
            .status();
    }
    let can_write_anyway = !immutable && nix_is_root();
    if can_write_anyway {
        eprintln!("skipped: running as root without chattr, a 0555 directory is writable");
        return;
    }
    for (r, what) in [(r, "the report"), (r_plot, "the plot")] {
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(
            r.stderr.contains(&format!("cannot write {what} to")),
            "{}",
            r.stderr
        );
        assert!(
            !r.stdout.contains("the script ran"),
            "checked before the script started"
        );
    }
}

fn nix_is_root() -> bool {
    // SAFETY: plain call.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn a_report_that_cannot_be_written_at_the_end_is_kept_and_the_run_fails() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gone");
    std::fs::create_dir(&out).unwrap();
    // The directory disappears while the script runs: found only at the end.
    let script = step_script(
        dir.path(),
        &format!("import shutil\nshutil.rmtree({out:?})\nstep()\n"),
    );
    let r = run_in(
        dir.path(),
        &[
            "-f",
            "step",
            "--format",
            "json",
            "-o",
            "gone/r.json",
            &script,
        ],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("cannot write the report to"),
        "{}",
        r.stderr
    );
    let kept = r
        .stderr
        .split("the report was written to ")
        .nth(1)
        .and_then(|rest| rest.split(" instead").next())
        .unwrap_or_else(|| panic!("no fallback named: {}", r.stderr));
    let v = read_json(Path::new(kept));
    assert_eq!(function(&v, "step")["calls"], 2);
    let _ = std::fs::remove_file(kept);

    // The same for a --plot whose directory went: the run does not pass.
    std::fs::create_dir(&out).unwrap();
    let r = run_in(dir.path(), &["-f", "step", "--plot", "gone/p.svg", &script]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("gone/p.svg"), "{}", r.stderr);
}

#[test]
fn os_exit_writes_the_report_before_the_process_ends() {
    let dir = tempfile::tempdir().unwrap();
    // A forked child that left first is in the report; the children's folder goes.
    let script = step_script(
        dir.path(),
        "pid = os.fork()\nif pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)\nstep()\nos._exit(5)\n",
    );
    let tmp = own_tmpdir(dir.path());
    let r = finish(
        memprof()
            .current_dir(dir.path())
            .env("TMPDIR", &tmp)
            .args([
                "--device",
                device_flag(),
                "run",
                "-f",
                "step",
                "-o",
                "r.json",
                &script,
            ])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 5, "{}", r.stderr);
    let v = read_json(&dir.path().join("r.json"));
    assert_eq!(v["metadata"]["outcome"]["status"], "os_exit");
    assert_eq!(v["metadata"]["outcome"]["exit_code"], 5);
    assert_eq!(function(&v, "step")["calls"], 2);
    let children = v["children"].as_array().unwrap();
    assert_eq!(children.len(), 1, "{v:#}");
    assert_eq!(children[0]["outcome"], "os_exit");
    assert_eq!(children_folders_left(&tmp), Vec::<String>::new());
    // A forked child leaving through os._exit (as multiprocessing's do) writes nothing.
    let script = step_script(
        dir.path(),
        "pid = os.fork()\nif pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)\n",
    );
    let r = run_in(dir.path(), &["-f", "step", "-o", "f.json", &script]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        read_json(&dir.path().join("f.json"))["metadata"]["outcome"]["status"],
        "completed"
    );
    assert_eq!(
        r.stderr.matches("report written").count(),
        1,
        "{}",
        r.stderr
    );
}

#[test]
fn a_directory_or_zip_with_main_runs_as_under_python() {
    let dir = tempfile::tempdir().unwrap();
    let app = dir.path().join("dirapp");
    std::fs::create_dir(&app).unwrap();
    let main = "import os, sys, torch\nDEV = os.environ.get('MEMPROF_TEST_DEVICE', 'cpu')\ndef step():\n    return torch.empty(1024 * 1024, device=DEV)\nkeep = step()\nprint(sys.argv[0], os.path.basename(__file__), sys.path[0] == os.path.abspath(sys.argv[0]))\n";
    std::fs::write(app.join("__main__.py"), main).unwrap();
    let zipped = std::process::Command::new(python())
        .current_dir(&app)
        .args(["-m", "zipfile", "-c", "../app.zip", "__main__.py"])
        .status()
        .unwrap();
    assert!(zipped.success());
    for target in ["dirapp", "app.zip"] {
        let python = finish(
            std::process::Command::new(python())
                .current_dir(dir.path())
                .arg(target)
                .env(
                    "MEMPROF_TEST_DEVICE",
                    if on_cuda() { "cuda" } else { "cpu" },
                )
                .output()
                .unwrap(),
        );
        assert_eq!(python.code, 0, "{}", python.stderr);
        let r = run_in(dir.path(), &["-f", "step", "--format", "json", target]);
        assert_eq!(r.code, 0, "{target}: {}", r.stderr);
        // A JSON report on standard output has it to itself: the program's line is on stderr.
        let printed: String = r
            .program_stderr()
            .iter()
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(printed, python.stdout, "{target}");
        let v = r.json();
        assert_eq!(delta_sum(function(&v, "step")), 4 * MIB, "{target}: {v:#}");
        // The source text shows, from the archive too.
        assert_eq!(
            delta(line(function(&v, "step"), "return torch.empty")),
            4 * MIB
        );
    }
    // A directory without __main__.py is named as such, not as missing.
    std::fs::create_dir(dir.path().join("nomain")).unwrap();
    let r = run_in(dir.path(), &["nomain"]);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr
            .contains("can't find '__main__' module in 'nomain'"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("No such file"), "{}", r.stderr);
}

#[test]
fn a_missing_module_exits_1_with_pythons_message_and_no_report() {
    let dir = tempfile::tempdir().unwrap();
    let python = finish(
        std::process::Command::new(python())
            .current_dir(dir.path())
            .args(["-m", "no.such.module"])
            .output()
            .unwrap(),
    );
    let r = run_in(dir.path(), &["-m", "no.such.module"]);
    assert_eq!((r.code, python.code), (1, 1), "{}", r.stderr);
    assert!(r.stderr.contains("No module named 'no'"), "{}", r.stderr);
    assert_eq!(r.stdout, "", "no report: nothing ran");
}

#[test]
fn a_name_found_only_in_a_package_is_suggested_in_the_form_that_works() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("opt.py");
    std::fs::write(
        &script,
        "import torch\nopt = torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=0.1)\nopt.step()\n",
    )
    .unwrap();
    let script = script.to_str().unwrap();
    let r = run_in(dir.path(), &["-f", "SGD.step", script]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains(
            "no function matched '-f SGD.step' in your code; in installed packages: -f torch.optim.sgd:SGD.step"
        ),
        "{}",
        r.stdout
    );
    // The suggestion works as given, and so does the module with the bare name.
    for spec in ["torch.optim.sgd:SGD.step", "torch.optim.sgd:step"] {
        let r = run_in(dir.path(), &["-f", spec, script]);
        assert!(
            r.stdout.contains("Function: SGD.step"),
            "{spec}: {}",
            r.stdout
        );
        assert!(
            !r.stdout.contains("no function matched"),
            "{spec}: {}",
            r.stdout
        );
    }
}

#[test]
fn a_programs_own_trace_function_is_not_silently_allowed_to_hide_a_target() {
    let dir = tempfile::tempdir().unwrap();
    let script = step_script(
        dir.path(),
        "import sys\ndef tracer(frame, event, arg):\n    return tracer\nsys.settrace(tracer)\nstep()\nsys.settrace(None)\n",
    );
    let (r, v) = profile(&[], &["-f", "step", &script]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let calls = function(&v, "step")["calls"].as_u64().unwrap();
    let warned = v["warnings"].as_array().unwrap().iter().any(|w| {
        w.as_str()
            .unwrap()
            .contains("installed its own trace function")
    });
    if v["metadata"]["python_version"]
        .as_str()
        .unwrap()
        .starts_with("3.11")
    {
        // 3.11 has one trace function per thread: the second call was not measured, and the
        // report says why.
        assert_eq!(calls, 1);
        assert!(warned, "{v:#}");
    } else {
        // 3.12+: sys.monitoring and sys.settrace work side by side.
        assert_eq!(calls, 2);
        assert!(!warned, "{v:#}");
    }
}
