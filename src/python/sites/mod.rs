//! Allocation sites: for the thread that allocates, the innermost Python frame outside torch,
//! the standard library and memprof (the site), and beside it the line that led there (the
//! context): the innermost frame of the user's own code when the site is a library's
//! (a transformers `modeling_*.py` line reached from `trainer.train()`), else the site's nearest
//! caller outside torch (a helper's caller). Read natively on the allocation path (`layout`), with
//! each code object classified once, each (site, context) instruction pair cached, and the chains
//! of frames each thread's walks went through remembered (`memo`); strings
//! are copied when a site is first seen, so the table outlives the code objects. Registered with
//! `capture::peak` as its resolver; `stacks` reads whole stacks for `--history`; `backward`
//! gives autograd's threads the line that runs the backward; `compiled` maps the lines of
//! torch.compile's generated code back to the source lines their FX nodes came from. Uses
//! `capture` and `torch`.
mod backward;
mod compiled;
pub mod layout;
mod memo;
mod stacks;

use crate::capture::int_hash::IntMap;
use crate::capture::peak;
use compiled::{Chain, LineMap};
use layout::{CodeIdentity, RawFrame};
use pyo3::prelude::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

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
    /// Whether `place` (and `context`, when it comes from the same graph) is where a compiled
    /// graph's FX node came from: an attribution of the graph's buffer, not a line that ran.
    pub compiled: bool,
}

/// The folders installed packages live in (any environment's: a layered venv's, the system's).
pub const INSTALLED_DIRS: [&str; 2] = ["/site-packages/", "/dist-packages/"];

/// Whether `file` belongs to an installed package.
pub fn in_installed_package(file: &str) -> bool {
    INSTALLED_DIRS.iter().any(|d| file.contains(d))
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
    /// Code inductor generated for a compiled graph, with a line map: each line stands for the
    /// source frames of the FX node it came from.
    Compiled,
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
        // `__init__`: the interpreter's own shim frame that runs a class's `__init__` when a call
        // to the class is specialized (`_Py_InitCleanup`, 3.13+); 3.14 leaves it on the chain as
        // a thread-owned frame, where it stood as the site of a constructor's allocations.
        if file.starts_with("<frozen") || file.starts_with("<memprof") || file == "__init__" {
            return Class::Skip;
        }
        if starts(&self.tool_prefixes)
            || self.skip_markers.iter().any(|m| file.contains(m.as_str()))
        {
            return Class::Skip;
        }
        if in_installed_package(file) {
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
    /// The line map of a compiled graph's file.
    line_map: Option<Arc<LineMap>>,
    /// `function_key` of its file and qualified name.
    function: u64,
    /// torch's `nn.Module` call machinery (`_call_impl`): a frame of it on the stack means the
    /// allocation is made inside a module call.
    module_call: bool,
}

/// The file of `nn.Module.__call__` (`_wrapped_call_impl`, `_call_impl`).
const MODULE_CALL_FILE: &str = "torch/nn/modules/module.py";

/// The name that real and compiled frames of one function share: the name alone, not the
/// qualified one (a stack trace names a function, a code object qualifies it), and dynamo's
/// `torch_dynamo_resume_in_<name>_at_<line>`, the part of a function after a graph break, as
/// `<name>`.
fn function_name(qualname: &str) -> &str {
    let name = qualname.rsplit('.').next().unwrap_or(qualname);
    name.strip_prefix("torch_dynamo_resume_in_")
        .and_then(|rest| rest.rsplit_once("_at_"))
        .map_or(name, |(inner, _)| inner)
}

/// What names a function across real and compiled frames: its file and `function_name`, hashed.
pub(crate) fn function_key(file: &str, qualname: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (file, function_name(qualname)).hash(&mut h);
    h.finish()
}

/// Whether `p` is a frame of the targeted function `t`: its file, within its lines, of a function
/// of its name (`function_name`).
pub fn in_target(p: &Place, t: &peak::TargetRange) -> bool {
    p.file == t.file
        && (t.first_line..=t.last_line.max(t.first_line)).contains(&p.line)
        && function_name(&p.function) == function_name(&t.qualname)
}

/// A frame as the site finder weighs it: one that ran, or one a compiled line stands for.
#[derive(Clone)]
enum Frame {
    Real(RawFrame),
    Virtual(Chain, usize),
}

/// What identifies a frame for the cache: its code's generation, its instruction, and for a
/// compiled line's frames 1 + the index in its chain (0: the frame itself).
type FrameKey = (u32, i32, u32);

/// What a resolved site is cached by: its frame, its context's, and the innermost compiled
/// instruction's (generation, offset), whose line's tag names a module.
type InstructionKey = (FrameKey, FrameKey, (u32, i32));

/// The site and its context, as the walk outward finds them.
#[derive(Default)]
struct Pick {
    site: Option<(Frame, Class, FrameKey)>,
    context: Option<(Frame, FrameKey)>,
    compiled: bool,
    /// The function whose frame the last compiled chain began in: dynamo runs it as transformed
    /// code, a real frame standing at its first line, which the chain's frames already stand for.
    compiled_root: Option<u64>,
}

impl Pick {
    /// Weighs the next frame outward; false once the context is found.
    fn offer(&mut self, class: Class, key: FrameKey, frame: impl FnOnce() -> Frame) -> bool {
        if class == Class::Skip {
            return true;
        }
        match self.site {
            None => {
                self.site = Some((frame(), class, key));
                true
            }
            // A library's site: the user's innermost line is its context.
            Some((_, Class::Library, _)) if class != Class::User => true,
            Some(_) => {
                self.context = Some((frame(), key));
                false
            }
        }
    }
}

#[derive(Default)]
struct Table {
    rules: Rules,
    codes: IntMap<usize, CodeInfo>,
    generations: u32,
    /// (site frame, context frame, innermost compiled instruction) -> (site id, its line's tag).
    by_instruction: IntMap<InstructionKey, (u32, u32)>,
    /// Generated files of compiled graphs -> their line maps (`register_compiled`).
    line_maps: HashMap<String, Arc<LineMap>>,
    /// (generation, offset) of a compiled graph's instruction -> the frames its line stands for,
    /// and the line's tag.
    compiled_lines: IntMap<(u32, i32), (Option<Chain>, u32)>,
    /// Site id -> the compiled chains it was found in (for attributing to outer frames).
    chains: IntMap<u32, Vec<Chain>>,
    by_site: HashMap<Site, u32>,
    /// Site id - 1 -> site (id 0 is `peak::UNKNOWN_SITE`).
    sites: Vec<Site>,
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);
/// Whether the native layout matched the public API (checked once, at start).
static READABLE: AtomicBool = AtomicBool::new(false);

impl Table {
    /// (class, generation, function key, whether it is `nn.Module`'s call machinery).
    fn code(&mut self, code: usize) -> (Class, u32, u64, bool) {
        // SAFETY: `code` belongs to a frame of the thread being read: alive.
        let identity = unsafe { layout::identity(code) };
        if let Some(info) = self.codes.get(&code) {
            if info.identity == identity {
                return (info.class, info.generation, info.function, info.module_call);
            }
        }
        // SAFETY: the code's file name is a live str.
        let file = unsafe { layout::text_of(identity.filename) };
        self.generations += 1;
        let line_map = self.line_maps.get(&file).cloned();
        // SAFETY: as the file name.
        let qualname = unsafe { layout::text_of(identity.qualname) };
        let info = CodeInfo {
            module_call: file.ends_with(MODULE_CALL_FILE),
            function: function_key(&file, &qualname),
            identity,
            class: if line_map.is_some() {
                Class::Compiled
            } else {
                self.rules.classify(&file)
            },
            generation: self.generations,
            line_map,
        };
        let out = (info.class, info.generation, info.function, info.module_call);
        self.codes.insert(code, info);
        out
    }

    /// The frames a compiled graph's instruction stands for (cached: reading a line is a walk
    /// of the line table, and a graph's `call` is long).
    fn compiled_chain(&mut self, f: RawFrame, generation: u32) -> (Option<Chain>, u32) {
        if let Some(found) = self.compiled_lines.get(&(generation, f.offset)) {
            return found.clone();
        }
        let Some(map) = self.codes.get(&f.code).and_then(|c| c.line_map.clone()) else {
            return (None, 0);
        };
        // SAFETY: the frame's code object is alive while its thread is in the allocator.
        let line = unsafe { layout::line_of(f.code, f.offset) };
        let found = (
            line.and_then(|l| map.chain_at(l)),
            line.map_or(0, |l| map.tag_at(l)),
        );
        self.compiled_lines
            .insert((generation, f.offset), found.clone());
        found
    }

    /// The site of the frames `visit` is given, innermost first (UNKNOWN_SITE if none counts),
    /// the tag of the innermost compiled graph's line among them (0: none), and whether a module
    /// call's frame was among those walked (up to the site's context).
    /// A compiled graph's frame counts as the source frames its line stands for, in their place.
    /// With `noting`, also the chain of frames walked, for `memo` (None where it cannot stand
    /// for the site: a compiled graph's frame on it, or no context found).
    fn resolve(
        &mut self,
        frames: impl FnOnce(&mut dyn FnMut(RawFrame) -> bool),
        noting: bool,
    ) -> (peak::Found, Option<memo::Chain>) {
        let mut pick = Pick::default();
        let mut walked = memo::Chain::default();
        let mut notable = noting;
        // The innermost compiled instruction (its generation and offset) and its line's tag.
        let mut innermost: Option<((u32, i32), u32)> = None;
        let mut in_module = false;
        frames(&mut |f| {
            let (class, generation, function, module_call) = self.code(f.code);
            in_module |= module_call;
            if notable {
                walked.frames.push((f.frame, f.code));
            }
            if class != Class::Compiled {
                // The compiled region's own function, as dynamo runs it (the part before a
                // graph break and the resumed rest alike): its frames stand at the call of the
                // graph, whose frames came first.
                if class != Class::Skip && pick.compiled_root.is_some() {
                    if pick.compiled_root == Some(function) {
                        return true;
                    }
                    pick.compiled_root = None;
                }
                let had_site = pick.site.is_some();
                let more = pick.offer(class, (generation, f.offset, 0), || Frame::Real(f));
                if !had_site && pick.site.is_some() {
                    walked.site = walked.frames.len().saturating_sub(1);
                    walked.site_generation = generation;
                } else if !more {
                    walked.context_generation = generation;
                }
                return more;
            }
            notable = false;
            let (chain, tag) = self.compiled_chain(f, generation);
            if innermost.is_none() {
                innermost = Some(((generation, f.offset), tag));
            }
            let Some(chain) = chain else {
                return true;
            };
            pick.compiled_root = chain.last().map(|v| v.function);
            for (i, v) in chain.iter().enumerate() {
                let key = (generation, f.offset, i as u32 + 1);
                let had_site = pick.site.is_some();
                let more = pick.offer(v.class, key, || Frame::Virtual(chain.clone(), i));
                if !had_site && pick.site.is_some() {
                    pick.compiled = true;
                }
                if !more {
                    return false;
                }
            }
            true
        });
        let (compiled_at, tag) = innermost.unwrap_or(((0, -1), 0));
        walked.in_module = in_module;
        let walked = (notable && pick.site.is_some() && pick.context.is_some()).then_some(walked);
        let found = |site: u32, tag: u32| peak::Found {
            site,
            tag,
            in_module,
        };
        let Some((f, class, site_key)) = pick.site else {
            return (found(peak::UNKNOWN_SITE, tag), None);
        };
        let key = (
            site_key,
            pick.context.as_ref().map_or((0, -1, 0), |c| c.1),
            compiled_at,
        );
        if let Some(&(id, tag)) = self.by_instruction.get(&key) {
            return (found(id, tag), walked);
        }
        let chain = match &f {
            Frame::Virtual(chain, _) => Some(chain.clone()),
            Frame::Real(_) => None,
        };
        let site = Site {
            place: place(&f),
            context: pick.context.map(|(c, _)| place(&c)),
            user_code: class == Class::User,
            compiled: pick.compiled,
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
        if let Some(chain) = chain {
            let known = self.chains.entry(id).or_default();
            if !known
                .iter()
                .any(|c| Arc::ptr_eq(c, &chain) || **c == *chain)
            {
                let targets: Vec<u64> = peak::targets()
                    .iter()
                    .filter(|t| chain.iter().any(|v| in_target(&v.place, t)))
                    .map(|t| t.id)
                    .collect();
                if !targets.is_empty() {
                    peak::attribute_later(id, targets);
                }
                known.push(chain);
            }
        }
        self.by_instruction.insert(key, (id, tag));
        (found(id, tag), walked)
    }
}

fn place(f: &Frame) -> Place {
    let f = match f {
        Frame::Real(f) => *f,
        Frame::Virtual(chain, i) => return chain[*i].place.clone(),
    };
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
pub(crate) fn site_here() -> peak::Found {
    const NONE: peak::Found = peak::Found {
        site: peak::UNKNOWN_SITE,
        tag: 0,
        in_module: false,
    };
    if !READABLE.load(Ordering::Relaxed) {
        return NONE;
    }
    // SAFETY: this thread's own state (null on a thread that never ran Python); no GIL needed
    // to read its frames while it is inside the allocator.
    let tstate = unsafe { pyo3::ffi::PyGILState_GetThisThreadState() };
    if tstate.is_null() {
        return NONE;
    }
    let epoch = memo::epoch();
    if let Some(epoch) = epoch {
        // The chain of a walk made before from these frames: its site's and context's
        // instructions now name the site, where the table has seen them (the walk reads frames
        // only, outside the table's lock).
        // SAFETY: as above; the layout was checked at start.
        match memo::replay(epoch, |visit| unsafe { layout::walk(tstate, visit) }) {
            // A thread that runs no Python now (autograd's device threads): no site, and no lock.
            memo::Replay::NoFrames => return NONE,
            memo::Replay::Found(r) => {
                if let Some((site, tag)) = r.named {
                    return peak::Found {
                        site,
                        tag,
                        in_module: r.in_module,
                    };
                }
                let key = (
                    (r.site.0, r.site.1, 0),
                    (r.context.0, r.context.1, 0),
                    (0, -1),
                );
                let table = TABLE.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(&(site, tag)) = table.as_ref().and_then(|t| t.by_instruction.get(&key))
                {
                    drop(table);
                    memo::remember(epoch, &r, site, tag);
                    return peak::Found {
                        site,
                        tag,
                        in_module: r.in_module,
                    };
                }
            }
            memo::Replay::Missed => {}
        }
    }
    let mut guard = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(table) = guard.as_mut() else {
        return NONE;
    };
    // SAFETY: as above; the layout was checked at start.
    let (found, chain) = table.resolve(
        |visit| unsafe { layout::walk(tstate, visit) },
        epoch.is_some(),
    );
    drop(guard);
    if let (Some(epoch), Some(chain)) = (epoch, chain) {
        memo::note(epoch, chain);
    }
    found
}

/// The calling thread's whole stack (the reader `capture::history` calls inside the allocator,
/// for `--history`), as an id of `stacks()`; 0 where it runs no Python.
fn stack_here() -> u32 {
    if !READABLE.load(Ordering::Relaxed) {
        return 0;
    }
    // SAFETY: as in `site_here`.
    unsafe {
        let tstate = pyo3::ffi::PyGILState_GetThisThreadState();
        if tstate.is_null() {
            return 0;
        }
        stacks::stack_here(tstate, memo::epoch())
    }
}

/// Every whole stack read so far, by id (id 1 first), innermost frame first.
pub fn stacks() -> Vec<Vec<Place>> {
    stacks::all()
}

/// Starts finding sites: the rules for files, checked against the public frame API first.
/// `hidden`: where memprof's own frames are (its package), which whole stacks leave out;
/// `launcher`: the files of the wheel's command that runs the script, where stacks end.
/// Returns whether sites can be read on this Python (else every site is unknown).
#[pyfunction]
#[pyo3(signature = (
    tool_prefixes, skip_markers, library_prefixes, user_prefixes, hidden=Vec::new(),
    launcher=Vec::new()
))]
pub fn sites_start(
    py: Python<'_>,
    tool_prefixes: Vec<String>,
    skip_markers: Vec<String>,
    library_prefixes: Vec<String>,
    user_prefixes: Vec<String>,
    hidden: Vec<String>,
    launcher: Vec<String>,
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
    // A new table: what the threads' chains name is another table's.
    memo::invalidate();
    memo::watch_code_objects();
    peak::set_resolver(site_here);
    stacks::start(hidden, launcher);
    crate::capture::history::set_stack_reader(stack_here);
    readable
}

/// Sites are no longer read (an in-process session ended): the code watcher is taken off, so
/// that nothing of memprof stays in the program. The table stays, for the report.
pub fn stop() {
    memo::unwatch_code_objects();
}

/// A compiled graph's generated file as inductor loaded it, with torch's map of its lines:
/// (first line, the FX node's frames innermost first as (file, line, qualified name)); and with
/// `--modules`, the tags of its lines as (first line, tag) (`Tracker::tagged_totals`).
#[pyfunction]
#[pyo3(signature = (path, entries, tags=Vec::new()))]
pub fn register_compiled(path: String, entries: Vec<compiled::Entry>, tags: Vec<(u32, u32)>) {
    let mut table = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(table) = table.as_mut() else {
        return;
    };
    let map = Arc::new(LineMap::new(entries, tags, &table.rules));
    table.line_maps.insert(path, map);
    // The file's code objects may have been classified before the map came (its module's own
    // lines run while it loads); generations keep growing, so cached sites stay apart.
    table.codes.clear();
    memo::invalidate();
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

/// An optimizer's step ended: a mark on the timeline.
#[pyfunction]
pub fn optimizer_stepped() {
    peak::with(|t| t.optimizer_stepped());
}

/// The source frames of each compiled site, innermost first, by site id: every chain of
/// frames it was found in (a line of a function may be reached from several callers).
pub fn compiled_chains() -> Vec<(u32, Vec<Vec<Place>>)> {
    TABLE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map(|t| {
            let mut out: Vec<_> = t
                .chains
                .iter()
                .map(|(&id, chains)| {
                    let chains = chains
                        .iter()
                        .map(|c| c.iter().map(|v| v.place.clone()).collect())
                        .collect();
                    (id, chains)
                })
                .collect();
            out.sort_by_key(|(id, _)| *id);
            out
        })
        .unwrap_or_default()
}

/// Every source line that an FX node of a loaded compiled graph came from, per torch's line maps
/// (a node whose kernel was fused into a later node's is not among them).
pub fn compiled_node_lines() -> std::collections::HashSet<Place> {
    TABLE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map(|t| {
            t.line_maps
                .values()
                .flat_map(|m| m.frames())
                .map(|v| v.place.clone())
                .collect()
        })
        .unwrap_or_default()
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
