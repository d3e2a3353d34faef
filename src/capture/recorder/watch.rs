//! Watched callers: the untargeted code objects whose events the hook must see while a targeted
//! call they made runs (so that its return, which 3.12 reports only to the caller, is seen).
use super::*;

impl<R: Runtime> Recorder<R> {
    /// Whether calls that returned are waiting for their caller to resume.
    #[cfg_attr(Py_3_12, allow(dead_code))] // sys.monitoring only reports watched callers
    #[inline]
    pub fn has_returning(&self) -> bool {
        !self.returning.is_empty()
    }

    /// Code objects whose events must be switched on (true) or off (false), since the last call.
    /// Only sys.monitoring needs them (a C trace function sees every frame), and they are
    /// applied outside the recorder's lock because that calls into Python.
    #[cfg_attr(not(Py_3_12), allow(dead_code))]
    #[inline]
    pub fn take_watch_changes(&mut self) -> Option<Vec<(usize, bool)>> {
        if self.watch_changes.is_empty() {
            None
        } else {
            Some(std::mem::take(&mut self.watch_changes))
        }
    }

    /// A targeted call runs with its caller running `code`: watch that code while any call
    /// does, so that the caller's next event (it resumes: the call returned or raised) is seen.
    pub(super) fn watch(&mut self, code: usize) {
        if code == 0 || self.codes.contains_key(&code) {
            return;
        }
        let n = self.watched.entry(code).or_insert(0);
        *n += 1;
        if *n == 1 {
            self.watch_changes.push((code, true));
        }
    }

    /// A call stopped waiting on a caller running `code`; with none left, stop watching it, so
    /// a caller's later lines (a hot loop, say) cost nothing.
    pub(super) fn unwatch(&mut self, code: usize) {
        if let Some(n) = self.watched.get_mut(&code) {
            *n -= 1;
            if *n == 0 {
                self.watched.remove(&code);
                self.watch_changes.push((code, false));
            }
        }
    }
}
