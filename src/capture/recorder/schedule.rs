//! `--warmup`/`--calls`: which calls of each targeted function are measured, and when the
//! schedule is complete so that the hooks can stop.
use super::*;

impl<R: Runtime> Recorder<R> {
    /// Whether a targeted call of the schedule's is running now (on any thread); always true
    /// without a schedule. Module calls and inventories follow it.
    pub fn measuring(&self) -> bool {
        if !self.scheduled() {
            return true;
        }
        self.stacks
            .values()
            .flatten()
            .any(|f| self.frames.get(f).is_some_and(|s| s.measured))
    }

    /// Whether `--warmup` or `--calls` chose which calls are measured.
    pub(super) fn scheduled(&self) -> bool {
        self.options.calls.is_some() || self.options.warmup > 0
    }

    /// Once, when every targeted function has had its measured calls and they have all ended:
    /// the hooks can stop, so the rest of the run pays nothing.
    pub fn take_finished(&mut self) -> bool {
        if !self.finished || !self.idle() {
            return false;
        }
        self.finished = false;
        true
    }

    /// Counts a call of `func`; whether the schedule measures it.
    pub(super) fn count_call(&mut self, func: u32) -> bool {
        let (warmup, calls) = (self.options.warmup, self.options.calls);
        let f = &mut self.functions[func as usize];
        f.calls += 1;
        let n = f.calls;
        let (measured, last) = verdict(n, warmup, calls);
        if measured {
            let first = f.measured.map_or(n, |(first, _)| first);
            f.measured = Some((first, n));
        }
        if last {
            self.unfinished -= 1;
            if self.unfinished == 0 {
                self.finished = true;
            }
        }
        measured
    }

    /// The schedule is complete (`take_finished`): stop now, so that later events cost only the
    /// lookup that finds nothing.
    pub fn stop_early(&mut self) {
        if !self.stopped {
            self.stop(None);
            self.stopped_early = true;
        }
    }

    /// Whether recording stopped before the end because the schedule was complete.
    pub fn stopped_early(&self) -> bool {
        self.stopped_early
    }
}

/// The schedule's one rule, for the call numbered `n` (from 1) of a targeted function or of a
/// root module (`--modules` without -f counts those in Python and asks here): whether it is
/// measured, and whether it is the last one measured.
pub fn verdict(n: u64, warmup: u64, calls: Option<u64>) -> (bool, bool) {
    (
        n > warmup && calls.is_none_or(|m| n <= warmup + m),
        calls.is_some_and(|m| n == warmup + m),
    )
}

impl<R: Runtime> Recorder<R> {
    /// `verdict` under this run's `--warmup` and `--calls`.
    pub fn schedule_verdict(&self, n: u64) -> (bool, bool) {
        verdict(n, self.options.warmup, self.options.calls)
    }
}
