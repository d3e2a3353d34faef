//! Measurement scopes that are not lines: module calls (`--modules`), opened and closed at a
//! new sample, and the allocated bytes now.
use super::*;

impl<R: Runtime> Recorder<R> {
    /// Opens a measurement scope (a module's forward or backward call) at a new sample; it sees
    /// the same peaks as the lines open around it.
    pub fn open_scope(&mut self) -> u64 {
        self.take_sample_for_scope();
        self.choose_device();
        let mut window = self
            .spare_windows
            .pop()
            .unwrap_or_else(|| self.sampler.new_window());
        self.sampler.open(&mut window);
        self.next_scope += 1;
        self.scopes.insert(self.next_scope, window);
        self.next_scope
    }

    /// Closes a scope at a new sample: allocated bytes at its start and end, and the highest
    /// allocated bytes reached while it was open.
    pub fn close_scope(&mut self, id: u64) -> Option<ScopeReading> {
        self.take_sample_for_scope();
        let window = self.scopes.remove(&id)?;
        let reading = self.sampler.allocated_in(&window);
        self.spare_windows.push(window);
        Some(reading)
    }

    /// Allocated bytes now (`allocated_bytes.all.current`), at a new sample.
    pub fn allocated_now(&mut self) -> i64 {
        self.take_sample();
        self.sampler.allocated_current()
    }
}
