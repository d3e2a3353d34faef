//! Exact per-line numbers on fixtures with known allocations: each measuring rule of the README
//! ("What the numbers mean") is pinned here. The same expectations hold on CUDA (sizes are
//! multiples of the caching allocator's block sizes).
use crate::common::*;

const STATS: &[&str] = &[
    "allocated_bytes.all.peak",
    "allocated_bytes.all.current",
    "allocated_bytes.all.allocated",
    "allocated_bytes.all.freed",
    "allocation.all.current",
];

#[test]
fn each_line_gets_its_exact_bytes_and_hits_sum_amounts_and_max_levels() {
    let (r, report) = profile(STATS, &["-f", "step", "-f", "loop", "lines.py", "x"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.is_empty() || !r.stderr.contains("Traceback"),
        "{}",
        r.stderr
    );
    let step = function(&report, "step");
    assert_eq!(step["calls"], 2);
    assert_eq!(step["peak_allocated_bytes"], 8 * MIB + 512 * KIB);

    let a = line(step, "a = torch.empty");
    assert_eq!(hits(a), 2);
    assert_eq!(delta(a), 8 * MIB, "Δ sums over hits");
    assert_eq!(
        stat(a, "allocated_bytes.all.peak"),
        4 * MIB,
        "peak is the maximum over hits"
    );
    assert_eq!(stat(a, "allocated_bytes.all.current"), 4 * MIB);
    assert_eq!(
        stat(a, "allocated_bytes.all.allocated"),
        8 * MIB,
        "amounts sum over hits"
    );
    assert_eq!(stat(a, "allocated_bytes.all.freed"), 0);
    assert_eq!(stat(a, "allocation.all.current"), 1);

    let b = line(step, "b = torch.empty");
    assert_eq!(delta(b), 768 * KIB);
    assert_eq!(stat(b, "allocated_bytes.all.peak"), 4 * MIB + 512 * KIB);
    assert_eq!(stat(b, "allocated_bytes.all.allocated"), 768 * KIB);

    let c = line(step, "c = a.clone()");
    assert_eq!(delta(c), 8 * MIB);
    assert_eq!(stat(c, "allocated_bytes.all.peak"), 8 * MIB + 512 * KIB);
    assert_eq!(stat(c, "allocation.all.current"), 3);

    let del = line(step, "del a");
    assert_eq!(delta(del), -8 * MIB);
    assert_eq!(stat(del, "allocated_bytes.all.freed"), 8 * MIB);
    assert_eq!(
        stat(del, "allocated_bytes.all.current"),
        4 * MIB + 512 * KIB,
        "current is the value at the end"
    );
    assert_eq!(
        stat(del, "allocated_bytes.all.peak"),
        8 * MIB + 512 * KIB,
        "peak includes the value at the start"
    );

    // The last line of a call lasts until the caller resumes: it includes the release of the
    // frame's locals (b and c), so a function's Δ adds up to what its calls left allocated.
    let ret = line(step, "return c.numel()");
    assert_eq!(hits(ret), 2);
    assert_eq!(delta(ret), -(8 * MIB + 768 * KIB));
    assert_eq!(stat(ret, "allocated_bytes.all.current"), 0);
    assert_eq!(stat(ret, "allocated_bytes.all.freed"), 8 * MIB + 768 * KIB);
    assert_eq!(delta_sum(step), 0);

    let def = line(step, "def step");
    assert_eq!(hits(def), 0);
    assert!(
        def.get("delta_bytes").is_none() && def.get("stats").is_none(),
        "lines that never ran stay blank"
    );

    let lp = function(&report, "loop");
    assert_eq!(
        hits(line(lp, "for i in range")),
        4,
        "a for line runs once per iteration plus the exit"
    );
    let append = line(lp, "keep.append");
    assert_eq!(hits(append), 3);
    assert_eq!(delta(append), 6 * KIB);
    assert_eq!(stat(append, "allocated_bytes.all.allocated"), 6 * KIB);
    assert_eq!(stat(append, "allocated_bytes.all.current"), 6 * KIB);
    let tmp = line(lp, "tmp = torch.empty");
    assert_eq!(stat(tmp, "allocated_bytes.all.peak"), 70 * KIB);
    let del_tmp = line(lp, "del tmp");
    assert_eq!(delta(del_tmp), -64 * KIB);
    assert_eq!(stat(del_tmp, "allocated_bytes.all.freed"), 64 * KIB);
    assert_eq!(
        delta(line(lp, "return len(keep)")),
        -6 * KIB,
        "the list's tensors die with the frame"
    );
    assert_eq!(delta_sum(lp), 0);
}

#[test]
fn recursion_keeps_state_per_frame() {
    let (r, report) = profile(STATS, &["-f", "rec", "recursion.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let rec = function(&report, "rec");
    assert_eq!(rec["calls"], 3);
    let x = line(rec, "x = torch.empty");
    assert_eq!(hits(x), 3);
    assert_eq!(delta(x), 6 * KIB);
    assert_eq!(stat(x, "allocated_bytes.all.current"), 6 * KIB);
    let call = line(rec, "rec(n - 1)");
    assert_eq!(hits(call), 2);
    // The callee's x is freed when its frame ends, inside the caller's line.
    assert_eq!(delta(call), 0);
    assert_eq!(stat(call, "allocated_bytes.all.peak"), 6 * KIB);
    assert_eq!(stat(call, "allocated_bytes.all.current"), 5 * KIB);
    let ret = line(rec, "return x.numel()");
    assert_eq!(hits(ret), 3);
    assert_eq!(
        delta(ret),
        -6 * KIB,
        "each frame's x is released when it returns"
    );
    assert_eq!(stat(ret, "allocated_bytes.all.current"), 5 * KIB);
    assert_eq!(delta_sum(rec), 0);
}

#[test]
fn generators_and_coroutines_resume_the_line_they_yielded_from() {
    let (r, report) = profile(STATS, &["-f", "gen", "-f", "coro", "generators.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let gen = function(&report, "gen");
    assert_eq!(
        gen["calls"], 2,
        "two generator frames, resumptions are not calls"
    );
    let a = line(gen, "a = torch.empty");
    assert_eq!((hits(a), delta(a)), (2, 16 * KIB));
    let y = line(gen, "yield a.numel()");
    assert_eq!(hits(y), 2, "a resumed line is not a new hit");
    let b = line(gen, "b = torch.empty");
    assert_eq!((hits(b), delta(b)), (2, 32 * KIB));
    assert_eq!(stat(b, "allocated_bytes.all.peak"), 48 * KIB);

    let coro = function(&report, "coro");
    assert_eq!(coro["calls"], 1);
    assert_eq!(delta(line(coro, "c = torch.empty")), 2 * KIB);
    assert_eq!(hits(line(coro, "await asyncio.sleep(0)")), 1);
    let d = line(coro, "d = torch.empty");
    assert_eq!(delta(d), 4 * KIB);
    // The two suspended generators still hold 48 KiB.
    assert_eq!(stat(d, "allocated_bytes.all.peak"), 54 * KIB);
    assert_eq!(delta(line(coro, "return c.numel()")), -6 * KIB);
}

#[test]
fn a_callers_line_includes_its_targeted_callee() {
    let (r, report) = profile(STATS, &["-f", "inner", "-f", "outer", "nested.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let inner = function(&report, "inner");
    assert_eq!(
        stat(line(inner, "u = torch.empty"), "allocated_bytes.all.peak"),
        150 * KIB
    );
    assert_eq!(delta(line(inner, "del u")), -50 * KIB);
    let outer = function(&report, "outer");
    let call = line(outer, "keep = inner()");
    assert_eq!(delta(call), 100 * KIB);
    assert_eq!(
        stat(call, "allocated_bytes.all.peak"),
        150 * KIB,
        "the callee's peak is inside the caller's line"
    );
    assert_eq!(stat(call, "allocated_bytes.all.allocated"), 150 * KIB);
    assert_eq!(stat(call, "allocated_bytes.all.freed"), 50 * KIB);
    assert_eq!(
        delta(line(inner, "return t")),
        0,
        "t lives on in the caller"
    );
    assert_eq!(delta(line(outer, "return keep.numel()")), -100 * KIB);
}

#[test]
fn targets_on_other_threads_are_measured() {
    let (r, report) = profile(STATS, &["-f", "worker", "threads.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let worker = function(&report, "worker");
    assert_eq!(worker["calls"], 2);
    let w = line(worker, "w = torch.empty");
    assert_eq!((hits(w), delta(w)), (2, 64 * KIB));
    assert_eq!(stat(w, "allocated_bytes.all.peak"), 32 * KIB);
    assert_eq!(delta(line(worker, "del w")), -64 * KIB);
}

#[test]
fn exceptions_mark_the_lines_they_leave_from_and_still_report() {
    let (r, report) = profile(STATS, &["-f", "fail", "-f", "caught", "raises.py"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("Traceback (most recent call last)"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("\nValueError: boom\n"), "{}", r.stderr);
    assert_eq!(report["metadata"]["outcome"]["status"], "exception");
    assert_eq!(
        report["metadata"]["outcome"]["exception"],
        "ValueError: boom"
    );
    let fail = function(&report, "fail");
    let raise = line(fail, "raise ValueError");
    assert_eq!((hits(raise), raise["raised"].as_u64()), (2, Some(2)));
    assert_eq!(delta(line(fail, "x = torch.empty")), 8 * KIB);
    let caught = function(&report, "caught");
    let lines: Vec<(u64, u64)> = caught["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["source"].as_str().unwrap().trim() == "fail()")
        .map(|l| (hits(l), l["raised"].as_u64().unwrap_or(0)))
        .collect();
    assert_eq!(
        lines,
        vec![(1, 0), (1, 1)],
        "caught inside the frame: not raised; uncaught: raised"
    );
}

#[test]
fn an_out_of_memory_error_still_produces_the_report_and_marks_its_line() {
    let mut stats = vec!["allocated_bytes.all.current"];
    if on_cuda() {
        stats.push("num_ooms");
    }
    let (r, report) = profile(&stats, &["-f", "grow", "oom.py"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let outcome = &report["metadata"]["outcome"];
    assert_eq!(outcome["status"], "exception");
    if on_cuda() {
        assert!(
            outcome["exception"]
                .as_str()
                .unwrap()
                .starts_with("OutOfMemoryError: CUDA out of memory"),
            "{outcome}"
        );
    }
    let grow = function(&report, "grow");
    let huge = line(grow, "huge = torch.empty");
    assert_eq!(huge["raised"].as_u64(), Some(1));
    assert_eq!(delta(huge), 0);
    assert_eq!(
        stat(
            line(grow, "small = torch.empty"),
            "allocated_bytes.all.current"
        ),
        KIB
    );
    if on_cuda() {
        assert_eq!(stat(huge, "num_ooms"), 1);
    }
}

#[test]
fn a_returning_line_ends_when_its_caller_moves_on_within_the_statement() {
    // `keep += [C.s(), C.c(), ex()]`: C.c returns 2 MiB that the caller keeps; ex, called next
    // in the same statement, allocates 1 MiB that is not C.c's.
    let (r, report) = profile(
        &["allocated_bytes.all.current"],
        &["-f", "C.c", "returning.py"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let c = function(&report, "C.c");
    let ret = line(c, "return torch.ones(512, 1024");
    assert_eq!(hits(ret), 2);
    assert_eq!(delta(ret), 4 * MIB, "2 MiB per call, without ex()'s MiB");
    assert_eq!(delta_sum(c), 4 * MIB);
}

#[test]
fn host_memory_columns_show_rss_its_peak_within_a_line_and_vms() {
    // Line 10 fills a 256 MiB CPU tensor and frees it within the line (large blocks go back to
    // the OS), line 11 keeps 64 MiB: RSS's peak shows the first, its current value the second.
    let (r, report) = profile(
        &[
            "host_rss_bytes.peak",
            "host_rss_bytes.current",
            "host_vms_bytes.current",
        ],
        &["-f", "host", "host_memory.py"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let f = function(&report, "host");
    let temp = line(f, "torch.ones(64 * MiB).sum()");
    let kept = line(f, "keep = torch.ones(16 * MiB)");
    let (peak, current) = (
        stat(temp, "host_rss_bytes.peak"),
        stat(temp, "host_rss_bytes.current"),
    );
    assert!(
        (250 * MIB..300 * MIB).contains(&(peak - current)),
        "the 256 MiB that lived within the line: peak {peak}, current {current}"
    );
    let rise = stat(kept, "host_rss_bytes.current") - current;
    assert!((60 * MIB..72 * MIB).contains(&rise), "64 MiB kept: {rise}");
    for l in [temp, kept] {
        assert!(stat(l, "host_vms_bytes.current") >= stat(l, "host_rss_bytes.current"));
        assert!(stat(l, "host_rss_bytes.peak") >= stat(l, "host_rss_bytes.current"));
    }
}
