//! The growth record of the report: the tracker's ledgers (`capture::growth`) read at the end.
//! The step is the optimizer step when the run made at least two; else the calls of the
//! targeted function called most (two calls at least); the sites named by the site table.
use super::peak::Namer;
use crate::capture::growth::Ledger;
use crate::capture::peak::{Role, Tracker};
use crate::model::growth::{GrowingSite, Growth, GROWTH_SEMANTICS, MIN_GROWING_STEPS};

/// The record (None when no kind of step ended twice); `functions`: the targeted functions'
/// names by the recorder's id.
pub fn record(tracker: &Tracker, namer: &mut Namer, functions: &[String]) -> Option<Growth> {
    let (steps, calls) = tracker.growth();
    let (step, ledger): (String, &Ledger) = if steps.boundaries() >= 2 {
        ("optimizer step".into(), steps)
    } else {
        let (id, ledger) = calls
            .into_iter()
            .filter(|(_, l)| l.boundaries() >= 2)
            .max_by_key(|(id, l)| (l.boundaries(), std::cmp::Reverse(*id)))?;
        let name = functions.get(id as usize).cloned().unwrap_or_default();
        (format!("call of {name}"), ledger)
    };
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
