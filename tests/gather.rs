//! `--gather` over a real two-node torchrun on one machine (two `torchrun --nnodes 2` launchers,
//! one process each, separate working directories standing for the nodes' disks, gloo): rank 0's
//! node ends with every rank's report, byte for byte what each rank wrote on its own node, and
//! `memprof merge` of them works; with the static and the c10d rendezvous. A rank that runs
//! without memprof is named as missing after --gather-timeout, and the run still ends. Outside
//! torchrun, or with a table for a report, --gather is refused with the fix.
use crate::common::*;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Stdio};

/// A port free now, for the rendezvous.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One node's torchrun (`rendezvous` its node arguments), running `program` in `dir`.
fn node(dir: &Path, rendezvous: &[String], program: &[String]) -> Child {
    let mut cmd = torchrun_launcher(dir);
    cmd.args(["--nnodes", "2", "--nproc-per-node", "1"])
        .args(rendezvous)
        .args(program)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().expect("torchrun starts")
}

/// `memprof --device cpu run --gather EXTRA -f step -o r.{rank}.json ranks.py`, as torchrun's
/// program.
fn memprof_program(extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "--no-python".into(),
        memprof_binary().to_string_lossy().into(),
    ];
    args.extend(["--device", "cpu", "run", "--gather"].map(String::from));
    args.extend(extra.iter().map(|a| a.to_string()));
    args.extend(["-f", "step", "-o", "r.{rank}.json"].map(String::from));
    args.push(fixture("ranks.py"));
    args
}

fn static_rendezvous(port: u16, node_rank: u32) -> Vec<String> {
    [
        "--node-rank".to_string(),
        node_rank.to_string(),
        "--master-addr".into(),
        "127.0.0.1".into(),
        "--master-port".into(),
        port.to_string(),
    ]
    .into()
}

fn c10d_rendezvous(port: u16) -> Vec<String> {
    [
        "--rdzv-backend".to_string(),
        "c10d".into(),
        "--rdzv-endpoint".into(),
        format!("127.0.0.1:{port}"),
        "--rdzv-id".into(),
        "memprof-gather-test".into(),
    ]
    .into()
}

fn both(a: Child, b: Child) -> (Run, Run) {
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    (finish(a), finish(b))
}

/// Checks that `zero` (rank 0's node) has both reports, `one` only rank 1's, and the two copies
/// of rank 1's report are the same bytes; then merges them.
fn assert_gathered(zero: &Path, one: &Path) {
    assert!(zero.join("r.0.json").exists() && zero.join("r.1.json").exists());
    assert!(
        !one.join("r.0.json").exists(),
        "rank 0's report stays on its node"
    );
    assert_eq!(
        std::fs::read(zero.join("r.1.json")).unwrap(),
        std::fs::read(one.join("r.1.json")).unwrap(),
        "rank 1's report on rank 0's node is what rank 1 wrote"
    );
    assert_eq!(
        read_json(&zero.join("r.1.json"))["metadata"]["process"]["rank"],
        1
    );
    let merged = finish(
        memprof()
            .arg("merge")
            .arg(zero.join("r.0.json"))
            .arg(zero.join("r.1.json"))
            .output()
            .unwrap(),
    );
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    assert!(
        merged.stdout.contains("merged: 2 of 2 ranks"),
        "{}",
        merged.stdout
    );
}

#[test]
fn gather_brings_every_ranks_report_to_rank_0s_node_static_and_c10d() {
    // The static rendezvous: node 0 has rank 0.
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let port = free_port();
    let program = memprof_program(&[]);
    let (r0, r1) = both(
        node(a.path(), &static_rendezvous(port, 0), &program),
        node(b.path(), &static_rendezvous(port, 1), &program),
    );
    assert_eq!((r0.code, r1.code), (0, 0), "{}\n{}", r0.stderr, r1.stderr);
    assert!(
        r0.stderr.contains("gathered 2 of 2 ranks' reports into")
            && r0.stderr.contains("through torchrun's store"),
        "{}",
        r0.stderr
    );
    assert_gathered(a.path(), b.path());

    // The c10d rendezvous (torchrun's default for several nodes): whichever node got rank 0.
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let rendezvous = c10d_rendezvous(free_port());
    let (r0, r1) = both(
        node(a.path(), &rendezvous, &program),
        node(b.path(), &rendezvous, &program),
    );
    assert_eq!((r0.code, r1.code), (0, 0), "{}\n{}", r0.stderr, r1.stderr);
    if a.path().join("r.0.json").exists() {
        assert_gathered(a.path(), b.path());
    } else {
        assert_gathered(b.path(), a.path());
    }
}

#[test]
fn a_rank_that_never_reports_is_named_after_the_timeout() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let port = free_port();
    let started = std::time::Instant::now();
    // Node 1 runs the program without memprof: rank 1 never hands a report over.
    let (r0, r1) = both(
        node(
            a.path(),
            &static_rendezvous(port, 0),
            &memprof_program(&["--gather-timeout", "3"]),
        ),
        node(
            b.path(),
            &static_rendezvous(port, 1),
            &[fixture("ranks.py")],
        ),
    );
    assert_eq!((r0.code, r1.code), (0, 0), "{}\n{}", r0.stderr, r1.stderr);
    assert!(
        r0.stderr.contains("gathered 1 of 2 ranks' reports")
            && r0
                .stderr
                .contains("--gather: no report from rank 1 within 3 s"),
        "{}",
        r0.stderr
    );
    assert!(a.path().join("r.0.json").exists() && !a.path().join("r.1.json").exists());
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
}

#[test]
fn gather_outside_torchrun_or_with_a_table_is_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.{rank}.json");
    let r = finish(
        as_rank(1, 2)
            .args(["--device", "cpu", "run", "--gather", "-o"])
            .arg(&out)
            .arg(fixture("lines.py"))
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("TORCHELASTIC_USE_AGENT_STORE is not True")
            && r.stderr.contains("launch with torchrun"),
        "{}",
        r.stderr
    );
    let r = finish(
        as_rank(1, 2)
            .env("TORCHELASTIC_USE_AGENT_STORE", "True")
            .args(["--device", "cpu", "run", "--gather", "-o"])
            .arg(dir.path().join("r.{rank}.txt"))
            .arg(fixture("lines.py"))
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("and this run writes a table"),
        "{}",
        r.stderr
    );
    // One rank: nothing to gather, and no store needed.
    let r = finish(
        memprof()
            .args(["--device", "cpu", "run", "--gather", "-o"])
            .arg(dir.path().join("one.json"))
            .arg(fixture("lines.py"))
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
}
