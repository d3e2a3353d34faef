//! The live view's state of the run now (`model::live`), from the tracker under its lock: memory
//! now and at its highest, the timeline's latest points, the top sites and the growing ones
//! named by the site table. Cheap enough for once a second: no walk of the live blocks, no
//! Python, nothing that takes the allocator's lock while the tracker's is held.
use super::peak::Namer;
use crate::cli::config::RunConfig;
use crate::model::growth::MIN_GROWING_STEPS;
use crate::model::live::{LiveGrowing, LiveSite, LiveState};

/// The points of memory over time the state carries (a terminal's width, and then some).
const HISTORY: usize = 400;
/// Sites in each list.
const SITES: usize = 8;

pub fn state(config: &RunConfig, seconds: f64) -> Option<LiveState> {
    let mut namer = Namer::new(SITES, false);
    // Read before the tracker's lock: the recorder's is taken before it everywhere else (a line
    // hook holds the recorder's, allocates, and the allocation takes the tracker's).
    let functions: Vec<String> = crate::capture::recorder::with(|r| r.function_list())
        .unwrap_or_default()
        .into_iter()
        .map(|(qualname, _, _)| qualname)
        .collect();
    crate::capture::peak::with(|t| {
        let (allocated, reserved, peak) = t.now();
        let (step, ledger) = super::growth::steps_of(t, &functions, 1).unzip();
        let steps_so_far = ledger.map_or(0, |l| l.boundaries());
        let label = |namer: &mut Namer, site: u32| {
            let at = namer.site_at(site);
            (at.label(), at.place.source.clone())
        };
        let top_sites = t
            .top_sites(SITES)
            .into_iter()
            .map(|(site, bytes)| {
                let (label, source) = label(&mut namer, site);
                LiveSite {
                    label,
                    source,
                    bytes,
                }
            })
            .collect();
        let mut growing: Vec<LiveGrowing> = ledger
            .map(|l| l.growing(MIN_GROWING_STEPS))
            .unwrap_or_default()
            .into_iter()
            .map(|(site, s)| {
                let (label, source) = label(&mut namer, site);
                LiveGrowing {
                    label,
                    source,
                    bytes_per_step: s.grown / s.boundaries as i64,
                    steps: s.boundaries,
                    live_bytes: t.site_live_bytes(site),
                }
            })
            .collect();
        growing.sort_by_key(|g| std::cmp::Reverse(g.bytes_per_step * g.steps as i64));
        LiveState {
            pid: std::process::id(),
            script: config.script_label(),
            device: match config.source.cuda_index() {
                Some(i) => format!("cuda:{i}"),
                None => "cpu".into(),
            },
            seconds,
            allocated_bytes: allocated,
            reserved_bytes: reserved,
            peak_allocated_bytes: peak,
            history: t.history(HISTORY),
            top_sites,
            growing,
            step,
            steps: steps_so_far,
        }
    })
}
