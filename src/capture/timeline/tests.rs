//! The timeline's rules on hand-made event sequences, and through the tracker.
use super::*;
use crate::capture::peak::{Role, Tracker};

/// An allocation then its level, as the tracker feeds them.
fn alloc(t: &mut Timeline, total: &mut i64, serial: &mut u64, site: u32, bytes: i64) {
    *serial += 1;
    *total += bytes;
    t.allocated(site, bytes, *serial);
    t.level(*total, *total, || 0.0);
}

fn free(t: &mut Timeline, total: &mut i64, site: u32, bytes: i64, serial: u64, category: usize) {
    *total -= bytes;
    t.freed(site, bytes, serial, category);
    t.level(*total, *total, || 0.0);
}

/// The live bytes per site at each point's end: the changes summed.
fn levels(points: &[Point], site: u32) -> Vec<i64> {
    let mut level = 0;
    points
        .iter()
        .map(|p| {
            level += p
                .sites
                .iter()
                .filter(|s| s.0 == site)
                .map(|s| s.1)
                .sum::<i64>();
            level
        })
        .collect()
}

#[test]
fn a_point_per_event_until_the_bound_then_neighbours_merge_and_the_maximum_stays_exact() {
    let mut t = Timeline::default();
    let (mut total, mut serial) = (0, 0);
    // A sawtooth whose highest tooth (at allocation 7777) is the peak.
    for i in 0..20_000u64 {
        let bytes = if i == 7777 { 1000 } else { 10 };
        alloc(&mut t, &mut total, &mut serial, 1, bytes);
        free(
            &mut t,
            &mut total,
            1,
            bytes,
            serial,
            Role::Temporaries.index(),
        );
    }
    let r = t.record(1.0, std::iter::empty());
    assert!(r.points.len() < MAX_POINTS && r.points.len() > MAX_POINTS / 4);
    assert_eq!(r.events_per_point, 32);
    assert_eq!(r.points.iter().map(|p| p.max).max(), Some(1000));
    assert!(r.points.iter().all(|p| p.min == 0 && p.end == 0));
    let at = r.points.iter().position(|p| p.max == 1000).unwrap();
    assert!(r.points[at].allocations >= 7778 && r.points[at - 1].allocations < 7778);
    assert_eq!(r.points.last().unwrap().allocations, 20_000);
}

#[test]
fn a_block_counts_in_its_category_from_the_point_that_allocated_it_to_the_one_that_freed_it() {
    let mut t = Timeline::default();
    let (mut total, mut serial) = (0, 0);
    alloc(&mut t, &mut total, &mut serial, 1, 100); // point 0 (one event per point so far)
    let kept = serial;
    alloc(&mut t, &mut total, &mut serial, 2, 7); // point 1
    free(&mut t, &mut total, 1, 100, kept, Role::Activations.index()); // point 2
    alloc(&mut t, &mut total, &mut serial, 3, 5); // point 3, live at the end
    let r = t.record(1.0, [(serial, 5, Role::Inputs.index())].into_iter());
    let category = |role: Role| -> Vec<i64> {
        let mut level = 0;
        r.points
            .iter()
            .map(|p| {
                level += p.roles[role.index()];
                level
            })
            .collect()
    };
    assert_eq!(category(Role::Activations), vec![100, 100, 0, 0]);
    assert_eq!(category(Role::Inputs), vec![0, 0, 0, 5]);
    // Allocation 2 is not freed and named by nothing: no category (the page calls it other).
    assert_eq!(levels(&r.points, 1), vec![100, 100, 0, 0]);
    assert_eq!(levels(&r.points, 2), vec![0, 7, 7, 7]);
    assert_eq!(
        r.points.iter().map(|p| p.end).collect::<Vec<_>>(),
        vec![100, 107, 7, 12]
    );
}

#[test]
fn site_changes_and_categories_stay_right_across_merges() {
    let mut t = Timeline::default();
    let (mut total, mut serial) = (0, 0);
    let mut held = Vec::new();
    for i in 0..10_000u32 {
        alloc(&mut t, &mut total, &mut serial, 1 + i % 7, 64);
        held.push((serial, 1 + i % 7));
        if held.len() > 50 {
            let (s, site) = held.remove(0);
            free(&mut t, &mut total, site, 64, s, Role::Activations.index());
        }
    }
    let live = held.iter().map(|&(s, _)| (s, 64, Role::Gradients.index()));
    let r = t.record(1.0, live);
    let last = r.points.last().unwrap();
    assert_eq!(last.end, 50 * 64);
    let sum_sites: i64 = (1..=7).map(|s| *levels(&r.points, s).last().unwrap()).sum();
    assert_eq!(sum_sites, 50 * 64);
    let roles: [i64; CATEGORIES] = r.points.iter().fold([0; CATEGORIES], |mut acc, p| {
        for (a, x) in acc.iter_mut().zip(p.roles) {
            *a += x;
        }
        acc
    });
    assert_eq!(roles[Role::Gradients.index()], 50 * 64);
    assert_eq!(roles[Role::Activations.index()], 0);
    // At every point's end, the categories hold what was live then: its end level.
    let mut level = [0i64; CATEGORIES];
    for p in &r.points {
        for (a, x) in level.iter_mut().zip(p.roles) {
            *a += x;
        }
        assert_eq!(level.iter().sum::<i64>(), p.end);
    }
}

#[test]
fn merged_points_keep_each_sites_changes_summed_once_and_none_that_cancel() {
    // 300 sites, blocks freed in a scrambled order, past several merges: at every point's end
    // each site's level (its changes summed) is what it held then, as a replay says; each
    // point's changes in site order (what a merge joins).
    let mut t = Timeline::default();
    let (mut total, mut serial) = (0, 0);
    let mut held: Vec<(u64, u32, i64)> = Vec::new();
    let mut live = vec![0i64; 301];
    let mut history: Vec<(u64, i64, Vec<i64>)> = Vec::new();
    let mut x: u64 = 12345;
    for _ in 0..40_000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let site = 1 + (x >> 33) as u32 % 300;
        let bytes = 1 + (x >> 20) as i64 % 512;
        if held.len() > 200 && (x >> 40) % 3 == 0 {
            let (s, site, bytes) = held.swap_remove((x >> 45) as usize % held.len());
            free(
                &mut t,
                &mut total,
                site,
                bytes,
                s,
                Role::Activations.index(),
            );
            live[site as usize] -= bytes;
        } else {
            alloc(&mut t, &mut total, &mut serial, site, bytes);
            held.push((serial, site, bytes));
            live[site as usize] += bytes;
        }
        history.push((serial, total, live.clone()));
    }
    let r = t.record(1.0, std::iter::empty());
    assert!(
        r.events_per_point >= 16,
        "merged {} times",
        r.events_per_point
    );
    let mut level = vec![0i64; 301];
    let mut events = 0;
    for p in &r.points {
        assert!(
            p.sites.windows(2).all(|w| w[0].0 < w[1].0),
            "a site once per point, in site order: {:?}",
            p.sites
        );
        assert!(p.sites.iter().all(|s| s.1 != 0));
        for &(site, change) in &p.sites {
            level[site as usize] += change;
        }
        events += r.events_per_point as usize;
        let (_, end, want) = &history[events.min(history.len()) - 1];
        assert_eq!(p.end, *end);
        assert_eq!(&level, want);
    }
}

#[test]
fn the_site_changes_are_bounded_however_many_sites_change() {
    let mut t = Timeline::default();
    let (mut total, mut serial) = (0, 0);
    for i in 0..2_000_000u32 {
        alloc(&mut t, &mut total, &mut serial, 1 + i % 5000, 1);
    }
    let r = t.record(1.0, std::iter::empty());
    let changes: usize = r.points.iter().map(|p| p.sites.len()).sum();
    assert!(changes <= MAX_SITE_CHANGES, "{changes} changes");
    assert_eq!(r.points.last().unwrap().end, 2_000_000);
}

#[test]
fn marks_past_the_bound_are_thinned_evenly() {
    let mut t = Timeline::default();
    for _ in 0..3 * MAX_MARKS {
        t.mark(MarkKind::Step, || 0.0);
    }
    assert!(t.marks.len() <= MAX_MARKS && t.marks.len() >= MAX_MARKS / 2);
    assert_eq!(t.mark_stride, 4);
}

#[test]
fn the_tracker_feeds_it_every_event_and_marks_its_backward_passes() {
    let mut t = Tracker::default();
    t.on_event(1, 100, 3, false, None); // a forward's line
    t.backward_started(1);
    t.on_event(2, 50, 1, true, None);
    t.on_event(1, -100, 1, true, None);
    t.optimizer_stepped();
    let r = t.timeline();
    assert_eq!(
        r.points.iter().map(|p| p.end).collect::<Vec<_>>(),
        vec![100, 150, 50]
    );
    assert_eq!(r.points.iter().map(|p| p.max).max(), Some(150));
    let kinds: Vec<MarkKind> = r.marks.iter().map(|m| m.kind).collect();
    assert_eq!(kinds, vec![MarkKind::Backward, MarkKind::Step]);
    assert_eq!(r.marks[0].allocations, 1);
    // The first block, freed by the backward pass, was an activation from its allocation on.
    assert_eq!(r.points[0].roles[Role::Activations.index()], 100);
}

#[test]
fn a_forked_child_starts_its_timeline_with_what_it_inherited() {
    let mut t = Tracker::default();
    t.on_event(1, 100, 1, false, None);
    t.on_event(2, 30, 2, false, None);
    t.forked();
    t.on_event(3, 5, 3, false, None);
    t.on_event(1, -100, 4, false, None); // freed at another line: an input
    let r = t.timeline();
    assert_eq!(
        r.points.iter().map(|p| p.end).collect::<Vec<_>>(),
        vec![135, 35]
    );
    // Site 1 held its 100 bytes from the start, and let them go: never below zero.
    assert_eq!(levels(&r.points, 1), vec![100, 0]);
    assert_eq!(levels(&r.points, 2), vec![30, 30]);
    assert_eq!(r.points[0].roles[Role::Inputs.index()], 100);
    assert_eq!(r.points[1].roles[Role::Inputs.index()], -100);
}

#[test]
fn each_role_sits_at_its_index_in_all() {
    for (i, role) in Role::ALL.iter().enumerate() {
        assert_eq!(role.index(), i, "{role:?}");
    }
}

#[test]
fn the_point_a_serial_was_born_in_is_found_from_the_newest_as_a_search_of_all_finds_it() {
    let mut t = Timeline::default();
    let (mut total, mut serial) = (0, 0);
    // Points of one event, then merged ones of two, four...: uneven starts.
    for i in 0..5000 {
        alloc(&mut t, &mut total, &mut serial, (i % 7) as u32, 64);
    }
    assert!(t.points.len() > 100);
    assert_eq!(t.ends.len(), t.points.len());
    for s in 0..=serial + 2 {
        let all = t.points.partition_point(|p| p.allocations < s);
        assert_eq!(t.point_of(s), all, "serial {s}");
    }
    assert_eq!(Timeline::default().point_of(5), 0);
}
