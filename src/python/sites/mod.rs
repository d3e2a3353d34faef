//! Allocation sites: for the thread that allocates, the innermost Python frame outside torch,
//! the standard library and memprof (the site), and beside it the line that led there (the
//! context): the innermost frame of the user's own code when the site is a library's
//! (a transformers `modeling_*.py` line reached from `trainer.train()`), else the site's nearest
//! caller outside torch (a helper's caller). Read natively on the allocation path (`layout`), with
//! each code object classified once and each (site, context) instruction pair cached; strings
//! are copied when a site is first seen, so the table outlives the code objects. Registered with
//! `capture::peak` as its resolver; `backward` gives autograd's threads the line that runs the
//! backward. Uses `capture` and `torch`.
mod backward;
pub mod layout;

use crate::capture::int_hash::IntMap;
use crate::capture::peak;
use layout::{CodeIdentity, RawFrame};
use pyo3::prelude::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

pub use backward::BackwardEntry;

/// One frame of a site, as the report names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Place {
    pub file: String,
    pub line: u32,
    pub function: String,
}

/// A site: where the allocation was made, and the line that led there.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Site {
    pub place: Place,
    pub context: Option<Place>,
    /// Whether `place` is the user's own code (the script's directory, outside installed packages).
    pub user_code: bool,
}

/// What a code object's file makes it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Class {
    /// torch, the standard library, memprof, inductor's generated code: looked through.
    Skip,
    /// An installed package's or another library's code.
    Library,
    /// The script's own code.
    User,
}

/// Which files are which (set by the bootstrap from the interpreter's paths).
#[derive(Default)]
struct Rules {
    /// Looked through even inside site-packages: torch's own folders (and triton's).
    tool_prefixes: Vec<String>,
    /// Looked through wherever they are: inductor's generated files.
    skip_markers: Vec<String>,
    /// The standard library's folders.
    library_prefixes: Vec<String>,
    /// The script's folder (the current one for -m).
    user_prefixes: Vec<String>,
}

impl Rules {
    fn classify(&self, file: &str) -> Class {
        let starts = |prefixes: &[String]| prefixes.iter().any(|p| file.starts_with(p.as_str()));
        if file.starts_with("<frozen") || file.starts_with("<memprof") {
            return Class::Skip;
        }
        if starts(&self.tool_prefixes)
            || self.skip_markers.iter().any(|m| file.contains(m.as_str()))
        {
            return Class::Skip;
        }
        if file.contains("/site-packages/") || file.contains("/dist-packages/") {
            return Class::Library;
        }
        if starts(&self.library_prefixes) {
            return Class::Skip;
        }
        if starts(&self.user_prefixes) || file.starts_with('<') {
            return Class::User;
        }
        Class::Library
    }
}

struct CodeInfo {
    identity: CodeIdentity,
    class: Class,
    /// Renewed when the address is reused by another code object, so cached sites keyed by it
    /// are not taken for the new one's.
    generation: u32,
}

#[derive(Default)]
struct Table {
    rules: Rules,
    codes: IntMap<usize, CodeInfo>,
    generations: u32,
    /// (site code generation, offset, context code generation, offset) -> site id.
    by_instruction: IntMap<(u32, i32, u32, i32), u32>,
    by_site: HashMap<Site, u32>,
    /// Site id - 1 -> site (id 0 is `peak::UNKNOWN_SITE`).
    sites: Vec<Site>,
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);
/// Whether the native layout matched the public API (checked once, at start).
static READABLE: AtomicBool = AtomicBool::new(false);

impl Table {
    fn code(&mut self, code: usize) -> (Class, u32) {
        // SAFETY: `code` belongs to a frame of the thread being read: alive.
        let identity = unsafe { layout::identity(code) };
        if let Some(info) = self.codes.get(&code) {
            if info.identity == identity {
                return (info.class, info.generation);
            }
        }
        // SAFETY: the code's file name is a live str.
        let file = unsafe { layout::text_of(identity.filename) };
        self.generations += 1;
        let info = CodeInfo {
            identity,
            class: self.rules.classify(&file),
            generation: self.generations,
        };
        let out = (info.class, info.generation);
        self.codes.insert(code, info);
        out
    }

    /// The site of the frames `visit` is given, innermost first (UNKNOWN_SITE if none counts).
    fn resolve(&mut self, frames: impl FnOnce(&mut dyn FnMut(RawFrame) -> bool)) -> u32 {
        let mut site: Option<(RawFrame, Class, u32)> = None;
        let mut context: Option<(RawFrame, u32)> = None;
        frames(&mut |f| {
            let (class, generation) = self.code(f.code);
            if class == Class::Skip {
                return true;
            }
            match site {
                None => {
                    site = Some((f, class, generation));
                    true
                }
                // A library's site: the user's innermost line is its context.
                Some((_, Class::Library, _)) if class != Class::User => true,
                Some(_) => {
                    context = Some((f, generation));
                    false
                }
            }
        });
        let Some((f, class, generation)) = site else {
            return peak::UNKNOWN_SITE;
        };
        let key = (
            generation,
            f.offset,
            context.map_or(0, |c| c.1),
            context.map_or(-1, |c| c.0.offset),
        );
        if let Some(&id) = self.by_instruction.get(&key) {
            return id;
        }
        let site = Site {
            place: place(f),
            context: context.map(|(c, _)| place(c)),
            user_code: class == Class::User,
        };
        let id = match self.by_site.get(&site) {
            Some(&id) => id,
            None => {
                self.sites.push(site.clone());
                let id = self.sites.len() as u32;
                self.by_site.insert(site, id);
                id
            }
        };
        self.by_instruction.insert(key, id);
        id
    }
}

fn place(f: RawFrame) -> Place {
    // SAFETY: the frame's code object is alive while its thread is in the allocator.
    unsafe {
        let id = layout::identity(f.code);
        Place {
            file: layout::text_of(id.filename),
            line: layout::line_of(f.code, f.offset).unwrap_or(0),
            function: layout::text_of(id.qualname),
        }
    }
}

/// The calling thread's site (the resolver `capture::peak` calls inside the allocator).
pub(crate) fn site_here() -> u32 {
    if !READABLE.load(Ordering::Relaxed) {
        return peak::UNKNOWN_SITE;
    }
    // SAFETY: this thread's own state (null on a thread that never ran Python); no GIL needed
    // to read its frames while it is inside the allocator.
    let tstate = unsafe { pyo3::ffi::PyGILState_GetThisThreadState() };
    if tstate.is_null() {
        return peak::UNKNOWN_SITE;
    }
    let mut table = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(table) = table.as_mut() else {
        return peak::UNKNOWN_SITE;
    };
    // SAFETY: as above; the layout was checked at start.
    table.resolve(|visit| unsafe { layout::walk(tstate, visit) })
}

/// Starts finding sites: the rules for files, checked against the public frame API first.
/// Returns whether sites can be read on this Python (else every site is unknown).
#[pyfunction]
pub fn sites_start(
    py: Python<'_>,
    tool_prefixes: Vec<String>,
    skip_markers: Vec<String>,
    library_prefixes: Vec<String>,
    user_prefixes: Vec<String>,
) -> bool {
    let readable = layout::matches_public_api(py);
    *TABLE.lock().unwrap_or_else(|e| e.into_inner()) = Some(Table {
        rules: Rules {
            tool_prefixes,
            skip_markers,
            library_prefixes,
            user_prefixes,
        },
        ..Table::default()
    });
    READABLE.store(readable, Ordering::Relaxed);
    peak::set_resolver(site_here);
    readable
}

/// What an optimizer's step says its tensors are: (storage data_ptr, 1 parameters, 3 optimizer
/// state), for the peak's categories (`capture::peak::Role`).
#[pyfunction]
pub fn mark_roles(roles: Vec<(u64, u8)>) {
    peak::with(|t| {
        for (ptr, code) in roles {
            t.mark_role(ptr, peak::Role::from_code(code));
        }
    });
}

/// The sites seen so far, by id (id 1 first).
pub fn sites() -> Vec<Site> {
    TABLE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map(|t| t.sites.clone())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
