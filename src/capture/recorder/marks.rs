//! Which targeted line runs now, for those that follow it: allocation tags (`--tensors`) and
//! `--history`'s events; `--history`'s start; and the calls that ended (`--tensors`).
use super::*;

impl<R: Runtime> Recorder<R> {
    /// For `--tensors`: keep a list of the targeted calls that end, and tag allocations with
    /// the line that made them.
    pub fn collect_ended_calls(&mut self) {
        self.collect_ended = true;
        self.tagging = true;
        self.sampler.runtime().tags_enable();
    }

    /// Where a live block was allocated: (qualname, file, line), if by a targeted line.
    pub fn created_at(&self, ptr: usize) -> Option<(String, String, u32)> {
        let (func, line) = self.sampler.runtime().tag_of(ptr)?;
        let f = self.functions.get(func as usize)?;
        Some((f.qualname.clone(), f.file.clone(), line))
    }

    /// The targeted line now running (None: none), for `--tensors` and `--history`.
    pub(super) fn mark_line(&self, func: Option<u32>, line: u32) {
        if self.tagging {
            self.sampler.runtime().tag_set(func, line);
        }
    }

    /// Whether the line running is followed (`--tensors`, `--history`).
    pub(super) fn marks_lines(&self) -> bool {
        self.tagging
    }

    /// After a frame left `thread`: allocations now belong to the line of the targeted frame
    /// below it, if any.
    pub(super) fn retag(&self, thread: usize) {
        if !self.marks_lines() {
            return;
        }
        let top = self
            .stacks
            .get(&thread)
            .and_then(|s| s.last())
            .and_then(|f| self.frames.get(f))
            .filter(|s| s.open);
        match top {
            Some(s) => self.mark_line(Some(s.func), s.line),
            None => self.mark_line(None, 0),
        }
    }

    /// `--history`: a measured call starts. memprof's own record of the allocator's events
    /// starts with the first (each event tagged with the running line): on the CPU at once, on
    /// CUDA once the program has initialised CUDA (memprof never initialises it; its
    /// allocator's trace entries are the events).
    pub(super) fn history_call_started(&mut self) {
        if self.options.history.is_none() {
            return;
        }
        self.measured_running += 1;
        if self.history_started {
            return;
        }
        self.history_waiting = true;
        self.history_poll();
    }

    /// `--history`: starts the record if a measured call is waiting for it and it can start
    /// now (asked after every event of the hooks: on CUDA, the program may have initialised
    /// CUDA since).
    #[inline]
    pub fn history_poll(&mut self) {
        if !self.history_waiting || self.measured_running == 0 {
            return;
        }
        let Some(max_entries) = self.options.history else {
            return;
        };
        let cuda = self.sampler.device().is_some();
        if cuda && !self.sampler.runtime().allocator_initialized() {
            return;
        }
        self.history_waiting = false;
        self.history_started = true;
        // The events take the running line's tag as they happen (`tags::current`); the shim's
        // map of each live block's tag is `--tensors`' alone (it cost a lock and a hash map
        // insert or erase at every CPU allocation and free).
        self.tagging = true;
        crate::capture::history::start(max_entries);
        if cuda && !self.sampler.runtime().cuda_history_enable(true) {
            crate::capture::history::unavailable();
        }
    }
}
