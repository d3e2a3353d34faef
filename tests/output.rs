//! Output: the table (pinned by snapshots), YAML and JSON, `-o`, `memprof show`, `memprof stats`,
//! and shell completions.
use crate::common::*;
use std::path::Path;

/// Compares with a checked-in snapshot; `UPDATE_SNAPSHOTS=1` rewrites it.
fn assert_snapshot(name: &str, got: &str) {
    let path = root().join("tests").join("snapshots").join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(want == got, "snapshot {name} differs (UPDATE_SNAPSHOTS=1 rewrites it)\n--- want\n{want}\n--- got\n{got}");
}

/// A table without its line of the process's memory (the host's resident peak, the driver's
/// count), which two runs of one program read a little differently: the rest is the same.
fn without_process_memory(table: &str) -> String {
    let kept: Vec<&str> = table
        .lines()
        .filter(|l| !l.starts_with("host: resident peak") && !l.starts_with("device at the peak:"))
        .collect();
    assert!(
        kept.len() + 1 >= table.lines().count(),
        "one line of process memory at most: {table}"
    );
    kept.join("\n")
}

fn show(file: &Path, format: &str) -> Run {
    finish(
        memprof()
            .args(["show", "--format", format])
            .arg(file)
            .output()
            .unwrap(),
    )
}

#[test]
fn the_table_of_a_saved_report_is_pinned() {
    let report = root().join("tests/snapshots/report.json");
    let r = show(&report, "table");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_snapshot("report.table.txt", &r.stdout);
}

/// A saved report with the --modules and --tensors sections (cnn.py on the CPU): their tables,
/// and the sections' round trip through YAML.
#[test]
fn the_module_and_tensor_tables_of_a_saved_report_are_pinned() {
    let report = root().join("tests/snapshots/sections.json");
    let r = show(&report, "table");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_snapshot("sections.table.txt", &r.stdout);
    let yaml = show(&report, "yaml");
    let dir = tempfile::tempdir().unwrap();
    let yaml_file = dir.path().join("r.yaml");
    std::fs::write(&yaml_file, &yaml.stdout).unwrap();
    let original: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(show(&yaml_file, "json").json(), original);
}

#[test]
fn yaml_and_json_carry_the_same_report_and_show_converts_between_them() {
    let report = root().join("tests/snapshots/report.json");
    let yaml = show(&report, "yaml");
    assert_eq!(yaml.code, 0);
    assert!(
        yaml.stdout.starts_with("schema: memprof.profile/1\n"),
        "{}",
        yaml.stdout
    );
    let dir = tempfile::tempdir().unwrap();
    let yaml_file = dir.path().join("r.yaml");
    std::fs::write(&yaml_file, &yaml.stdout).unwrap();
    let json_again = show(&yaml_file, "json");
    let original: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(json_again.json(), original);
    assert_eq!(
        show(&yaml_file, "table").stdout,
        show(&report, "table").stdout
    );
}

#[test]
fn the_json_schema_has_metadata_and_bytes() {
    let (r, v) = profile(
        &["allocated_bytes.all.peak", "allocation.all.current"],
        &["-f", "step", "lines.py"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let m = &v["metadata"];
    assert_eq!(v["schema"], "memprof.profile/1");
    assert_eq!(m["memprof_version"], env!("CARGO_PKG_VERSION"));
    let torch = std::process::Command::new(python())
        .args(["-c", "import torch; print(torch.__version__)"])
        .output()
        .unwrap();
    assert_eq!(
        m["torch_version"].as_str().unwrap(),
        String::from_utf8_lossy(&torch.stdout).trim(),
        "the script's torch"
    );
    assert_eq!(m["device"]["type"], if on_cuda() { "cuda" } else { "cpu" });
    assert_eq!(
        m["stats"][0],
        serde_json::json!({"key": "allocated_bytes.all.peak", "is_bytes": true, "aggregation": "max"})
    );
    assert_eq!(
        m["stats"][1],
        serde_json::json!({"key": "allocation.all.current", "is_bytes": false, "aggregation": "max"})
    );
    assert!(m["semantics"]
        .as_str()
        .unwrap()
        .contains("amounts and delta_bytes take the sum"));
    assert!(m["command_line"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a == "lines.py"));
    assert_eq!(
        m["outcome"],
        serde_json::json!({"status": "completed", "exit_code": 0, "exception": null})
    );
    assert_eq!(m["peak_resets"], serde_json::Value::Null);
}

#[test]
fn a_live_table_equals_the_table_of_its_saved_report() {
    let stats = [
        "--stat",
        "allocated_bytes.all.peak,allocated_bytes.all.current",
    ];
    let table = run(&[stats[0], stats[1], "-f", "step", "lines.py"]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    let saved = run(&[
        stats[0],
        stats[1],
        "-f",
        "step",
        "--format",
        "json",
        "-o",
        file.to_str().unwrap(),
        "lines.py",
    ]);
    assert_eq!(saved.code, 0);
    assert!(
        saved
            .stderr
            .contains(&format!("memprof: report written to {}", file.display())),
        "{}",
        saved.stderr
    );
    let shown = show(&file, "table");
    let live = table.stdout.split_once('\n').unwrap().1; // after the script's own line
    assert_eq!(
        without_process_memory(live),
        without_process_memory(&shown.stdout)
    );
    assert!(live.contains("Line #   Hits   Δ allocated   allocated_bytes.all.peak   allocated_bytes.all.current   Line Contents"), "{live}");
}

#[test]
fn device_and_stat_work_before_and_after_the_subcommand() {
    let before = finish(
        memprof()
            .args([
                "--device",
                device_flag(),
                "--stat",
                "allocation.all.current",
                "run",
                "-f",
                "step",
                "lines.py",
            ])
            .output()
            .unwrap(),
    );
    let after = finish(
        memprof()
            .args([
                "run",
                "--device",
                device_flag(),
                "--stat",
                "allocation.all.current",
                "-f",
                "step",
                "lines.py",
            ])
            .output()
            .unwrap(),
    );
    assert_eq!(before.code, 0, "{}", before.stderr);
    assert!(
        before
            .stdout
            .contains("   allocation.all.current   Line Contents"),
        "{}",
        before.stdout
    );
    assert_eq!(
        without_process_memory(&before.stdout),
        without_process_memory(&after.stdout)
    );
}

#[test]
fn stats_lists_every_key_with_its_meaning() {
    let r = finish(memprof().arg("stats").output().unwrap());
    assert_eq!(r.code, 0);
    let cuda: Vec<&str> = r
        .stdout
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(cuda.len(), 122);
    assert!(cuda
        .iter()
        .any(|l| l.starts_with("  num_ooms ") && l.contains("out-of-memory")));
    assert!(cuda
        .iter()
        .any(|l| l.starts_with("  oversize_allocations.peak ")));
    assert!(cuda
        .iter()
        .any(|l| l.starts_with("  allocation.large_pool.freed ")));
    let mut keys: Vec<&str> = cuda
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    let sorted = {
        let mut k = keys.clone();
        k.sort();
        k
    };
    assert_eq!(
        keys, sorted,
        "sorted as torch.cuda.memory_stats() sorts them"
    );
    keys.dedup();
    assert_eq!(keys.len(), 122);
    assert!(r.stdout.contains("  host_rss_bytes.current "));
}

#[test]
fn completions_are_current() {
    for (shell, file) in [
        ("bash", "memprof.bash"),
        ("zsh", "_memprof"),
        ("fish", "memprof.fish"),
    ] {
        let r = finish(memprof().args(["completions", shell]).output().unwrap());
        assert_eq!(r.code, 0);
        let path = root().join("completions").join(file);
        let saved = std::fs::read_to_string(&path).unwrap();
        assert!(
            saved == r.stdout,
            "completions/{file} is stale: run `memprof completions {shell} > completions/{file}`"
        );
        assert!(saved.contains("device") && saved.contains("stat"), "{file}");
    }
}

#[test]
fn a_table_on_a_terminal_fits_its_width_and_files_keep_every_column() {
    let args = [
        "--device",
        device_flag(),
        "run",
        "-f",
        "step",
        "lines.py",
        "x",
    ];
    let widest = |text: &str| {
        text.lines()
            .filter(|l| !l.starts_with("warning") && !l.starts_with("result"))
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0)
    };
    for cols in [80u16, 120] {
        let text = on_a_terminal(cols, &[], &args);
        assert!(text.contains("Line Contents"), "{text}");
        assert!(widest(&text) <= cols as usize, "{cols} columns:\n{text}");
        // The stat keys' headers take two lines; the Δ and the peak column stay.
        assert!(text.contains("allocated_bytes"), "{text}");
        assert!(text.contains("all.peak"), "{text}");
        assert!(text.contains("+8.00 MiB"), "{text}");
        assert!(text.contains("a = torch.empty"), "{text}");
    }
    // At 80 columns some default columns make way, and the table says which.
    let narrow = on_a_terminal(80, &[], &args);
    assert!(narrow.contains("(left out to fit 80 columns: "), "{narrow}");
    // COLUMNS wins over the terminal's own size, as for ls and git.
    let text = on_a_terminal(200, &[("COLUMNS", "90")], &args);
    assert!(widest(&text) <= 90, "{text}");
    // A pipe gets the whole table, as before.
    let piped = run(&args[3..]);
    assert!(piped
        .stdout
        .contains("allocated_bytes.all.peak   allocated_bytes.all.current"));
    assert!(widest(&piped.stdout) > 120, "{}", piped.stdout);
    // `memprof diff` fits too: its stat headers take two lines and the source is cut last.
    let dir = tempfile::tempdir().unwrap();
    for name in ["diff_base", "diff_new"] {
        let out = dir.path().join(format!("{name}.json"));
        let r = run(&[
            "-f",
            "step",
            "-o",
            out.to_str().unwrap(),
            &format!("{name}.py"),
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let (base, new) = (
        dir.path().join("diff_base.json"),
        dir.path().join("diff_new.json"),
    );
    let diff = ["diff", base.to_str().unwrap(), new.to_str().unwrap()];
    let text = on_a_terminal(160, &[], &diff);
    assert!(widest(&text) <= 160, "{text}");
    assert!(text.contains("a = torch.em"), "{text}");
    let piped = finish(memprof().args(diff).output().unwrap());
    assert!(widest(&piped.stdout) > 160, "{}", piped.stdout);
}
