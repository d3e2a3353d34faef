//! Which targeted line runs now, for those that follow it: allocation tags (`--tensors`, CPU
//! `--history`), the CUDA history's line timeline; and the calls that ended (`--tensors`).
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
        if self.cuda_history() {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as i64);
            self.history_lines.borrow_mut().push((now, func, line));
        }
    }

    /// Whether the line running is followed: tags (`--tensors`, CPU `--history`) or the CUDA
    /// history's line timeline.
    pub(super) fn marks_lines(&self) -> bool {
        self.tagging || self.cuda_history()
    }

    pub(super) fn cuda_history(&self) -> bool {
        self.history_started && self.sampler.device().is_some()
    }

    /// `--history` on CUDA: the line timeline so far (see `history_lines`).
    pub fn history_line_timeline(&self) -> Vec<(i64, Option<u32>, u32)> {
        self.history_lines.borrow().clone()
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

    /// `--history`: a measured call starts. On the CPU memprof's own record starts with the
    /// first (tagged with the running line); on CUDA the Python side is told when the first of
    /// the running calls starts and the last ends.
    pub(super) fn history_call_started(&mut self) {
        let Some(max_entries) = self.options.history else {
            return;
        };
        self.measured_running += 1;
        if self.sampler.device().is_none() {
            if !self.history_started {
                self.history_started = true;
                self.tagging = true;
                self.sampler.runtime().tags_enable();
                crate::capture::history::start(max_entries);
            }
        } else if self.measured_running == 1 {
            self.history_started = true;
            self.history_waiting = false;
            self.history_changes.push(true);
        }
    }

    /// `--history` on CUDA: the Python side could not start because CUDA was not initialised.
    pub fn history_wait(&mut self) {
        self.history_waiting = true;
    }

    /// `--history` on CUDA: calls running started (true) or all ended (false) since last asked;
    /// a start is asked again once the program has initialised CUDA.
    #[inline]
    pub fn take_history_changes(&mut self) -> Option<Vec<bool>> {
        if self.history_waiting
            && self.measured_running > 0
            && self.sampler.runtime().allocator_initialized()
        {
            self.history_waiting = false;
            self.history_changes.push(true);
        }
        if self.history_changes.is_empty() {
            None
        } else {
            Some(std::mem::take(&mut self.history_changes))
        }
    }
}
