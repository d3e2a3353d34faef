// What the shim calls in memprof's Rust core. The shim is a shared library of its own, one per
// torch release, loaded at run time (src/torch/loader.rs): it cannot link the core's symbols, so
// the core hands it these functions once, through mp_set_callbacks, before anything calls them.
#pragma once

#include <cstddef>
#include <cstdint>

// One module call's concern with a gradient (grad_hooks.cpp): its token, the kind of event
// (src/capture/backward.rs: 0 an output's gradient, 1 an input's, 2 the pass ended) and, for an
// output's, the call's forward entry and its number of hooked inputs (what its backward's start
// needs to know).
struct MpGradCall {
  uint64_t token;
  int32_t kind;
  uint32_t entry;
  uint32_t inputs;
};

struct MpCallbacks {
  // src/capture/peak.rs: an allocation or free of the measured device (no Python, no panic).
  void (*allocation_event)(uint64_t ptr, int64_t bytes, uint32_t backward_site, int32_t has_totals,
                           int64_t total, int64_t reserved, int64_t requested, uint64_t stream);
  // src/capture/backward.rs: a gradient hook's events, one per call it holds, in order
  // (grad_hooks.cpp).
  int (*grad_events)(const MpGradCall* calls, size_t n);
  // src/capture/peak.rs: a segment event of the CUDA allocator's trace (cuda_trace.cpp; the
  // action numbered as for history_event).
  void (*segment_event)(int32_t kind, int64_t bytes, uint64_t stream);
  // src/capture/saved.rs: a tensor that `--modules`' native saved-tensors hook saved (its
  // TensorImpl), on the thread that saved it (saved_hooks.cpp).
  void (*saved_tensor)(void* tensor_impl);
  // src/capture/history.rs: any trace entry of the CUDA allocator, for `--history`
  // (cuda_trace.cpp; the action numbered as src/capture/history.rs's Action).
  void (*history_event)(int32_t action, uint64_t addr, int64_t size, uint64_t stream,
                        int32_t device);
};

// Defined in shim.cpp; set once by mp_set_callbacks, read-only afterwards.
extern MpCallbacks mp_callbacks;

inline void mp_rust_allocation_event(uint64_t ptr, int64_t bytes, uint32_t backward_site,
                                     int32_t has_totals, int64_t total, int64_t reserved,
                                     int64_t requested, uint64_t stream) {
  if (mp_callbacks.allocation_event)
    mp_callbacks.allocation_event(ptr, bytes, backward_site, has_totals, total, reserved,
                                  requested, stream);
}

inline int mp_rust_grad_events(const MpGradCall* calls, size_t n) {
  return mp_callbacks.grad_events ? mp_callbacks.grad_events(calls, n) : 0;
}

inline void mp_rust_segment_event(int32_t kind, int64_t bytes, uint64_t stream) {
  if (mp_callbacks.segment_event) mp_callbacks.segment_event(kind, bytes, stream);
}

inline void mp_rust_history_event(int32_t action, uint64_t addr, int64_t size, uint64_t stream,
                                  int32_t device) {
  if (mp_callbacks.history_event) mp_callbacks.history_event(action, addr, size, stream, device);
}

inline void mp_rust_saved_tensor(void* tensor_impl) {
  if (mp_callbacks.saved_tensor) mp_callbacks.saved_tensor(tensor_impl);
}
