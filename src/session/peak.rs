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
/// The least share of the peak (per mille) a site needs for its function to be offered: a
/// function holding a few bytes explains nothing.
const NEXT_MIN_PER_MILLE: i64 = 20;

/// The blocks still live when the run ended take their categories: those `roles` names (the
/// storages tensors held then, by the models' and optimizers' names, "other" for the rest), the
/// rest by their fate (`Role::fate`). Without `roles` (not looked for), what is not named stays
/// unknown.
pub fn name_remaining(tracker: &mut Tracker, roles: Option<Vec<(u64, String)>>) {
    let Some(roles) = roles else {
        return;
    };
    let roles: HashMap<u64, Role> = roles
        .into_iter()
        .map(|(ptr, name)| (ptr, Role::from_name(&name)))
        .collect();
    tracker.name_remaining(
        |ptr| roles.get(&ptr).copied().unwrap_or(Role::Other),
        |ptr| roles.contains_key(&ptr),
    );
}

/// What turns compositions into records: the sites by id and source files read once.
pub struct Namer {
    sites: Vec<Site>,
    files: SourceFiles,
    /// How many sites a record lists.
    listed: usize,
    /// Whether the run has `--modules` (else offered when libraries' code holds the peak).
    modules: bool,
}

impl Namer {
    pub fn new(listed: usize, modules: bool) -> Namer {
        Namer {
            sites: sites::sites(),
            files: SourceFiles::default(),
            listed,
            modules,
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

    /// Site `id` as records name it (a site memprof could not read: no Python frame).
    pub fn site_at(&mut self, id: u32) -> SiteAt {
        match self.site(id).cloned() {
            Some(site) => SiteAt {
                place: self.place(&site.place),
                context: site.context.as_ref().map(|c| self.place(c)),
                compiled: site.compiled,
            },
            None => SiteAt {
                place: unknown_place(),
                context: None,
                compiled: false,
            },
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
        let categories = Self::categories(c);
        let mut totals: BTreeMap<String, i64> = BTreeMap::new();
        for s in &c.sites {
            for (name, bytes) in Self::parts(&categories, s.site, s.bytes) {
                *totals.entry(name).or_default() += bytes;
            }
        }
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
            out_sites.push(PeakSite {
                at: self.site_at(s.site),
                bytes: s.bytes,
                share: percent(s.bytes),
                blocks: s.blocks,
                categories: Self::parts(&categories, s.site, s.bytes),
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
        let (next_targets, next_modules) = self.next_targets(&shares, targeted, peak);
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
            categories: totals,
            device: None,
            next_targets,
            next_modules,
            cuda_graph_replays: if whole_run {
                tracker.graph_replays()
            } else {
                0
            },
        }
    }

    /// Bytes by category per site: the roles the tracker learnt for the blocks live at the
    /// maximum, while they were live, when they were freed, or when the run ended.
    fn categories(c: &Composition) -> HashMap<u32, BTreeMap<String, i64>> {
        let mut out: HashMap<u32, BTreeMap<String, i64>> = HashMap::new();
        for (&(site, role), &bytes) in &c.role_bytes {
            if bytes != 0 {
                *out.entry(site)
                    .or_default()
                    .entry(role.name().into())
                    .or_default() += bytes;
            }
        }
        out
    }

    /// The parts of `bytes` live at `site`: its categories, and what none named as `other`.
    fn parts(
        categories: &HashMap<u32, BTreeMap<String, i64>>,
        site: u32,
        bytes: i64,
    ) -> BTreeMap<String, i64> {
        let mut parts = categories.get(&site).cloned().unwrap_or_default();
        let named: i64 = parts.values().sum();
        if bytes > named {
            parts.insert("other".into(), bytes - named);
        }
        parts
    }

    /// The functions holding the largest sites, as `-f` arguments that find them: the user's
    /// by name, a library's as `package.module:Qual.name` (or `file.py:Qual.name` outside an
    /// installed package); with whether `--modules` is worth adding (libraries' code, a model's
    /// layers mostly, holds most of the peak and the run had none).
    fn next_targets(
        &self,
        shares: &[crate::capture::peak::SiteShare],
        targeted: &[String],
        peak: i64,
    ) -> (Vec<String>, bool) {
        let mut out: Vec<String> = Vec::new();
        let mut in_libraries = 0;
        for s in shares {
            if s.bytes * 1000 < peak * NEXT_MIN_PER_MILLE {
                break;
            }
            let Some(site) = self.site(s.site) else {
                continue;
            };
            if !site.user_code {
                in_libraries += s.bytes;
            }
            let Some(name) = target_of(site) else {
                continue;
            };
            let qualname = name.rsplit(':').next().unwrap_or(&name);
            if targeted.iter().any(|t| t == qualname) || out.contains(&name) {
                continue;
            }
            if out.len() < NEXT_TARGETS {
                out.push(name);
            }
        }
        (out, !self.modules && in_libraries * 2 > peak)
    }
}

/// The `-f` that profiles the lines of `site`'s function: the user's own by its qualified name,
/// a library's in the form that names its file; a function with no file of its own (a
/// dataclass's generated `__init__`, from `<string>`) by its caller's. Comprehensions, generator
/// expressions and lambdas are their enclosing function's lines.
fn target_of(site: &Site) -> Option<String> {
    let has_file = |p: &sites::Place| !p.file.starts_with('<');
    let place = if has_file(&site.place) {
        &site.place
    } else {
        site.context.as_ref().filter(|c| has_file(c))?
    };
    let qualname = enclosing(&place.function);
    // The site's class says whether it is the user's; a context is the user's innermost line
    // for a library's site, and for a user's site (`<string>`) whatever called it.
    let user = if std::ptr::eq(place, &site.place) {
        site.user_code
    } else {
        !site.user_code || !sites::in_installed_package(&place.file)
    };
    if user {
        return Some(qualname);
    }
    if qualname.rsplit('.').next() == Some("__init__") {
        // A library's constructor (a model's layers making their parameters) runs once, when
        // the program builds the model: the program's own line that did it is the one to see.
        return site
            .context
            .as_ref()
            .filter(|c| has_file(c) && !std::ptr::eq(*c, place))
            .map(|c| enclosing(&c.function));
    }
    Some(format!("{}:{qualname}", library_module(&place.file)))
}

/// The function a comprehension, generator expression or lambda is written in
/// (`main.<locals>.<genexpr>` -> `main`; at the top level, `<module>`).
fn enclosing(qualname: &str) -> String {
    let mut name = qualname;
    loop {
        let last = name.rsplit('.').next().unwrap_or(name);
        if !last.starts_with('<') || last == "<module>" {
            return name.to_string();
        }
        match name.rsplit_once(".<locals>.") {
            Some((outer, _)) => name = outer,
            None => return "<module>".to_string(),
        }
    }
}

/// A library file as `-f` names it: the dotted module of an installed package's file, else the
/// file's path.
fn library_module(file: &str) -> String {
    let installed = sites::INSTALLED_DIRS
        .iter()
        .filter_map(|d| file.rfind(d).map(|i| &file[i + d.len()..]))
        .next();
    match installed.and_then(|rel| rel.strip_suffix(".py")) {
        Some(rel) => {
            let rel = rel.strip_suffix("/__init__").unwrap_or(rel);
            rel.replace('/', ".")
        }
        None => file.to_string(),
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
