//! A stand-in for libtorch in unit tests: a CPU allocator that a test drives by hand (which
//! thread runs, what it allocates and frees), keeping the tallies and per-thread counts the shim
//! keeps, so that the recorder's and sampler's state machines run without libtorch.
use crate::model::stats::{cuda_stats, CUDA_STAT_COUNT};
use crate::torch::{collectives, tally, Runtime, TALLY_LEN};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// Cheap to clone: the test keeps one handle, the recorder's sampler another.
#[derive(Clone, Default)]
pub struct TestTorch(Rc<RefCell<State>>);

#[derive(Default)]
struct State {
    current: i64,
    max: i64,
    allocated: i64,
    freed: i64,
    count: i64,
    count_max: i64,
    count_allocated: i64,
    count_freed: i64,
    thread: usize,
    own: HashMap<usize, i64>,
    tag: u64,
    /// A CUDA device (the tally is the device's, the allocator's stats are readable), and how
    /// many times its stats were read.
    cuda: bool,
    device_reads: usize,
}

impl TestTorch {
    /// A CUDA device whose allocator's stats (allocated bytes, current and peak) can be read.
    pub fn cuda() -> Self {
        let torch = TestTorch::default();
        torch.0.borrow_mut().cuda = true;
        torch
    }

    /// How many times the allocator's stats were read.
    pub fn device_reads(&self) -> usize {
        self.0.borrow().device_reads
    }

    /// The thread that allocates from now on.
    pub fn on_thread(&self, thread: usize) {
        self.0.borrow_mut().thread = thread;
    }

    /// `bytes` allocated by the current thread.
    pub fn alloc(&self, bytes: i64) {
        let mut s = self.0.borrow_mut();
        s.current += bytes;
        s.max = s.max.max(s.current);
        s.allocated += bytes;
        s.count += 1;
        s.count_max = s.count_max.max(s.count);
        s.count_allocated += 1;
        let thread = s.thread;
        *s.own.entry(thread).or_default() += bytes;
    }

    /// `bytes` freed by the current thread.
    pub fn free(&self, bytes: i64) {
        let mut s = self.0.borrow_mut();
        s.current -= bytes;
        s.freed += bytes;
        s.count -= 1;
        s.count_freed += 1;
        let thread = s.thread;
        *s.own.entry(thread).or_default() -= bytes;
    }

    /// The line allocations are tagged with now.
    pub fn tag(&self) -> u64 {
        self.0.borrow().tag
    }
}

impl Runtime for TestTorch {
    fn allocator_initialized(&self) -> bool {
        self.0.borrow().cuda
    }
    fn device_stats(&self, _device: i32, out: &mut [i64; CUDA_STAT_COUNT]) -> bool {
        let mut s = self.0.borrow_mut();
        if !s.cuda {
            return false;
        }
        s.device_reads += 1;
        out.fill(0);
        let at = |key: &str| {
            cuda_stats()
                .iter()
                .position(|d| d.key == key)
                .expect("a stat")
        };
        out[at("allocated_bytes.all.current")] = s.current;
        out[at("allocated_bytes.all.peak")] = s.max;
        true
    }
    fn reset_peak_stats(&self, _device: i32) -> bool {
        false
    }
    fn set_reporter_device(&self, _device: i32) -> bool {
        false
    }
    fn current_device(&self) -> Option<i32> {
        None
    }
    fn take_tally(&self, _device: bool, out: &mut [i64; TALLY_LEN]) {
        let mut s = self.0.borrow_mut();
        out.fill(0);
        out[tally::ALLOCATED_CURRENT] = s.current;
        out[tally::ALLOCATED_MAX] = s.max;
        out[tally::BYTES_ALLOCATED] = s.allocated;
        out[tally::BYTES_FREED] = s.freed;
        out[tally::COUNT_CURRENT] = s.count;
        out[tally::COUNT_MAX] = s.count_max;
        out[tally::COUNT_ALLOCATED] = s.count_allocated;
        out[tally::COUNT_FREED] = s.count_freed;
        // As the shim does: the maxima restart at the current values when read.
        s.max = s.current;
        s.count_max = s.count;
    }
    fn own_net(&self, _device: bool) -> i64 {
        let s = self.0.borrow();
        s.own.get(&s.thread).copied().unwrap_or(0)
    }
    fn take_collectives(&self, out: &mut [i64; collectives::LEN]) {
        out.fill(0);
    }
    fn tags_enable(&self) {}
    fn cuda_history_enable(&self, _on: bool) -> bool {
        false
    }
    fn tag_set(&self, func: Option<u32>, line: u32) {
        self.0.borrow_mut().tag = crate::torch::tags::encode(func, line);
    }
    fn tag_of(&self, _ptr: usize) -> Option<(u32, u32)> {
        crate::torch::tags::decode(self.0.borrow().tag)
    }
}
