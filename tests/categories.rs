//! The peak by what it is: every byte of a training step's peak in a category, exact where the
//! parts are known by construction (fixtures/categories_known.py, on the CPU, where a storage's
//! bytes are its tensor's).
use crate::common::*;
use serde_json::Value;

/// The fixture's sizes: batch N, inputs D, hidden H; float32.
const N: i64 = 2048;
const D: i64 = 256;
const H: i64 = 512;
const F32: i64 = 4;

fn cpu_report(script: &str) -> (Run, Value) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.json");
    let r = finish(
        memprof()
            .args(["run", "--device", "cpu", "-o"])
            .arg(&out)
            .arg(fixture(script))
            .output()
            .expect("memprof starts"),
    );
    let report = read_json(&out);
    (r, report)
}

#[test]
fn every_byte_of_a_training_steps_peak_is_named_exactly() {
    let (r, report) = cpu_report("categories_known.py");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let peak = &report["peak"];
    assert_sums_to_the_peak(peak);
    // The peak is in the second step's backward, once Adam's state exists: the last layer's
    // backward has made its weight's gradient and the two gradients of activations in flight.
    assert_eq!(peak["reached"]["site"]["source"], "loss.backward()");
    let parameters = F32 * (D * H + H * H + H);
    let expected = serde_json::json!({
        "parameters": parameters,
        // exp_avg and exp_avg_sq of each weight, and Adam's three step counters.
        "optimizer_state": 2 * parameters + 3 * F32,
        // The two ReLU outputs autograd saved, and the model's output MSELoss saved.
        "activations": 2 * N * H * F32 + N * F32,
        // The gradients of the second ReLU's output and input, in flight; and the gradient
        // the backward started from (a float32 scalar).
        "autograd_temporaries": 2 * N * H * F32 + F32,
        // The last layer's weight's gradient.
        "gradients": H * F32,
        // The batch and the targets.
        "inputs": N * D * F32 + N * F32,
    });
    assert_eq!(peak["categories"], expected, "{peak:#}");
    let sum: i64 = expected
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_i64().unwrap())
        .sum();
    assert_eq!(peak["allocated_bytes"], sum);
    // Each site's parts sum to its bytes.
    for site in peak["sites"].as_array().unwrap() {
        let parts: i64 = site["categories"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_i64().unwrap())
            .sum();
        assert_eq!(site["bytes"].as_i64().unwrap(), parts, "{site}");
    }
}

#[test]
fn the_table_says_what_the_peak_is_and_marks_a_mixed_row() {
    let r = finish(
        memprof()
            .args(["run", "--device", "cpu"])
            .arg(fixture("categories_known.py"))
            .output()
            .expect("memprof starts"),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains(
            "what it is: activations 8.01 MiB (35.6%), autograd temporaries 8.00 MiB (35.5%), \
             optimizer state 3.00 MiB (13.3%), inputs 2.01 MiB (8.9%), parameters 1.50 MiB (6.7%), \
             gradients 2.00 KiB (0.0%), other 0 B (0.0%)"
        ),
        "{}",
        r.stdout
    );
    // loss.backward() made gradients and gradients of activations: the larger part, marked.
    let row = r
        .stdout
        .lines()
        .find(|l| l.contains("loss.backward()") && l.contains("MiB"))
        .unwrap_or_else(|| panic!("{}", r.stdout));
    assert!(row.contains("autograd temporaries*"), "{row}");
    assert!(
        r.stdout.contains("* more than one category"),
        "{}",
        r.stdout
    );
}
