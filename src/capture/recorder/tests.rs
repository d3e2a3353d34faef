//! The recorder's state machine on a hand-driven allocator (`TestTorch`): lines, returns,
//! generators, exceptions, threads and the schedule, with exact bytes.
use super::*;
use crate::capture::test_torch::TestTorch;
use crate::model::stats;

const MAIN: usize = 1;
const OTHER: usize = 2;
/// The untargeted frame that calls the targeted function, and its code object.
const CALLER: Caller = Caller {
    frame: 900,
    code: 901,
};
const CODE: usize = 100;

/// A recorder measuring `allocated_bytes.all.current` and `.peak` on the CPU, with `step`
/// (lines 1 to 5) registered as function 0.
/// allocated_bytes.all.current and .peak among `all` (a device's stats).
fn allocated_columns(all: Vec<stats::StatDef>) -> Vec<stats::StatDef> {
    ["allocated_bytes.all.current", "allocated_bytes.all.peak"]
        .iter()
        .map(|k| all.iter().find(|s| s.key == *k).expect("a stat").clone())
        .collect()
}

fn recorder(options: Options) -> (Recorder<TestTorch>, TestTorch) {
    let torch = TestTorch::default();
    let chosen = allocated_columns(stats::cpu_stats());
    let mut r = Recorder::with_runtime(torch.clone(), Source::Cpu, chosen, options);
    assert!(r.register(CODE, "step".into(), "t.py".into(), (1, 5), "step".into()));
    (r, torch)
}

/// (hits, raised, Δ, current at the end, peak) of a line of `step`.
fn line(r: &Recorder<TestTorch>, line: u32) -> (u64, u64, i64, i64, i64) {
    let agg = &r.functions[0].lines[&line];
    (
        agg.hits,
        agg.raised,
        agg.delta,
        agg.values[0],
        agg.values[1],
    )
}

fn start(r: &mut Recorder<TestTorch>, frame: usize, thread: usize) {
    r.on_enter(frame, 0, false, thread, CALLER, |_| true);
}

#[test]
fn each_line_gets_its_bytes_and_a_returning_line_ends_when_its_caller_moves_on() {
    let (mut r, torch) = recorder(Options::default());
    start(&mut r, 1, MAIN);
    assert_eq!(r.take_watch_changes(), Some(vec![(CALLER.code, true)]));
    r.on_line(1, 0, 2, MAIN);
    torch.alloc(1000);
    r.on_line(1, 0, 3, MAIN);
    torch.alloc(500);
    torch.free(500);
    r.on_line(1, 0, 4, MAIN);
    torch.free(600);
    r.on_exit(1, false, MAIN);
    assert!(r.has_returning());
    // The frame's locals go after the return: still the returning line's.
    torch.free(400);
    r.on_caller_event(CALLER.frame, MAIN);
    assert!(!r.has_returning());
    assert_eq!(r.take_watch_changes(), Some(vec![(CALLER.code, false)]));
    assert_eq!(line(&r, 2), (1, 0, 1000, 1000, 1000));
    assert_eq!(line(&r, 3), (1, 0, 0, 1000, 1500));
    assert_eq!(line(&r, 4), (1, 0, -1000, 0, 1000));
    assert_eq!(r.functions[0].calls, 1);
    // What the caller does next is not the function's.
    torch.alloc(7);
    r.on_caller_event(CALLER.frame, MAIN);
    assert_eq!(line(&r, 4).2, -1000);
}

#[test]
fn a_generator_resuming_a_line_continues_that_hit() {
    let (mut r, torch) = recorder(Options::default());
    start(&mut r, 1, MAIN);
    r.on_line(1, 0, 2, MAIN);
    torch.alloc(100);
    r.on_yield(1, MAIN);
    // Between yield and resume the caller's work is nobody's line.
    torch.alloc(5000);
    r.on_caller_event(CALLER.frame, MAIN);
    r.on_enter(1, 0, true, MAIN, CALLER, |_| true);
    torch.alloc(50);
    r.on_line(1, 0, 3, MAIN);
    assert_eq!(line(&r, 2), (1, 0, 150, 5150, 5150));
    assert_eq!(r.functions[0].calls, 1, "a resume is not a call");
}

#[test]
fn an_exception_leaving_a_frame_marks_its_line_raised() {
    let (mut r, torch) = recorder(Options::default());
    // Reported (3.11): the line closes at once, raised.
    start(&mut r, 1, MAIN);
    r.on_line(1, 0, 2, MAIN);
    torch.alloc(64);
    r.on_exit(1, true, MAIN);
    assert!(!r.has_returning());
    assert_eq!(line(&r, 2), (1, 1, 64, 64, 64));
    // Not reported (3.12): the next frame to start, not a descendant, finds it gone.
    start(&mut r, 2, MAIN);
    r.on_line(2, 0, 3, MAIN);
    torch.alloc(8);
    r.on_enter(3, 0, false, MAIN, CALLER, |_| false);
    assert_eq!(line(&r, 3), (1, 1, 8, 72, 72));
}

#[test]
fn an_uncaught_exception_ends_every_frame_of_its_thread() {
    let (mut r, torch) = recorder(Options::default());
    start(&mut r, 1, MAIN);
    r.on_line(1, 0, 2, MAIN);
    torch.alloc(32);
    r.on_uncaught(MAIN);
    assert_eq!(line(&r, 2), (1, 1, 32, 32, 32));
    let ended = r.take_ended();
    assert_eq!(ended, None, "only collected with --tensors");
}

#[test]
fn threads_keep_their_own_frames_and_their_own_deltas() {
    let (mut r, torch) = recorder(Options::default());
    torch.on_thread(MAIN);
    start(&mut r, 1, MAIN);
    r.on_line(1, 0, 2, MAIN);
    torch.alloc(100);
    torch.on_thread(OTHER);
    start(&mut r, 2, OTHER);
    r.on_line(2, 0, 2, OTHER);
    torch.alloc(300);
    torch.on_thread(MAIN);
    r.on_line(1, 0, 3, MAIN);
    torch.on_thread(OTHER);
    r.on_line(2, 0, 3, OTHER);
    // Each hit counts its own thread's bytes: 100 and 300, not the device's 400 twice.
    let (hits, raised, delta, current, peak) = line(&r, 2);
    assert_eq!((hits, raised, delta), (2, 0, 400));
    assert_eq!(
        (current, peak),
        (400, 400),
        "levels and peaks are the device's"
    );
    assert!(!r.settled_on(MAIN) && !r.settled_on(OTHER));
}

#[test]
fn the_schedule_measures_the_calls_after_the_warmup_then_finishes() {
    let options = Options {
        warmup: 1,
        calls: Some(1),
        ..Options::default()
    };
    let (mut r, torch) = recorder(options);
    let call = |r: &mut Recorder<TestTorch>, frame: usize, bytes: i64| {
        start(r, frame, MAIN);
        let measuring = r.measuring();
        r.on_line(frame, 0, 2, MAIN);
        torch.alloc(bytes);
        r.on_exit(frame, false, MAIN);
        r.on_caller_event(CALLER.frame, MAIN);
        measuring
    };
    assert!(!call(&mut r, 1, 10), "the warm-up call is not measured");
    assert!(r.functions[0].lines.is_empty());
    assert!(!r.take_finished());
    assert!(call(&mut r, 2, 20));
    assert_eq!(line(&r, 2), (1, 0, 20, 30, 30));
    assert_eq!(r.functions[0].measured, Some((2, 2)));
    assert!(r.take_finished(), "every target had its calls");
    assert!(!r.take_finished(), "said once");
    r.stop_early();
    assert!(r.stopped_early());
    assert_eq!(r.function_of(CODE), None, "later events find nothing");
}

#[test]
fn allocated_now_is_read_at_a_new_sample() {
    let torch = TestTorch::cuda();
    let chosen = allocated_columns(stats::cuda_stats());
    let mut r = Recorder::with_runtime(torch.clone(), Source::Cuda(0), chosen, Options::default());
    let reads = torch.device_reads();
    torch.alloc(1000);
    torch.alloc(16);
    assert_eq!(r.allocated_now(), 1016);
    assert_eq!(torch.device_reads(), reads + 1);
}

#[test]
fn tensors_tag_allocations_with_the_running_line_and_list_the_calls_that_ended() {
    let (mut r, torch) = recorder(Options::default());
    r.collect_ended_calls();
    start(&mut r, 1, MAIN);
    r.on_line(1, 0, 3, MAIN);
    assert_eq!(crate::torch::tags::decode(torch.tag()), Some((0, 3)));
    assert_eq!(
        r.created_at(0xdead),
        Some(("step".to_string(), "t.py".to_string(), 3))
    );
    r.on_exit(1, true, MAIN);
    assert_eq!(torch.tag(), 0, "no targeted line runs");
    assert_eq!(
        r.take_ended(),
        Some(vec![EndedCall {
            func: 0,
            call: 1,
            raised: true
        }])
    );
}

#[test]
fn the_schedules_rule_names_the_measured_calls_and_the_last() {
    use super::schedule::verdict;
    let judged: Vec<(bool, bool)> = (1..=5).map(|n| verdict(n, 2, Some(2))).collect();
    assert_eq!(
        judged,
        [
            (false, false),
            (false, false),
            (true, false),
            (true, true),
            (false, false)
        ]
    );
    assert_eq!(
        verdict(9, 2, None),
        (true, false),
        "no --calls: all after the warm-up"
    );
    assert_eq!(verdict(1, 0, None), (true, false));
}
