//! The tracker's rules on hand-made event sequences.
use super::*;

fn cpu(t: &mut Tracker, ptr: u64, bytes: i64, site: u32) {
    t.on_event(ptr, bytes, site, false, None);
}

fn shares(c: &Composition) -> Vec<(u32, i64, u64)> {
    c.sites
        .iter()
        .map(|s| (s.site, s.bytes, s.blocks))
        .collect()
}

#[test]
fn the_peak_is_the_sites_live_at_the_maximum_and_they_sum_to_it() {
    let mut t = Tracker::default();
    cpu(&mut t, 1, 100, 1);
    cpu(&mut t, 2, 50, 2);
    cpu(&mut t, 3, 30, 2); // maximum: 180
    cpu(&mut t, 2, -50, 0);
    cpu(&mut t, 4, 60, 3); // 190: a new maximum
    cpu(&mut t, 4, -60, 0);
    cpu(&mut t, 5, 10, 3); // 140: below it
    let peak = t.peak().expect("a peak");
    assert_eq!(peak.moment.allocated, 190);
    assert_eq!(peak.moment.site, 3);
    assert_eq!(peak.moment.allocation, 4);
    assert_eq!(shares(&peak), vec![(1, 100, 1), (2, 30, 1), (3, 60, 1)]);
    assert_eq!(peak.sites.iter().map(|s| s.bytes).sum::<i64>(), 190);
    assert_eq!(peak.unseen_bytes, 0);
}

#[test]
fn a_maximum_with_no_free_after_it_is_copied_at_the_end() {
    let mut t = Tracker::default();
    cpu(&mut t, 1, 10, 1);
    cpu(&mut t, 2, 20, 2);
    let peak = t.peak().expect("a peak");
    assert_eq!(peak.moment.allocated, 30);
    assert_eq!(shares(&peak), vec![(1, 10, 1), (2, 20, 1)]);
}

#[test]
fn cpu_bytes_live_before_tracking_count_in_the_peak_until_freed() {
    let mut t = Tracker::default();
    t.live_before(100); // an earlier session's tensors
    cpu(&mut t, 1, 50, 1); // 150: the maximum, 100 of it from before
    cpu(&mut t, 9, -60, 0); // a block from before is freed: 40 of them left
    cpu(&mut t, 2, 100, 2); // 190, the session's own 150
    cpu(&mut t, 2, -100, 0);
    cpu(&mut t, 9, -999, 0); // more than is left from before: none, never less
    cpu(&mut t, 3, 10, 3);
    let peak = t.peak().expect("a peak");
    assert_eq!(peak.moment.allocated, 190);
    assert_eq!(shares(&peak), vec![(1, 50, 1), (2, 100, 1)]);
    assert_eq!(peak.unseen_bytes, 40);
    assert_eq!(t.seen_max(), 150);
    assert_eq!(t.last_total, 60);
}

#[test]
fn the_allocators_totals_show_what_memprof_did_not_see() {
    let mut t = Tracker::default();
    // CUDA: 1000 bytes were allocated before tracking started.
    t.on_event(1, 512, 4, true, Some((1512, 2048)));
    t.on_event(1, -512, 0, false, Some((1000, 2048)));
    let peak = t.peak().expect("a peak");
    assert_eq!(peak.moment.allocated, 1512);
    assert_eq!(peak.moment.reserved, 2048);
    assert!(peak.moment.in_backward);
    assert_eq!(shares(&peak), vec![(4, 512, 1)]);
    assert_eq!(peak.unseen_bytes, 1000);
}

#[test]
fn a_functions_peak_counts_only_while_its_calls_run() {
    let mut t = Tracker::default();
    cpu(&mut t, 1, 100, 1);
    t.function_started(7);
    cpu(&mut t, 2, 40, 2); // 140 inside the call
    cpu(&mut t, 2, -40, 0);
    t.function_ended(7);
    cpu(&mut t, 3, 500, 3); // 600 outside it
    let f = t.function_peak(7).expect("the function's peak");
    assert_eq!(f.moment.allocated, 140);
    assert_eq!(shares(&f), vec![(1, 100, 1), (2, 40, 1)]);
    assert_eq!(t.peak().expect("a peak").moment.allocated, 600);
}

#[test]
fn a_function_whose_calls_only_free_peaks_at_its_start() {
    let mut t = Tracker::default();
    cpu(&mut t, 1, 100, 1);
    t.function_started(9);
    cpu(&mut t, 1, -100, 0);
    t.function_ended(9);
    let f = t.function_peak(9).expect("the function's peak");
    assert_eq!(f.moment.allocated, 100);
    assert_eq!(f.moment.site, UNKNOWN_SITE);
    assert_eq!(shares(&f), vec![(1, 100, 1)]);
}

#[test]
fn a_reused_address_replaces_a_block_freed_unseen() {
    let mut t = Tracker::default();
    cpu(&mut t, 1, 100, 1);
    cpu(&mut t, 1, 30, 2);
    assert_eq!(t.block(1), Some((2, 2, 30, Role::Other)));
    let peak = t.peak().expect("a peak");
    assert_eq!(peak.moment.allocated, 100);
    assert_eq!(shares(&peak), vec![(1, 100, 1)]);
}

#[test]
fn what_a_backward_leaves_live_is_a_gradient_also_in_the_peak_taken_during_it() {
    let mut t = Tracker::default();
    cpu(&mut t, 1, 100, 1); // a parameter
    let since = t.serial();
    t.on_event(2, 100, 9, true, None); // the gradient
    t.on_event(3, 400, 9, true, None); // an intermediate: the maximum, 600
    t.on_event(3, -400, 0, false, None);
    t.mark_gradients(since);
    t.on_event(2, -100, 0, false, None); // zero_grad(set_to_none=True)
    let peak = t.peak().expect("a peak");
    assert_eq!(peak.moment.allocated, 600);
    assert_eq!(shares(&peak), vec![(1, 100, 1), (9, 500, 2)]);
    assert_eq!(peak.role_bytes.get(&(9, Role::Gradients)), Some(&100));
    assert_eq!(peak.role_bytes.get(&(1, Role::Gradients)), None);
}

#[test]
fn a_role_learnt_later_reaches_the_copies_of_maxima_the_block_was_live_at() {
    let mut t = Tracker::default();
    cpu(&mut t, 1, 100, 1); // a parameter
    cpu(&mut t, 2, 300, 2); // the maximum, 400
    cpu(&mut t, 2, -300, 0);
    cpu(&mut t, 3, 50, 3); // optimizer state, after the maximum
    t.mark_role(1, Role::Parameters);
    t.mark_role(3, Role::OptimizerState);
    t.mark_role(99, Role::Parameters); // not a block memprof knows: ignored
    let peak = t.peak().expect("a peak");
    assert_eq!(peak.role_bytes.get(&(1, Role::Parameters)), Some(&100));
    assert_eq!(peak.role_bytes.get(&(3, Role::OptimizerState)), None);
    // A role changes: the bytes move.
    t.mark_role(1, Role::Gradients);
    let peak = t.peak().expect("a peak");
    assert_eq!(peak.role_bytes.get(&(1, Role::Parameters)), Some(&0));
    assert_eq!(peak.role_bytes.get(&(1, Role::Gradients)), Some(&100));
}

#[test]
fn a_function_that_runs_compiled_peaks_at_the_allocations_of_its_buffers() {
    let mut t = Tracker::default();
    // Function 7 has no call of its own: site 1 holds its compiled buffers.
    t.attribute_site(1, &[7]);
    cpu(&mut t, 1, 100, 2); // another site: not the function's
    cpu(&mut t, 2, 40, 1); // 140: the function's maximum so far
    cpu(&mut t, 3, 20, 1); // 160
    cpu(&mut t, 2, -40, 0);
    cpu(&mut t, 4, 500, 2); // 620: the run's, not the function's
    cpu(&mut t, 4, -500, 0);
    cpu(&mut t, 5, 10, 1); // 130: below its maximum
    let own = t.function_peak(7).expect("its peak");
    assert_eq!((own.moment.allocated, own.moment.site), (160, 1));
    assert_eq!(shares(&own), vec![(1, 60, 2), (2, 100, 1)]);
    assert_eq!(t.peak().unwrap().moment.allocated, 620);
    assert_eq!(t.site_totals(1), (3, 70, 0));
}

/// An event as the reporter gives it on the CPU.
fn event(ptr: u64, bytes: i64, site: u32, in_backward: bool, in_module: bool) -> Event {
    Event {
        ptr,
        bytes,
        site,
        in_backward,
        in_module,
        totals: None,
    }
}

#[test]
fn each_block_of_the_peak_is_named_by_how_its_life_ended() {
    let mut t = Tracker::default();
    // Sites: 1 the batch's line, 2 the model's line (its forward), 3 the backward's line.
    t.record(event(1, 100, 1, false, false)); // the batch, held until the end
    t.record(event(2, 40, 2, false, true)); // saved for the backward
    t.record(event(3, 30, 2, false, true)); // the logits, held past their line
    t.record(event(4, 20, 2, false, true)); // an op's intermediate
    t.record(event(4, -20, 2, false, false)); // freed at its own line: a temporary
    t.record(event(9, 5, 2, false, true)); // a library's workspace, kept by C++
    t.record(event(8, 1, 3, false, false)); // the gradient the backward starts from
    let since = t.backward_started(3);
    t.record(event(5, 50, 3, true, false)); // an activation's gradient: the maximum, 226
    t.record(event(5, -50, 3, true, false));
    t.record(event(2, -40, 3, true, false)); // autograd lets the saved activation go
    t.mark_gradients(since);
    t.record(event(8, -1, 3, false, false)); // the backward's line lets its seed go
    t.record(event(3, -30, 2, false, false)); // the next step's forward line drops the logits
    t.name_remaining(|_| Role::Other, |ptr| ptr != 9);
    let peak = t.peak().expect("a peak");
    assert_eq!(peak.moment.allocated, 226);
    let named = |site, role| peak.role_bytes.get(&(site, role)).copied().unwrap_or(0);
    assert_eq!(named(1, Role::Inputs), 100);
    assert_eq!(named(2, Role::Activations), 70);
    assert_eq!(named(2, Role::Workspaces), 5);
    assert_eq!(named(3, Role::AutogradTemporaries), 51);
    let all: i64 = peak.role_bytes.values().sum();
    assert_eq!(all, 226, "every byte named: {:?}", peak.role_bytes);
}

#[test]
fn a_line_run_again_after_a_backward_frees_no_temporary_of_its_own() {
    let mut t = Tracker::default();
    t.record(event(1, 10, 7, false, true)); // step 1's output at line 7: the maximum
    t.backward_started(3);
    t.record(event(1, -10, 7, false, false)); // line 7 in step 2 drops it
    let peak = t.peak().expect("a peak");
    assert_eq!(peak.role_bytes.get(&(7, Role::Activations)), Some(&10));
    assert_eq!(peak.role_bytes.get(&(7, Role::Temporaries)), None);
}

/// What the reporter's queue is told a copy of a maximum holds is what `needs_free_site` says,
/// event after event, and no allocation at or below the threshold it is told sets a maximum:
/// a pseudo-random run of allocations and frees (a quarter by backward passes), calls of two
/// targeted functions, backward passes' gradients and roles learnt on the way.
#[test]
fn the_queue_is_told_exactly_which_frees_need_their_line() {
    let mut t = Tracker::default();
    let mut told = crate::capture::int_hash::IntSet::default();
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    let mut next = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let mut live: Vec<u64> = Vec::new();
    let mut active = [0u32; 2];
    let (mut needed, mut held_seen, mut maxima) = (0, 0, 0);
    for ptr in 1..=30_000u64 {
        let (pending_before, threshold) = t.raisable();
        // Rising, falling (no maximum for a long while: the log of recent blocks outgrows its
        // bound), rising again.
        let allocations = [50, 45, 55][(ptr / 10_000) as usize % 3];
        match next(100) {
            n if n < allocations => {
                let bytes = 1 + next(1000) as i64;
                t.on_event(ptr, bytes, 1 + next(20) as u32, next(4) == 0, None);
                live.push(ptr);
                let (pending, _) = t.raisable();
                if pending && !pending_before {
                    maxima += 1;
                    assert!(
                        t.last_total > threshold,
                        "a maximum set at or below the threshold"
                    );
                }
            }
            n if n < 95 && !live.is_empty() => {
                let p = live.swap_remove(next(live.len() as u64) as usize);
                let bytes = t.block(p).expect("live").2;
                t.on_event(p, -bytes, 0, next(4) == 0, None);
            }
            95 | 96 if !live.is_empty() => {
                let p = live[next(live.len() as u64) as usize];
                t.mark_role(
                    p,
                    [Role::Parameters, Role::OptimizerState][next(2) as usize],
                );
            }
            97 => {
                let f = next(2) as usize;
                if active[f] > 0 && next(2) == 0 {
                    active[f] -= 1;
                    t.function_ended(f as u64 + 1);
                } else {
                    active[f] += 1;
                    t.function_started(f as u64 + 1);
                }
            }
            98 => {
                let since = t.backward_started(3);
                t.mark_gradients(since.saturating_sub(next(50)));
            }
            _ => {}
        }
        t.held.tell(&mut told);
        if t.raisable().0 || ptr % 3 != 0 {
            continue; // every free is decided by the tracker until the maximum is copied
        }
        for &p in &live {
            let needs = t.needs_free_site(p);
            assert_eq!(told.contains(&p), needs, "block {p} after event {ptr}");
            needed += usize::from(needs);
        }
        held_seen = held_seen.max(told.len());
    }
    assert!(
        needed > 1000 && held_seen > 10 && maxima > 10,
        "{needed} {held_seen} {maxima}"
    );
}

#[test]
fn the_shims_segment_actions_are_the_traces_segment_kinds_and_nothing_else_is() {
    let kinds: Vec<Option<TraceKind>> = (-1..9).map(TraceKind::of_segment).collect();
    assert_eq!(
        kinds,
        [
            None,
            None, // alloc
            None, // free_requested
            None, // free_completed
            Some(TraceKind::SegmentAlloc),
            Some(TraceKind::SegmentFree),
            Some(TraceKind::SegmentMap),
            Some(TraceKind::SegmentUnmap),
            None, // oom
            None,
        ]
    );
}

/// The tests that turn the process's tracker on, one at a time.
static GLOBAL_TRACKER: Mutex<()> = Mutex::new(());

/// The process's tracker on, a fresh one, and its thread running: held until the guard drops.
fn tracker_and_its_thread() -> std::sync::MutexGuard<'static, ()> {
    let one_at_a_time = GLOBAL_TRACKER.lock().unwrap_or_else(|e| e.into_inner());
    start();
    worker::start();
    one_at_a_time
}

#[test]
fn the_trackers_thread_records_the_queue_the_allocating_thread_leaves() {
    // 300 allocations (no free, which the tracker may decide at once), more than the thread's
    // wake and fewer than a full queue, which the allocating thread would record itself.
    let _tracker = tracker_and_its_thread();
    for i in 0..300u64 {
        mp_rust_allocation_event(0x1000 + 64 * i, 64, 0, 0, 0, 0, 0, 0);
    }
    let deadline = Instant::now() + std::time::Duration::from_secs(20);
    while queue::pending() >= queue::WAKE_AT && Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(
        queue::pending() < queue::WAKE_AT,
        "the thread recorded the events queued before its wake"
    );
    // A reader records what is left first: every event, in order.
    let (serial, peak) = with(|t| (t.serial(), t.peak().map(|p| p.moment.allocated))).unwrap();
    stop();
    assert_eq!(serial, 300);
    assert_eq!(peak, Some(300 * 64));
}

#[test]
fn a_child_forked_while_the_trackers_thread_records_finds_the_tracker_free() {
    // Forks right after waking the thread, when it is most likely recording: without the
    // thread's fork handlers the child would find the tracker locked by a thread it lacks.
    let _tracker = tracker_and_its_thread();
    for round in 0..60u64 {
        for i in 0..queue::WAKE_AT as u64 {
            mp_rust_allocation_event(0x100_0000 * (round + 1) + 64 * i, 64, 0, 0, 0, 0, 0, 0);
        }
        // SAFETY: the child runs memprof's own code and leaves through _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            forked();
            let status = if with(|t| t.serial()).is_some() { 0 } else { 1 };
            unsafe { libc::_exit(status) };
        }
        assert!(pid > 0, "fork");
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        let mut status = 0;
        loop {
            // SAFETY: waits for the child forked above.
            let done = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if done == pid {
                break;
            }
            if Instant::now() > deadline {
                unsafe { libc::kill(pid, libc::SIGKILL) };
                panic!("round {round}: the child found the tracker locked");
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    }
    stop();
}
