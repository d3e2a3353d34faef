//! The timeline record of the report: the tracker's points (`capture::timeline`) as columns,
//! the categories' live bytes summed from their changes, the sites that changed named by the
//! site table, and the marks with their functions' names.
use super::peak::Namer;
use crate::capture::peak::{Role, Tracker};
use crate::capture::timeline::{MarkKind, Record};
use crate::model::timeline::{Timeline, TimelineMark, TIMELINE_SEMANTICS};
use std::collections::{BTreeMap, HashMap};

/// The record of `tracker`'s timeline (None before any event); `functions`: the targeted
/// functions' names by the recorder's id.
pub fn record(tracker: &Tracker, namer: &mut Namer, functions: &[String]) -> Option<Timeline> {
    let r = tracker.timeline();
    if r.points.is_empty() || r.points.iter().all(|p| p.allocations == 0) {
        return None;
    }
    Some(columns(r, namer, functions))
}

fn columns(r: Record, namer: &mut Namer, functions: &[String]) -> Timeline {
    let mut t = Timeline {
        semantics: TIMELINE_SEMANTICS.to_string(),
        events_per_point: r.events_per_point,
        ..Timeline::default()
    };
    let mut levels = [0i64; crate::capture::timeline::CATEGORIES];
    let mut categories: Vec<Vec<i64>> = vec![Vec::with_capacity(r.points.len()); levels.len()];
    let mut index: HashMap<u32, i64> = HashMap::new();
    let mut ids: Vec<u32> = Vec::new();
    for p in &r.points {
        t.allocations.push(p.allocations);
        t.seconds.push((p.seconds * 1e6).round() / 1e6);
        t.allocated_max.push(p.max);
        t.allocated_min.push(p.min);
        t.allocated_end.push(p.end);
        t.reserved_max.push(p.reserved_max);
        t.reserved_end.push(p.reserved_end);
        for (i, change) in p.roles.iter().enumerate() {
            levels[i] += change;
            categories[i].push(levels[i]);
        }
        let mut changes = Vec::with_capacity(p.sites.len() * 2);
        for &(site, change) in &p.sites {
            let next = ids.len() as i64;
            let at = *index.entry(site).or_insert_with(|| {
                ids.push(site);
                next
            });
            changes.extend([at, change]);
        }
        t.site_changes.push(changes);
    }
    t.categories = Role::ALL
        .iter()
        .zip(categories)
        .filter(|(_, series)| series.iter().any(|&b| b != 0))
        .map(|(role, series)| (role.name().to_string(), series))
        .collect::<BTreeMap<_, _>>();
    t.sites = ids.into_iter().map(|id| namer.site_at(id)).collect();
    t.marks = r
        .marks
        .iter()
        .map(|m| {
            let (kind, function) = match m.kind {
                MarkKind::Backward => ("backward", None),
                MarkKind::Step => ("step", None),
                MarkKind::CallStart(id) => ("call_start", functions.get(id as usize).cloned()),
                MarkKind::CallEnd(id) => ("call_end", functions.get(id as usize).cloned()),
            };
            TimelineMark {
                kind: kind.to_string(),
                function,
                allocation: m.allocations,
                seconds: (m.seconds * 1e6).round() / 1e6,
            }
        })
        .collect();
    t
}
