//! `--modules`: the backward of each module call. The C++ gradient hooks
//! (src/torch/cpp/grad_hooks.cpp) report, per call token and without Python, when an output's
//! gradient is ready (the backward starts), when an input's is (it ends once all have arrived),
//! when the backward pass ends (what is still open ends), and when a hook is freed with its
//! graph; with --history or a schedule, Python tensor hooks report the same events. This keeps
//! each call's state (with its forward entry), opens and closes its measurement window
//! (module_windows.rs: the events one hook delivers share one reading), and holds the readings
//! until module_calls.rs collects them.
use crate::capture::int_hash::IntMap;
use crate::capture::module_windows::{self, ScopeReading};
use std::os::raw::c_int;
use std::sync::{Mutex, MutexGuard};

/// The event kinds of grad_hooks.cpp.
const OUTPUT_READY: c_int = 0;
const INPUT_READY: c_int = 1;
const PASS_ENDED: c_int = 2;
const HOOK_FREED: c_int = 3;

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
    /// Hooks alive: the call is forgotten when the last is freed and nothing is open.
    hooks: u32,
}

#[derive(Default)]
struct State {
    calls: IntMap<u64, CallBackward>,
    /// A callback for the end of the running backward pass has been queued.
    callback_queued: bool,
    /// (forward entry, scope id, reading) of backwards that ended, in the order they ended.
    finished: Vec<(u32, u64, ScopeReading)>,
}

/// Lock order: this state, then the windows' (never the other way: they free no graph).
static STATE: Mutex<Option<State>> = Mutex::new(None);

fn lock() -> MutexGuard<'static, Option<State>> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Hooks the nodes that produced tensors (their TensorImpl addresses, Python tensors' `_cdata`)
/// for module call `token` of forward entry `entry`: `output` for the call's outputs, else its
/// inputs. True when any was hooked (a leaf has no node; an error hooks nothing).
pub fn hook(tensor_impls: &[usize], token: u64, entry: u32, output: bool) -> bool {
    let kind = if output { OUTPUT_READY } else { INPUT_READY };
    if tensor_impls.is_empty() {
        return false;
    }
    // SAFETY: the caller holds the tensors (and the GIL) for the duration of the call.
    let hooked = unsafe { crate::torch::grad_hooks(tensor_impls, token, kind) };
    if hooked > 0 {
        note_hooked(token, entry, output, hooked, true);
    }
    hooked > 0
}

/// With Python tensor hooks (--history, a schedule of root calls): call `token` of forward entry
/// `entry` has a hooked output, or one more hooked input. Such calls stay known until the run
/// ends.
pub fn register(token: u64, entry: u32, output: bool) {
    note_hooked(token, entry, output, 1, false);
}

/// Counts `n` hooked inputs (or notes outputs) of call `token`; C++ hooks are also counted
/// until they are freed with their graph.
fn note_hooked(token: u64, entry: u32, output: bool, n: u32, freed_later: bool) {
    let mut guard = lock();
    let call = guard
        .get_or_insert_with(State::default)
        .calls
        .entry(token)
        .or_default();
    call.entry = entry;
    if freed_later {
        call.hooks += n;
    }
    if !output {
        call.inputs += n;
    }
}

/// What the tracker collects: the forward entries and readings of finished backwards (with
/// their scope ids, the order they started in), and the forward entries of the calls whose
/// backward is running now.
pub type Collected = (Vec<(u32, u64, ScopeReading)>, Vec<u32>);

pub fn collect() -> Collected {
    let mut guard = lock();
    let Some(state) = guard.as_mut() else {
        return Default::default();
    };
    let open = state
        .calls
        .values()
        .filter(|c| c.scope.is_some())
        .map(|c| c.entry)
        .collect();
    (std::mem::take(&mut state.finished), open)
}

/// The forward entry of call `token`, while it is known (hooked, its graph alive).
pub fn entry_of(token: u64) -> Option<u32> {
    lock().as_ref()?.calls.get(&token).map(|c| c.entry)
}

/// Ends every running backward now (the report is being written).
pub fn end_all() {
    event(0, PASS_ENDED);
}

/// Called by the hooks, on autograd's threads, without the GIL: the events of the `n` calls a
/// node's hook holds, in order (`freed`: the hook is gone with its graph, a HOOK_FREED for
/// each), under one lock. Returns 1 when the engine should call back at the end of this
/// backward pass.
pub extern "C" fn mp_rust_grad_events(
    calls: *const crate::torch::GradCall,
    n: usize,
    freed: i32,
) -> c_int {
    std::panic::catch_unwind(|| {
        if calls.is_null() || n == 0 {
            return 0;
        }
        // SAFETY: the hook passes its own array of `n` calls, alive during the call.
        let calls = unsafe { std::slice::from_raw_parts(calls, n) };
        let mut guard = lock();
        let Some(state) = guard.as_mut() else {
            return 0;
        };
        let mut queue = false;
        let mut moment = module_windows::Moment::new();
        for c in calls {
            let kind = if freed != 0 { HOOK_FREED } else { c.kind };
            queue |= apply(state, &mut moment, c.token, kind).queue;
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
        Some(state) => apply(state, &mut module_windows::Moment::new(), token, kind),
        None => Outcome::default(),
    }
}

fn apply(
    state: &mut State,
    moment: &mut module_windows::Moment,
    token: u64,
    kind: c_int,
) -> Outcome {
    match kind {
        OUTPUT_READY => {
            let Some(call) = state.calls.get_mut(&token) else {
                return Outcome::default();
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
            // An input's gradient before any output's: the backward has not started; its start
            // counts the inputs afresh (as the Python hooks did).
            call.pending -= 1;
            let mut closed = false;
            if call.pending <= 0 {
                if let Some(id) = call.scope.take() {
                    let entry = call.entry;
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
            open.sort_by_key(|(_, id)| *id);
            let closed = !open.is_empty();
            for (entry, id) in open {
                finish(state, moment, entry, id);
            }
            Outcome {
                closed,
                ..Outcome::default()
            }
        }
        HOOK_FREED => {
            if let Some(call) = state.calls.get_mut(&token) {
                call.hooks = call.hooks.saturating_sub(1);
                if call.hooks == 0 && call.scope.is_none() {
                    state.calls.remove(&token);
                }
            }
            Outcome::default()
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
