//! `--modules`: the backward of each module call. The C++ gradient hooks
//! (src/torch/cpp/grad_hooks.cpp) report, per call token and without Python, when an output's
//! gradient is ready (the backward starts), when an input's is (it ends once all have arrived),
//! and when the backward pass ends (what is still open ends); with --history or a schedule,
//! Python tensor hooks report the same events. This keeps the state of each call whose backward
//! runs (with its forward entry), opens and closes its measurement window (module_windows.rs:
//! the events one hook delivers share one reading), and holds the readings until
//! module_calls.rs collects them.
//!
//! A call hooked by the C++ hooks is known here only while its backward runs: its output's hook
//! carries what its start needs (the forward entry, the number of hooked inputs), so hooking a
//! call in forward takes no lock, and a hook freed with its graph tells nothing. A call hooked
//! by Python tensor hooks is registered when hooked and stays known until the run ends.
use crate::capture::int_hash::IntMap;
use crate::capture::module_windows::{self, ScopeReading};
use std::os::raw::c_int;
use std::sync::{Mutex, MutexGuard};

/// The event kinds of grad_hooks.cpp.
const OUTPUT_READY: c_int = 0;
const INPUT_READY: c_int = 1;
const PASS_ENDED: c_int = 2;

/// One module call's backward.
#[derive(Default)]
struct CallBackward {
    /// The call's forward entry (module_calls.rs).
    entry: u32,
    /// Hooked inputs, and those whose gradient has not arrived since the backward started.
    inputs: u32,
    pending: i64,
    /// Its measurement window while the backward runs.
    scope: Option<u64>,
    /// Registered by the Python hooks: known until the run ends (else forgotten when its
    /// window closes).
    registered: bool,
}

/// What the output's hook of a call hooked by the C++ hooks tells of it: its forward entry and
/// hooked inputs (None: an input's hook, or an event of the Python hooks, whose calls are
/// registered).
pub type Hooked = Option<(u32, u32)>;

#[derive(Default)]
struct State {
    calls: IntMap<u64, CallBackward>,
    /// A callback for the end of the running backward pass has been queued.
    callback_queued: bool,
    /// (forward entry, scope id, reading) of backwards that ended, in the order they ended.
    finished: Vec<Finished>,
}

/// Lock order: this state, then the windows' (never the other way: they free no graph).
static STATE: Mutex<Option<State>> = Mutex::new(None);

fn lock() -> MutexGuard<'static, Option<State>> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Hooks the nodes that produced tensors (their TensorImpl addresses, Python tensors' `_cdata`)
/// for module call `token`: `output` for the call's outputs (their hook carries the call's
/// forward `entry` and its number of hooked `inputs`), else its inputs. The number hooked (a
/// leaf has no node; an error hooks nothing).
pub fn hook(tensor_impls: &[usize], token: u64, output: Hooked) -> u32 {
    if tensor_impls.is_empty() {
        return 0;
    }
    let (kind, (entry, inputs)) = match output {
        Some(call) => (OUTPUT_READY, call),
        None => (INPUT_READY, (0, 0)),
    };
    let call = crate::torch::GradCall {
        token,
        kind,
        entry,
        inputs,
    };
    // SAFETY: the caller holds the tensors (and the GIL) for the duration of the call.
    unsafe { crate::torch::grad_hooks(tensor_impls, &call) }
}

/// With Python tensor hooks (--history, a schedule of root calls): call `token` of forward entry
/// `entry` has a hooked output, or one more hooked input. Such calls stay known until the run
/// ends.
pub fn register(token: u64, entry: u32, output: bool) {
    let mut guard = lock();
    let call = guard
        .get_or_insert_with(State::default)
        .calls
        .entry(token)
        .or_default();
    call.entry = entry;
    call.registered = true;
    if !output {
        call.inputs += 1;
    }
}

/// A finished backward: its forward entry, its scope id (the order backwards started in), and
/// its reading.
pub type Finished = (u32, u64, ScopeReading);

/// Moves the finished backwards into `out` (the tracker's, which keeps its capacity from step to
/// step, as `finished` keeps its own).
pub fn take_finished(out: &mut Vec<Finished>) {
    if let Some(state) = lock().as_mut() {
        out.append(&mut state.finished);
    }
}

/// The forward entries of the calls whose backward is running now.
pub fn running() -> Vec<u32> {
    lock().as_ref().map_or_else(Vec::new, |state| {
        state
            .calls
            .values()
            .filter(|c| c.scope.is_some())
            .map(|c| c.entry)
            .collect()
    })
}

/// The forward entry of call `token`, while it is known (registered by the Python hooks, or its
/// backward running).
pub fn entry_of(token: u64) -> Option<u32> {
    lock().as_ref()?.calls.get(&token).map(|c| c.entry)
}

/// Ends every running backward now (the report is being written).
pub fn end_all() {
    event(0, PASS_ENDED);
}

/// Called by the hooks, on autograd's threads, without the GIL: the events of the `n` calls a
/// node's hook holds, in order, under one lock. Returns 1 when the engine should call back at
/// the end of this backward pass.
pub extern "C" fn mp_rust_grad_events(calls: *const crate::torch::GradCall, n: usize) -> c_int {
    std::panic::catch_unwind(|| {
        if calls.is_null() || n == 0 {
            return 0;
        }
        // SAFETY: the hook passes its own array of `n` calls, alive during the call.
        let calls = unsafe { std::slice::from_raw_parts(calls, n) };
        let mut guard = lock();
        let state = guard.get_or_insert_with(State::default);
        let mut queue = false;
        let mut moment = module_windows::Moment::new();
        for c in calls {
            let hooked = (c.kind == OUTPUT_READY).then_some((c.entry, c.inputs));
            queue |= apply(state, &mut moment, c.token, c.kind, hooked).queue;
        }
        c_int::from(queue)
    })
    .unwrap_or(0)
}

/// What an event did.
#[derive(Default)]
pub struct Outcome {
    /// The engine should call back at the end of this backward pass (kind 2).
    pub queue: bool,
    /// A call's backward started; one (or more) ended.
    pub opened: bool,
    pub closed: bool,
}

/// One event of a call's hooks (the kinds above), from the Python hooks or the report.
pub fn event(token: u64, kind: c_int) -> Outcome {
    let mut guard = lock();
    match guard.as_mut() {
        Some(state) => apply(state, &mut module_windows::Moment::new(), token, kind, None),
        None => Outcome::default(),
    }
}

fn apply(
    state: &mut State,
    moment: &mut module_windows::Moment,
    token: u64,
    kind: c_int,
    hooked: Hooked,
) -> Outcome {
    match kind {
        OUTPUT_READY => {
            let call = match hooked {
                Some((entry, inputs)) => state.calls.entry(token).or_insert(CallBackward {
                    entry,
                    inputs,
                    ..CallBackward::default()
                }),
                None => match state.calls.get_mut(&token) {
                    Some(call) => call,
                    None => return Outcome::default(),
                },
            };
            if call.scope.is_some() {
                return Outcome::default();
            }
            call.pending = i64::from(call.inputs);
            call.scope = Some(moment.open());
            let queue = !state.callback_queued;
            state.callback_queued = true;
            Outcome {
                queue,
                opened: true,
                closed: false,
            }
        }
        INPUT_READY => {
            let Some(call) = state.calls.get_mut(&token) else {
                return Outcome::default();
            };
            // An input's gradient before any output's: the backward has not started (a call
            // of the C++ hooks is not known yet); its start counts the inputs afresh.
            call.pending -= 1;
            let mut closed = false;
            if call.pending <= 0 {
                if let Some(id) = call.scope.take() {
                    let entry = call.entry;
                    if !call.registered {
                        state.calls.remove(&token);
                    }
                    finish(state, moment, entry, id);
                    closed = true;
                }
            }
            Outcome {
                closed,
                ..Outcome::default()
            }
        }
        PASS_ENDED => {
            state.callback_queued = false;
            let mut open: Vec<(u32, u64)> = state
                .calls
                .values_mut()
                .filter_map(|c| c.scope.take().map(|id| (c.entry, id)))
                .collect();
            state.calls.retain(|_, c| c.registered);
            open.sort_unstable_by_key(|(_, id)| *id);
            let closed = !open.is_empty();
            for (entry, id) in open {
                finish(state, moment, entry, id);
            }
            Outcome {
                closed,
                ..Outcome::default()
            }
        }
        _ => Outcome::default(),
    }
}

/// Closes the backward window `scope` of a call of forward entry `entry`; its reading waits in
/// `finished` for the tracker.
fn finish(state: &mut State, moment: &mut module_windows::Moment, entry: u32, scope: u64) {
    if let Some(reading) = moment.close(scope) {
        state.finished.push((entry, scope, reading));
    }
}
