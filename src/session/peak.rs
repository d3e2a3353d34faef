//! The peak records of the report: the tracker's compositions (`capture::peak`) named by the
//! site table (`python::sites`), with source text, categories matched from the storages the
//! program held at its end, the largest sites listed and the rest summed, and the next `-f`
//! to run.
use super::source::SourceFiles;
use crate::capture::peak::{Composition, Role, Tracker, UNKNOWN_SITE};
use crate::model::peak::{OtherSites, Peak, PeakSite, Place, Reached, SiteAt, PEAK_SEMANTICS};
use crate::python::sites::{self, Site};
use std::collections::{BTreeMap, HashMap};

/// How many functions the peak offers as the next `-f`.
const NEXT_TARGETS: usize = 3;

/// What turns compositions into records: the sites by id, source files read once, and the
/// storages' categories.
pub struct Namer {
    sites: Vec<Site>,
    files: SourceFiles,
    /// data_ptr -> category, as the program's models and optimizers held them at the end.
    roles: HashMap<u64, String>,
    /// How many sites a record lists.
    listed: usize,
}

impl Namer {
    pub fn new(roles: Vec<(u64, String)>, listed: usize) -> Namer {
        Namer {
            sites: sites::sites(),
            files: SourceFiles::default(),
            roles: roles.into_iter().collect(),
            listed,
        }
    }

    fn place(&mut self, p: &sites::Place) -> Place {
        Place {
            source: self.files.line(&p.file, p.line).trim().to_string(),
            file: p.file.clone(),
            line: p.line,
            function: p.function.clone(),
        }
    }

    fn site(&self, id: u32) -> Option<&Site> {
        (id != UNKNOWN_SITE)
            .then(|| self.sites.get(id as usize - 1))
            .flatten()
    }

    /// The record of `c`; `targeted`: the functions already targeted (not offered again).
    pub fn record(
        &mut self,
        c: &Composition,
        tracker: &Tracker,
        targeted: &[String],
        whole_run: bool,
    ) -> Peak {
        let categories = self.categories(c, tracker);
        let mut shares = c.sites.clone();
        shares.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.site.cmp(&b.site)));
        let peak = c.moment.allocated;
        let percent = |bytes: i64| {
            if peak > 0 {
                (bytes as f64 * 1000.0 / peak as f64).round() / 10.0
            } else {
                0.0
            }
        };
        let listed = shares.len().min(self.listed);
        let mut out_sites = Vec::new();
        for s in &shares[..listed] {
            let (place, context, compiled) = match self.site(s.site).cloned() {
                Some(site) => (
                    self.place(&site.place),
                    site.context.as_ref().map(|c| self.place(c)),
                    site.compiled,
                ),
                None => (unknown_place(), None, false),
            };
            out_sites.push(PeakSite {
                at: SiteAt {
                    place,
                    context,
                    compiled,
                },
                bytes: s.bytes,
                share: percent(s.bytes),
                blocks: s.blocks,
                categories: categories
                    .get(&s.site)
                    .cloned()
                    .map(|mut known| {
                        let named: i64 = known.values().sum();
                        if s.bytes > named {
                            known.insert("other".into(), s.bytes - named);
                        }
                        known
                    })
                    .unwrap_or_default(),
            });
        }
        let rest = &shares[listed..];
        let other_sites = (!rest.is_empty()).then(|| OtherSites {
            sites: rest.len() as u64,
            bytes: rest.iter().map(|s| s.bytes).sum(),
            blocks: rest.iter().map(|s| s.blocks).sum(),
        });
        let reached_site = self.site(c.moment.site).cloned();
        let reached = Reached {
            site: reached_site.as_ref().map(|s| self.place(&s.place)),
            context: reached_site
                .as_ref()
                .and_then(|s| s.context.as_ref())
                .map(|p| self.place(p)),
            in_backward: c.moment.in_backward,
            compiled: reached_site.as_ref().is_some_and(|s| s.compiled),
            allocation: c.moment.allocation,
            site_allocation: c.moment.site_allocations,
            seconds: (c.moment.seconds * 1000.0).round() / 1000.0,
        };
        let next_targets = self.next_targets(&shares, targeted);
        Peak {
            semantics: if whole_run {
                PEAK_SEMANTICS.to_string()
            } else {
                String::new()
            },
            allocated_bytes: peak,
            reserved_bytes: c.moment.reserved,
            reached,
            sites: out_sites,
            other_sites,
            unseen_bytes: c.unseen_bytes,
            next_targets,
            cuda_graph_replays: if whole_run {
                tracker.graph_replays()
            } else {
                0
            },
        }
    }

    /// Bytes by category per site: the roles the tracker learnt while the blocks were live, and
    /// for the rest, the blocks live at the maximum that the program still held, under a role,
    /// when it ended (a block whose serial is at most the maximum's was live then).
    fn categories(
        &self,
        c: &Composition,
        tracker: &Tracker,
    ) -> HashMap<u32, BTreeMap<String, i64>> {
        let mut out: HashMap<u32, BTreeMap<String, i64>> = HashMap::new();
        for (&(site, role), &bytes) in &c.role_bytes {
            if bytes != 0 {
                *out.entry(site)
                    .or_default()
                    .entry(role.name().into())
                    .or_default() += bytes;
            }
        }
        for (&ptr, role) in &self.roles {
            if let Some((serial, site, bytes, known)) = tracker.block(ptr) {
                if serial <= c.serial && known == Role::Other {
                    *out.entry(site)
                        .or_default()
                        .entry(role.clone())
                        .or_default() += bytes;
                }
            }
        }
        out
    }

    /// The user's functions holding the largest sites, as `-f` arguments.
    fn next_targets(
        &self,
        shares: &[crate::capture::peak::SiteShare],
        targeted: &[String],
    ) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for s in shares {
            let Some(site) = self.site(s.site) else {
                continue;
            };
            let user = if site.user_code {
                Some(&site.place)
            } else {
                site.context.as_ref()
            };
            let Some(p) = user else { continue };
            let name = p.function.clone();
            if name.starts_with('<') && name != "<module>"
                || targeted.contains(&name)
                || out.contains(&name)
            {
                continue;
            }
            out.push(name);
            if out.len() == NEXT_TARGETS {
                break;
            }
        }
        out
    }
}

fn unknown_place() -> Place {
    Place {
        file: String::new(),
        line: 0,
        function: "(no Python frame)".into(),
        source: String::new(),
    }
}
