//! The peak, always (issue 22): with no flags, the run's highest allocated bytes split by the
//! lines that allocated what was live then, exactly; gradients at the line that ran the
//! backward; a targeted function's own peak; and the record through show, merge, diff and plot.
use crate::common::*;
use serde_json::Value;

/// A site as (file name, line, function, bytes, blocks).
type SiteRow = (String, u64, String, i64, u64);

/// The peak record of a report, and its sites.
fn sites(report: &Value) -> (&Value, Vec<SiteRow>) {
    let peak = &report["peak"];
    assert!(peak.is_object(), "no peak record: {report}");
    let sites = peak["sites"]
        .as_array()
        .expect("sites")
        .iter()
        .map(|s| {
            (
                s["file"]
                    .as_str()
                    .unwrap()
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .to_string(),
                s["line"].as_u64().unwrap(),
                s["function"].as_str().unwrap().to_string(),
                s["bytes"].as_i64().unwrap(),
                s["blocks"].as_u64().unwrap(),
            )
        })
        .collect();
    (peak, sites)
}

/// A site row as `sites` gives it.
fn m(file: &str, line: u64, function: &str, bytes: i64, blocks: u64) -> SiteRow {
    (file.to_string(), line, function.to_string(), bytes, blocks)
}

fn site<'a>(peak: &'a Value, needle: &str) -> &'a Value {
    peak["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["source"].as_str().unwrap().contains(needle))
        .unwrap_or_else(|| panic!("no site `{needle}` in {peak}"))
}

#[test]
fn with_no_flags_the_peak_is_split_by_the_lines_that_allocated_it_exactly() {
    let (r, report) = profile(&[], &["peak_sites.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (peak, got) = sites(&report);
    assert_eq!(
        got,
        vec![
            m("peak_sites.py", 35, "<module>", 4 * MIB, 1),
            m("peak_sites.py", 29, "worker", 3 * MIB, 1),
            m("peak_sites.py", 15, "<module>", 2 * MIB, 1),
            // The helper's line, the caller's as context (below); the generator's two blocks.
            m("peak_helper.py", 11, "make", MIB, 1),
            m("peak_sites.py", 21, "chunks", MIB, 2),
        ]
    );
    assert_eq!(peak["allocated_bytes"], 11 * MIB);
    assert_sums_to_the_peak(peak);
    let helper = site(peak, "return torch.empty(n");
    assert_eq!(helper["context"]["line"], 16);
    assert_eq!(helper["context"]["source"], "held = make(MiB)");
    assert_eq!(site(peak, "yield torch.empty")["context"]["line"], 24);
    // A thread's target started by threading: no caller outside the standard library.
    assert!(site(peak, "box.append")["context"].is_null());
    let reached = &peak["reached"];
    assert_eq!(reached["site"]["line"], 35);
    assert_eq!(reached["in_backward"], false);
    assert_eq!(reached["site_allocation"], 1);
    assert_eq!(
        peak["next_targets"],
        serde_json::json!(["<module>", "worker", "make"])
    );
    // No line event reached memprof: nothing was targeted.
    assert_eq!(report["metadata"]["hook_events"], 0);
    // Nothing targeted is no longer news: the peak is the report.
    assert_eq!(report["warnings"], serde_json::json!([]), "{}", r.stderr);
    assert!(report["functions"].as_array().unwrap().is_empty());
}

#[test]
fn the_table_of_a_run_with_no_flags_is_its_peak_and_the_next_command() {
    let r = run(&["peak_sites.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = &r.stdout;
    assert!(
        out.contains("Peak: 11.00 MiB allocated (allocated_bytes.all.peak)"),
        "{out}"
    );
    assert!(
        out.contains(
            "reached at peak_sites.py:35 <module>: spike = torch.empty(4 * MiB, dtype=torch.uint8, device=DEV)"
        ),
        "{out}"
    );
    assert!(out.contains("from peak_sites.py:16 <module>"), "{out}");
    assert!(out.contains(" 11.00 MiB   100.0%"), "{out}");
    assert!(
        out.contains("next: memprof run -f '<module>' -f worker -f make peak_sites.py"),
        "{out}"
    );
    assert!(!out.contains("no targeted function ran"), "{out}");
    assert!(!r.stderr.contains("nothing was targeted"), "{}", r.stderr);
}

#[test]
fn a_peak_inside_backward_is_at_the_line_that_ran_it() {
    let (r, report) = profile(&[], &["peak_backward.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (peak, _) = sites(&report);
    assert_sums_to_the_peak(peak);
    let reached = &peak["reached"];
    assert_eq!(reached["in_backward"], true, "{peak}");
    assert_eq!(reached["site"]["source"], "loss.backward()");
    // The backward's own gradients (on the GPU, autograd's device thread made them).
    assert!(site(peak, "loss.backward()")["bytes"].as_i64().unwrap() >= 2 * MIB);
    assert_eq!(site(peak, "w = torch.ones")["bytes"], MIB);
}

#[test]
fn what_a_backward_leaves_is_a_gradient_at_its_line() {
    let (r, report) = profile(&[], &["peak_backward.py", "--spike"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (peak, _) = sites(&report);
    assert_sums_to_the_peak(peak);
    assert_eq!(peak["reached"]["site"]["line"], 20);
    let backward = site(peak, "loss.backward()");
    assert_eq!(backward["bytes"], MIB);
    assert_eq!(
        backward["categories"],
        serde_json::json!({ "gradients": MIB })
    );
}

#[test]
fn a_targeted_functions_peak_is_its_own() {
    let (r, report) = profile(
        &["allocated_bytes.all.peak"],
        &["-f", "step", "peak_function.py"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let f = function(&report, "step");
    // The second call: the first call's 1 MiB, its own 1 MiB and the 2 MiB temporary.
    assert_eq!(f["peak"]["allocated_bytes"], 4 * MIB);
    assert_eq!(f["peak_allocated_bytes"], f["peak"]["allocated_bytes"]);
    let (fp, got) = sites(f);
    assert_sums_to_the_peak(fp);
    let lines: Vec<(u64, i64, u64)> = got.iter().map(|s| (s.1, s.3, s.4)).collect();
    assert_eq!(lines, vec![(12, 2 * MIB, 2), (13, 2 * MIB, 1)]);
    // The run's peak is elsewhere: the 5 MiB after the calls.
    let (run_peak, _) = sites(&report);
    assert_eq!(run_peak["allocated_bytes"], 7 * MIB);
    assert_eq!(run_peak["reached"]["site"]["line"], 19);
}

/// `peak_sites.py` run as ranks 0 and 1 of 2, each writing its report to `template`.
fn two_ranks_of_peak_sites(template: &str) {
    for rank in [0, 1] {
        let out = as_rank(rank, 2)
            .args([
                "--device",
                device_flag(),
                "run",
                "-o",
                template,
                "peak_sites.py",
            ])
            .output()
            .expect("memprof starts");
        let r = finish(out);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
}

#[test]
fn show_merge_diff_and_plot_read_the_peak() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    two_ranks_of_peak_sites(&path("r{rank}.json"));
    let show = finish(memprof().args(["show", &path("r0.json")]).output().unwrap());
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(
        show.stdout.contains("Peak: 11.00 MiB allocated"),
        "{}",
        show.stdout
    );

    let merged = finish(
        memprof()
            .args([
                "merge",
                &path("r0.json"),
                &path("r1.json"),
                "--format",
                "json",
            ])
            .output()
            .unwrap(),
    );
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    let m = merged.json();
    assert_eq!(m["peak"]["allocated_bytes"]["max"], 11 * MIB);
    assert_eq!(m["peak"]["ranks"].as_array().unwrap().len(), 2);
    let spike = &m["peak"]["sites"][0];
    assert_eq!(spike["line"], 35);
    assert_eq!(spike["bytes"]["min"], 4 * MIB);
    assert_eq!(spike["bytes"]["imbalance"], 0);
    let table = finish(
        memprof()
            .args(["merge", &path("r0.json"), &path("r1.json")])
            .output()
            .unwrap(),
    );
    assert!(
        table.stdout.contains("Peak over 2 ranks"),
        "{}",
        table.stdout
    );

    let other = path("other.json");
    let r = run(&["-o", &other, "peak_backward.py", "--spike"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let diff = finish(
        memprof()
            .args(["diff", &path("r0.json"), &other, "--format", "json"])
            .output()
            .unwrap(),
    );
    assert_eq!(diff.code, 0, "{}", diff.stderr);
    let d = diff.json();
    assert_eq!(d["peak"]["allocated_bytes"]["base"], 11 * MIB);
    let removed = d["peak"]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["line"] == 35)
        .expect("the spike's site");
    assert_eq!(removed["status"], "removed");
    assert_eq!(removed["bytes"]["change"], -4 * MIB);

    let svg = path("peak.svg");
    let plot = finish(
        memprof()
            .args(["plot", &path("r0.json"), &path("r1.json"), "-o", &svg])
            .output()
            .unwrap(),
    );
    assert_eq!(plot.code, 0, "{}", plot.stderr);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.contains("The peak by the line that allocated it"),
        "{text}"
    );
    assert!(
        text.contains("peak_sites.py:35 &lt;module&gt;")
            || text.contains("peak_sites.py:35 <module>")
    );
}

#[test]
fn compiled_code_is_attributed_to_the_line_that_called_it_never_to_generated_files() {
    let (r, report) = profile(&[], &["compiled_model.py", "--backend", "inductor"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // What the program prints, and nothing of memprof's own work (no warning of torch's).
    assert!(
        r.stdout.starts_with("out ") && r.stdout.contains(" grad "),
        "{}",
        r.stdout
    );
    // (torch's own warnings, such as inductor's about TF32 on a GPU, are the program's.)
    assert!(!r.stderr.contains("FakeTensor"), "{}", r.stderr);
    let (peak, got) = sites(&report);
    assert_sums_to_the_peak(peak);
    for s in peak["sites"].as_array().unwrap() {
        let file = s["file"].as_str().unwrap();
        assert!(!file.contains("torchinductor"), "a generated file: {s}");
        assert!(file.ends_with("compiled_model.py"), "{s}");
    }
    assert_eq!(
        peak["sites"][0]["source"], "out = compiled(x)",
        "the compiled call's line first: {got:?}"
    );
    // Reached in the compiled forward, or (on a GPU) in its compiled backward, which autograd's
    // threads run for the line that called backward().
    let reached = peak["reached"]["site"]["source"].as_str().unwrap();
    assert!(
        ["out = compiled(x)", "out.sum().backward()"].contains(&reached),
        "{reached}"
    );
}

#[test]
fn an_optimizers_step_names_its_parameters_and_state_though_they_are_gone_at_the_end() {
    let (r, report) = profile(&[], &["peak_optimizer.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (peak, _) = sites(&report);
    assert_sums_to_the_peak(peak);
    assert_eq!(
        peak["reached"]["site"]["source"],
        "spike = torch.empty(16 * MiB, dtype=torch.uint8, device=DEV)"
    );
    // Linear(512, 512): a 1 MiB weight and a 2 KiB bias.
    let params = site(peak, "torch.nn.Linear(512, 512)");
    assert_eq!(params["bytes"], MIB + 2 * KIB);
    assert_eq!(
        params["categories"],
        serde_json::json!({ "parameters": MIB + 2 * KIB })
    );
    // Adam's exp_avg and exp_avg_sq of both (and, on the CPU, its step counters).
    let state = site(peak, "opt.step()");
    assert!(state["bytes"].as_i64().unwrap() >= 2 * (MIB + 2 * KIB));
    assert_eq!(
        state["categories"],
        serde_json::json!({ "optimizer_state": state["bytes"] })
    );
}

/// A rank whose report has no peak (on two GPUs, rank 1 measured cuda:0 where it allocated
/// nothing, before memprof followed `torch.cuda.set_device`): `merge` names it, and takes no max,
/// min or imbalance from the one rank that has a peak.
#[test]
fn merge_names_a_rank_without_a_peak_instead_of_imbalance_zero() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    two_ranks_of_peak_sites(&path("r{rank}.json"));
    // Rank 1's report as the landed build wrote it on two GPUs: no peak record.
    let r1 = path("r1.json");
    let mut report: Value = serde_json::from_str(&std::fs::read_to_string(&r1).unwrap()).unwrap();
    report.as_object_mut().unwrap().remove("peak");
    std::fs::write(&r1, serde_json::to_string(&report).unwrap()).unwrap();

    let merged = finish(
        memprof()
            .args(["merge", &path("r0.json"), &r1, "--format", "json"])
            .output()
            .unwrap(),
    );
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    let m = merged.json();
    assert_eq!(m["peak"]["ranks_without_peak"], serde_json::json!([1]));
    assert_eq!(m["peak"]["ranks"].as_array().unwrap().len(), 1);
    let table = finish(
        memprof()
            .args(["merge", &path("r0.json"), &r1])
            .output()
            .unwrap(),
    );
    assert!(
        table
            .stdout
            .contains("Peak of rank 0 only: allocated_bytes.all.peak 11.00 MiB")
            && table
                .stdout
                .contains("No peak: rank 1 (their reports have none")
            && !table.stdout.contains("imbalance 0 B"),
        "{}",
        table.stdout
    );
}

#[test]
fn blocks_made_again_from_the_same_frames_or_by_code_made_anew_keep_their_own_lines() {
    let (r, report) = profile(&[], &["peak_same_frames.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (peak, mut got) = sites(&report);
    got.sort();
    assert_eq!(
        got,
        vec![
            // One line, two callers: each caller's blocks at their own context.
            m("peak_same_frames.py", 11, "make", 6 * MIB, 6),
            m("peak_same_frames.py", 11, "make", 9 * MIB, 3),
            // The function's line in each of its codes (lines 100 apart), never an earlier
            // code's whose address it took.
            m("peak_same_frames.py", 30, "fresh", MIB, 1),
            // Six lines of one function run from the same frames three times: each its own.
            m("peak_same_frames.py", 47, "six_lines", 3 * MIB, 3),
            m("peak_same_frames.py", 48, "six_lines", 6 * MIB, 3),
            m("peak_same_frames.py", 49, "six_lines", 9 * MIB, 3),
            m("peak_same_frames.py", 50, "six_lines", 12 * MIB, 3),
            m("peak_same_frames.py", 51, "six_lines", 15 * MIB, 3),
            m("peak_same_frames.py", 52, "six_lines", 18 * MIB, 3),
            m("peak_same_frames.py", 130, "fresh", 2 * MIB, 1),
            m("peak_same_frames.py", 230, "fresh", 3 * MIB, 1),
            m("peak_same_frames.py", 330, "fresh", 4 * MIB, 1),
            m("peak_same_frames.py", 430, "fresh", 5 * MIB, 1),
            m("peak_same_frames.py", 530, "fresh", 6 * MIB, 1),
        ]
    );
    let contexts: Vec<(i64, u64)> = peak["sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["line"] == 11)
        .map(|s| {
            (
                s["bytes"].as_i64().unwrap(),
                s["context"]["line"].as_u64().unwrap(),
            )
        })
        .collect();
    assert!(contexts.contains(&(6 * MIB, 15)), "{contexts:?}");
    assert!(contexts.contains(&(9 * MIB, 19)), "{contexts:?}");
    assert_eq!(peak["allocated_bytes"], 99 * MIB);
}
