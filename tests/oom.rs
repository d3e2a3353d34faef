//! Out-of-memory forensics on the CPU: a real torch.OutOfMemoryError, raised as torch raises it
//! (the CUDA allocator's message, from code in torch's files, below a layer's forward), ends a
//! training loop run without -f. The report's `oom` record names the innermost line of the
//! user's code, parses torch's numbers, lists the live tensors and the modules running, and ranks
//! its suggestions. (The allocator's own path, exact numbers and caught OOMs, is checked on the
//! GPU by scripts/gpu-check.sh.)
use crate::common::*;
use serde_json::{json, Value};

const MIB: i64 = 1 << 20;

fn line_of(fixture_name: &str, needle: &str) -> u64 {
    let text = std::fs::read_to_string(fixture(fixture_name)).unwrap();
    text.lines()
        .position(|l| l.contains(needle))
        .map(|i| i as u64 + 1)
        .unwrap_or_else(|| panic!("{needle} not in {fixture_name}"))
}

fn oom_run(extra: &[&str]) -> (Run, Value) {
    if on_cuda() {
        // The fixture fakes torch's CUDA OOM on the CPU; on CUDA the real one is checked.
        return (
            Run {
                code: 1,
                stdout: String::new(),
                stderr: String::new(),
            },
            Value::Null,
        );
    }
    let mut args = extra.to_vec();
    args.push("oom_forensics.py");
    profile(&[], &args)
}

fn category(tensors: &Value, name: &str) -> i64 {
    tensors["categories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["category"] == name)
        .map(|c| c["bytes"].as_i64().unwrap())
        .unwrap()
}

#[test]
fn an_oom_that_ends_the_program_is_recorded_at_the_innermost_line_of_the_users_code() {
    let (r, report) = oom_run(&["--modules"]);
    if report.is_null() {
        return;
    }
    assert_eq!(r.code, 1, "the script's own exit code: {}", r.stderr);
    assert!(
        r.stderr
            .contains("torch.OutOfMemoryError: CUDA out of memory"),
        "the program's traceback is printed as python prints it: {}",
        r.stderr
    );
    let oom = &report["oom"];
    assert_eq!(oom["count"], 1);
    assert_eq!(oom["caught"], 0);
    let e = &oom["events"][0];
    assert_eq!(e["source"], "exception");
    assert_eq!(e["caught"], false);
    // torch's message, parsed: 4.00 MiB, 8.00 GiB total, 1.50 MiB free, 7.50 GiB allocated and
    // 256.00 MiB reserved but unallocated.
    assert_eq!(e["device"], 0);
    assert_eq!(e["requested_bytes"], 4 * MIB);
    assert_eq!(e["device_total_bytes"], 8192 * MIB);
    assert_eq!(e["device_free_bytes"], 3 * MIB / 2);
    assert_eq!(e["allocated_bytes"], 7680 * MIB);
    assert_eq!(e["reserved_bytes"], 7936 * MIB);
    assert_eq!(e["fragmentation_bytes"], 256 * MIB);

    // The raise is in torch's files, below Linear.forward and Module.__call__: the line is the
    // user's `return self.fc2(h)` in Net.forward.
    let line = &e["line"];
    assert!(line["file"]
        .as_str()
        .unwrap()
        .ends_with("fixtures/oom_forensics.py"));
    assert_eq!(
        line["line"].as_u64().unwrap(),
        line_of("oom_forensics.py", "return self.fc2(h)")
    );
    assert_eq!(line["function"], "Net.forward");
    assert_eq!(line["source"], "return self.fc2(h)");
    let stack = e["stack"].as_array().unwrap();
    assert!(stack[0]["file"]
        .as_str()
        .unwrap()
        .ends_with("torch/nn/_oom_stand_in.py"));
    assert_eq!(stack[0]["user"], false);
    assert_eq!(stack[1]["function"], "Linear.forward");
    assert_eq!(stack[1]["user"], false);
    let user: Vec<&str> = stack
        .iter()
        .filter(|f| f["user"] == true)
        .map(|f| f["function"].as_str().unwrap())
        .collect();
    assert_eq!(user, ["Net.forward", "step", "<module>"], "innermost first");
    assert_eq!(
        e["modules_active"],
        json!(["Net (forward)", "Net.fc2 (forward)"])
    );

    // The live tensors when it was raised: the model (fc1 256→512, fc2 512→256, float32), its
    // gradients (zeroed, not freed) and SGD's momentum, the 4096-row input and fc1's output.
    let tensors = &e["tensors"];
    let params = (256 * 512 + 512 + 512 * 256 + 256) * 4;
    assert_eq!(category(tensors, "parameters"), params);
    assert_eq!(category(tensors, "gradients"), params);
    assert_eq!(category(tensors, "optimizer_state"), params);
    assert_eq!(category(tensors, "other"), 12 * MIB);
    let listed = tensors["tensors"].as_array().unwrap();
    assert_eq!(listed[0]["name"], "Net.forward:h");
    assert_eq!(listed[0]["bytes"], 8 * MIB);
    assert_eq!(listed[1]["name"], "Net.forward:x, step:batch");
    assert_eq!(listed[1]["bytes"], 4 * MIB);

    // Ranked by what each saves: the 256 MiB cached but unallocated, fc1's activations in the
    // failing pass (its 4 MiB input), the 2.5 MiB the request lacked, the gradients.
    let ranked: Vec<(&str, i64)> = oom["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["kind"].as_str().unwrap(),
                s["saving_bytes"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ranked,
        [
            ("expandable_segments", 256 * MIB),
            ("activation_checkpointing", 4 * MIB),
            ("smaller_batch", 5 * MIB / 2),
            ("free_gradients", params),
        ]
    );
}

#[test]
fn the_table_shows_the_oom_its_line_and_the_suggestions() {
    if on_cuda() {
        return;
    }
    let r = run(&["oom_forensics.py"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let out = &r.stdout;
    let expected_at = format!(
        "#1 · not caught · cuda:0 · at {}:{} in Net.forward",
        fixture("oom_forensics.py"),
        line_of("oom_forensics.py", "return self.fc2(h)")
    );
    for needle in [
        "Out of memory: 1 raised during the run (0 caught by the program, the last one ended it)",
        expected_at.as_str(),
        "  requested            4.00 MiB",
        "  fragmentation      256.00 MiB",
        "    * oom_forensics.py:",
        "Live tensors at OOM #1:",
        "Suggestions, largest saving first:",
        "  1. [saves ≈ 256.00 MiB] PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
    ] {
        assert!(out.contains(needle), "{needle:?} missing from:\n{out}");
    }
    // Without --modules, the last suggestion is how to measure what checkpointing would save.
    let last = out
        .lines()
        .rfind(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .unwrap();
    assert!(last.contains("--modules --suggest-checkpoints"), "{last}");
}

#[test]
fn runs_without_an_oom_have_no_oom_record() {
    // A run that completes, and one that ends with another exception.
    let (r, report) = profile(&[], &["-f", "step", "lines.py", "x"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(report.get("oom").is_none(), "{report}");
    let (r, report) = profile(&[], &["-f", "fail", "raises.py"]);
    assert_ne!(r.code, 0);
    assert!(report.get("oom").is_none(), "{report}");
}
