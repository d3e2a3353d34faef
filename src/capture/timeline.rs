//! The run's memory over time, kept small enough to be always on: the allocator's total in
//! points of a fixed number of events each (the highest, lowest and last allocated bytes of each,
//! the highest reserved), with what changed per site and per category, and the moments that
//! shape a run (backward passes, optimizer steps, targeted calls). When the points (or the site
//! changes) reach their bound, neighbours merge and each point covers twice the events: the
//! record's size never depends on the run's length, and each point's maximum stays exact, so the
//! highest point is the peak. Categories are learnt when a block is freed (or at the end), so a
//! block's bytes are added to its category from the point that allocated it onwards then, by
//! difference. Fed by `peak::Tracker` under its lock; uses nothing else.
use std::time::Instant;

/// The most points kept (a merge then halves them).
const MAX_POINTS: usize = 2048;
/// The most per-site changes kept over all points (16 bytes each), before points merge.
const MAX_SITE_CHANGES: usize = 200_000;
/// The most marks kept (every other is dropped, and later ones thinned alike, past it).
const MAX_MARKS: usize = 4096;
/// The categories a block's bytes can take (`peak::Role` by index).
pub const CATEGORIES: usize = 11;

/// A stretch of the run, as the timeline keeps it. `roles` and `sites` are changes, not levels:
/// the live bytes at a point's end are the sum of the changes up to it.
///
/// The timeline keeps its closed points as `Point<Stretch>`: their site changes a stretch of
/// one buffer for all points (`Timeline::site_store`), so that closing a point or merging two
/// allocates nothing (a list per point cost an allocation per point and per merge, most of the
/// timeline's work while its points are narrow, at the start of every run).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Point<S = Vec<(u32, i64)>> {
    /// Allocations seen by the point's end (the allocation index).
    pub allocations: u64,
    /// Seconds from the start of tracking to the point's last event.
    pub seconds: f64,
    /// allocated_bytes.all.current: the highest, the lowest and the last within the point.
    pub max: i64,
    pub min: i64,
    pub end: i64,
    /// reserved_bytes.all.current: the highest within the point, and the last.
    pub reserved_max: i64,
    pub reserved_end: i64,
    /// The change of live bytes per category (`peak::Role` index) over the point.
    pub roles: [i64; CATEGORIES],
    /// The change of live bytes per site over the point, the sites that changed, by site id.
    pub sites: S,
}

/// What a mark is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkKind {
    /// A backward pass began.
    Backward,
    /// An optimizer's step ended.
    Step,
    /// A targeted function's call began (`id`: the recorder's function id) or ended.
    CallStart(u64),
    CallEnd(u64),
}

/// A moment of the run worth drawing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mark {
    pub kind: MarkKind,
    /// Allocations seen when it happened.
    pub allocations: u64,
    pub seconds: f64,
}

/// The point being filled.
#[derive(Clone, Copy, Debug)]
struct Open {
    events: u64,
    /// The serial of the last allocation before it opened: a block of a higher serial was
    /// allocated in it.
    opened_after: u64,
    max: i64,
    min: i64,
    reserved_max: i64,
    roles: [i64; CATEGORIES],
}

impl Open {
    fn new(opened_after: u64, level: i64, reserved: i64) -> Open {
        Open {
            events: 0,
            opened_after,
            max: level,
            min: level,
            reserved_max: reserved,
            roles: [0; CATEGORIES],
        }
    }
}

/// The open point's change of one site, beside the number of the point that last touched it.
#[derive(Clone, Copy, Debug, Default)]
struct SiteSlot {
    change: i64,
    touched_in: u32,
}

/// Where a kept point's site changes are in the timeline's buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Stretch {
    from: usize,
    len: usize,
}

type Kept = Point<Stretch>;

impl Kept {
    fn sites_in<'a>(&self, store: &'a [(u32, i64)]) -> &'a [(u32, i64)] {
        &store[self.sites.from..self.sites.from + self.sites.len]
    }

    /// The point as the report takes it, its changes its own.
    fn with_sites(&self, store: &[(u32, i64)]) -> Point {
        Point {
            sites: self.sites_in(store).to_vec(),
            allocations: self.allocations,
            seconds: self.seconds,
            max: self.max,
            min: self.min,
            end: self.end,
            reserved_max: self.reserved_max,
            reserved_end: self.reserved_end,
            roles: self.roles,
        }
    }
}

/// The recorder.
pub struct Timeline {
    points: Vec<Kept>,
    /// Each kept point's `allocations`, packed (eight to a cache line): what `point_of`
    /// searches at a free. Searched in `points` (160 bytes each, up to 320 KiB), each probe of
    /// the search was a line of its own, out of the cache after the step's work: the tracker's
    /// costliest function on the launching thread of an H100's resnet50 step.
    ends: Vec<u64>,
    /// Every kept point's site changes, point after point (each point's `Stretch`), each
    /// point's in site order.
    site_store: Vec<(u32, i64)>,
    /// Where a merge sets a point's changes aside, kept for the next merge.
    merge_scratch: Vec<(u32, i64)>,
    /// Events per point (doubles at each merge).
    width: u64,
    open: Open,
    /// The open point's change per site (dense by site id), and the sites it touched.
    site_slots: Vec<SiteSlot>,
    touched: Vec<u32>,
    /// The open point's number (+1), which a slot's `touched_in` compares with.
    epoch: u32,
    marks: Vec<Mark>,
    /// Marks seen, and every how-many-th is kept (past `MAX_MARKS`).
    marks_seen: u64,
    mark_stride: u64,
    serial: u64,
    total: i64,
    reserved: i64,
}

/// The site changes' room made at the start (16 bytes each): the first points' changes, a
/// change or two each while the points are narrow, fit without the buffer growing.
const SITE_CHANGES_AT_START: usize = 2 * MAX_POINTS;

impl Default for Timeline {
    /// An empty record, its room for every point it keeps (and the first points' site changes)
    /// made at once: grown point by point, the lists were copied into larger rooms a dozen times
    /// in a session's first steps, when every event closes a point (180,000 instructions in one
    /// of those steps on benches/module_call_model.py's MLP, an eighth of no flags' work in it).
    fn default() -> Self {
        Timeline {
            points: Vec::with_capacity(MAX_POINTS),
            ends: Vec::with_capacity(MAX_POINTS),
            site_store: Vec::with_capacity(SITE_CHANGES_AT_START),
            merge_scratch: Vec::new(),
            width: 1,
            open: Open::new(0, 0, 0),
            site_slots: Vec::new(),
            touched: Vec::new(),
            epoch: 1,
            marks: Vec::new(),
            marks_seen: 0,
            mark_stride: 1,
            serial: 0,
            total: 0,
            reserved: 0,
        }
    }
}

/// The record as the report takes it: the points (the open one closed, the blocks still live
/// given their categories) and the marks.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Record {
    pub points: Vec<Point>,
    pub marks: Vec<Mark>,
    /// Allocations and frees per point.
    pub events_per_point: u64,
}

impl Timeline {
    /// The allocator's totals before the first event (memory live from before tracking).
    pub fn start_at(&mut self, total: i64) {
        self.total = total;
        self.reserved = total;
        self.open = Open::new(self.serial, total, total);
    }

    /// A block live when the record started (a forked child's, inherited from its parent):
    /// its site holds it from the first point on.
    pub fn inherited(&mut self, site: u32, bytes: i64) {
        self.change_site(site, bytes);
    }

    /// A block of `bytes` at `site` was allocated as allocation `serial`.
    #[inline]
    pub fn allocated(&mut self, site: u32, bytes: i64, serial: u64) {
        self.serial = serial;
        self.change_site(site, bytes);
    }

    /// A block allocated as `serial` at `site` was freed, and was `category` to the program.
    #[inline]
    pub fn freed(&mut self, site: u32, bytes: i64, serial: u64, category: usize) {
        self.change_site(site, -bytes);
        if serial > self.open.opened_after {
            return; // born and gone within the open point: no change of its category
        }
        self.open.roles[category] -= bytes;
        let born = self.point_of(serial);
        if let Some(p) = self.points.get_mut(born) {
            p.roles[category] += bytes;
        }
    }

    /// After each event: the allocator's totals now (`seconds`: the clock, read only when a
    /// point closes).
    #[inline]
    pub fn level(&mut self, total: i64, reserved: i64, seconds: impl FnOnce() -> f64) {
        self.total = total;
        self.reserved = reserved;
        let o = &mut self.open;
        o.max = o.max.max(total);
        o.min = o.min.min(total);
        o.reserved_max = o.reserved_max.max(reserved);
        o.events += 1;
        if o.events >= self.width {
            self.close(seconds());
        }
    }

    /// A moment to mark (a backward pass, a step, a call).
    pub fn mark(&mut self, kind: MarkKind, seconds: impl FnOnce() -> f64) {
        self.marks_seen += 1;
        if (self.marks_seen - 1) % self.mark_stride != 0 {
            return;
        }
        if self.marks.len() >= MAX_MARKS {
            let mut i = 0;
            self.marks.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            self.mark_stride *= 2;
        }
        self.marks.push(Mark {
            kind,
            allocations: self.serial,
            seconds: seconds(),
        });
    }

    fn change_site(&mut self, site: u32, bytes: i64) {
        let i = site as usize;
        if i >= self.site_slots.len() {
            self.site_slots.resize(i + 1, SiteSlot::default());
        }
        let slot = &mut self.site_slots[i];
        if slot.touched_in != self.epoch {
            slot.touched_in = self.epoch;
            self.touched.push(site);
        }
        slot.change += bytes;
    }

    /// reserved_bytes.all.current now (the allocated bytes on the CPU).
    pub fn reserved_now(&self) -> i64 {
        self.reserved
    }

    /// The highest allocated bytes of each of the latest `n` points, the open one last (the
    /// live view's memory over time).
    pub fn highs(&self, n: usize) -> Vec<i64> {
        let from = self.points.len().saturating_sub(n.saturating_sub(1));
        let mut out: Vec<i64> = self.points[from..].iter().map(|p| p.max).collect();
        out.push(self.open.max);
        out
    }

    /// The point that holds the allocation `serial` (the first whose allocations reach it).
    fn point_of(&self, serial: u64) -> usize {
        // Most blocks freed are recent: back from the newest point, in doubling strides, to
        // one made before `serial`, then a binary search after it, in `ends` (a search of the
        // whole list is a miss at each probe, where the newest points share a few lines).
        let mut end = self.ends.len();
        let mut stride = 1;
        while end > 0 {
            let at = end.saturating_sub(stride);
            if self.ends[at] < serial {
                return at + 1 + self.ends[at + 1..end].partition_point(|&a| a < serial);
            }
            end = at;
            stride *= 2;
        }
        0
    }

    fn close(&mut self, seconds: f64) {
        let from = self.site_store.len();
        for site in self.touched.drain(..) {
            let change = std::mem::take(&mut self.site_slots[site as usize].change);
            if change != 0 {
                self.site_store.push((site, change));
            }
        }
        // Each point's changes in site order, so that a merge joins two sorted lists.
        if self.site_store.len() - from > 1 {
            self.site_store[from..].sort_unstable_by_key(|s| s.0);
        }
        self.epoch = self.epoch.wrapping_add(1).max(1);
        let o = self.open;
        self.points.push(Kept {
            allocations: self.serial,
            seconds,
            max: o.max,
            min: o.min,
            end: self.total,
            reserved_max: o.reserved_max,
            reserved_end: self.reserved,
            roles: o.roles,
            sites: Stretch {
                from,
                len: self.site_store.len() - from,
            },
        });
        self.ends.push(self.serial);
        self.open = Open::new(self.serial, self.total, self.reserved);
        while self.points.len() >= MAX_POINTS || self.site_store.len() > MAX_SITE_CHANGES {
            self.merge();
        }
    }

    /// Each pair of neighbouring points becomes one, covering twice the events; their site
    /// changes (each point's in site order) are joined in site order and summed per site, those
    /// that cancel left out. In place: the first point's changes are set aside, and what is
    /// written never runs ahead of the second's still to be read. (It sorted the two lists
    /// together: a third of a merge's instructions, and a merge comes at each doubling of the
    /// points' width, in a fresh session's first steps most often.)
    fn merge(&mut self) {
        let mut aside = std::mem::take(&mut self.merge_scratch);
        let (mut read, mut written, mut store_len) = (0, 0, 0);
        while read < self.points.len() {
            let a = self.points[read];
            let from = store_len;
            let merged = match self.points.get(read + 1).copied() {
                Some(b) => {
                    aside.clear();
                    aside.extend_from_slice(a.sites_in(&self.site_store));
                    let store = &mut self.site_store;
                    let (mut i, mut j, b_end) = (0, b.sites.from, b.sites.from + b.sites.len);
                    loop {
                        let next = match (aside.get(i), (j < b_end).then(|| store[j])) {
                            (Some(&x), Some(y)) if x.0 == y.0 => {
                                i += 1;
                                j += 1;
                                (x.0, x.1 + y.1)
                            }
                            (Some(&x), Some(y)) if x.0 < y.0 => {
                                i += 1;
                                x
                            }
                            (Some(&x), None) => {
                                i += 1;
                                x
                            }
                            (_, Some(y)) => {
                                j += 1;
                                y
                            }
                            (None, None) => break,
                        };
                        // Before this one, at most i + (j - b.from) - 1 changes were written
                        // from `from` (at most a.from, which is b.from less a's length): the
                        // slot is at most j - 1, already read.
                        if next.1 != 0 {
                            store[store_len] = next;
                            store_len += 1;
                        }
                    }
                    merged(
                        a,
                        b,
                        Stretch {
                            from,
                            len: store_len - from,
                        },
                    )
                }
                None => {
                    let Stretch { from: at, len } = a.sites;
                    self.site_store.copy_within(at..at + len, from);
                    store_len += len;
                    Kept {
                        sites: Stretch { from, len },
                        ..a
                    }
                }
            };
            self.points[written] = merged;
            written += 1;
            read += 2;
        }
        self.points.truncate(written);
        self.ends.clear();
        self.ends.extend(self.points.iter().map(|p| p.allocations));
        self.site_store.truncate(store_len);
        self.merge_scratch = aside;
        self.width *= 2;
    }

    /// The record so far: the open point closed (if it saw an event), and `live` — (serial,
    /// bytes, category) of each block still live — added to its category from its point on.
    pub fn record(&self, seconds: f64, live: impl Iterator<Item = (u64, i64, usize)>) -> Record {
        let mut t = self.clone_for_record();
        if t.open.events > 0 || t.points.is_empty() {
            t.close(seconds);
        }
        let mut points: Vec<Point> = t
            .points
            .iter()
            .map(|k| k.with_sites(&t.site_store))
            .collect();
        for (serial, bytes, category) in live {
            let at = t.point_of(serial).min(points.len() - 1);
            points[at].roles[category] += bytes;
        }
        Record {
            points,
            marks: t.marks,
            events_per_point: t.width,
        }
    }

    fn clone_for_record(&self) -> Timeline {
        Timeline {
            points: self.points.clone(),
            ends: self.ends.clone(),
            site_store: self.site_store.clone(),
            merge_scratch: Vec::new(),
            width: self.width,
            open: self.open,
            site_slots: self.site_slots.clone(),
            touched: self.touched.clone(),
            epoch: self.epoch,
            marks: self.marks.clone(),
            marks_seen: self.marks_seen,
            mark_stride: self.mark_stride,
            serial: self.serial,
            total: self.total,
            reserved: self.reserved,
        }
    }
}

/// Two neighbouring points as one, its site changes (already summed) at `sites`.
fn merged(a: Kept, b: Kept, sites: Stretch) -> Kept {
    let mut roles = a.roles;
    for (r, x) in roles.iter_mut().zip(b.roles) {
        *r += x;
    }
    Kept {
        allocations: b.allocations,
        seconds: b.seconds,
        max: a.max.max(b.max),
        min: a.min.min(b.min),
        end: b.end,
        reserved_max: a.reserved_max.max(b.reserved_max),
        reserved_end: b.reserved_end,
        roles,
        sites,
    }
}

/// The clock for a tracker that started at `started`.
pub fn since(started: Instant) -> impl FnOnce() -> f64 {
    move || started.elapsed().as_secs_f64()
}

#[cfg(test)]
mod tests;
