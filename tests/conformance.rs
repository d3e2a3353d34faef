//! The differential conformance suite (tests/conformance/check.py): every program of
//! fixtures/conformance runs under plain python and under the memprof that cargo built, and must
//! see and do exactly the same. (The wheel's `memprof run` goes through the same suite in
//! scripts/wheel-check.sh.)
use crate::common::*;
use std::process::Command;

#[test]
fn every_program_of_the_corpus_runs_under_memprof_exactly_as_under_python() {
    let mut cmd = in_the_venv(Command::new("python3"));
    cmd.arg(root().join("tests/conformance/check.py"))
        .arg("--python")
        .arg(python())
        .arg("--memprof")
        .arg(memprof_binary());
    // Here every case must run (CI installs hydra-core and transformers); the GPU machine has
    // neither, and runs the rest on cuda:0.
    if !on_cuda() {
        cmd.arg("--require-all");
    }
    let r = finish(cmd.output().expect("python3 starts"));
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("cases identical"), "{}", r.stdout);
}
