//! Turns the hook's events on targeted frames (start, line, yield, resume, return, unwind) into
//! per-line measurements: per-frame state, sampling of the allocator, and aggregation over hits.
//! It knows nothing of Python: the hooks hand it frame and code addresses.
use crate::host::RssReader;
use crate::stats::{self, Field, StatDef, CUDA_STAT_COUNT};
use crate::torch::{self, tally, TALLY_LEN};
use std::collections::HashMap;

/// Where the numbers come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Cuda(i32),
    Cpu,
}

/// How one peak column learns the highest value reached since the previous sample.
#[derive(Clone, Copy, Debug)]
enum PeakSource {
    /// memprof's own tally of the allocator's reports (CPU), read at `max`.
    Tally { max: usize },
    /// The CUDA allocator's reports (their totals' maximum at `max`), checked against the
    /// device-wide peak at `global`: when that rose since the previous sample, it is exact.
    Reports { max: usize, global: usize },
    /// The device-wide peak at `global`, reset after every sample.
    Reset { global: usize },
}

/// How one column is read from a sample.
#[derive(Clone, Copy, Debug)]
enum Probe {
    /// The value at `at` at the end of the execution.
    Level { at: usize },
    /// The increase of the monotonic counter at `at` during the execution.
    Amount { at: usize },
    /// The running maximum kept per window; starts at the value at `current`.
    Peak {
        current: usize,
        source: PeakSource,
        slot: usize,
    },
}

/// The frame that called a targeted frame, and the code object it runs (0 where the hook does
/// not need it). A frame 0 means no Python caller.
#[derive(Clone, Copy, Debug)]
pub struct Caller {
    pub frame: usize,
    pub code: usize,
}

/// One open or suspended execution of a targeted frame.
struct FrameState {
    func: u32,
    /// The frame that called (or resumed) it, and that frame's code.
    caller: Caller,
    /// The line being executed, or 0 before the first line.
    line: u32,
    open: bool,
    /// This window continues the line a generator yielded from: not a new hit.
    continuation: bool,
    start: Vec<i64>,
    peaks: Vec<i64>,
}

/// One line's aggregate over its hits.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LineAgg {
    pub hits: u64,
    pub raised: u64,
    pub delta: i64,
    /// Per column (`Recorder::columns`), aggregated by the column's rule.
    pub values: Vec<i64>,
    measured: bool,
}

/// A targeted function and what its lines measured.
#[derive(Debug)]
pub struct FunctionRecord {
    pub qualname: String,
    pub file: String,
    pub first_line: u32,
    pub last_line: u32,
    pub targets: Vec<String>,
    pub calls: u64,
    pub lines: HashMap<u32, LineAgg>,
}

/// The state of a profiling run.
pub struct Recorder {
    source: Source,
    /// The columns measured: the chosen stats, then allocated_bytes.all.peak if not chosen
    /// (the function's total peak in the header needs it).
    columns: Vec<StatDef>,
    probes: Vec<Probe>,
    shown: usize,
    total_peak_column: usize,
    delta_at: usize,
    rss_at: Option<usize>,
    tally_at: usize,
    reset_peaks: bool,
    /// Device-wide peak values at the previous sample, per peak slot.
    last_global: Vec<i64>,
    peak_slots: usize,
    sample: Vec<i64>,
    cuda_ready: bool,
    stopped: bool,
    codes: HashMap<usize, u32>,
    pub functions: Vec<FunctionRecord>,
    frames: HashMap<usize, FrameState>,
    /// Calls that returned, with their caller: their last line ends when it resumes.
    returning: Vec<(Caller, FrameState)>,
    /// Untargeted callers' code objects with calls waiting on them, and how many.
    watched: HashMap<usize, u32>,
    /// Code objects whose events the hook must switch on (true) or off (false).
    watch_changes: Vec<(usize, bool)>,
    /// Per thread, the targeted frames running (started or resumed, not yet left), outermost
    /// first.
    stacks: HashMap<usize, Vec<usize>>,
    rss: RssReader,
}

impl Recorder {
    /// Plans how to measure `chosen` (validated keys of `stats::stats_for`) on `source`.
    pub fn new(source: Source, chosen: Vec<StatDef>) -> Self {
        let cuda = matches!(source, Source::Cuda(_));
        let all = stats::stats_for(cuda);
        let find = |key: &str| {
            all.iter()
                .find(|s| s.key == key)
                .cloned()
                .expect("known stat key")
        };
        let shown = chosen.len();
        let mut columns = chosen;
        let total_peak_column = match columns
            .iter()
            .position(|c| c.key == "allocated_bytes.all.peak")
        {
            Some(i) => i,
            None => {
                columns.push(find("allocated_bytes.all.peak"));
                columns.len() - 1
            }
        };
        // Sample layout: CUDA stats (CUDA only), then the tally, then host RSS.
        let tally_at = if cuda { CUDA_STAT_COUNT } else { 0 };
        let rss_at = tally_at + TALLY_LEN;
        let cpu_index = |key: &str| -> usize {
            tally_at
                + match key {
                    "allocated_bytes.all.current" => tally::ALLOCATED_CURRENT,
                    "allocated_bytes.all.allocated" => tally::BYTES_ALLOCATED,
                    "allocated_bytes.all.freed" => tally::BYTES_FREED,
                    "allocation.all.current" => tally::COUNT_CURRENT,
                    "allocation.all.allocated" => tally::COUNT_ALLOCATED,
                    "allocation.all.freed" => tally::COUNT_FREED,
                    other => unreachable!("{other} is not a CPU stat"),
                }
        };
        let mut reset_peaks = false;
        let mut peak_slots = 0;
        let mut probes = Vec::with_capacity(columns.len());
        let mut uses_rss = false;
        for col in &columns {
            let probe = if col.key == stats::HOST_RSS {
                uses_rss = true;
                Probe::Level { at: rss_at }
            } else if let Some(i) = col.cuda_index {
                match col.field {
                    Field::Peak => {
                        let source = if stats::cuda_peak_from_reports(&col.key) {
                            let max = if col.key.starts_with("allocated") {
                                tally::ALLOCATED_MAX
                            } else {
                                tally::RESERVED_MAX
                            };
                            PeakSource::Reports {
                                max: tally_at + max,
                                global: i,
                            }
                        } else {
                            reset_peaks = true;
                            PeakSource::Reset { global: i }
                        };
                        peak_slots += 1;
                        // In the shim's order `.current` directly precedes `.peak`.
                        Probe::Peak {
                            current: i - 1,
                            source,
                            slot: peak_slots - 1,
                        }
                    }
                    f if f.sums_over_hits() => Probe::Amount { at: i },
                    _ => Probe::Level { at: i },
                }
            } else {
                match col.field {
                    Field::Peak => {
                        let (current, max) = if col.key.starts_with("allocated_bytes") {
                            (tally::ALLOCATED_CURRENT, tally::ALLOCATED_MAX)
                        } else {
                            (tally::COUNT_CURRENT, tally::COUNT_MAX)
                        };
                        peak_slots += 1;
                        Probe::Peak {
                            current: tally_at + current,
                            source: PeakSource::Tally {
                                max: tally_at + max,
                            },
                            slot: peak_slots - 1,
                        }
                    }
                    f if f.sums_over_hits() => Probe::Amount {
                        at: cpu_index(&col.key),
                    },
                    _ => Probe::Level {
                        at: cpu_index(&col.key),
                    },
                }
            };
            probes.push(probe);
        }
        let delta_at = if cuda {
            all.iter()
                .position(|s| s.key == "allocated_bytes.all.current")
                .expect("known key")
        } else {
            tally_at + tally::ALLOCATED_CURRENT
        };
        Recorder {
            source,
            columns,
            probes,
            shown,
            total_peak_column,
            delta_at,
            rss_at: uses_rss.then_some(rss_at),
            tally_at,
            reset_peaks,
            last_global: vec![i64::MIN; peak_slots],
            peak_slots,
            sample: vec![0; rss_at + 1],
            cuda_ready: false,
            stopped: false,
            codes: HashMap::new(),
            functions: Vec::new(),
            frames: HashMap::new(),
            returning: Vec::new(),
            watched: HashMap::new(),
            watch_changes: Vec::new(),
            stacks: HashMap::new(),
            rss: RssReader::new(),
        }
    }

    /// The columns shown in the report, in order.
    pub fn shown_columns(&self) -> &[StatDef] {
        &self.columns[..self.shown]
    }

    /// Why peak stats are reset, if they are.
    pub fn peak_reset_reason(&self) -> Option<String> {
        self.reset_peaks.then(|| {
            let keys: Vec<&str> = self
                .probes
                .iter()
                .zip(&self.columns)
                .filter(|(p, _)| matches!(p, Probe::Peak { source: PeakSource::Reset { .. }, .. }))
                .map(|(_, c)| c.key.as_str())
                .collect();
            format!(
                "{} cannot be measured from the allocator's reports, so memprof reset the device's \
                 peak stats at every traced line; the program's own max_memory_* readings were affected",
                keys.join(", ")
            )
        })
    }

    /// Registers a targeted code object; returns false if it was already registered (the
    /// target is then added to its list).
    pub fn register(
        &mut self,
        code: usize,
        qualname: String,
        file: String,
        lines: (u32, u32),
        target: String,
    ) -> bool {
        if let Some(&id) = self.codes.get(&code) {
            let targets = &mut self.functions[id as usize].targets;
            if !targets.contains(&target) {
                targets.push(target);
            }
            return false;
        }
        self.codes.insert(code, self.functions.len() as u32);
        self.functions.push(FunctionRecord {
            qualname,
            file,
            first_line: lines.0,
            last_line: lines.1,
            targets: vec![target],
            calls: 0,
            lines: HashMap::new(),
        });
        true
    }

    /// The function id of a registered code object.
    #[inline]
    pub fn function_of(&self, code: usize) -> Option<u32> {
        if self.stopped {
            return None;
        }
        self.codes.get(&code).copied()
    }

    /// Stops recording; later events are ignored. Calls whose caller never resumed end now;
    /// frames still running on `exception_thread` (the thread whose exception ended the program)
    /// were left by that exception, which sys.monitoring does not report; frames of other
    /// threads still running end unraised.
    pub fn stop(&mut self, exception_thread: Option<usize>) {
        self.take_sample();
        for (_, mut state) in std::mem::take(&mut self.returning) {
            self.close(&mut state, false);
        }
        for (thread, stack) in std::mem::take(&mut self.stacks) {
            for frame in stack.into_iter().rev() {
                if let Some(mut state) = self.frames.remove(&frame) {
                    if state.open {
                        self.close(&mut state, exception_thread == Some(thread));
                    }
                }
            }
        }
        self.stopped = true;
    }

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
    fn watch(&mut self, code: usize) {
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
    fn unwatch(&mut self, code: usize) {
        if let Some(n) = self.watched.get_mut(&code) {
            *n -= 1;
            if *n == 0 {
                self.watched.remove(&code);
                self.watch_changes.push((code, false));
            }
        }
    }

    /// A targeted frame starts (`resume == false`) or a generator or coroutine frame resumes,
    /// called from `caller` on `thread`. `is_ancestor(f)` tells whether frame f is on the
    /// new frame's call stack.
    pub fn on_enter(
        &mut self,
        frame: usize,
        func: u32,
        resume: bool,
        thread: usize,
        caller: Caller,
        is_ancestor: impl Fn(usize) -> bool,
    ) {
        self.take_sample();
        self.resumed(thread, caller.frame);
        // A frame left by an exception sends no event on 3.12: any frame still on this thread's
        // stack that is not an ancestor of the new one has ended.
        while let Some(&top) = self.stacks.get(&thread).and_then(|s| s.last()) {
            if is_ancestor(top) {
                break;
            }
            let len = self.stacks[&thread].len();
            self.reap_from(thread, len - 1);
        }
        let mut state = match self.frames.remove(&frame) {
            Some(s) if resume && s.func == func => s,
            _ => self.new_state(func),
        };
        if !resume {
            self.functions[func as usize].calls += 1;
        }
        state.caller = caller;
        self.watch(caller.code);
        self.stacks.entry(thread).or_default().push(frame);
        if resume && state.line != 0 {
            let line = state.line;
            self.open(&mut state, line, true);
        }
        self.frames.insert(frame, state);
    }

    /// A new line starts in a targeted frame.
    pub fn on_line(&mut self, frame: usize, func: u32, line: u32, thread: usize) {
        self.take_sample();
        self.resumed(thread, frame);
        let mut state = match self.frames.remove(&frame) {
            Some(s) if s.func == func => s,
            _ => {
                // A frame that was running before profiling could see it start.
                self.stacks.entry(thread).or_default().push(frame);
                self.new_state(func)
            }
        };
        if state.open {
            self.close(&mut state, false);
        }
        self.open(&mut state, line, false);
        self.frames.insert(frame, state);
    }

    /// A generator or coroutine frame yields: its line's execution ends, the frame stays.
    pub fn on_yield(&mut self, frame: usize, thread: usize) {
        self.take_sample();
        self.resumed(thread, frame);
        self.pop(thread, frame);
        if let Some(mut state) = self.frames.remove(&frame) {
            if state.open {
                self.close(&mut state, false);
            }
            self.unwatch(state.caller.code);
            self.frames.insert(frame, state);
        }
    }

    /// A targeted frame returns (`raised == false`) or an exception leaves it (reported on
    /// 3.11; on 3.12 found later, see `on_enter`). A returning frame's last line stays open until
    /// its caller resumes, so that it includes the release of the frame's locals; an exception's
    /// traceback keeps the frame alive, so that line closes now.
    pub fn on_exit(&mut self, frame: usize, raised: bool, thread: usize) {
        self.take_sample();
        self.resumed(thread, frame);
        self.pop(thread, frame);
        if let Some(mut state) = self.frames.remove(&frame) {
            if state.open && !raised && state.caller.frame != 0 {
                self.returning.push((state.caller, state));
            } else {
                if state.open {
                    self.close(&mut state, raised);
                }
                self.unwatch(state.caller.code);
            }
        }
    }

    /// An event of a frame that is not targeted: a watched caller's line, return or yield.
    /// Calls it made have ended.
    pub fn on_caller_event(&mut self, frame: usize, thread: usize) {
        let returned = self
            .returning
            .iter()
            .any(|(caller, _)| caller.frame == frame);
        let raised = self.stacks.get(&thread).is_some_and(|stack| {
            stack
                .iter()
                .any(|f| self.frames.get(f).is_some_and(|s| s.caller.frame == frame))
        });
        if returned || raised {
            self.take_sample();
            self.resumed(thread, frame);
        }
    }

    /// `frame` runs again on `thread`: the calls it made have ended. Calls that returned to it
    /// close their last line; frames above it on the stack (called from it, directly or not)
    /// were left by an exception.
    fn resumed(&mut self, thread: usize, frame: usize) {
        if !self.returning.is_empty() {
            self.settle(frame);
        }
        let Some(stack) = self.stacks.get(&thread) else {
            return;
        };
        if stack.last() == Some(&frame) || stack.is_empty() {
            return;
        }
        let from = match stack.iter().rposition(|f| *f == frame) {
            Some(i) => i + 1,
            None => match stack
                .iter()
                .position(|f| self.frames.get(f).is_some_and(|s| s.caller.frame == frame))
            {
                Some(i) => i,
                None => return,
            },
        };
        self.reap_from(thread, from);
    }

    /// The exception that ends the program has left every targeted frame of `thread`: end
    /// them now, while it still holds their locals, as a reported unwind would.
    pub fn on_uncaught(&mut self, thread: usize) {
        if self.stacks.get(&thread).is_some_and(|s| !s.is_empty()) {
            self.take_sample();
            self.reap_from(thread, 0);
        }
    }

    /// Ends, as left by an exception, the frames from index `from` of `thread`'s stack up.
    fn reap_from(&mut self, thread: usize, from: usize) {
        let Some(stack) = self.stacks.get_mut(&thread) else {
            return;
        };
        let dead: Vec<usize> = stack.drain(from.min(stack.len())..).collect();
        for frame in dead.into_iter().rev() {
            if let Some(mut state) = self.frames.remove(&frame) {
                if state.open {
                    self.close(&mut state, true);
                }
                self.unwatch(state.caller.code);
            }
        }
    }

    /// Removes `frame` (the top, normally) from `thread`'s stack.
    fn pop(&mut self, thread: usize, frame: usize) {
        if let Some(stack) = self.stacks.get_mut(&thread) {
            if let Some(i) = stack.iter().rposition(|f| *f == frame) {
                stack.remove(i);
            }
        }
    }

    /// Closes the windows of calls that returned to `caller`, at the current sample.
    fn settle(&mut self, caller: usize) {
        let mut i = 0;
        while i < self.returning.len() {
            if self.returning[i].0.frame == caller {
                let (caller, mut state) = self.returning.swap_remove(i);
                self.close(&mut state, false);
                self.unwatch(caller.code);
            } else {
                i += 1;
            }
        }
    }

    fn new_state(&self, func: u32) -> FrameState {
        FrameState {
            func,
            caller: Caller { frame: 0, code: 0 },
            line: 0,
            open: false,
            continuation: false,
            start: vec![0; self.sample.len()],
            peaks: vec![0; self.peak_slots],
        }
    }

    fn open(&self, state: &mut FrameState, line: u32, continuation: bool) {
        state.line = line;
        state.open = true;
        state.continuation = continuation;
        state.start.copy_from_slice(&self.sample);
        for probe in &self.probes {
            if let Probe::Peak { current, slot, .. } = *probe {
                state.peaks[slot] = self.sample[current];
            }
        }
    }

    fn close(&mut self, state: &mut FrameState, raised: bool) {
        state.open = false;
        let end = &self.sample;
        let agg = self.functions[state.func as usize]
            .lines
            .entry(state.line)
            .or_default();
        if !agg.measured {
            agg.measured = true;
            agg.values = self
                .probes
                .iter()
                .map(|p| {
                    if matches!(p, Probe::Amount { .. }) {
                        0
                    } else {
                        i64::MIN
                    }
                })
                .collect();
        }
        if !state.continuation {
            agg.hits += 1;
        }
        agg.raised += u64::from(raised);
        agg.delta += end[self.delta_at] - state.start[self.delta_at];
        for (value, probe) in agg.values.iter_mut().zip(&self.probes) {
            match *probe {
                Probe::Level { at } => *value = (*value).max(end[at]),
                Probe::Amount { at } => {
                    let (a, b) = (state.start[at], end[at]);
                    // A counter that went down was reset by the program
                    // (reset_accumulated_memory_stats): count what accumulated since.
                    *value += if b >= a { b - a } else { b };
                }
                Probe::Peak { slot, .. } => *value = (*value).max(state.peaks[slot]),
            }
        }
    }

    /// Reads the allocator, then folds the highest values reached since the previous sample into
    /// every open window (a caller's line includes everything its callees did).
    fn take_sample(&mut self) {
        if let Source::Cuda(device) = self.source {
            if !self.cuda_ready {
                self.cuda_ready = torch::allocator_initialized();
            }
            let stats: &mut [i64; CUDA_STAT_COUNT] = (&mut self.sample[..CUDA_STAT_COUNT])
                .try_into()
                .expect("sample layout");
            if !self.cuda_ready || torch::device_stats(device, stats).is_err() {
                stats.fill(0);
            }
        }
        let t: &mut [i64; TALLY_LEN] = (&mut self.sample[self.tally_at..self.tally_at + TALLY_LEN])
            .try_into()
            .expect("sample layout");
        torch::take_tally(matches!(self.source, Source::Cuda(_)), t);
        if let Some(at) = self.rss_at {
            self.sample[at] = self.rss.bytes();
        }
        if self.peak_slots == 0 {
            return;
        }
        let mut since = [i64::MIN; 8];
        let mut since_vec;
        let since: &mut [i64] = if self.peak_slots <= since.len() {
            &mut since[..self.peak_slots]
        } else {
            since_vec = vec![i64::MIN; self.peak_slots];
            &mut since_vec
        };
        let s = &self.sample;
        for probe in &self.probes {
            if let Probe::Peak {
                current,
                source,
                slot,
            } = *probe
            {
                since[slot] = match source {
                    PeakSource::Tally { max } => s[max].max(s[current]),
                    PeakSource::Reports { max, global } => {
                        let mut v = s[max].max(s[current]);
                        if s[global] > self.last_global[slot] {
                            v = v.max(s[global]);
                        }
                        self.last_global[slot] = s[global];
                        v
                    }
                    PeakSource::Reset { global } => s[global],
                };
            }
        }
        let returning = self.returning.iter_mut().map(|(_, s)| s);
        for state in self.frames.values_mut().filter(|f| f.open).chain(returning) {
            for (peak, &seen) in state.peaks.iter_mut().zip(since.iter()) {
                *peak = (*peak).max(seen);
            }
        }
        if self.reset_peaks && self.cuda_ready {
            if let Source::Cuda(device) = self.source {
                if torch::reset_peak_stats(device).is_ok() {
                    // After a reset every device-wide peak equals its current value.
                    for probe in &self.probes {
                        if let Probe::Peak {
                            current,
                            slot,
                            source: PeakSource::Reports { .. },
                        } = *probe
                        {
                            self.last_global[slot] = self.sample[current];
                        }
                    }
                }
            }
        }
    }

    /// A line's aggregated values for the shown columns, and the total-peak value.
    pub fn shown_values<'a>(&self, agg: &'a LineAgg) -> (&'a [i64], Option<i64>) {
        if !agg.measured {
            return (&[], None);
        }
        (
            &agg.values[..self.shown],
            Some(agg.values[self.total_peak_column]),
        )
    }
}

/// The one recorder of this process. Hooks run with the GIL held, so the lock is uncontended
/// except against the second-Ctrl-C path, which only tries it.
pub static RECORDER: std::sync::Mutex<Option<Recorder>> = std::sync::Mutex::new(None);

/// Runs `f` on the recorder, if there is one.
#[inline]
pub fn with<R>(f: impl FnOnce(&mut Recorder) -> R) -> Option<R> {
    let mut guard = RECORDER.lock().unwrap_or_else(|e| e.into_inner());
    guard.as_mut().map(f)
}
