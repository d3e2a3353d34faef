//! memprof's model of PyTorch's CUDA caching allocator (`c10/cuda/CUDACachingAllocator.cpp` of
//! torch 2.11, the `DeviceCachingAllocator` without CUDA graphs' private pools): a trace of
//! allocations and frees replayed on a device of a given size, with given settings, gives the
//! reserved and allocated peaks, the `cudaMalloc` retries, the segments and where it runs out of
//! memory. The rules, as the source has them:
//! - sizes round up to 512 bytes (or to a power-of-2 division, `roundup_power2_divisions`);
//! - requests of at most 1 MiB use the small pool, whose segments are 2 MiB; larger ones the
//!   large pool: a request under 10 MiB gets a 20 MiB segment, a larger one its size rounded up
//!   to 2 MiB;
//! - a free block is found best fit by (stream, size, address) in the request's pool; blocks of
//!   `max_split_size` or more serve only requests of that size or more, and within 20 MiB;
//! - a found block is split when what remains is at least 512 bytes (small pool) or more than
//!   1 MiB (large pool, requests under `max_split_size`);
//! - a freed block merges with free neighbours of its segment;
//! - when `cudaMalloc` fails (the device is full): free cached oversize blocks enough for the
//!   request and retry; then free every cached block that is a whole segment and retry (this
//!   retry is `num_alloc_retries`); then out of memory;
//! - `garbage_collection_threshold` frees the oldest whole cached segments of the large pool
//!   before a `cudaMalloc` once reserved memory passes that fraction of the capacity.
//!
//! With `expandable_segments:True` (expandable.rs) a pool grows one segment per stream by pages
//! (2 MiB small, 20 MiB large) instead of allocating segments, and gives free pages back when the
//! device is full. `scale` synthesizes a trace at another batch size from traces at two or
//! three. Uses nothing.
mod expandable;
pub mod scale;
mod settings;
#[cfg(test)]
mod tests;

pub use settings::{Settings, SettingsError};
use std::collections::{BTreeSet, HashMap};

pub const MIN_BLOCK: u64 = 512;
pub const SMALL_SIZE: u64 = 1 << 20;
pub const SMALL_BUFFER: u64 = 2 << 20;
pub const MIN_LARGE_ALLOC: u64 = 10 << 20;
pub const ROUND_LARGE: u64 = 2 << 20;
pub const LARGE_BUFFER: u64 = 20 << 20;

/// A block of a segment: allocated, or cached free in its pool.
#[derive(Clone, Debug)]
struct Block {
    addr: u64,
    size: u64,
    stream: u64,
    small: bool,
    allocated: bool,
    prev: Option<usize>,
    next: Option<usize>,
    /// The pool's `get_free_blocks` count when the block was last cached (garbage collection's
    /// age).
    gc_base: u64,
    /// Backed by device memory (always, outside expandable segments).
    mapped: bool,
    /// The expandable segment it is part of (`expandable_segments:True`).
    segment: Option<usize>,
}

impl Block {
    fn is_split(&self) -> bool {
        self.prev.is_some() || self.next.is_some()
    }
}

/// The allocator's numbers, as `torch.cuda.memory_stats()` names them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub allocated_bytes: u64,
    pub allocated_bytes_peak: u64,
    pub reserved_bytes: u64,
    pub reserved_bytes_peak: u64,
    pub segment: u64,
    pub segment_peak: u64,
    pub num_alloc_retries: u64,
    pub num_device_alloc: u64,
    pub num_device_free: u64,
}

/// A request the device could not hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutOfMemory {
    /// The bytes requested, and what the allocator asked `cudaMalloc` for.
    pub requested: u64,
    pub allocation: u64,
    /// allocated and reserved bytes when it failed (after freeing the cache).
    pub allocated_bytes: u64,
    pub reserved_bytes: u64,
}

/// Ordered as the source's `BlockComparatorSize`: stream, size, address.
type Key = (u64, u64, u64, usize);

pub struct Allocator {
    settings: Settings,
    /// The bytes `cudaMalloc` may hand out in all (the device's free memory for PyTorch, or
    /// `set_per_process_memory_fraction`'s share).
    capacity: u64,
    blocks: Vec<Block>,
    small: BTreeSet<Key>,
    large: BTreeSet<Key>,
    /// get_free_block calls per pool (small, large), counted while garbage collection is on.
    gc_calls: [u64; 2],
    /// Unmapped blocks of expandable segments per pool (small, large), by (stream, address).
    unmapped: [BTreeSet<(u64, u64, usize)>; 2],
    /// Expandable segments: (base address, page size, pages mapped).
    segments: Vec<expandable::Segment>,
    next_addr: u64,
    stats: Stats,
}

impl Allocator {
    pub fn new(capacity: u64, settings: Settings) -> Self {
        Allocator {
            settings,
            capacity,
            blocks: Vec::new(),
            small: BTreeSet::new(),
            large: BTreeSet::new(),
            gc_calls: [0, 0],
            unmapped: [BTreeSet::new(), BTreeSet::new()],
            segments: Vec::new(),
            // Segments get addresses of their own, apart (the source's ptr order).
            next_addr: 1 << 32,
            stats: Stats::default(),
        }
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// `round_size`: what a request of `size` bytes takes.
    pub fn round_size(&self, size: u64) -> u64 {
        if size < MIN_BLOCK {
            return MIN_BLOCK;
        }
        let divisions = self.settings.divisions_for(size);
        if divisions > 1 && size > MIN_BLOCK * divisions {
            roundup_power2_next_division(size, divisions)
        } else {
            size.div_ceil(MIN_BLOCK) * MIN_BLOCK
        }
    }

    /// Allocates `size` bytes on `stream`: the block's handle, or what ran out.
    pub fn malloc(&mut self, size: u64, stream: u64) -> Result<usize, OutOfMemory> {
        let rounded = self.round_size(size);
        let small = rounded <= SMALL_SIZE;
        let allocation = allocation_size(rounded);
        let found = match self.get_free_block(rounded, stream, small) {
            Some(b) => Some(b),
            None => {
                if self.settings.garbage_collection_threshold > 0.0 {
                    self.garbage_collect();
                }
                self.alloc_block(allocation, rounded, stream, small, false)
                    .or_else(|| {
                        self.release_available_cached_blocks(rounded, stream, small)
                            .then(|| self.alloc_block(allocation, rounded, stream, small, false))
                            .flatten()
                    })
                    .or_else(|| {
                        self.release_cached_blocks();
                        self.alloc_block(allocation, rounded, stream, small, true)
                    })
            }
        };
        let Some(block) = found else {
            return Err(OutOfMemory {
                requested: size,
                allocation,
                allocated_bytes: self.stats.allocated_bytes,
                reserved_bytes: self.stats.reserved_bytes,
            });
        };
        let block = if self.should_split(block, rounded) {
            self.split(block, rounded)
        } else {
            block
        };
        self.blocks[block].allocated = true;
        self.stats.allocated_bytes += self.blocks[block].size;
        self.stats.allocated_bytes_peak = self
            .stats
            .allocated_bytes_peak
            .max(self.stats.allocated_bytes);
        Ok(block)
    }

    /// Frees an allocated block (its handle from `malloc`).
    pub fn free(&mut self, block: usize) {
        debug_assert!(self.blocks[block].allocated);
        self.blocks[block].allocated = false;
        self.stats.allocated_bytes -= self.blocks[block].size;
        for neighbour in [self.blocks[block].prev, self.blocks[block].next]
            .into_iter()
            .flatten()
        {
            self.try_merge(block, neighbour);
        }
        self.insert(block);
    }

    fn pool(&mut self, small: bool) -> &mut BTreeSet<Key> {
        if small {
            &mut self.small
        } else {
            &mut self.large
        }
    }

    fn key(&self, b: usize) -> Key {
        let block = &self.blocks[b];
        (block.stream, block.size, block.addr, b)
    }

    fn insert(&mut self, b: usize) {
        let small = self.blocks[b].small;
        self.blocks[b].gc_base = self.gc_calls[usize::from(!small)];
        let key = self.key(b);
        self.pool(small).insert(key);
    }

    fn remove(&mut self, b: usize) {
        let key = self.key(b);
        let small = self.blocks[b].small;
        self.pool(small).remove(&key);
    }

    /// `get_free_block`: the best-fitting cached block, taken out of its pool.
    fn get_free_block(&mut self, size: u64, stream: u64, small: bool) -> Option<usize> {
        if self.settings.garbage_collection_threshold > 0.0 {
            self.gc_calls[usize::from(!small)] += 1;
        }
        let max_split = self.settings.max_split_size;
        let &(s, mut found, _, mut b) = self.pool(small).range((stream, size, 0, 0)..).next()?;
        if s != stream {
            return None;
        }
        if self.settings.expandable_segments && self.blocks[b].segment.is_some() {
            (b, found) = self.least_expandable_fit(b, stream, small);
        }
        // An oversize block only for an oversize request, and not much larger than it.
        if size < max_split && found >= max_split {
            return None;
        }
        if size >= max_split && found >= size + LARGE_BUFFER {
            return None;
        }
        self.remove(b);
        Some(b)
    }

    fn should_split(&self, b: usize, size: u64) -> bool {
        let block = &self.blocks[b];
        let remaining = block.size - size;
        if block.small || self.settings.expandable_segments {
            remaining >= MIN_BLOCK
        } else {
            size < self.settings.max_split_size && remaining > SMALL_SIZE
        }
    }

    /// The first `size` bytes of `b` become a block of their own (returned); the rest stays
    /// cached.
    fn split(&mut self, b: usize, size: u64) -> usize {
        let addr = self.blocks[b].addr;
        let f = self.splice_before(b, addr, size);
        self.blocks[f].allocated = false;
        let rest = &mut self.blocks[b];
        rest.addr += size;
        rest.size -= size;
        self.insert(b);
        f
    }

    /// A new block like `b` at `addr` of `size` bytes, linked in just before `b` (its handle).
    fn splice_before(&mut self, b: usize, addr: u64, size: u64) -> usize {
        let n = self.blocks.len();
        self.blocks.push(Block {
            addr,
            size,
            prev: self.blocks[b].prev,
            next: Some(b),
            ..self.blocks[b].clone()
        });
        if let Some(p) = self.blocks[b].prev {
            self.blocks[p].next = Some(n);
        }
        self.blocks[b].prev = Some(n);
        n
    }

    /// A new block like `b` at `addr` of `size` bytes, linked in just after `b` (its handle).
    fn splice_after(&mut self, b: usize, addr: u64, size: u64) -> usize {
        let n = self.blocks.len();
        self.blocks.push(Block {
            addr,
            size,
            prev: Some(b),
            next: self.blocks[b].next,
            ..self.blocks[b].clone()
        });
        if let Some(x) = self.blocks[b].next {
            self.blocks[x].prev = Some(n);
        }
        self.blocks[b].next = Some(n);
        n
    }

    /// Merges the free block `src` into `dst` (its neighbour), if it is free.
    fn try_merge(&mut self, dst: usize, src: usize) {
        if self.blocks[src].allocated || self.blocks[src].mapped != self.blocks[dst].mapped {
            return;
        }
        if self.blocks[src].mapped {
            self.remove(src);
        } else {
            self.unmapped_remove(src);
        }
        let s = self.blocks[src].clone();
        let d = &mut self.blocks[dst];
        if d.prev == Some(src) {
            d.addr = s.addr;
            d.prev = s.prev;
            if let Some(p) = s.prev {
                self.blocks[p].next = Some(dst);
            }
        } else {
            d.next = s.next;
            if let Some(n) = s.next {
                self.blocks[n].prev = Some(dst);
            }
        }
        self.blocks[dst].size += s.size;
        // The merged block's slot is not reused: handles stay unique.
        self.blocks[src].size = 0;
    }

    /// `alloc_block`: a new segment of `size` bytes, if the device has room.
    fn alloc_block(
        &mut self,
        size: u64,
        rounded: u64,
        stream: u64,
        small: bool,
        retry: bool,
    ) -> Option<usize> {
        if retry {
            self.stats.num_alloc_retries += 1;
        }
        if self.stats.reserved_bytes + size > self.capacity {
            return None;
        }
        if self.settings.expandable_segments {
            return self.allocate_expandable(stream, small, rounded);
        }
        let b = self.segment_block(size, stream, small, None);
        let s = &mut self.stats;
        s.reserved_bytes += size;
        s.reserved_bytes_peak = s.reserved_bytes_peak.max(s.reserved_bytes);
        s.segment += 1;
        s.segment_peak = s.segment_peak.max(s.segment);
        s.num_device_alloc += 1;
        Some(b)
    }

    /// The one free block of a new segment of `size` bytes at addresses of its own: a
    /// `cudaMalloc`'d one (mapped), or the unmapped whole of expandable segment `segment`.
    fn segment_block(
        &mut self,
        size: u64,
        stream: u64,
        small: bool,
        segment: Option<usize>,
    ) -> usize {
        let b = self.blocks.len();
        self.blocks.push(Block {
            addr: self.next_addr,
            size,
            stream,
            small,
            allocated: false,
            prev: None,
            next: None,
            gc_base: 0,
            mapped: segment.is_none(),
            segment,
        });
        self.next_addr += size.next_multiple_of(ROUND_LARGE) + ROUND_LARGE;
        b
    }

    /// `release_block`: a cached whole segment back to the device.
    fn release_block(&mut self, b: usize) {
        self.remove(b);
        let s = &mut self.stats;
        s.reserved_bytes -= self.blocks[b].size;
        s.segment -= 1;
        s.num_device_free += 1;
        self.blocks[b].size = 0;
    }

    /// `release_available_cached_blocks`: frees cached oversize blocks, enough for `size`.
    fn release_available_cached_blocks(&mut self, size: u64, stream: u64, small: bool) -> bool {
        let max_split = self.settings.max_split_size;
        if max_split == u64::MAX {
            return false;
        }
        let key_size = size.max(max_split);
        let fitting = self
            .pool(small)
            .range((stream, key_size, 0, 0)..)
            .next()
            .copied();
        match fitting {
            Some((s, _, _, b)) if s == stream => {
                if self.blocks[b].is_split() || self.blocks[b].segment.is_some() {
                    return false; // cudaFree needs a whole segment
                }
                self.release_block(b);
                true
            }
            _ => {
                // No single block is large enough: free oversize ones, the largest first.
                let candidates: Vec<Key> = self
                    .pool(small)
                    .range(..(stream, key_size, 0, 0))
                    .rev()
                    .take_while(|k| k.0 == stream && k.1 >= max_split)
                    .copied()
                    .collect();
                let mut released = 0;
                for (_, found, _, b) in candidates {
                    if released >= key_size {
                        break;
                    }
                    if self.blocks[b].is_split() || self.blocks[b].segment.is_some() {
                        continue;
                    }
                    released += found;
                    self.release_block(b);
                }
                released >= key_size
            }
        }
    }

    /// `release_cached_blocks`: every cached block that is a whole segment, large pool first.
    fn release_cached_blocks(&mut self) {
        for small in [false, true] {
            let pool = if small { &self.small } else { &self.large };
            let (expandable, whole): (Vec<usize>, Vec<usize>) = pool
                .iter()
                .map(|k| k.3)
                .filter(|&b| self.blocks[b].segment.is_some() || !self.blocks[b].is_split())
                .partition(|&b| self.blocks[b].segment.is_some());
            for b in whole {
                self.release_block(b);
            }
            for b in expandable {
                self.unmap_free_pages(b);
            }
        }
    }

    /// `garbage_collect_cached_blocks`: past the threshold, frees whole cached segments of the
    /// large pool that have waited at least the average number of lookups, until enough is free.
    fn garbage_collect(&mut self) {
        let threshold = (self.settings.garbage_collection_threshold * self.capacity as f64) as u64;
        if self.stats.reserved_bytes <= threshold {
            return;
        }
        let target = self.stats.reserved_bytes - threshold;
        let age = |a: &Allocator, b: usize| a.gc_calls[1] - a.blocks[b].gc_base;
        let mut total_age: u64 = 0;
        let mut count: u64 = 0;
        // (A block of an expandable segment is never released whole: the source asserts so.)
        let whole =
            |a: &Allocator, b: usize| !a.blocks[b].is_split() && a.blocks[b].segment.is_none();
        for &(_, _, _, b) in &self.large {
            if whole(self, b) {
                total_age += age(self, b);
                count += 1;
            }
        }
        let mut reclaimed = 0;
        let mut freed = true;
        while reclaimed < target && freed && count > 0 {
            let threshold_age = total_age as f64 / count as f64;
            freed = false;
            let keys: Vec<Key> = self.large.iter().copied().collect();
            for (_, _, _, b) in keys {
                if whole(self, b) && age(self, b) as f64 >= threshold_age {
                    freed = true;
                    reclaimed += self.blocks[b].size;
                    total_age -= age(self, b);
                    count -= 1;
                    self.release_block(b);
                }
            }
        }
    }
}

/// `get_allocation_size`: the segment a request that finds no cached block gets.
pub fn allocation_size(size: u64) -> u64 {
    if size <= SMALL_SIZE {
        SMALL_BUFFER
    } else if size < MIN_LARGE_ALLOC {
        LARGE_BUFFER
    } else {
        size.div_ceil(ROUND_LARGE) * ROUND_LARGE
    }
}

/// `roundup_power2_next_division`: `size` rounded up to the next of `divisions` equal steps
/// between the powers of two around it.
fn roundup_power2_next_division(size: u64, divisions: u64) -> u64 {
    if size.is_power_of_two() {
        return size;
    }
    let floor = 1u64 << (63 - size.leading_zeros());
    let step = floor >> (63 - divisions.leading_zeros());
    if step == 0 {
        return floor << 1;
    }
    let below = size & !(step - 1);
    if below == size {
        size
    } else {
        below + step
    }
}

/// A trace replayed: the final numbers, and the first request that did not fit with the index
/// of its event (the replay stops there, as the program would).
pub struct Replay {
    pub stats: Stats,
    pub out_of_memory: Option<(usize, OutOfMemory)>,
    /// With an out-of-memory error: the allocations live then, as (id, block bytes).
    pub live_at_oom: Vec<(u64, u64)>,
}

/// One event of a trace: an allocation of `size` bytes on `stream` known by `id` from then on,
/// or the free of the allocation `id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    Alloc { id: u64, size: u64, stream: u64 },
    Free { id: u64 },
}

/// Replays `events` on a device of `capacity` bytes. A free of an id that is not allocated is
/// an error naming the event (a trace cut in the middle, or not memprof's).
pub fn replay(events: &[Event], capacity: u64, settings: Settings) -> Result<Replay, String> {
    let mut allocator = Allocator::new(capacity, settings);
    let mut live: HashMap<u64, usize> = HashMap::new();
    for (i, event) in events.iter().enumerate() {
        match *event {
            Event::Alloc { id, size, stream } => match allocator.malloc(size, stream) {
                Ok(block) => {
                    if live.insert(id, block).is_some() {
                        return Err(format!("event {i}: allocation {id} is already live"));
                    }
                }
                Err(oom) => {
                    let mut live_at_oom: Vec<(u64, u64)> = live
                        .iter()
                        .map(|(&id, &b)| (id, allocator.blocks[b].size))
                        .collect();
                    live_at_oom.sort_unstable();
                    return Ok(Replay {
                        stats: allocator.stats().clone(),
                        out_of_memory: Some((i, oom)),
                        live_at_oom,
                    });
                }
            },
            Event::Free { id } => {
                let block = live.remove(&id).ok_or_else(|| {
                    format!("event {i}: frees allocation {id}, which is not live")
                })?;
                allocator.free(block);
            }
        }
    }
    Ok(Replay {
        stats: allocator.stats().clone(),
        out_of_memory: None,
        live_at_oom: Vec::new(),
    })
}
