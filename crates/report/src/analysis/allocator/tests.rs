//! Hand-worked cases of the allocator's rules (the numbers in each comment are worked out from
//! the rules in mod.rs, not read back from the model).
use super::*;

const MIB: u64 = 1 << 20;

fn with(conf: &str) -> Settings {
    Settings::parse(conf).unwrap()
}

#[test]
fn sizes_round_to_512_bytes_or_to_a_power_of_two_division() {
    let a = Allocator::new(u64::MAX, Settings::default());
    assert_eq!(a.round_size(1), 512);
    assert_eq!(a.round_size(512), 512);
    assert_eq!(a.round_size(513), 1024);
    // 1000000 / 512 = 1953.1: 1954 blocks of 512.
    assert_eq!(a.round_size(1_000_000), 1_000_448);
    // Four divisions between 4096 and 8192: 4096, 5120, 6144, 7168.
    let a = Allocator::new(u64::MAX, with("roundup_power2_divisions:4"));
    assert_eq!(a.round_size(5000), 5120);
    assert_eq!(a.round_size(4096), 4096);
    // At most 512 x divisions, plain rounding.
    assert_eq!(a.round_size(1200), 1536);
    // Per interval: sizes from 256 MiB get 2 divisions (256, 384 MiB); below, plain rounding.
    let a = Allocator::new(u64::MAX, with("roundup_power2_divisions:[256:2,>:2]"));
    assert_eq!(a.round_size(300 * MIB), 384 * MIB);
    assert_eq!(a.round_size(3 * MIB + 1), 3 * MIB + 512);
    assert_eq!(allocation_size(1000), 2 * MIB);
    assert_eq!(allocation_size(MIB + 1), 20 * MIB);
    assert_eq!(allocation_size(11 * MIB + 1), 12 * MIB);
}

#[test]
fn small_requests_share_a_2_mib_segment_and_large_ones_split_a_20_mib_one() {
    let mut a = Allocator::new(u64::MAX, Settings::default());
    a.malloc(1000, 0).unwrap();
    a.malloc(1000, 0).unwrap();
    // Two blocks of 1024 bytes, split from one 2 MiB segment.
    assert_eq!(
        (a.stats().allocated_bytes, a.stats().reserved_bytes),
        (2048, 2 * MIB)
    );
    a.malloc(5 * MIB, 0).unwrap();
    // A 20 MiB segment, split: 5 MiB allocated, 15 MiB cached.
    assert_eq!(a.stats().reserved_bytes, 22 * MIB);
    a.malloc(15 * MIB, 0).unwrap();
    // The 15 MiB cached block fits exactly: no new segment.
    assert_eq!(a.stats().reserved_bytes, 22 * MIB);
    assert_eq!(a.stats().allocated_bytes, 2048 + 20 * MIB);
    assert_eq!(a.stats().segment, 2);
}

#[test]
fn a_remainder_of_1_mib_or_less_stays_with_the_large_block() {
    let mut a = Allocator::new(u64::MAX, Settings::default());
    let b = a.malloc(12 * MIB, 0).unwrap(); // a 12 MiB segment
    a.free(b);
    a.malloc(11 * MIB, 0).unwrap();
    // 1 MiB would remain: not split, the block keeps its 12 MiB.
    assert_eq!(a.stats().allocated_bytes, 12 * MIB);
    assert_eq!(a.stats().segment, 1);
}

#[test]
fn freed_neighbours_merge_back_into_one_block() {
    let mut a = Allocator::new(u64::MAX, Settings::default());
    let x = a.malloc(5 * MIB, 0).unwrap(); // 20 MiB segment: x 5, free 15
    let y = a.malloc(5 * MIB, 0).unwrap(); // from the 15: y 5, free 10
    a.free(x);
    a.free(y);
    // x, y and the 10 MiB merge into the whole 20 MiB: a 20 MiB request takes it.
    a.malloc(20 * MIB, 0).unwrap();
    assert_eq!(a.stats().segment, 1);
    assert_eq!(a.stats().reserved_bytes, 20 * MIB);
}

#[test]
fn a_full_device_frees_the_cache_and_retries() {
    let mut a = Allocator::new(40 * MIB, Settings::default());
    let x = a.malloc(30 * MIB, 0).unwrap();
    a.free(x); // 30 MiB cached, whole
               // 35 MiB rounds to a 36 MiB segment; 30 + 36 > 40, so the cache is freed and retried.
    a.malloc(35 * MIB, 0).unwrap();
    let s = a.stats();
    assert_eq!(s.num_alloc_retries, 1);
    assert_eq!(
        (s.reserved_bytes, s.reserved_bytes_peak),
        (36 * MIB, 36 * MIB)
    );
    assert_eq!((s.num_device_alloc, s.num_device_free), (2, 1));
}

#[test]
fn fragmentation_runs_out_of_memory_with_enough_bytes_free() {
    let mut a = Allocator::new(40 * MIB, Settings::default());
    let x = a.malloc(8 * MIB, 0).unwrap(); // segment A (20): x 8, free 12
    let _y = a.malloc(8 * MIB, 0).unwrap(); // from A's 12: y 8, free 4
    let z = a.malloc(8 * MIB, 0).unwrap(); // 4 is too small: segment B (20)
    a.free(x); // A: free 8, y, free 4 (y keeps them apart)
    a.free(z); // B whole again
               // 24 MiB: 12 free in A and 20 on the device after B is released, but no 24 in one piece.
    let oom = a.malloc(24 * MIB, 0).unwrap_err();
    assert_eq!(
        oom,
        OutOfMemory {
            requested: 24 * MIB,
            allocation: 24 * MIB,
            allocated_bytes: 8 * MIB,
            reserved_bytes: 20 * MIB,
        }
    );
    assert_eq!(a.stats().num_alloc_retries, 1);
}

#[test]
fn an_oversize_block_serves_only_requests_near_its_size() {
    // max_split_size 32 MiB: the cached 40 MiB block is not split for an 8 MiB request.
    let mut a = Allocator::new(u64::MAX, with("max_split_size_mb:32"));
    let x = a.malloc(40 * MIB, 0).unwrap();
    a.free(x);
    a.malloc(8 * MIB, 0).unwrap();
    assert_eq!(a.stats().reserved_bytes, 60 * MIB);
    // Without the setting it is split, and nothing more is reserved.
    let mut a = Allocator::new(u64::MAX, Settings::default());
    let x = a.malloc(40 * MIB, 0).unwrap();
    a.free(x);
    a.malloc(8 * MIB, 0).unwrap();
    assert_eq!(a.stats().reserved_bytes, 40 * MIB);
}

#[test]
fn a_full_device_frees_oversize_blocks_first() {
    // max_split_size 32 MiB, 100 MiB device: two cached oversize blocks (40 and 34 MiB); a
    // 50 MiB request frees the larger first, then the other (74 >= 50), without a retry.
    let mut a = Allocator::new(100 * MIB, with("max_split_size_mb:32"));
    let x = a.malloc(40 * MIB, 0).unwrap();
    let y = a.malloc(34 * MIB, 0).unwrap();
    a.free(x);
    a.free(y);
    a.malloc(50 * MIB, 0).unwrap();
    let s = a.stats();
    assert_eq!((s.num_alloc_retries, s.num_device_free), (0, 2));
    assert_eq!(s.reserved_bytes, 50 * MIB);
}

#[test]
fn streams_do_not_share_cached_blocks() {
    let mut a = Allocator::new(u64::MAX, Settings::default());
    let x = a.malloc(1000, 0).unwrap();
    a.free(x);
    a.malloc(1000, 7).unwrap();
    assert_eq!(a.stats().segment, 2);
}

#[test]
fn replay_stops_at_the_first_request_that_does_not_fit() {
    let events = [
        Event::Alloc {
            id: 1,
            size: 30 * MIB,
            stream: 0,
        },
        Event::Alloc {
            id: 2,
            size: 30 * MIB,
            stream: 0,
        },
        Event::Free { id: 1 },
    ];
    let r = replay(&events, 40 * MIB, Settings::default()).unwrap();
    let (at, oom) = r.out_of_memory.unwrap();
    assert_eq!((at, oom.requested), (1, 30 * MIB));
    let r = replay(&events, 60 * MIB, Settings::default()).unwrap();
    assert!(r.out_of_memory.is_none());
    assert_eq!(r.stats.allocated_bytes_peak, 60 * MIB);
    let bad = [Event::Free { id: 3 }];
    assert_eq!(
        replay(&bad, MIB, Settings::default()).err().unwrap(),
        "event 0: frees allocation 3, which is not live"
    );
}

#[test]
fn settings_are_checked_as_torch_checks_them() {
    assert!(Settings::parse("max_split_size_mb:20").is_err());
    assert!(Settings::parse("garbage_collection_threshold:1.5").is_err());
    assert!(Settings::parse("roundup_power2_divisions:3").is_err());
    assert!(Settings::parse("expandable_segments:maybe").is_err());
    assert!(with("expandable_segments:True").expandable_segments);
    assert!(!with("expandable_segments:False").expandable_segments);
    assert!(Settings::parse("max_splitsize_mb:64").is_err());
    let s = with("max_split_size_mb:64,garbage_collection_threshold:0.6");
    assert_eq!(s.max_split_size, 64 * MIB);
    assert_eq!(s.garbage_collection_threshold, 0.6);
}

#[test]
fn garbage_collection_frees_the_oldest_cached_segments_past_its_threshold() {
    // 150 MiB, threshold 0.5 (75 MiB). x (40) is cached at lookup 1, y (45, a 46 MiB segment)
    // at lookup 2; the 60 MiB request is lookup 3 and misses: 86 MiB reserved is past 75, so
    // the segments at least as old as the average (2 and 1: 1.5) go: x. Then 46 + 60 = 106.
    let run = |conf: &str| {
        let mut a = Allocator::new(150 * MIB, with(conf));
        let x = a.malloc(40 * MIB, 0).unwrap();
        a.free(x);
        let y = a.malloc(45 * MIB, 0).unwrap();
        a.free(y);
        a.malloc(60 * MIB, 0).unwrap();
        a.stats().clone()
    };
    let gc = run("garbage_collection_threshold:0.5");
    assert_eq!((gc.reserved_bytes_peak, gc.num_device_free), (106 * MIB, 1));
    // Without it the cache stays: 40 + 46 + 60 = 146 MiB reserved.
    let kept = run("");
    assert_eq!(
        (kept.reserved_bytes_peak, kept.num_device_free),
        (146 * MIB, 0)
    );
}

/// A step at batch `b`: 4 MiB of weights (kept), then an activation and an output of 2 MiB per
/// sample, both freed. The third trace's output is off the line when `bent`.
fn step(b: u64, bent: bool) -> (Vec<Event>, Vec<Option<String>>) {
    let out = if bent { b * b * MIB } else { 2 * b * MIB };
    let events = vec![
        Event::Alloc {
            id: 1,
            size: 4 * MIB,
            stream: 0,
        },
        Event::Alloc {
            id: 2,
            size: 2 * b * MIB,
            stream: 0,
        },
        Event::Alloc {
            id: 3,
            size: out,
            stream: 0,
        },
        Event::Free { id: 2 },
        Event::Free { id: 3 },
    ];
    let at = ["model.py:1", "model.py:2", "model.py:3", "", ""]
        .iter()
        .map(|s| (!s.is_empty()).then(|| s.to_string()))
        .collect();
    (events, at)
}

/// One traced run for scale's matching.
fn traced_run<'a>(batch: u64, events: &'a [Event], at: &'a [Option<String>]) -> scale::Traced<'a> {
    scale::Traced { batch, events, at }
}

#[test]
fn another_batch_size_is_synthesized_from_two_and_checked_by_a_third() {
    use scale::{max_batch, synthesize};
    let (e2, a2) = step(2, false);
    let (e4, a4) = step(4, false);
    let traced = [traced_run(2, &e2, &a2), traced_run(4, &e4, &a4)];
    let at8 = synthesize(&traced, 8).unwrap();
    assert_eq!(at8.events, step(8, false).0);
    // At batch 8 on 40 MiB: the weights' 20 MiB segment keeps 16 MiB free, which the
    // activation takes; the output gets a 16 MiB segment: 36 MiB reserved. At 9, the 18 MiB
    // activation and output need two new segments: 20 + 18 + 18 > 40, and the weights'
    // segment is split, so nothing can be freed: the largest batch is 8.
    let r = replay(&at8.events, 40 * MIB, Settings::default()).unwrap();
    assert!(r.out_of_memory.is_none());
    assert_eq!(r.stats.reserved_bytes_peak, 36 * MIB);
    assert_eq!(
        max_batch(&traced, 40 * MIB, &Settings::default(), 1 << 20).unwrap(),
        Some(8)
    );
    assert_eq!(
        max_batch(&traced, 3 * MIB, &Settings::default(), 1 << 20).unwrap(),
        None
    );
    // A third trace off the line names the line.
    let (e6, a6) = step(6, true);
    let three = [
        traced_run(2, &e2, &a2),
        traced_run(4, &e4, &a4),
        traced_run(6, &e6, &a6),
    ];
    assert_eq!(synthesize(&three, 8).unwrap().not_affine, ["model.py:3"]);
    // The larger batch's trace is the template; the smaller one's events may differ from it.
    // Frees between two allocations may come in another order (autocast's cache is freed in
    // hash order): the allocator ends in the same state, and the traces still match.
    let (mut reordered, reordered_at) = step(2, false);
    reordered.swap(3, 4);
    let same = [
        traced_run(2, &reordered, &reordered_at),
        traced_run(4, &e4, &a4),
    ];
    assert_eq!(synthesize(&same, 8).unwrap().events, at8.events);
    // Frees in another place among the allocations: the template's events are the prediction's.
    let (mut other, mut other_at) = step(2, false);
    other.swap(2, 3);
    other_at.swap(2, 3);
    let moved = [traced_run(2, &other, &other_at), traced_run(4, &e4, &a4)];
    assert_eq!(synthesize(&moved, 8).unwrap().events, at8.events);
    // An allocation only the smaller trace has (a cuDNN algorithm's workspace at one batch
    // size) is passed over and counted, and the rest still lines up.
    let workspace = Event::Alloc {
        id: 99,
        size: 5 * MIB,
        stream: 0,
    };
    let with_workspace = |b: u64| {
        let (mut events, mut at) = step(b, false);
        events.insert(1, workspace);
        at.insert(1, Some("model.py:9".into()));
        events.insert(2, Event::Free { id: 99 });
        at.insert(2, None);
        (events, at)
    };
    let (extra2, extra2_at) = with_workspace(2);
    let s = synthesize(
        &[traced_run(2, &extra2, &extra2_at), traced_run(4, &e4, &a4)],
        8,
    )
    .unwrap();
    assert_eq!(s.events, at8.events);
    let u = s.unmatched;
    assert_eq!((u.other_allocations, u.other_bytes), (1, 5 * MIB));
    assert_eq!(u.first_allocations, 0);
    // One the template alone has keeps its size, sized as its line's like ones where it has
    // some (a batch prefetched sooner in one run); given first or second, the larger batch's
    // trace is the template.
    let (extra4, extra4_at) = with_workspace(4);
    for order in [[0, 1], [1, 0]] {
        let runs = [traced_run(4, &extra4, &extra4_at), traced_run(2, &e2, &a2)];
        let s = synthesize(&[runs[order[0]], runs[order[1]]], 8).unwrap();
        assert_eq!(
            (s.unmatched.first_allocations, s.unmatched.first_sized_alike),
            (1, 0)
        );
        assert!(s.events.contains(&workspace));
    }
    // Traces with no allocation in common (by line and stream) are refused.
    let elsewhere: Vec<Option<String>> = a4
        .iter()
        .map(|a| a.as_ref().map(|_| "other.py:1".into()))
        .collect();
    let err = synthesize(
        &[traced_run(2, &e2, &a2), traced_run(4, &e4, &elsewhere)],
        8,
    )
    .err()
    .unwrap();
    assert!(err.contains("have no allocation in common"), "{err}");
}

#[test]
fn expandable_segments_grow_by_pages_and_avoid_the_fragmentation_oom() {
    // The fragmentation case above, with expandable segments (20 MiB pages, one growing segment):
    // x maps page 0 (x 8, free 12); y splits the 12 (y 8, free 4); z finds the free 4 followed
    // by unmapped space, maps page 1 beside it (40 MiB reserved) and takes 8 of the merged 24;
    // freeing x and z leaves z's 24 MiB in one piece, which the 24 MiB request takes.
    let mut a = Allocator::new(40 * MIB, with("expandable_segments:True"));
    let x = a.malloc(8 * MIB, 0).unwrap();
    let _y = a.malloc(8 * MIB, 0).unwrap();
    let z = a.malloc(8 * MIB, 0).unwrap();
    assert_eq!(a.stats().reserved_bytes, 40 * MIB);
    a.free(x);
    a.free(z);
    a.malloc(24 * MIB, 0).unwrap();
    let s = a.stats();
    assert_eq!((s.reserved_bytes_peak, s.num_alloc_retries), (40 * MIB, 0));
    assert_eq!((s.num_device_alloc, s.segment), (2, 0));
}

#[test]
fn a_full_device_unmaps_the_free_pages_of_expandable_segments() {
    // 30 MiB maps two 20 MiB pages (40 MiB, the device). Freed, its pages are free but mapped;
    // a small request finds no room for a 2 MiB page, so the free pages are unmapped (the whole
    // segment goes) and the retry maps one small page.
    let mut a = Allocator::new(40 * MIB, with("expandable_segments:True"));
    let x = a.malloc(30 * MIB, 0).unwrap();
    a.free(x);
    a.malloc(1000, 0).unwrap();
    let s = a.stats();
    assert_eq!(
        (s.reserved_bytes, s.reserved_bytes_peak),
        (2 * MIB, 40 * MIB)
    );
    assert_eq!((s.num_alloc_retries, s.num_device_free), (1, 1));
}
