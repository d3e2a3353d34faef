//! Turns the hook's events on targeted frames (start, resume, line, yield, return, exception
//! exit) into executions of lines: which frame runs which line, when an execution starts and
//! ends, and which lines it is attributed to; which calls are measured (`--warmup`/`--calls`)
//! and on which CUDA device (the one the program uses when a measured call starts). What an
//! execution measures is `sampler`'s. It knows nothing of Python: the hooks hand it frame, code
//! and thread addresses.
mod marks;
mod schedule;
#[cfg(test)]
mod tests;
mod watch;

use crate::capture::int_hash::IntMap;
pub use crate::capture::sampler::{LineAgg, Source};
use crate::capture::sampler::{Sampler, Window};
use crate::model::stats::StatDef;
use crate::torch::{Linked, Runtime};
use std::collections::HashMap;

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
    /// The call is one the schedule measures (every call without `--warmup`/`--calls`).
    measured: bool,
    window: Window,
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
    /// The first and last call measured (all calls without a schedule).
    pub measured: Option<(u64, u64)>,
    pub lines: HashMap<u32, LineAgg>,
    /// The source text, when the file cannot be read by its name (a module in a zip archive).
    pub source: Option<String>,
}

/// How a run measures, beyond the stats.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// No `--device`: measure the CUDA device the program uses when a measured call starts.
    pub follow_device: bool,
    /// `--collectives`.
    pub collectives: bool,
    /// `--warmup N`: the first N calls of each function are not measured.
    pub warmup: u64,
    /// `--calls M`: the M calls after the warm-up are measured; then memprof stops.
    pub calls: Option<u64>,
    /// `--history`: how many allocation events to keep (None: no history).
    pub history: Option<u64>,
}

/// The state of a profiling run; `R` reads the allocator (libtorch, or a test's stand-in).
pub struct Recorder<R: Runtime = Linked> {
    sampler: Sampler<R>,
    stopped: bool,
    codes: IntMap<usize, u32>,
    pub functions: Vec<FunctionRecord>,
    frames: IntMap<usize, FrameState>,
    /// Calls that returned, with their caller: their last line ends when it resumes.
    returning: Vec<(Caller, FrameState)>,
    /// Untargeted callers' code objects with calls waiting on them, and how many.
    watched: IntMap<usize, u32>,
    /// Code objects whose events the hook must switch on (true) or off (false).
    watch_changes: Vec<(usize, bool)>,
    /// Per thread, the targeted frames running (started or resumed, not yet left), outermost
    /// first.
    stacks: IntMap<usize, Vec<usize>>,
    /// Targeted calls that ended since the hook last asked (only with `collect_ended`): the tensor
    /// inventory runs for each.
    ended: Vec<EndedCall>,
    collect_ended: bool,
    /// `--history`: measured targeted calls running now; whether the record started.
    measured_running: u32,
    history_started: bool,
    /// CUDA `--history` could not start because CUDA was not initialised yet.
    history_waiting: bool,
    /// Tell the allocation tags which line runs (for `--tensors`).
    tagging: bool,
    options: Options,
    /// The CUDA devices measured, in the order first used.
    devices: Vec<i32>,
    /// Functions that have not had all the calls the schedule measures.
    unfinished: usize,
    /// The schedule is complete and the hooks were not yet told to stop.
    finished: bool,
    stopped_early: bool,
}

/// A targeted call that ended: which function, its call number, and whether an exception left it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndedCall {
    pub func: u32,
    pub call: u64,
    pub raised: bool,
}

impl Recorder<Linked> {
    /// A recorder that measures `chosen` (validated keys of `stats::stats_for`) on `source`,
    /// through the libtorch this process loaded.
    pub fn new(source: Source, chosen: Vec<StatDef>, options: Options) -> Self {
        Recorder::with_runtime(Linked, source, chosen, options)
    }
}

impl<R: Runtime> Recorder<R> {
    /// A recorder that reads the allocator through `runtime`.
    pub fn with_runtime(
        runtime: R,
        source: Source,
        chosen: Vec<StatDef>,
        options: Options,
    ) -> Self {
        Recorder {
            sampler: Sampler::new(runtime, source, chosen, options.collectives),
            stopped: false,
            codes: IntMap::default(),
            functions: Vec::new(),
            frames: IntMap::default(),
            returning: Vec::new(),
            watched: IntMap::default(),
            watch_changes: Vec::new(),
            stacks: IntMap::default(),
            ended: Vec::new(),
            collect_ended: false,
            measured_running: 0,
            history_started: false,
            history_waiting: false,
            tagging: false,
            options,
            devices: Vec::new(),
            unfinished: 0,
            finished: false,
            stopped_early: false,
        }
    }

    /// The CUDA devices measured, in the order first used (empty on the CPU, or when CUDA was
    /// never initialised).
    pub fn devices(&self) -> &[i32] {
        &self.devices
    }

    /// Nothing is being measured: no targeted frame runs, no returned call waits for its caller,
    /// no module call's window is open (module_windows.rs).
    fn idle(&self) -> bool {
        self.returning.is_empty()
            && !crate::capture::module_windows::any_open()
            && self.stacks.values().all(|s| s.is_empty())
    }

    /// Nothing on `thread` waits for an event: none of its targeted frames runs, and no call
    /// that returned waits for its caller (on any thread: those are not kept per thread). On
    /// 3.11 the trace function leaves such a thread.
    #[cfg_attr(Py_3_12, allow(dead_code))]
    pub fn settled_on(&self, thread: usize) -> bool {
        self.returning.is_empty() && self.stacks.get(&thread).is_none_or(|s| s.is_empty())
    }

    /// The program set its CUDA device: with nothing measured open, follow it now (a run with no
    /// targets has no call start to follow it at).
    pub fn follow_program_device(&mut self) {
        self.choose_device();
    }

    /// A measured call (or a root module call) starts: with nothing else open, follow the
    /// program to the CUDA device it uses now (`torch.cuda.set_device` in each rank, say), and
    /// remember which devices were measured.
    pub fn choose_device(&mut self) {
        let Some(mut device) = self.sampler.device() else {
            return;
        };
        let follow = self.options.follow_device && self.idle();
        // Asked only when it can matter: the device query is a call into the CUDA runtime.
        let used = if follow || !self.devices.contains(&device) {
            self.sampler.runtime().current_device()
        } else {
            None
        };
        if let Some(used) = used.filter(|_| follow) {
            if used != device && self.sampler.switch_device(used) {
                device = used;
            }
        }
        if used.is_some() && !self.devices.contains(&device) {
            self.devices.push(device);
        }
    }

    /// The measurement plan (columns, peak resets, per-line values).
    pub fn sampler(&self) -> &Sampler<R> {
        &self.sampler
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
        crate::capture::peak::add_target(crate::capture::peak::TargetRange {
            id: self.functions.len() as u64,
            file: file.clone(),
            qualname: qualname.clone(),
            first_line: lines.0,
            last_line: lines.1,
        });
        self.functions.push(FunctionRecord {
            qualname,
            file,
            first_line: lines.0,
            last_line: lines.1,
            targets: vec![target],
            calls: 0,
            measured: None,
            lines: HashMap::new(),
            source: None,
        });
        self.unfinished += 1;
        true
    }

    /// The source text of a registered code object's file, for files that are not on disk.
    pub fn set_source(&mut self, code: usize, text: String) {
        if let Some(&id) = self.codes.get(&code) {
            self.functions[id as usize].source = Some(text);
        }
    }

    /// The function id of a registered code object.
    #[inline]
    pub fn function_of(&self, code: usize) -> Option<u32> {
        if self.stopped {
            return None;
        }
        self.codes.get(&code).copied()
    }

    /// This process was forked from the one that ran the program (a DataLoader worker): what
    /// the parent measured is the parent's. The calls and lines so far are forgotten, and the
    /// calls running at the fork with them (the child never returns to them); the targets stay.
    pub fn forked(&mut self) {
        for f in &mut self.functions {
            f.calls = 0;
            f.measured = None;
            f.lines.clear();
        }
        self.frames.clear();
        self.returning.clear();
        self.stacks.clear();
        self.watched.clear();
        self.ended.clear();
        self.measured_running = 0;
        self.take_sample();
    }

    /// Stops recording; later events are ignored. Calls whose caller never resumed end now;
    /// frames still running on `exception_thread` (the thread whose exception ended the program)
    /// were left by that exception, which sys.monitoring does not report; frames of other
    /// threads still running end unraised.
    pub fn stop(&mut self, exception_thread: Option<usize>) {
        if self.stopped {
            return;
        }
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
        if caller.frame != 0 {
            self.resumed(thread, caller.frame);
        }
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
            state.measured = self.count_call(func);
            if state.measured {
                self.choose_device();
                self.history_call_started();
                crate::capture::peak::with(|t| t.function_started(u64::from(func)));
            }
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
        self.retag(thread);
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
            self.ended(&state, raised);
            if state.open && !raised && state.caller.frame != 0 {
                // Until the caller moves on, what is allocated or freed (the frame's locals)
                // belongs to the returning line, in tags as in its Δ.
                self.mark_line(Some(state.func), state.line);
                self.returning.push((state.caller, state));
                return;
            }
            if state.open {
                self.close(&mut state, raised);
            }
            self.unwatch(state.caller.code);
        }
        self.retag(thread);
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
            self.retag(thread);
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
                self.ended(&state, true);
                if state.open {
                    self.close(&mut state, true);
                }
                self.unwatch(state.caller.code);
            }
        }
        self.retag(thread);
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
            // A frame first seen mid-call (it was running before profiling started) is measured
            // only without a schedule.
            measured: !self.scheduled(),
            window: self.sampler.new_window(),
        }
    }

    fn open(&self, state: &mut FrameState, line: u32, continuation: bool) {
        state.line = line;
        state.open = true;
        state.continuation = continuation;
        self.sampler.open(&mut state.window);
        self.mark_line(Some(state.func), line);
    }

    fn close(&mut self, state: &mut FrameState, raised: bool) {
        state.open = false;
        if !state.measured {
            return;
        }
        let agg = self.functions[state.func as usize]
            .lines
            .entry(state.line)
            .or_default();
        self.sampler
            .close(&state.window, agg, !state.continuation, raised);
    }

    /// The targeted calls that ended since the last call.
    #[inline]
    pub fn take_ended(&mut self) -> Option<Vec<EndedCall>> {
        if self.ended.is_empty() {
            None
        } else {
            Some(std::mem::take(&mut self.ended))
        }
    }

    /// (qualname, file, first line) of every targeted function, by id.
    pub fn function_list(&self) -> Vec<(String, String, u32)> {
        self.functions
            .iter()
            .map(|f| (f.qualname.clone(), f.file.clone(), f.first_line))
            .collect()
    }

    fn ended(&mut self, state: &FrameState, raised: bool) {
        if state.measured {
            crate::capture::peak::with(|t| t.function_ended(u64::from(state.func)));
        }
        if state.measured && self.options.history.is_some() && self.measured_running > 0 {
            self.measured_running -= 1;
            if self.measured_running == 0 && self.sampler.device().is_some() {
                // Outside measured calls the events carry no line and no stack.
                self.mark_line(None, 0);
            }
        }
        if self.collect_ended && state.measured {
            let func = state.func;
            let call = self.functions[func as usize].calls;
            self.ended.push(EndedCall { func, call, raised });
        }
    }

    /// Reads the allocator, then folds the highest values reached since the previous sample into
    /// every open window (a caller's line includes everything its callees did).
    fn take_sample(&mut self) {
        self.sampler.read();
        self.fold_sample();
    }

    /// Allocated bytes now (`allocated_bytes.all.current`), at a new sample.
    pub fn allocated_now(&mut self) -> i64 {
        self.take_sample();
        self.sampler.allocated_current()
    }

    /// Folds the highest values reached since the previous sample into every open window.
    fn fold_sample(&mut self) {
        let returning = self.returning.iter_mut().map(|(_, s)| s);
        for state in self.frames.values_mut().filter(|f| f.open).chain(returning) {
            self.sampler.fold(&mut state.window);
        }
        self.sampler.after_fold();
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
