//! `expandable_segments:True`: each pool's blocks on a stream live in one segment of address
//! space (1.125 times the device, as the source reserves) whose pages are mapped as needed (2 MiB
//! pages for the small pool, 20 MiB for the large one) and unmapped again, whole pages of free
//! blocks only, when the device is full: what `find_expandable_block`, `map_block`,
//! `try_allocate_expandable_block` and `unmap_block` do in the source.
use super::{Allocator, LARGE_BUFFER, SMALL_BUFFER};

/// One expandable segment: its address range, its page size, and which pages are mapped.
pub struct Segment {
    base: u64,
    page: u64,
    mapped: Vec<bool>,
}

impl Segment {
    fn page_of(&self, addr: u64) -> usize {
        ((addr - self.base) / self.page) as usize
    }
    fn page_after(&self, addr: u64) -> usize {
        (addr - self.base).div_ceil(self.page) as usize
    }
}

impl Allocator {
    pub(super) fn unmapped_insert(&mut self, b: usize) {
        let block = &self.blocks[b];
        let key = (block.stream, block.addr, b);
        self.unmapped[usize::from(!block.small)].insert(key);
    }

    pub(super) fn unmapped_remove(&mut self, b: usize) {
        let block = &self.blocks[b];
        let key = (block.stream, block.addr, b);
        self.unmapped[usize::from(!block.small)].remove(&key);
    }

    /// What a block could hold: its size, and the unmapped space right after it.
    fn expandable_size(&self, b: usize) -> u64 {
        let block = &self.blocks[b];
        block.size
            + block
                .next
                .filter(|&n| !self.blocks[n].mapped)
                .map_or(0, |n| self.blocks[n].size)
    }

    /// `get_free_block`'s walk among expandable blocks: from the best fit by size, on to larger
    /// blocks while they could grow less (a block that can grow is kept for large requests).
    pub(super) fn least_expandable_fit(
        &self,
        first: usize,
        stream: u64,
        small: bool,
    ) -> (usize, u64) {
        let pool = if small { &self.small } else { &self.large };
        let start = (
            stream,
            self.blocks[first].size,
            self.blocks[first].addr,
            first,
        );
        let mut it = first;
        for &(s, _, _, next) in pool.range(start..).skip(1) {
            if s != stream
                || self.blocks[it].segment.is_none()
                || self.expandable_size(next) >= self.expandable_size(it)
            {
                break;
            }
            it = next;
        }
        (it, self.blocks[it].size)
    }

    /// Whether free or unmapped blocks from `b` on hold `size` bytes of address space.
    fn room_from(&self, mut b: Option<usize>, size: u64) -> bool {
        let mut bytes = 0;
        while let Some(i) = b {
            if bytes >= size || self.blocks[i].allocated {
                break;
            }
            bytes += self.blocks[i].size;
            b = self.blocks[i].next;
        }
        bytes >= size
    }

    /// `find_expandable_block`: the lowest address of an expandable segment of this stream and
    /// pool where `size` bytes of free and unmapped space follow; a new segment when none has.
    fn find_expandable_block(&mut self, stream: u64, small: bool, size: u64) -> usize {
        let candidates: Vec<usize> = self.unmapped[usize::from(!small)]
            .range((stream, 0, 0)..)
            .take_while(|k| k.0 == stream)
            .map(|k| k.2)
            .collect();
        for c in candidates {
            let start = match self.blocks[c].prev {
                Some(p) if !self.blocks[p].allocated => p,
                _ => c,
            };
            if self.room_from(Some(start), size) {
                return start;
            }
        }
        let page = if small { SMALL_BUFFER } else { LARGE_BUFFER };
        let pages = (self.capacity.saturating_add(self.capacity / 8))
            .div_ceil(page)
            .max(1);
        self.segments.push(Segment {
            base: self.next_addr,
            page,
            mapped: vec![false; pages as usize],
        });
        let segment = Some(self.segments.len() - 1);
        let b = self.segment_block(pages * page, stream, small, segment);
        self.unmapped_insert(b);
        b
    }

    /// `map_block`: maps the pages under the first `size` bytes of the unmapped block `b`;
    /// false when the device has no room for them.
    fn map_block(&mut self, b: usize, size: u64) -> bool {
        let seg = self.blocks[b].segment.expect("an expandable block");
        let (first, last) = {
            let s = &self.segments[seg];
            (
                s.page_of(self.blocks[b].addr),
                s.page_after(self.blocks[b].addr + size),
            )
        };
        let page = self.segments[seg].page;
        let bytes = (last - first) as u64 * page;
        if self.stats.reserved_bytes + bytes > self.capacity {
            return false;
        }
        for p in first..last {
            self.segments[seg].mapped[p] = true;
        }
        self.unmapped_remove(b);
        self.blocks[b].mapped = true;
        if bytes < self.blocks[b].size {
            // The rest stays unmapped, a block of its own after `b`.
            let (addr, size) = (self.blocks[b].addr + bytes, self.blocks[b].size - bytes);
            let r = self.splice_after(b, addr, size);
            self.blocks[r].mapped = false;
            self.blocks[b].size = bytes;
            self.unmapped_insert(r);
        }
        for neighbour in [self.blocks[b].prev, self.blocks[b].next]
            .into_iter()
            .flatten()
        {
            self.try_merge(b, neighbour);
        }
        self.insert(b);
        let s = &mut self.stats;
        s.reserved_bytes += bytes;
        s.reserved_bytes_peak = s.reserved_bytes_peak.max(s.reserved_bytes);
        s.num_device_alloc += 1;
        true
    }

    /// `try_allocate_expandable_block`: a free block of at least `size` bytes, mapping pages.
    pub(super) fn allocate_expandable(
        &mut self,
        stream: u64,
        small: bool,
        size: u64,
    ) -> Option<usize> {
        let mut candidate = self.find_expandable_block(stream, small, size);
        if !self.blocks[candidate].mapped {
            let want = self.blocks[candidate].size.min(size);
            if !self.map_block(candidate, want) {
                return None;
            }
            // map_block merged it into its free neighbour, if it had one: the merged block is
            // the one in the pool now (candidate kept its index).
        }
        while self.blocks[candidate].size < size {
            let next = self.blocks[candidate].next?;
            let want = (size - self.blocks[candidate].size).min(self.blocks[next].size);
            if !self.map_block(next, want) {
                return None;
            }
            candidate = next;
        }
        self.remove(candidate);
        Some(candidate)
    }

    /// `unmap_block`: gives the device back the whole pages inside the free block `b`; what is
    /// left of them on either side stays a free mapped block.
    pub(super) fn unmap_free_pages(&mut self, b: usize) {
        let seg = self.blocks[b].segment.expect("an expandable block");
        let (addr, size) = (self.blocks[b].addr, self.blocks[b].size);
        let (first, last, page, base) = {
            let s = &self.segments[seg];
            (s.page_after(addr), s.page_of(addr + size), s.page, s.base)
        };
        if first >= last {
            return;
        }
        self.remove(b);
        let start = base + first as u64 * page;
        let end = base + last as u64 * page;
        // What is left of the first and last pages stays a free mapped block on either side.
        if start > addr {
            let f = self.splice_before(b, addr, start - addr);
            self.insert(f);
        }
        if addr + size > end {
            let a = self.splice_after(b, end, addr + size - end);
            self.insert(a);
        }
        for p in first..last {
            self.segments[seg].mapped[p] = false;
        }
        let unmapped = end - start;
        let block = &mut self.blocks[b];
        block.addr = start;
        block.size = unmapped;
        block.mapped = false;
        for neighbour in [self.blocks[b].prev, self.blocks[b].next]
            .into_iter()
            .flatten()
        {
            self.try_merge(b, neighbour);
        }
        if self.blocks[b].prev.is_none() && self.blocks[b].next.is_none() {
            // The whole segment is unmapped: it goes (release_expandable_segment).
            self.blocks[b].size = 0;
        } else {
            self.unmapped_insert(b);
        }
        let s = &mut self.stats;
        s.reserved_bytes -= unmapped;
        s.num_device_free += 1;
    }
}
