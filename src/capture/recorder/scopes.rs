//! Measurement scopes that are not lines: module calls (`--modules`), opened and closed at a
//! new sample, and the allocated bytes now.
use super::*;

impl<R: Runtime> Recorder<R> {
    /// Opens a measurement scope (a module's forward or backward call) at a new sample; it sees
    /// the same peaks as the lines open around it.
    pub fn open_scope(&mut self) -> u64 {
        self.take_sample_for_scope();
        self.choose_device();
        let window = self.sampler.open_scope();
        self.next_scope += 1;
        self.scopes.insert(self.next_scope, window);
        self.next_scope
    }

    /// Closes a scope at a new sample: allocated bytes at its start and end, and the highest
    /// allocated bytes reached while it was open.
    pub fn close_scope(&mut self, id: u64) -> Option<ScopeReading> {
        self.take_sample_for_scope();
        let window = self.scopes.remove(&id)?;
        Some(self.sampler.scope_reading(&window))
    }

    /// Allocated bytes now (`allocated_bytes.all.current`), at a new sample.
    pub fn allocated_now(&mut self) -> i64 {
        self.take_sample();
        self.sampler.allocated_current()
    }
}
