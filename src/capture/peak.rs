//! The program's high-water mark and what it was made of. Every allocation and free on the
//! measured device reaches `on_event` (from the shim's allocation reporter, inside the
//! allocator); each live block keeps the site that allocated it (an id of `python::sites`'
//! table, found by the resolver the Python layer registers), and the live bytes per site are
//! copied at the moment `allocated_bytes.all.current` reached its maximum: for the whole run, and
//! for each targeted function while its calls run; the same events feed the run's timeline
//! (`timeline`, bounded). Its memory is the live blocks and the distinct sites, never the run's
//! length. The reporter queues the events and the tracker records them in batches (`queue`),
//! on a thread of its own where `MEMPROF_TRACKER_THREAD=1` asks for it (`worker`).
//! Uses `torch` (device stats), `int_hash` and `timeline`.
mod queue;
mod worker;

use super::growth::Ledger;
use super::int_hash::IntMap;
use super::timeline::{self, MarkKind, Timeline};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Site id 0: an allocation whose site could not be read (no Python frame on its thread, and no
/// backward running for it).
pub const UNKNOWN_SITE: u32 = 0;

/// One live block.
#[derive(Clone, Copy)]
struct Block {
    site: u32,
    bytes: i64,
    serial: u64,
    /// Allocated by a backward pass.
    in_backward: bool,
    /// Allocated while an `nn.Module` was called (a frame of its `__call__` on the stack).
    in_module: bool,
    /// The backward passes begun before it was allocated: a line's temporary is freed before
    /// another begins (a line run again in the next step frees the last step's result).
    passes: u32,
    /// What the program uses it as, where known (`mark_gradients`, `mark_role`).
    role: Role,
}

impl Block {
    /// Whether its free outside a backward pass needs the freeing line, where a copy of a
    /// maximum holds it: it has no known role, and no backward pass made it (its fate is read
    /// from where it ends: `Role::fate`).
    fn fate_by_freeing_line(&self) -> bool {
        self.role == Role::Other && !self.in_backward
    }
}

/// What a block is to the program, where memprof learns it while the block is live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Role {
    #[default]
    Other,
    Parameters,
    Gradients,
    OptimizerState,
    /// A block of a CUDA graph's private pool (allocated while a graph was captured, or while
    /// torch's CUDA-graph trees ran a warm-up in their pool).
    CudaGraphPool,
    /// Buffers of the models (named by the inventory at the end).
    Buffers,
    /// Made outside a backward pass and freed by one: what autograd saved for the backward
    /// (torch's ACTIVATION); also a module call's outputs the program held past their line
    /// (the logits).
    Activations,
    /// Made by a backward pass and freed before it was used as a gradient of a parameter:
    /// gradients of activations in flight, the backward's own intermediates (torch's
    /// AUTOGRAD_DETAIL).
    AutogradTemporaries,
    /// Freed at the line that allocated it, outside a backward pass: an op's or a line's
    /// intermediates, workspaces of one call (cuDNN's), foreach optimizers' scratch.
    Temporaries,
    /// Made outside any module call and held past its line: the batch, targets, masks, what
    /// the program keeps outside its models.
    Inputs,
    /// Still live at the end and held by no tensor the program could reach: a library's
    /// workspace (cuBLAS's), kept by C++.
    Workspaces,
}

impl Role {
    /// Every role, in the order of their indices (`index`).
    pub const ALL: [Role; super::timeline::CATEGORIES] = [
        Role::Other,
        Role::Parameters,
        Role::Gradients,
        Role::OptimizerState,
        Role::CudaGraphPool,
        Role::Buffers,
        Role::Activations,
        Role::AutogradTemporaries,
        Role::Temporaries,
        Role::Inputs,
        Role::Workspaces,
    ];

    /// Its place in `ALL` (the timeline's category index).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The category's name in the report (as `--tensors` names them).
    pub fn name(self) -> &'static str {
        match self {
            Role::Other => "other",
            Role::Parameters => "parameters",
            Role::Gradients => "gradients",
            Role::OptimizerState => "optimizer_state",
            Role::CudaGraphPool => "cuda_graph_pool",
            Role::Buffers => "buffers",
            Role::Activations => "activations",
            Role::AutogradTemporaries => "autograd_temporaries",
            Role::Temporaries => "temporaries",
            Role::Inputs => "inputs",
            Role::Workspaces => "workspaces",
        }
    }

    /// The role a report names `name` (the inventory's categories), Other if none.
    pub fn from_name(name: &str) -> Role {
        [
            Role::Parameters,
            Role::Buffers,
            Role::Gradients,
            Role::OptimizerState,
            Role::CudaGraphPool,
        ]
        .into_iter()
        .find(|r| r.name() == name)
        .unwrap_or(Role::Other)
    }

    /// What a block of no known role was, from how it ended (`Ending`): freed by a backward pass
    /// or at a line, after how many backward passes, or still live at the end.
    fn fate(b: &Block, end: Ending) -> Role {
        match end {
            _ if b.in_backward => Role::AutogradTemporaries,
            // The gradient a backward starts from, made at the line that runs it.
            Ending::Freed {
                in_backward: true,
                site,
                ..
            } if site == b.site => Role::AutogradTemporaries,
            Ending::Freed {
                in_backward: true, ..
            } => Role::Activations,
            // The same gradient, let go by that line once the backward it ran returned.
            Ending::Freed {
                site,
                passes,
                backward_site,
                ..
            } if site == b.site && site == backward_site && passes == b.passes.wrapping_add(1) => {
                Role::AutogradTemporaries
            }
            Ending::Freed { site, passes, .. }
                if site == b.site && site != UNKNOWN_SITE && passes == b.passes =>
            {
                Role::Temporaries
            }
            Ending::Live { held: false } => Role::Workspaces,
            _ if b.in_module => Role::Activations,
            _ => Role::Inputs,
        }
    }

    /// From the bootstrap's code: 1 parameters, 2 gradients, 3 optimizer state, 4 a CUDA
    /// graph's private pool.
    pub fn from_code(code: u8) -> Role {
        match code {
            1 => Role::Parameters,
            2 => Role::Gradients,
            3 => Role::OptimizerState,
            4 => Role::CudaGraphPool,
            _ => Role::Other,
        }
    }
}

/// How a block's life ended, for its fate (`Role::fate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Freed: by a backward pass (`site`: the line running it), or at `site` (UNKNOWN_SITE: not
    /// looked up), when `passes` backward passes had begun.
    Freed {
        in_backward: bool,
        site: u32,
        passes: u32,
        /// The line that ran the latest backward pass.
        backward_site: u32,
    },
    /// Live when the run ended; `held`: by a tensor the program could reach.
    Live { held: bool },
}

/// What the reporter says of one allocation or free.
#[derive(Clone, Copy, Debug, Default)]
pub struct Event {
    pub ptr: u64,
    /// > 0: an allocation of that many bytes; < 0: a free.
    pub bytes: i64,
    /// An allocation's site; a free's, where looked up (`needs_free_site`), else UNKNOWN_SITE.
    pub site: u32,
    /// Made (or freed) for a backward pass.
    pub in_backward: bool,
    /// An allocation made inside an `nn.Module` call.
    pub in_module: bool,
    /// The allocator's own totals after it (CUDA), None on the CPU (memprof's sum then).
    pub totals: Option<(i64, i64)>,
}

/// The allocation that set a maximum.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Moment {
    /// allocated_bytes.all.current then (the maximum).
    pub allocated: i64,
    /// reserved_bytes.all.current then (CUDA; the allocated bytes on the CPU).
    pub reserved: i64,
    /// The site of the allocation that reached it (UNKNOWN_SITE when a watch began at a maximum).
    pub site: u32,
    /// Whether it was allocated by a backward pass (autograd's threads, or the thread running it).
    pub in_backward: bool,
    /// Its number among the allocations memprof saw (1 = the first).
    pub allocation: u64,
    /// The how-many-th allocation of its site it was.
    pub site_allocations: u64,
    /// Seconds since tracking started.
    pub seconds: f64,
}

/// The live bytes by site at a maximum.
#[derive(Clone, Debug, Default)]
pub struct Composition {
    pub moment: Moment,
    /// (site, live bytes, live blocks, the highest allocation serial among them), every site
    /// with live bytes.
    pub sites: Vec<SiteShare>,
    /// Bytes the allocator counted that memprof saw no allocation of (allocated before tracking
    /// started, or on a thread without the reporter): the maximum minus Σ sites.
    pub unseen_bytes: i64,
    /// The allocation serial at the maximum: a block still live later with a serial at most this
    /// was live then (how categories are matched afterwards).
    pub serial: u64,
    /// Bytes per site and role of the blocks whose role memprof learnt while they were live
    /// (gradients: allocated by a backward pass and live when it returned; parameters and
    /// optimizer state: named by an optimizer's step), as far as known by now.
    pub role_bytes: IntMap<(u32, Role), i64>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SiteShare {
    pub site: u32,
    pub bytes: i64,
    pub blocks: u64,
}

/// One maximum being followed: the run's, or a targeted function's across its calls.
#[derive(Default)]
struct Watch {
    max: i64,
    moment: Moment,
    /// A new maximum since the last copy: the next free (or the end) copies the sites first.
    dirty: bool,
    copy: Option<Composition>,
    /// Calls of the function running now (the run's watch is always on).
    active: u32,
    /// A compiled graph's buffers count towards it (`attribute_site`), whether or not a call
    /// of it runs.
    compiled: bool,
}

/// A site's counts beside its live bytes.
#[derive(Clone, Copy, Debug, Default)]
struct SiteCounts {
    /// Live blocks.
    blocks: u64,
    /// Allocations over the run.
    allocations: u64,
    /// Bytes allocated over the run, and of them by backward passes.
    allocated: i64,
    backward_allocated: i64,
}

/// The tracker of one device.
pub struct Tracker {
    live: IntMap<u64, Block>,
    /// Live bytes per site (the growth ledgers read it as a slice).
    site_bytes: Vec<i64>,
    /// The rest of each site's counts, side by side: an allocation touches one cache line for
    /// them, not four (the allocator's events arrive between kernels' launches, cache cold).
    site_counts: Vec<SiteCounts>,
    /// (allocations, bytes, of which in a CUDA graph's pool) per tag of compiled graphs' lines
    /// (`count_tagged`).
    tagged: Vec<(u64, i64, i64)>,
    /// Replays of CUDA graphs (`note_graph_replay`): they allocate nothing.
    graph_replays: u64,
    /// Live bytes per site and known role.
    site_roles: IntMap<(u32, Role), i64>,
    /// Σ live bytes seen: the total on the CPU (with `unseen_live`), where libtorch passes none.
    seen_total: i64,
    /// The highest `seen_total` reached: the most that what was allocated since tracking started
    /// held at once (an in-process session's own peak, whatever was live before it).
    seen_max: i64,
    /// CPU: the bytes memprof's tally counted live when tracking started (an earlier session's
    /// tensors, a test's cached model), less those of them freed since. Part of the CPU total,
    /// as the CUDA allocator's own total includes what was live before.
    unseen_live: i64,
    /// allocated_bytes.all.current after the latest event.
    last_total: i64,
    /// Backward passes begun (`backward_started`), and the line that ran the latest.
    passes: u32,
    backward_site: u32,
    serial: u64,
    whole: Watch,
    /// Targeted functions' watches, by the recorder's function id.
    functions: IntMap<u64, Watch>,
    /// Sites of compiled graphs' buffers -> the targeted functions whose lines they came from:
    /// an allocation there counts towards those functions' maxima (they run as generated code,
    /// with no call of their own to watch).
    site_functions: IntMap<u32, Vec<u64>>,
    started: Instant,
    /// `--trace`: every allocation and free seen, in order.
    trace: Option<TraceLog>,
    /// The size requested and the stream of the allocation recorded next (the CUDA
    /// allocator's trace entry), for the trace.
    requested: Option<(i64, u64)>,
    /// The `--modules` forward entry (+1; 0: none) of the allocation recorded next, for the
    /// trace.
    module: u32,
    /// Which blocks a copy of a maximum holds, for the queue.
    held: queue::Held,
    /// The run's memory over time (always on, bounded).
    timeline: Timeline,
    /// Which sites grow from one optimizer step to the next, and from one call of each
    /// targeted function (by id) to the next.
    steps: Ledger,
    calls: IntMap<u64, Ledger>,
}

/// The device's allocations and frees in order (`--trace`). Bounded: past `max` events it stops
/// and says so.
pub struct TraceLog {
    pub events: Vec<TraceRecord>,
    pub truncated: bool,
    /// The streams seen, in order of first use: a record's `stream` is an index here.
    pub streams: Vec<u64>,
    /// `--modules`' names of the entries (by entry id), given when the modules' report is made.
    pub module_names: Vec<String>,
    max: usize,
}

thread_local! {
    /// The `--modules` forward entry running innermost on this thread (+1; 0: none), which the
    /// trace names each allocation by.
    static THREAD_MODULE: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// The module call running innermost on this thread now (`--modules`' forward entry), or None.
pub fn set_thread_module(entry: Option<u32>) {
    THREAD_MODULE.with(|m| m.set(entry.map_or(0, |e| e.saturating_add(1))));
}

/// What a trace record is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceKind {
    /// An allocation (bytes > 0) or a free (bytes < 0) of a block.
    Block,
    /// The allocator's own segment events (CUDA): cudaMalloc, cudaFree, and expandable
    /// segments' pages mapped and unmapped; `bytes` is the segment's or the pages'.
    SegmentAlloc,
    SegmentFree,
    SegmentMap,
    SegmentUnmap,
}

impl TraceKind {
    /// A segment event, by the shim's number for torch's action (cuda_trace.cpp, the history's
    /// `Action`).
    fn of_segment(kind: i32) -> Option<Self> {
        use super::history::Action;
        Some(match Action::of(kind)? {
            Action::SegmentAlloc => TraceKind::SegmentAlloc,
            Action::SegmentFree => TraceKind::SegmentFree,
            Action::SegmentMap => TraceKind::SegmentMap,
            Action::SegmentUnmap => TraceKind::SegmentUnmap,
            _ => return None,
        })
    }
}

/// One allocation, free or segment event as the trace keeps it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TraceRecord {
    pub kind: TraceKind,
    /// The allocation's serial (a free names its allocation's; 0 for a segment event).
    pub serial: u64,
    /// The block's bytes; negative for a free.
    pub bytes: i64,
    /// The bytes the program asked for (CUDA: the allocator's trace entry; 0: not known).
    pub requested: i64,
    pub site: u32,
    /// The `--modules` forward entry running innermost on the allocating thread (+1; 0: none).
    pub module: u32,
    /// The allocation's stream (an index into `streams`).
    pub stream: u16,
}

impl TraceLog {
    /// The index of `stream` in the streams seen, added if new.
    fn stream_index(&mut self, stream: u64) -> u16 {
        let i = match self.streams.iter().position(|&s| s == stream) {
            Some(i) => i,
            None => {
                self.streams.push(stream);
                self.streams.len() - 1
            }
        };
        i.min(u16::MAX as usize) as u16
    }

    fn push(&mut self, event: TraceRecord) {
        if self.events.len() < self.max {
            self.events.push(event);
        } else {
            self.truncated = true;
        }
    }
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker {
            live: IntMap::default(),
            site_bytes: Vec::new(),
            site_counts: Vec::new(),
            tagged: Vec::new(),
            graph_replays: 0,
            site_roles: IntMap::default(),
            seen_total: 0,
            seen_max: 0,
            unseen_live: 0,
            last_total: 0,
            passes: 0,
            backward_site: UNKNOWN_SITE,
            serial: 0,
            whole: Watch {
                active: 1,
                ..Watch::default()
            },
            functions: IntMap::default(),
            site_functions: IntMap::default(),
            started: Instant::now(),
            trace: None,
            requested: None,
            module: 0,
            held: queue::Held::default(),
            timeline: Timeline::default(),
            steps: Ledger::default(),
            calls: IntMap::default(),
        }
    }
}

impl Tracker {
    /// An allocation (`bytes` > 0) or a free (< 0) of the block at `ptr`, outside any module
    /// call; `totals` as `Event`'s (the tests' shorthand for `record`).
    #[cfg(test)]
    pub fn on_event(
        &mut self,
        ptr: u64,
        bytes: i64,
        site: u32,
        in_backward: bool,
        totals: Option<(i64, i64)>,
    ) {
        self.record(Event {
            ptr,
            bytes,
            site,
            in_backward,
            in_module: false,
            totals,
        });
    }

    /// One allocation or free, as the reporter saw it.
    pub fn record(&mut self, e: Event) {
        if e.bytes > 0 {
            self.allocate(e);
        } else if e.bytes < 0 {
            let ending = self.freed_now(e.in_backward, e.site);
            if !self.free(e.ptr, ending) && e.totals.is_none() {
                // A block live before tracking started (CPU, where memprof keeps the total).
                self.unseen_live = (self.unseen_live + e.bytes).max(0);
            }
            let cpu_total = self.seen_total + self.unseen_live;
            let (total, reserved) = e.totals.unwrap_or((cpu_total, cpu_total));
            self.last_total = total;
            self.timeline
                .level(total, reserved, timeline::since(self.started));
        }
    }

    /// Whether the free of the block at `ptr` outside a backward pass needs the freeing site
    /// for its fate: a block of no known role that a maximum's copy holds (or will, once the
    /// pending one is taken). Most frees need none, and skip the frame walk.
    pub fn needs_free_site(&self, ptr: u64) -> bool {
        let Some(b) = self.live.get(&ptr) else {
            return false;
        };
        if !b.fate_by_freeing_line() {
            return false;
        }
        self.watches()
            .any(|w| w.dirty || w.copy.as_ref().is_some_and(|c| b.serial <= c.serial))
    }

    /// A free now, by a backward pass or not, at `site`: with the backward passes begun so far.
    fn freed_now(&self, in_backward: bool, site: u32) -> Ending {
        Ending::Freed {
            in_backward,
            site,
            passes: self.passes,
            backward_site: self.backward_site,
        }
    }

    fn watches(&self) -> impl Iterator<Item = &Watch> {
        std::iter::once(&self.whole).chain(self.functions.values())
    }

    fn allocate(&mut self, e: Event) {
        let Event {
            ptr,
            bytes,
            site,
            in_backward,
            in_module,
            totals,
        } = e;
        self.serial += 1;
        let i = site as usize;
        if i >= self.site_bytes.len() {
            self.site_bytes.resize(i + 1, 0);
            self.site_counts.resize(i + 1, SiteCounts::default());
        }
        // A block the tracker still holds at this address was freed where it could not see.
        if self.live.contains_key(&ptr) {
            self.free(ptr, self.freed_now(false, UNKNOWN_SITE));
        }
        if !in_backward {
            self.held.allocated(self.serial, ptr, self.live.len());
        }
        self.live.insert(
            ptr,
            Block {
                site,
                bytes,
                serial: self.serial,
                in_backward,
                in_module,
                passes: self.passes,
                role: Role::Other,
            },
        );
        let requested = self.requested.take();
        if let Some(log) = &mut self.trace {
            let (requested, stream) = requested.unwrap_or((0, 0));
            let stream = log.stream_index(stream);
            log.push(TraceRecord {
                kind: TraceKind::Block,
                serial: self.serial,
                bytes,
                requested,
                site,
                module: self.module,
                stream,
            });
        }
        self.site_bytes[i] += bytes;
        let counts = &mut self.site_counts[i];
        counts.blocks += 1;
        counts.allocations += 1;
        counts.allocated += bytes;
        if in_backward {
            counts.backward_allocated += bytes;
        }
        let site_allocations = counts.allocations;
        self.seen_total += bytes;
        self.seen_max = self.seen_max.max(self.seen_total);
        let cpu_total = self.seen_total + self.unseen_live;
        let (allocated, reserved) = totals.unwrap_or((cpu_total, cpu_total));
        self.last_total = allocated;
        self.timeline.allocated(site, bytes, self.serial);
        self.timeline
            .level(allocated, reserved, timeline::since(self.started));
        // Most allocations set no maximum: the moment (and its clock read) only when one does.
        let mut moment: Option<Moment> = None;
        let compiled_in = self.site_functions.get(&site);
        let watches = std::iter::once(&mut self.whole).chain(
            self.functions
                .iter_mut()
                .filter(|(id, w)| w.active > 0 || compiled_in.is_some_and(|ids| ids.contains(id)))
                .map(|(_, w)| w),
        );
        for w in watches.filter(|w| allocated > w.max) {
            w.max = allocated;
            w.moment = *moment.get_or_insert_with(|| Moment {
                allocated,
                reserved,
                site,
                in_backward,
                allocation: self.serial,
                site_allocations,
                seconds: self.started.elapsed().as_secs_f64(),
            });
            w.dirty = true;
        }
    }

    /// Whether the block at `ptr` was one memprof saw allocated. A block of no known role that
    /// a maximum's copy holds takes the role its `ending` gives it there.
    fn free(&mut self, ptr: u64, ending: Ending) -> bool {
        // The sites as they were at each maximum reached since the last free.
        if self.watches().any(|w| w.dirty) {
            self.settle();
        }
        let Some(block) = self.live.remove(&ptr) else {
            return false;
        };
        if self.held_by_copies(&block) {
            self.held.released(ptr);
        }
        let role = if block.role == Role::Other {
            let fate = Role::fate(&block, ending);
            self.name_in_copies(&block, fate);
            fate
        } else {
            block.role
        };
        self.timeline
            .freed(block.site, block.bytes, block.serial, role.index());
        if let Some(log) = &mut self.trace {
            log.push(TraceRecord {
                kind: TraceKind::Block,
                serial: block.serial,
                bytes: -block.bytes,
                requested: 0,
                site: block.site,
                module: 0,
                stream: 0,
            });
        }
        self.forget(block);
        true
    }

    /// CPU: the bytes memprof's tally counts live as tracking starts (what the program holds
    /// from before: they count towards the peak, as the CUDA allocator's total counts them).
    pub fn live_before(&mut self, bytes: i64) {
        self.unseen_live = bytes.max(0);
        self.last_total = self.seen_total + self.unseen_live;
        self.timeline.start_at(self.last_total);
    }

    /// This process was forked (a DataLoader worker): its peaks are its own from now on. The
    /// blocks it inherited stay live (the child holds them too), with their sites.
    pub fn forked(&mut self) {
        self.whole = Watch {
            active: 1,
            ..Watch::default()
        };
        self.functions
            .values_mut()
            .for_each(|w| *w = Watch::default());
        self.seen_max = self.seen_total;
        self.started = Instant::now();
        // The child's timeline starts now, holding what it inherited (by site; by category
        // once each block's fate is known, from the first point).
        self.timeline = Timeline::default();
        self.timeline.start_at(self.last_total);
        for b in self.live.values() {
            self.timeline.inherited(b.site, b.bytes);
        }
        self.held.restart();
        self.steps = Ledger::default();
        self.calls.clear();
    }

    /// The most bytes that what was allocated since tracking started held at once.
    pub fn seen_max(&self) -> i64 {
        self.seen_max
    }

    /// Records every allocation and free from now on (`--trace`), up to `max` events.
    pub fn record_trace(&mut self, max: usize) {
        TRACING.store(true, Ordering::Relaxed);
        self.trace = Some(TraceLog {
            events: Vec::new(),
            truncated: false,
            streams: Vec::new(),
            module_names: Vec::new(),
            max,
        });
    }

    /// One of the allocator's segment events, for the trace (if one is recorded).
    pub fn on_segment(&mut self, kind: TraceKind, bytes: i64, stream: u64) {
        if let Some(log) = &mut self.trace {
            let stream = log.stream_index(stream);
            log.push(TraceRecord {
                kind,
                serial: 0,
                bytes,
                requested: 0,
                site: 0,
                module: 0,
                stream,
            });
        }
    }

    /// `--modules`' names of its entries, by entry id, for the trace's allocations.
    pub fn name_trace_modules(&mut self, names: Vec<String>) {
        if let Some(log) = &mut self.trace {
            log.module_names = names;
        }
    }

    /// Whether a trace is being recorded.
    pub fn traces(&self) -> bool {
        self.trace.is_some()
    }

    /// The recorded trace, if one was asked for.
    pub fn take_trace(&mut self) -> Option<TraceLog> {
        TRACING.store(false, Ordering::Relaxed);
        self.trace.take()
    }

    fn forget(&mut self, block: Block) {
        let i = block.site as usize;
        self.site_bytes[i] -= block.bytes;
        self.site_counts[i].blocks -= 1;
        self.seen_total -= block.bytes;
        if block.role != Role::Other {
            *self.site_roles.entry((block.site, block.role)).or_default() -= block.bytes;
        }
    }

    /// What `site` allocated over the run: (allocations, bytes, of those bytes by backward
    /// passes).
    pub fn site_totals(&self, site: u32) -> (u64, i64, i64) {
        let c = self
            .site_counts
            .get(site as usize)
            .copied()
            .unwrap_or_default();
        (c.allocations, c.allocated, c.backward_allocated)
    }

    /// An allocation of `bytes` made by a compiled graph's line that carries `tag` (`in_pool`:
    /// while a CUDA graph captured, or a CUDA-graph tree warmed up in its pool).
    pub fn count_tagged(&mut self, tag: u32, bytes: i64, in_pool: bool) {
        let i = tag as usize;
        if i >= self.tagged.len() {
            self.tagged.resize(i + 1, (0, 0, 0));
        }
        let t = &mut self.tagged[i];
        t.0 += 1;
        t.1 += bytes;
        if in_pool {
            t.2 += bytes;
        }
    }

    /// (tag, allocations, bytes, of which in a CUDA graph's pool) of every tag that allocated.
    pub fn tagged_totals(&self) -> Vec<(u32, u64, i64, i64)> {
        self.tagged
            .iter()
            .enumerate()
            .filter(|(_, t)| t.0 > 0)
            .map(|(i, t)| (i as u32, t.0, t.1, t.2))
            .collect()
    }

    /// Every live block: (address, allocation serial). `--tensors`' inventory compares them
    /// with its previous look's, to walk the program's objects only when a block it cannot name
    /// otherwise is new.
    pub fn live_blocks(&self) -> Vec<(u64, u64)> {
        self.live.iter().map(|(ptr, b)| (*ptr, b.serial)).collect()
    }

    /// The serial of the latest allocation (a backward pass notes it when it starts).
    pub fn serial(&self) -> u64 {
        self.serial
    }

    /// A backward pass begins, run by the line at `site`: returns the serial of the latest
    /// allocation before it.
    pub fn backward_started(&mut self, site: u32) -> u64 {
        self.passes = self.passes.wrapping_add(1);
        self.backward_site = site;
        self.timeline
            .mark(MarkKind::Backward, timeline::since(self.started));
        self.serial
    }

    /// An optimizer's step ended (a mark on the timeline).
    pub fn optimizer_stepped(&mut self) {
        self.timeline
            .mark(MarkKind::Step, timeline::since(self.started));
        self.steps.boundary(&self.site_bytes);
    }

    /// The sites' growth from step to step (optimizer steps), and from call to call of each
    /// targeted function that was called (by id).
    pub fn growth(&self) -> (&Ledger, Vec<(u64, &Ledger)>) {
        let mut calls: Vec<(u64, &Ledger)> = self.calls.iter().map(|(id, l)| (*id, l)).collect();
        calls.sort_by_key(|(id, _)| *id);
        (&self.steps, calls)
    }

    /// The live bytes of `site` by category (`Role` index), from the blocks still live.
    pub fn live_roles_of(&self, site: u32) -> [i64; timeline::CATEGORIES] {
        let mut roles = [0i64; timeline::CATEGORIES];
        for b in self.live.values().filter(|b| b.site == site) {
            roles[b.role.index()] += b.bytes;
        }
        roles
    }

    /// Allocated and reserved bytes now, and the run's highest allocated (the live view).
    pub fn now(&self) -> (i64, i64, i64) {
        (
            self.last_total,
            self.timeline.reserved_now(),
            self.whole.max,
        )
    }

    /// Allocated bytes over time: the latest `n` timeline points' highest.
    pub fn history(&self, n: usize) -> Vec<i64> {
        self.timeline.highs(n)
    }

    /// The `n` sites holding the most live bytes now, the most first: (site, bytes).
    pub fn top_sites(&self, n: usize) -> Vec<(u32, i64)> {
        let mut sites: Vec<(u32, i64)> = self
            .site_bytes
            .iter()
            .enumerate()
            .filter(|(_, b)| **b > 0)
            .map(|(i, b)| (i as u32, *b))
            .collect();
        sites.sort_by_key(|(i, b)| (std::cmp::Reverse(*b), *i));
        sites.truncate(n);
        sites
    }

    /// The live bytes of `site` now.
    pub fn site_live_bytes(&self, site: u32) -> i64 {
        self.site_bytes.get(site as usize).copied().unwrap_or(0)
    }

    /// The timeline so far, with each block still live in its category (called after
    /// `name_remaining`, which gives them theirs).
    pub fn timeline(&self) -> timeline::Record {
        let live = self
            .live
            .values()
            .map(|b| (b.serial, b.bytes, b.role.index()));
        self.timeline
            .record(self.started.elapsed().as_secs_f64(), live)
    }

    /// A CUDA graph was replayed.
    pub fn note_graph_replay(&mut self) {
        self.graph_replays += 1;
    }

    /// The CUDA graphs' replays so far.
    pub fn graph_replays(&self) -> u64 {
        self.graph_replays
    }

    /// The blocks allocated after allocation `since` that are still live and of no known role
    /// take `role` (a CUDA graph's capture just ended: what it allocated is its pool's).
    pub fn mark_since(&mut self, since: u64, role: Role) {
        self.mark_live_since(since, role, |_| true);
    }

    /// A backward pass that started after allocation `since` returned: the blocks it allocated
    /// that are still live are gradients (the leaves' `.grad`, `torch.autograd.grad`'s results).
    pub fn mark_gradients(&mut self, since: u64) {
        self.mark_live_since(since, Role::Gradients, |b| b.in_backward);
    }

    /// The live blocks of no known role allocated after allocation `since`, of those `chosen`,
    /// take `role`.
    fn mark_live_since(&mut self, since: u64, role: Role, chosen: impl Fn(&Block) -> bool) {
        let blocks: Vec<u64> = self
            .live
            .iter()
            .filter(|(_, b)| b.serial > since && b.role == Role::Other && chosen(b))
            .map(|(&ptr, _)| ptr)
            .collect();
        for ptr in blocks {
            self.mark_role(ptr, role);
        }
    }

    /// The copies of maxima that `b` (of no known role until now) was live at learn its `role`.
    fn name_in_copies(&mut self, b: &Block, role: Role) {
        for c in self.copies_holding(b.serial) {
            *c.role_bytes.entry((b.site, role)).or_default() += b.bytes;
        }
    }

    /// The copies of maxima that a block allocated as `serial` and live now was live at.
    fn copies_holding(&mut self, serial: u64) -> impl Iterator<Item = &mut Composition> {
        std::iter::once(&mut self.whole)
            .chain(self.functions.values_mut())
            .filter_map(|w| w.copy.as_mut())
            .filter(move |c| serial <= c.serial)
    }

    /// The run ended: each live block of no known role takes the one `known` gives its address
    /// (the inventory's parameters, buffers, gradients, optimizer state, graph pools), else its
    /// fate (`held`: whether a tensor the program could reach holds the address).
    pub fn name_remaining(&mut self, known: impl Fn(u64) -> Role, held: impl Fn(u64) -> bool) {
        let blocks: Vec<(u64, Block)> = self
            .live
            .iter()
            .filter(|(_, b)| b.role == Role::Other)
            .map(|(&p, &b)| (p, b))
            .collect();
        for (ptr, b) in blocks {
            let role = match known(ptr) {
                Role::Other => Role::fate(&b, Ending::Live { held: held(ptr) }),
                role => role,
            };
            self.mark_role(ptr, role);
        }
    }

    /// The live block at `ptr` is used as `role` (an unknown address is ignored). The copies
    /// already taken of maxima it was live at learn it too.
    pub fn mark_role(&mut self, ptr: u64, role: Role) {
        let Some(b) = self.live.get_mut(&ptr) else {
            return;
        };
        if b.role == role {
            return;
        }
        let block = *b;
        let (old, site, bytes, serial) = (b.role, b.site, b.bytes, b.serial);
        b.role = role;
        if self.held_by_copies(&block) {
            self.held.released(ptr);
        }
        let mut live_roles = std::mem::take(&mut self.site_roles);
        let copies = self.copies_holding(serial).map(|c| &mut c.role_bytes);
        for map in std::iter::once(&mut live_roles).chain(copies) {
            if old != Role::Other {
                *map.entry((site, old)).or_default() -= bytes;
            }
            *map.entry((site, role)).or_default() += bytes;
        }
        self.site_roles = live_roles;
    }

    /// The live sites now.
    fn composition(&self) -> Composition {
        let sites = self
            .site_bytes
            .iter()
            .zip(self.site_counts.iter().map(|c| c.blocks))
            .enumerate()
            .filter(|(_, (&bytes, blocks))| bytes != 0 || *blocks != 0)
            .map(|(site, (&bytes, blocks))| SiteShare {
                site: site as u32,
                bytes,
                blocks,
            })
            .collect();
        Composition {
            moment: Moment::default(),
            sites,
            unseen_bytes: 0,
            serial: self.serial,
            role_bytes: self
                .site_roles
                .iter()
                .filter(|(_, &b)| b != 0)
                .map(|(&k, &b)| (k, b))
                .collect(),
        }
    }

    /// Allocations at `site` are made for the targeted functions `ids` (a compiled graph's
    /// buffers, attributed to their lines).
    pub fn attribute_site(&mut self, site: u32, ids: &[u64]) {
        let known = self.site_functions.entry(site).or_default();
        for &id in ids {
            if !known.contains(&id) {
                known.push(id);
                self.functions.entry(id).or_default().compiled = true;
            }
        }
    }

    /// A targeted function's call starts (`id`: the recorder's function id). Its maximum starts
    /// no lower than what is allocated now.
    pub fn function_started(&mut self, id: u64) {
        let allocated_now = self.last_total;
        self.timeline
            .mark(MarkKind::CallStart(id), timeline::since(self.started));
        let w = self.functions.entry(id).or_default();
        w.active += 1;
        if allocated_now > w.max || w.copy.is_none() && !w.dirty {
            w.max = allocated_now;
            w.moment = Moment {
                allocated: allocated_now,
                reserved: allocated_now,
                seconds: self.started.elapsed().as_secs_f64(),
                allocation: self.serial,
                ..Moment::default()
            };
            w.dirty = true;
        }
    }

    /// A targeted function's call ended.
    pub fn function_ended(&mut self, id: u64) {
        self.timeline
            .mark(MarkKind::CallEnd(id), timeline::since(self.started));
        self.calls.entry(id).or_default().boundary(&self.site_bytes);
        let settle = match self.functions.get_mut(&id) {
            Some(w) => {
                w.active = w.active.saturating_sub(1);
                w.dirty
            }
            None => false,
        };
        if settle {
            self.settle();
        }
    }

    /// Copies every pending maximum now (the end of a run, of a call).
    fn settle(&mut self) {
        let now = self.composition();
        let mut copied = false;
        for w in std::iter::once(&mut self.whole).chain(self.functions.values_mut()) {
            if w.dirty {
                w.dirty = false;
                w.copy = Some(Composition {
                    moment: w.moment,
                    unseen_bytes: w.max - self.seen_total,
                    ..now.clone()
                });
                copied = true;
            }
        }
        if copied {
            self.held.copied(self.serial, &self.live);
        }
    }

    /// Whether a copy of a maximum holds `b`, a live block, so that its free needs the freeing
    /// line (`needs_free_site` without the pending maxima).
    fn held_by_copies(&self, b: &Block) -> bool {
        b.fate_by_freeing_line() && b.serial <= self.held.copied_at
    }

    /// For the queue: whether a maximum is pending (the next free copies it), and the lowest
    /// maximum an allocation can raise (i64::MAX: none).
    fn raisable(&self) -> (bool, i64) {
        let raisable = self
            .functions
            .values()
            .filter(|w| w.active > 0 || w.compiled);
        let pending = self.watches().any(|w| w.dirty);
        let threshold = std::iter::once(&self.whole)
            .chain(raisable)
            .map(|w| w.max)
            .min()
            .unwrap_or(i64::MAX);
        (pending, threshold)
    }

    /// Records a queued event.
    fn take(&mut self, q: queue::Queued) {
        self.requested = q.requested;
        self.module = q.module;
        if q.tag != 0 && q.event.bytes > 0 {
            self.count_tagged(q.tag, q.event.bytes, q.in_pool);
        }
        self.record(q.event);
    }

    /// The run's maximum and its sites (None before any allocation).
    pub fn peak(&mut self) -> Option<Composition> {
        self.settle();
        self.whole.copy.clone()
    }

    /// A targeted function's maximum and its sites.
    pub fn function_peak(&mut self, id: u64) -> Option<Composition> {
        self.settle();
        self.functions.get(&id).and_then(|w| w.copy.clone())
    }

    /// The live block at `ptr`, if memprof saw it allocated: (serial, site, bytes, its role).
    #[cfg(test)]
    pub fn block(&self, ptr: u64) -> Option<(u64, u32, i64, Role)> {
        self.live
            .get(&ptr)
            .map(|b| (b.serial, b.site, b.bytes, b.role))
    }
}

/// The tracker of the run (None when off).
pub static TRACKER: Mutex<Option<Tracker>> = Mutex::new(None);
/// Whether the reporter hands allocations to the tracker (checked before any lock).
static ON: AtomicBool = AtomicBool::new(false);
/// Whether a trace is recorded (the reporter then reads the module running at each event).
static TRACING: AtomicBool = AtomicBool::new(false);
/// CUDA graphs' captures (and CUDA-graph trees' warm-ups in their pools) under way: what is
/// allocated meanwhile goes to a private pool.
static GRAPH_POOL_WINDOWS: AtomicU32 = AtomicU32::new(0);

/// A capture or a warm-up in a CUDA graph's pool begins (`open`) or ends.
pub fn graph_pool_window(open: bool) {
    if open {
        GRAPH_POOL_WINDOWS.fetch_add(1, Ordering::Relaxed);
    } else {
        let _ = GRAPH_POOL_WINDOWS
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }
}

/// The site of the calling thread's innermost frames: `python::sites` registers it.
static RESOLVER: AtomicUsize = AtomicUsize::new(0);

/// What the site finder says of the calling thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Found {
    /// Its site (UNKNOWN_SITE: none).
    pub site: u32,
    /// The tag of the compiled graph's line allocating (0: none), which names the module that
    /// line's buffers belong to (`--modules` on compiled models).
    pub tag: u32,
    /// Whether an `nn.Module` call is on its stack (up to the site's context).
    pub in_module: bool,
}

/// The site finder `python::sites` registers.
pub type Resolver = fn() -> Found;

/// Registers the function that finds the calling thread's site.
pub fn set_resolver(resolve: Resolver) {
    RESOLVER.store(resolve as usize, Ordering::Release);
}

fn resolve() -> Found {
    let f = RESOLVER.load(Ordering::Acquire);
    if f == 0 {
        return Found::default();
    }
    // SAFETY: only `set_resolver` stores here, and it stores a `Resolver`.
    let f: Resolver = unsafe { std::mem::transmute::<usize, Resolver>(f) };
    f()
}

/// A targeted function as the site finder matches compiled frames to it.
#[derive(Clone, Debug)]
pub struct TargetRange {
    /// The recorder's function id.
    pub id: u64,
    pub file: String,
    pub qualname: String,
    pub first_line: u32,
    pub last_line: u32,
}

/// The targeted functions so far (the recorder adds each as it registers it).
static TARGETS: Mutex<Vec<TargetRange>> = Mutex::new(Vec::new());
/// Site attributions found by the site finder, for the tracker to take at its next event (the
/// finder runs before the tracker's lock is taken, and must not take it).
static PENDING: Mutex<Vec<(u32, Vec<u64>)>> = Mutex::new(Vec::new());
static HAS_PENDING: AtomicBool = AtomicBool::new(false);

/// A targeted function, registered.
pub fn add_target(target: TargetRange) {
    TARGETS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(target);
}

/// The targeted functions registered so far.
pub fn targets() -> Vec<TargetRange> {
    TARGETS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Allocations at `site` are made for the targeted functions `ids` (taken at the next event).
pub fn attribute_later(site: u32, ids: Vec<u64>) {
    PENDING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((site, ids));
    HAS_PENDING.store(true, Ordering::Release);
}

/// Starts tracking (a fresh tracker).
pub fn start() {
    TARGETS.lock().unwrap_or_else(|e| e.into_inner()).clear();
    super::device_use::reset();
    *lock() = Some(Tracker::default());
    ON.store(true, Ordering::Release);
    worker::start_if_asked();
}

/// Stops tracking; what was tracked stays readable.
pub fn stop() {
    ON.store(false, Ordering::Release);
}

/// Whether tracking is on.
pub fn is_on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The measured device changed: what was tracked on the old one no longer adds up.
pub fn restart() {
    if is_on() {
        let mut tracker = lock();
        // A trace goes on from the new device's first event (the old one's are another
        // device's).
        let trace_max = tracker.as_mut().and_then(|t| t.take_trace()).map(|t| t.max);
        super::device_use::reset();
        let mut fresh = Tracker::default();
        if let Some(max) = trace_max {
            fresh.record_trace(max);
        }
        *tracker = Some(fresh);
    }
}

/// This process was just forked: its peaks are its own from now on (`Tracker::forked`). Only the
/// forking thread runs in the child, so a queue lock another thread held at the fork is let go
/// first (the events queued before it are the child's history too).
pub fn forked() {
    queue::forked();
    with(|t| t.forked());
}

/// Runs `f` on the tracker, if there is one (every event before it recorded).
pub fn with<T>(f: impl FnOnce(&mut Tracker) -> T) -> Option<T> {
    lock().as_mut().map(f)
}

/// The tracker, with the events queued so far recorded (and the site attributions found so
/// far taken); the queue learns the tracker's state when the lock is let go.
fn lock() -> Locked {
    let mut tracker = TRACKER.lock().unwrap_or_else(|e| e.into_inner());
    let mut batch = queue::take();
    if let Some(t) = tracker.as_mut() {
        // No panic may leave here: this runs inside the allocator, and under the program's
        // calls into memprof.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for q in batch.drain(..) {
                t.take(q);
            }
            if HAS_PENDING.load(Ordering::Acquire) && HAS_PENDING.swap(false, Ordering::AcqRel) {
                let pending =
                    std::mem::take(&mut *PENDING.lock().unwrap_or_else(|e| e.into_inner()));
                for (s, ids) in pending {
                    t.attribute_site(s, &ids);
                }
            }
        }));
    }
    queue::give_back(batch);
    Locked(tracker)
}

/// The tracker's lock, held: tells the queue what it decides by when let go.
struct Locked(std::sync::MutexGuard<'static, Option<Tracker>>);

impl std::ops::Deref for Locked {
    type Target = Option<Tracker>;
    fn deref(&self) -> &Option<Tracker> {
        &self.0
    }
}

impl std::ops::DerefMut for Locked {
    fn deref_mut(&mut self) -> &mut Option<Tracker> {
        &mut self.0
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        queue::publish(self.0.as_mut());
    }
}

/// Called by the shim's reporter for every allocation and free on the measured device, inside
/// the allocator (its lock held, on whichever thread allocates): no Python, no panic.
/// `backward_site`: the site of the backward this allocation works for (0: none); `has_totals`:
/// whether `total`/`reserved` are the allocator's (CUDA); `requested` (> 0 when known) and
/// `stream`: what the allocation asked for, from the CUDA allocator's trace entry (`--trace`).
/// What can only be read at the event is read here (the site, the line's tag, the module
/// running); the tracker records the event later, in a batch (`queue`).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn mp_rust_allocation_event(
    ptr: u64,
    bytes: i64,
    backward_site: u32,
    has_totals: i32,
    total: i64,
    reserved: i64,
    requested: i64,
    stream: u64,
) {
    if has_totals == 0 && super::history::is_on() {
        // The CPU's `--history`, which libtorch does not keep (CUDA's is the allocator's own).
        let _ = std::panic::catch_unwind(|| {
            super::history::record(ptr, bytes, crate::torch::tags::current());
        });
    }
    if !is_on() {
        return;
    }
    let _ = std::panic::catch_unwind(|| {
        let in_backward = backward_site != 0;
        let found = if bytes > 0 {
            match resolve() {
                Found {
                    site: UNKNOWN_SITE,
                    tag,
                    in_module,
                } => Found {
                    site: backward_site,
                    tag,
                    in_module,
                },
                found => found,
            }
        } else if in_backward {
            // Freed by a backward pass: the line running it.
            Found {
                site: backward_site,
                ..Found::default()
            }
        } else {
            Found::default()
        };
        if has_totals != 0 && bytes > 0 {
            super::device_use::first_allocation(reserved);
        }
        let mut q = queue::Queued {
            event: Event {
                ptr,
                bytes,
                site: found.site,
                in_backward,
                in_module: found.in_module,
                totals: (has_totals != 0).then_some((total, reserved)),
            },
            tag: found.tag,
            in_pool: found.tag != 0 && GRAPH_POOL_WINDOWS.load(Ordering::Relaxed) > 0,
            requested: (requested > 0).then_some((requested, stream)),
            module: if TRACING.load(Ordering::Relaxed) {
                THREAD_MODULE.with(|m| m.get())
            } else {
                0
            },
        };
        // A site attribution found by this event's walk applies from this event on: the queue
        // is recorded first, then the attribution, then the event.
        let offer = if HAS_PENDING.load(Ordering::Acquire) {
            queue::Offer::Decide
        } else {
            queue::offer(q)
        };
        match offer {
            queue::Offer::Queued => {}
            queue::Offer::Wake => worker::wake(),
            queue::Offer::Full => drop(lock()),
            queue::Offer::Decide => {
                let mut tracker = lock();
                if bytes < 0
                    && !in_backward
                    && tracker.as_ref().is_some_and(|t| t.needs_free_site(ptr))
                {
                    // A block of a peak freed outside a backward pass: the line freeing it
                    // says whether it was its own line's temporary. The walk runs outside the
                    // tracker's lock, as an allocation's does (the allocator's lock keeps `ptr`
                    // from being reused).
                    drop(tracker);
                    let found = resolve();
                    q.event.site = found.site;
                    q.event.in_module = found.in_module;
                    tracker = lock();
                }
                if let Some(t) = tracker.as_mut() {
                    t.take(q);
                }
            }
        }
    });
}

/// Called by cuda_trace.cpp for each segment event of the measured device while a trace is
/// taken, inside the allocator (its lock held): no Python, no panic.
pub extern "C" fn mp_rust_segment_event(kind: i32, bytes: i64, stream: u64) {
    let Some(kind) = TraceKind::of_segment(kind) else {
        return;
    };
    if !is_on() {
        return;
    }
    let _ = std::panic::catch_unwind(|| {
        if let Some(t) = lock().as_mut() {
            t.on_segment(kind, bytes, stream);
        }
    });
}

#[cfg(test)]
mod tests;
