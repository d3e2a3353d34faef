//! `memprof merge` at scale: 1024 rank reports made from one real report
//! (benches/synthetic_ranks.py: 128 hosts of 8, each rank's peak moved by a known amount, rank 513
//! 25% above, rank 17 20% below, rank 1021 ended by an exception) merge into a summary of at most
//! 60 lines that names the two outliers, with the distribution exact, within the time and memory
//! of BENCHMARKS.md's bound; `--ranks` picks ranks' detail and refuses ranks it does not have.
use crate::common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// One real report, then `n` ranks made from it under `dir`; what the generator says of them.
pub fn synthetic_ranks(dir: &Path, n: u32) -> Value {
    let template = dir.join("template.json");
    let r = run(&[
        "-f",
        "train_step",
        "-o",
        template.to_str().unwrap(),
        &fixture("mlp.py"),
        "float32",
        "100",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = finish(
        Command::new(python())
            .arg(root().join("benches").join("synthetic_ranks.py"))
            .arg(&template)
            .arg(dir.join("ranks"))
            .args(["--ranks", &n.to_string()])
            .output()
            .unwrap(),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

pub fn rank_files(dir: &Path, n: u32) -> Vec<String> {
    (0..n)
        .map(|r| {
            dir.join("ranks")
                .join(format!("r.{r}.json"))
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

/// `memprof merge ARGS`, under a python that reports the child's seconds and peak resident KiB.
fn timed_merge(args: &[String]) -> (Run, f64, u64) {
    let measure = "import resource, subprocess, sys, time\n\
                   t = time.monotonic()\n\
                   r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n\
                   sys.stdout.write(r.stdout)\n\
                   sys.stderr.write(r.stderr)\n\
                   sys.stderr.write('\\nMEASURED %f %d\\n' % (time.monotonic() - t, \
                   resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n\
                   sys.exit(r.returncode)";
    let out = finish(
        in_the_venv(Command::new(python()))
            .args(["-c", measure])
            .arg(memprof_binary())
            .arg("merge")
            .args(args)
            .output()
            .unwrap(),
    );
    let measured = out
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("MEASURED "))
        .expect("the measure line")
        .to_string();
    let mut parts = measured.split(' ');
    let seconds: f64 = parts.next().unwrap().parse().unwrap();
    let kib: u64 = parts.next().unwrap().parse().unwrap();
    (out, seconds, kib)
}

/// The bound on merging 1024 ranks' reports: BENCHMARKS.md's 3 s for a release build; a debug
/// build parses JSON about ten times slower.
fn seconds_allowed() -> f64 {
    if memprof_binary().to_string_lossy().contains("/debug/") {
        20.0
    } else {
        3.0
    }
}

#[test]
fn merging_1024_ranks_is_a_summary_that_names_the_outliers() {
    let dir = tempfile::tempdir().unwrap();
    let n = 1024;
    let made = synthetic_ranks(dir.path(), n);
    let files = rank_files(dir.path(), n);
    let (table, seconds, kib) = timed_merge(&files);
    assert_eq!(table.code, 0, "{}", table.stderr);
    let lines = table.stdout.lines().count();
    eprintln!(
        "merge of {n} ranks: {seconds:.2} s, {} MiB resident, {lines} lines",
        kib / 1024
    );
    assert!(lines <= 60, "{lines} lines:\n{}", table.stdout);
    assert!(seconds <= seconds_allowed(), "{seconds:.2} s");
    assert!(kib < 1024 * 1024, "{kib} KiB resident");
    for expected in [
        "merged: 1024 of 1024 ranks",
        "Hosts: 128, 8 ranks each",
        "Outcome: 1023 completed, 1 exception (rank 1021)",
        "Ranks that stand out (2 far from the rest):",
        "  rank 513 on node064: ",
        "far above the rest",
        "  rank 17 on node002: ",
        "far below the rest",
        "Hosts by their ranks' peaks (the 4 highest and lowest of 128)",
        "merge --ranks 513,17",
    ] {
        assert!(
            table.stdout.contains(expected),
            "no '{expected}' in:\n{}",
            table.stdout
        );
    }
    // No rank's own detail unasked.
    assert!(
        !table.stdout.contains("rank 5 (local 5)"),
        "{}",
        table.stdout
    );

    // The distribution, exact against the generator's peaks.
    let (json, _, _) = timed_merge(
        &[
            vec!["--format".to_string(), "json".to_string()],
            files.clone(),
        ]
        .concat(),
    );
    assert_eq!(json.code, 0, "{}", json.stderr);
    let m: Value = serde_json::from_str(&json.stdout).unwrap();
    let mut peaks: Vec<(i64, u64)> = made["peaks"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(r, v)| (v.as_i64().unwrap(), r as u64))
        .collect();
    peaks.sort();
    let d = &m["peak"]["distribution"]["allocated_bytes"];
    assert_eq!(d["min"], peaks[0].0);
    assert_eq!(d["min_rank"], 17);
    assert_eq!(d["max"], peaks[1023].0);
    assert_eq!(d["max_rank"], 513);
    assert_eq!(d["median"], peaks[511].0, "the lower middle of 1024");
    assert_eq!(d["p90"], peaks[921].0, "nearest rank: the 922nd of 1024");
    let outliers: Vec<(u64, &str)> = m["peak"]["outliers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["rank"].as_u64().unwrap(), o["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(outliers, vec![(513, "far_above"), (17, "far_below")]);
    assert_eq!(m["metadata"]["hosts"].as_array().unwrap().len(), 128);
    assert_eq!(m["metadata"]["hosts"][64]["ranks"][1], 513);

    // --ranks: those ranks' detail; a rank the files lack is refused with the ranks they have.
    let (picked, _, _) = timed_merge(
        &[
            vec!["--ranks".to_string(), "513,0-1".to_string()],
            files[..64].to_vec(),
        ]
        .concat(),
    );
    assert_eq!(
        picked.code, 2,
        "rank 513 is not among the first 64: {}",
        picked.stdout
    );
    assert!(
        picked
            .stderr
            .contains("--ranks 513,0-1: no report of rank 513 among the files")
            && picked.stderr.contains("the files have ranks 0–63"),
        "{}",
        picked.stderr
    );
    let picked = finish(
        memprof()
            .args(["merge", "--ranks", "0-1,17"])
            .args(&files[..64])
            .output()
            .unwrap(),
    );
    assert_eq!(picked.code, 0, "{}", picked.stderr);
    for rank in [
        "rank 0 (local 0) on node000",
        "rank 1 (local 1) on node000",
        "rank 17 (local 1) on node002",
    ] {
        assert!(
            picked.stdout.contains(rank),
            "no '{rank}':\n{}",
            picked.stdout
        );
    }
    assert!(
        !picked.stdout.contains("rank 2 (local 2)"),
        "{}",
        picked.stdout
    );
    assert!(
        picked
            .stdout
            .contains("Missing: no report of ranks 64–1023 (of 1024)"),
        "{}",
        picked.stdout
    );
}
