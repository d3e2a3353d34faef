//! The growth record of the report: the tracker's ledgers (`capture::growth`) read at the end.
//! The step is the optimizer step when the run made at least two; else the calls of the
//! targeted function called most (two calls at least); the sites named by the site table.
use super::peak::Namer;
use crate::capture::growth::Ledger;
use crate::capture::peak::{Role, Tracker};
use crate::model::growth::{GrowingSite, Growth, GROWTH_SEMANTICS, MIN_GROWING_STEPS};

/// What a step is in this run, and its ledger: the optimizer step when at least
/// `min_boundaries` ended, else the calls of the targeted function that ended most (at least
/// `min_boundaries`); None when neither did. `functions`: the targeted functions' names by the
/// recorder's id.
pub fn steps_of<'a>(
    tracker: &'a Tracker,
    functions: &[String],
    min_boundaries: u64,
) -> Option<(String, &'a Ledger)> {
    let (steps, calls) = tracker.growth();
    if steps.boundaries() >= min_boundaries {
        return Some(("optimizer step".into(), steps));
    }
    let (id, ledger) = calls
        .into_iter()
        .filter(|(_, l)| l.boundaries() >= min_boundaries)
        .max_by_key(|(id, l)| (l.boundaries(), std::cmp::Reverse(*id)))?;
    let name = functions.get(id as usize).cloned().unwrap_or_default();
    Some((format!("call of {name}"), ledger))
}

/// The record (None when no kind of step ended twice); `functions`: the targeted functions'
/// names by the recorder's id.
pub fn record(tracker: &Tracker, namer: &mut Namer, functions: &[String]) -> Option<Growth> {
    let (step, ledger) = steps_of(tracker, functions, 2)?;
    let mut sites: Vec<GrowingSite> = ledger
        .growing(MIN_GROWING_STEPS)
        .into_iter()
        .map(|(site, s)| {
            let roles = tracker.live_roles_of(site);
            GrowingSite {
                at: namer.site_at(site),
                bytes_per_step: s.grown / s.boundaries as i64,
                steps: s.boundaries,
                since_step: s.since,
                grown_bytes: s.grown,
                least_bytes: s.least,
                most_bytes: s.most,
                live_bytes: tracker.site_live_bytes(site),
                categories: Role::ALL
                    .iter()
                    .zip(roles)
                    .filter(|(_, b)| *b != 0)
                    .map(|(role, b)| (role.name().to_string(), b))
                    .collect(),
            }
        })
        .collect();
    sites.sort_by_key(|s| std::cmp::Reverse(s.grown_bytes));
    Some(Growth {
        semantics: GROWTH_SEMANTICS.to_string(),
        step,
        steps: ledger.boundaries(),
        min_steps: MIN_GROWING_STEPS,
        sites,
    })
}
