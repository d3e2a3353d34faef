// The CUDA caching allocator's own trace entries, for `memprof run --trace`: the size each
// allocation requested (before the allocator rounded it or handed out a larger block) and its
// stream, which the allocator's reports to the profiler (shim.cpp) do not carry, and its
// segment events (cudaMalloc, cudaFree, expandable segments' maps and unmaps); and for
// `--history`, every entry of every device, which memprof records itself (src/capture/history.rs)
// instead of switching on torch's own history: the allocator calls its trackers whether or not
// torch records, and a program's own `_record_memory_history` stays the program's.
//
// The allocator calls its trace trackers inside malloc, with its lock held, just before it
// reports the same block to the profiler on the same thread: the tracker leaves the entry in a
// thread-local slot, and the reporter takes it when the pointer matches. A tracker cannot be
// detached, so it is attached once per process and does nothing unless a trace is being taken.
//
// libc10_cuda is not linked (CPU builds have none): the allocator is found in the copy that the
// script's torch loaded, and its class comes from torch's headers, compiled against
// cuda_decls/ (declarations only) where the CUDA toolkit is absent.
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/version.h>

#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>

// shim.cpp: the device the reporter counts; src/capture/peak.rs: a segment event for the trace.
extern "C" int mp_reporter_device();
#include "callbacks.h"

namespace {

// The allocator's trace entry moved to c10/core in torch 2.11 (the same fields and actions):
// MEMPROF_TRACE_ENTRY names it, from src/torch/releases.tsv (build/shim.rs).
using TraceEntry = MEMPROF_TRACE_ENTRY;
using c10::cuda::CUDACachingAllocator::CUDAAllocator;

struct Requested {
  uint64_t ptr = 0;
  int64_t size = 0;
  uint64_t stream = 0;
};

thread_local Requested last_alloc;
std::atomic<bool> attached{false};
std::atomic<bool> tracing{false};
std::atomic<bool> history{false};

// memprof's numbers for torch's trace actions, which both callbacks hand over
// (src/capture/history.rs, Action); -1: one memprof does not keep.
enum ActionCode : int32_t {
  NOT_KEPT = -1,
  ALLOC_CODE,
  FREE_REQUESTED_CODE,
  FREE_COMPLETED_CODE,
  SEGMENT_ALLOC_CODE,
  SEGMENT_FREE_CODE,
  SEGMENT_MAP_CODE,
  SEGMENT_UNMAP_CODE,
  OOM_CODE,
};

ActionCode action_code(TraceEntry::Action action) {
  switch (action) {
    case TraceEntry::ALLOC:
      return ALLOC_CODE;
    case TraceEntry::FREE_REQUESTED:
      return FREE_REQUESTED_CODE;
    case TraceEntry::FREE_COMPLETED:
      return FREE_COMPLETED_CODE;
    case TraceEntry::SEGMENT_ALLOC:
      return SEGMENT_ALLOC_CODE;
    case TraceEntry::SEGMENT_FREE:
      return SEGMENT_FREE_CODE;
    case TraceEntry::SEGMENT_MAP:
      return SEGMENT_MAP_CODE;
    case TraceEntry::SEGMENT_UNMAP:
      return SEGMENT_UNMAP_CODE;
    case TraceEntry::OOM:
      return OOM_CODE;
    default:
      return NOT_KEPT;
  }
}

void on_trace_entry(const TraceEntry& entry) {
  ActionCode action = action_code(entry.action_);
  if (action == NOT_KEPT) return;
  if (history.load(std::memory_order_relaxed)) {
    mp_rust_history_event(action, (uint64_t)entry.addr_, (int64_t)entry.size_,
                          (uint64_t)(uintptr_t)entry.stream_, (int32_t)entry.device_);
  }
  if (!tracing.load(std::memory_order_relaxed) || entry.device_ != mp_reporter_device()) return;
  if (action == ALLOC_CODE) {
    last_alloc = Requested{(uint64_t)entry.addr_, (int64_t)entry.size_,
                           (uint64_t)(uintptr_t)entry.stream_};
  } else if (action >= SEGMENT_ALLOC_CODE && action <= SEGMENT_UNMAP_CODE) {
    mp_rust_segment_event(action, (int64_t)entry.size_, (uint64_t)(uintptr_t)entry.stream_);
  }
}

// c10::cuda::CUDACachingAllocator::allocator, the std::atomic<CUDAAllocator*> that torch's
// CUDA build defines in libc10_cuda.so.
CUDAAllocator* cuda_allocator() {
  void* lib = dlopen("libc10_cuda.so", RTLD_LAZY | RTLD_NOLOAD);
  if (lib == nullptr) return nullptr;
  void* slot = dlsym(lib, "_ZN3c104cuda20CUDACachingAllocator9allocatorE");
  dlclose(lib);
  if (slot == nullptr) return nullptr;
  return static_cast<std::atomic<CUDAAllocator*>*>(slot)->load();
}

// Attaches the tracker, once per process; false where there is no CUDA caching allocator to
// trace (a CPU build, another allocator backend, CUDA not initialised yet).
bool attach() {
  static std::mutex attaching;  // two first callers (--trace, --history) attach it once
  std::lock_guard<std::mutex> hold(attaching);
  if (attached.load()) return true;
  try {
    CUDAAllocator* allocator = cuda_allocator();
    if (allocator == nullptr || !allocator->initialized() || allocator->name() != "native") {
      return false;
    }
    allocator->attachAllocatorTraceTracker(&on_trace_entry);
    attached.store(true);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

extern "C" {

/// Starts (on != 0) or stops recording the requested sizes; attaches the tracker the first time.
/// Call after the program initialised CUDA (the allocator attaches trackers to the devices it
/// has). 0 on success, -1 where there is no CUDA caching allocator to trace (a CPU build, another
/// allocator backend).
int mp_cuda_trace_enable(int on) {
  if (on != 0 && !attach()) return -1;
  tracing.store(on != 0);
  return 0;
}

/// Starts (on != 0) or stops handing every trace entry to `--history`'s record, as
/// mp_cuda_trace_enable does for the requested sizes.
int mp_cuda_history_enable(int on) {
  if (on != 0 && !attach()) return -1;
  history.store(on != 0);
  return 0;
}

/// The size requested and the stream of the allocation at `ptr` that the calling thread's
/// allocator call is reporting now: 1 when the tracker saw it, 0 when not.
int mp_cuda_trace_requested(uint64_t ptr, int64_t* size, uint64_t* stream) {
  if (!tracing.load(std::memory_order_relaxed) || last_alloc.ptr != ptr) return 0;
  *size = last_alloc.size;
  *stream = last_alloc.stream;
  last_alloc.ptr = 0;
  return 1;
}
}
