//! What a program sees and writes under `memprof run` beyond the conformance corpus: its own
//! `@memprof.profile()` report, its standard output beside a machine-format report, the page read
//! back as a report, the history's pickle protocol.
use crate::common::*;

#[test]
fn a_decorated_function_reads_the_same_peak_under_memprof_run_as_under_python() {
    let script = fixture("decorated_report.py");
    let python = finish(python_with_memprof().arg(&script).output().unwrap());
    assert_eq!(python.code, 0, "{}", python.stderr);
    let out = memprof()
        .env("PYTHONPATH", root().join("src").join("wheel"))
        .args(["--device", "cpu", "run", "-o"])
        .arg(tempfile::tempdir().unwrap().path().join("r.json"))
        .arg(&script)
        .output()
        .unwrap();
    let run = finish(out);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The first line: the peak and the targeted function, the same numbers both ways.
    let first = |s: &str| s.lines().next().unwrap_or_default().to_string();
    assert!(python.stdout.starts_with("peak: 2097"), "{}", python.stdout);
    assert_eq!(first(&run.stdout), first(&python.stdout));
    // Under the command the report is the run's, still going.
    assert_eq!(run.stdout.lines().nth(1), Some("running"), "{}", run.stdout);
}

#[test]
fn a_machine_format_on_standard_output_is_only_the_report() {
    for format in ["json", "yaml", "html"] {
        let r = run(&["--format", format, "prints_and_allocates.py"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        // The program's own lines went to standard error, in its order.
        assert_eq!(r.program_stderr(), ["loss 1.0", "done"], "{}", r.stderr);
        assert!(r.stderr.contains("goes to standard error"), "{}", r.stderr);
        let peak = match format {
            "json" => r.json()["peak"]["allocated_bytes"].clone(),
            "yaml" => {
                let v: serde_json::Value = serde_yaml::from_str(&r.stdout).unwrap();
                v["peak"]["allocated_bytes"].clone()
            }
            _ => {
                assert!(
                    r.stdout.starts_with("<!DOCTYPE html>"),
                    "{}",
                    &r.stdout[..80]
                );
                continue;
            }
        };
        assert_eq!(peak, 4096);
    }
}

#[test]
fn show_diff_and_merge_read_the_page_as_they_read_its_json() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let page = dir.path().join("r.html");
    let r = run(&["-o", json.to_str().unwrap(), "prints_and_allocates.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = run(&["-o", page.to_str().unwrap(), "prints_and_allocates.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let show = |f: &std::path::Path| finish(memprof().arg("show").arg(f).output().unwrap());
    let (a, b) = (show(&json), show(&page));
    assert_eq!(b.code, 0, "{}", b.stderr);
    // The same report but for the run itself (both were run): the peak's lines agree.
    let peak_line = |s: &str| s.lines().find(|l| l.starts_with("Peak:")).map(String::from);
    assert!(peak_line(&a.stdout).is_some(), "{}", a.stdout);
    assert_eq!(peak_line(&a.stdout), peak_line(&b.stdout));
    let diff = finish(
        memprof()
            .arg("diff")
            .arg(&json)
            .arg(&page)
            .output()
            .unwrap(),
    );
    assert_eq!(diff.code, 0, "{}", diff.stderr);
    let merge = finish(memprof().arg("merge").arg(&page).output().unwrap());
    assert!(
        !merge.stderr.contains("not a memprof report"),
        "{}",
        merge.stderr
    );
}

#[test]
fn the_history_pickle_is_protocol_4_which_memory_viz_reads() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("h.pickle");
    let r = run(&[
        "-f",
        "step",
        "--history",
        history.to_str().unwrap(),
        "-o",
        dir.path().join("r.json").to_str().unwrap(),
        "lines.py",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(&std::fs::read(&history).unwrap()[..2], b"\x80\x04");
}
