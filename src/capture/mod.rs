//! Capture: turning the hooks' events into measured executions of lines and scopes. The recorder
//! (frames, lines, the schedule, module scopes, line marks), the sampler (reading the allocator),
//! host memory, module backward passes, signals, and the child processes followed. Knows nothing of Python objects: the hooks
//! hand it addresses. Uses `torch`, `model` and `error`.
pub mod backward;
pub mod children;
pub mod device_use;
pub mod host;
pub mod int_hash;
pub mod interrupt;
pub mod peak;
pub mod recorder;
pub mod sampler;
pub mod so_far;
#[cfg(test)]
pub mod test_torch;
pub mod timeline;
