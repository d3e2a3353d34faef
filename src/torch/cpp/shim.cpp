// The C ABI between memprof and libtorch: what tch does not expose.
//
// - the caching allocator's DeviceStats, flattened in the order of src/model/stats.rs (122 values);
// - a memory reporter in libtorch's PROFILER_STATE slot that sees every allocation and free of
//   the CUDA caching allocator and of the CPU allocator, exactly and without resetting any stat;
// - every allocation and free of the measured device handed to memprof's peak tracker
//   (src/capture/peak.rs), with the site of the backward it works for, if any;
// - the libtorch version and the path of the loaded libc10, for the start-up check;
// - which CUDA device the calling thread uses now, and switching the reporter to it;
// - with --collectives, the bytes of every torch.distributed collective, by kind, seen where
//   libtorch dispatches its c10d ops (a RecordFunction callback), whoever issued them.
//
// Every entry point catches every C++ exception: an exception crossing into Rust is undefined
// behaviour. The reporter callback runs inside the allocator (with its mutex held, on whatever
// thread allocates), so it only touches atomics.
#include <ATen/DeviceAccelerator.h>
#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/csrc/profiler/orchestration/observer.h>
#include <torch/version.h>

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

// The peak tracker (src/capture/peak.rs) and the other functions of memprof's core.
#include "callbacks.h"

MpCallbacks mp_callbacks = {nullptr, nullptr, nullptr};
// cuda_trace.cpp: the CUDA allocator's trace entry of the allocation being reported.
extern "C" int mp_cuda_trace_requested(uint64_t ptr, int64_t* size, uint64_t* stream);

namespace {

thread_local std::string last_error;

template <typename F>
int guarded(F&& f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    last_error = e.what();
  } catch (...) {
    last_error = "unknown C++ exception";
  }
  return -1;
}

void atomic_max(std::atomic<int64_t>& slot, int64_t value) {
  int64_t seen = slot.load(std::memory_order_relaxed);
  while (value > seen && !slot.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

// Adds to a counter that one thread at a time writes: the CUDA caching allocator reports with
// its device's lock held, so the reporter's device counters need no locked instruction (each
// makes the allocating thread wait for its pending stores, a cost paid at every allocation and
// free); readers on other threads still read whole values. The CPU's reports come from any
// thread at once, and keep fetch_add.
// Both return the counter's new value.
int64_t serial_add(std::atomic<int64_t>& slot, int64_t value) {
  int64_t now = slot.load(std::memory_order_relaxed) + value;
  slot.store(now, std::memory_order_relaxed);
  return now;
}

int64_t atomic_add(std::atomic<int64_t>& slot, int64_t value) {
  return slot.fetch_add(value, std::memory_order_relaxed) + value;
}

// Counters for one device, fed by the allocator's reports.
struct Tally {
  // CUDA: the allocator passes its own totals (allocated_bytes.all.current and
  // reserved_bytes.all.current) with every report; their maxima since the last take are exact
  // intra-line peaks. CPU: libtorch passes no usable total, so memprof keeps its own.
  std::atomic<int64_t> allocated_current{0};
  std::atomic<int64_t> allocated_max{0};
  std::atomic<int64_t> reserved_current{0};
  std::atomic<int64_t> reserved_max{0};
  std::atomic<int64_t> bytes_allocated{0};
  std::atomic<int64_t> bytes_freed{0};
  std::atomic<int64_t> count_current{0};
  std::atomic<int64_t> count_max{0};
  std::atomic<int64_t> count_allocated{0};
  std::atomic<int64_t> count_freed{0};
  std::atomic<int64_t> events{0};
  // Two readers restart allocated_max, each seeing every maximum since its own previous take:
  // the lines' samples (mp_tally_take) and module scopes (mp_tally_take_allocated). What one
  // takes waits here for the other (INT64_MIN: nothing). Written under take_lock.
  std::atomic<int64_t> allocated_max_for_lines{INT64_MIN};
  std::atomic<int64_t> allocated_max_for_scopes{INT64_MIN};
};

// Takes of a tally (full or of the allocated bytes only) one at a time: a scope's take and a
// line's, on two threads, must not split a maximum between the two periods. Never held by the
// allocator's reports.
std::atomic_flag take_lock = ATOMIC_FLAG_INIT;

struct TakeGuard {
  TakeGuard() {
    while (take_lock.test_and_set(std::memory_order_acquire)) {
    }
  }
  ~TakeGuard() { take_lock.clear(std::memory_order_release); }
};

// A maximum one reader took, kept for the other; and what the other kept for this one, taken.
// Only takes touch these, under take_lock: plain loads and stores, where a locked instruction
// each cost a module call's scope take twice over.
void hand_over(std::atomic<int64_t>& slot, int64_t max) {
  if (max > slot.load(std::memory_order_relaxed)) slot.store(max, std::memory_order_relaxed);
}

int64_t take_handed(std::atomic<int64_t>& slot) {
  int64_t kept = slot.load(std::memory_order_relaxed);
  slot.store(INT64_MIN, std::memory_order_relaxed);
  return kept;
}

// One reader's take of the allocated bytes' maximum (under take_lock): restarts it at `current`,
// keeps what it held for the other reader (`for_other`), and returns it with what the other kept
// for this one (`for_me`).
int64_t take_allocated_max(std::atomic<int64_t>& allocated_max, int64_t current,
                           std::atomic<int64_t>& for_other, std::atomic<int64_t>& for_me) {
  int64_t m = std::max(allocated_max.exchange(current, std::memory_order_relaxed), current);
  hand_over(for_other, m);
  return std::max(m, take_handed(for_me));
}

Tally cpu_tally;
Tally device_tally;
std::atomic<int> device_index{-1};

// --tensors: which targeted line was running when each live block of the profiled device was
// allocated (its address, as the storage's data pointer), so that unnamed tensors can be named
// by the line that created them. Off unless enabled: it costs a lock per allocation.
std::atomic<bool> tagging{false};
std::atomic<uint64_t> current_tag{0};
std::mutex tags_mutex;
std::unordered_map<void*, uint64_t> tags;

void remember(void* ptr, int64_t size) {
  if (!tagging.load(std::memory_order_relaxed) || ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(tags_mutex);
  if (size > 0) {
    uint64_t tag = current_tag.load(std::memory_order_relaxed);
    if (tag != 0) {
      tags[ptr] = tag;
    } else {
      tags.erase(ptr);
    }
  } else if (size < 0) {
    tags.erase(ptr);
  }
}

// Subclasses the profiler's own state base, not the bare reporting interface: torch's profiler
// static-casts whatever sits in the PROFILER_STATE slot to ProfilerStateBase. With profiler type
// NONE and a disabled config, profilerEnabled() stays false, so torch behaves as if unprofiled.
struct Reporter final : public torch::profiler::impl::ProfilerStateBase {
  Reporter()
      : ProfilerStateBase(torch::profiler::impl::ProfilerConfig(
            torch::profiler::impl::ProfilerState::Disabled,
            /*report_input_shapes=*/false,
            /*profile_memory=*/true)) {}

  // The net bytes allocated through this reporter: each Python thread has its own, and the
  // threads that work for it (autograd's engine copies the caller's thread-local state into its
  // device threads) report to the caller's. A line's Δ is its own thread's, not the process's.
  std::atomic<int64_t> own_cpu{0};
  std::atomic<int64_t> own_device{0};
  // The site of the line running a backward pass on this reporter's thread (0: none): autograd's
  // device threads, which run no Python, allocate for it.
  std::atomic<uint32_t> backward_site{0};

  void reportMemoryUsage(void* ptr, int64_t size, size_t total_allocated, size_t total_reserved,
                         c10::Device device) override {
    if (device.is_cpu()) {
      own_cpu.fetch_add(size, std::memory_order_relaxed);
      if (device_index.load(std::memory_order_relaxed) < 0) {
        remember(ptr, size);
        mp_rust_allocation_event((uint64_t)(uintptr_t)ptr, size,
                                 backward_site.load(std::memory_order_relaxed), 0, 0, 0, size, 0);
      }
      Tally& t = cpu_tally;
      int64_t now = t.allocated_current.fetch_add(size, std::memory_order_relaxed) + size;
      atomic_max(t.allocated_max, now);
      count<atomic_add>(t, size);
      return;
    }
    if (device.index() != device_index.load(std::memory_order_relaxed)) return;
    serial_add(own_device, size);
    remember(ptr, size);
    int64_t requested = 0;
    uint64_t stream = 0;
    if (size > 0) mp_cuda_trace_requested((uint64_t)(uintptr_t)ptr, &requested, &stream);
    mp_rust_allocation_event((uint64_t)(uintptr_t)ptr, size,
                             backward_site.load(std::memory_order_relaxed), 1,
                             (int64_t)total_allocated, (int64_t)total_reserved, requested, stream);
    Tally& t = device_tally;
    t.allocated_current.store((int64_t)total_allocated, std::memory_order_relaxed);
    t.reserved_current.store((int64_t)total_reserved, std::memory_order_relaxed);
    atomic_max(t.allocated_max, (int64_t)total_allocated);
    atomic_max(t.reserved_max, (int64_t)total_reserved);
    count<serial_add>(t, size);
  }

  void reportOutOfMemory(int64_t, size_t, size_t, c10::Device) override {}

  torch::profiler::impl::ActiveProfilerType profilerType() override {
    return torch::profiler::impl::ActiveProfilerType::NONE;
  }

 private:
  // `add`: `atomic_add` where reports come from any thread at once (the CPU's), `serial_add`
  // where they come one at a time (the device's); a template argument, so each is inlined.
  template <int64_t (*add)(std::atomic<int64_t>&, int64_t)>
  static void count(Tally& t, int64_t size) {
    add(t.events, 1);
    if (size >= 0) {
      add(t.bytes_allocated, size);
      add(t.count_allocated, 1);
      atomic_max(t.count_max, add(t.count_current, 1));
    } else {
      add(t.bytes_freed, -size);
      add(t.count_freed, 1);
      add(t.count_current, -1);
    }
  }
};

std::shared_ptr<Reporter> reporter;
// The reporter this thread pushed (its own), null before it pushed one.
thread_local Reporter* own_reporter = nullptr;

void flatten_stat(const c10::CachingAllocator::Stat& s, int64_t*& out) {
  *out++ = s.current;
  *out++ = s.peak;
  *out++ = s.allocated;
  *out++ = s.freed;
}

void flatten_array(const c10::CachingAllocator::StatArray& a, int64_t*& out) {
  for (const auto& s : a) flatten_stat(s, out);
}


// --collectives: bytes per kind of collective, summed since the start. The kinds, in the order
// of src/torch/mod.rs `collectives::KINDS` (keep them in step).
enum Kind { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, BROADCAST, ALL_TO_ALL, SEND, RECV, OTHER, KINDS };
std::atomic<int64_t> collective_bytes[KINDS];
std::atomic<int64_t> collective_count[KINDS];
std::atomic<bool> collectives_on{false};
at::CallbackHandle collectives_handle = 0;

int64_t tensor_bytes(const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    return t.defined() ? (int64_t)(t.numel() * t.element_size()) : 0;
  }
  int64_t total = 0;
  if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) {
      if (t.defined()) total += (int64_t)(t.numel() * t.element_size());
    }
  } else if (v.isList()) {
    for (const c10::IValue& item : v.toListRef()) total += tensor_bytes(item);
  }
  return total;
}

// Which kind a c10d op is, and which argument holds the collective's full buffer: what is
// reduced (all_reduce, broadcast, reduce), the gathered output (all_gather), the input that is
// reduced and scattered (reduce_scatter), what this rank sends (all_to_all, send, gather) or
// receives (recv, scatter).
bool classify(const char* op, Kind& kind, size_t& arg) {
  struct Rule {
    const char* name;
    Kind kind;
    size_t arg;
  };
  static const Rule rules[] = {
      {"allreduce_", ALL_REDUCE, 0},
      {"allreduce_coalesced_", ALL_REDUCE, 0},
      {"allgather_", ALL_GATHER, 0},
      {"_allgather_base_", ALL_GATHER, 0},
      {"allgather_coalesced_", ALL_GATHER, 0},
      {"allgather_into_tensor_coalesced_", ALL_GATHER, 0},
      {"reduce_scatter_", REDUCE_SCATTER, 1},
      {"_reduce_scatter_base_", REDUCE_SCATTER, 1},
      {"reduce_scatter_tensor_coalesced_", REDUCE_SCATTER, 1},
      {"broadcast_", BROADCAST, 0},
      {"alltoall_", ALL_TO_ALL, 1},
      {"alltoall_base_", ALL_TO_ALL, 1},
      {"send", SEND, 0},
      {"recv_", RECV, 0},
      {"recv_any_source_", RECV, 0},
      {"reduce_", OTHER, 0},
      {"gather_", OTHER, 1},
      {"scatter_", OTHER, 0},
  };
  for (const Rule& r : rules) {
    if (std::strcmp(op, r.name) == 0) {
      kind = r.kind;
      arg = r.arg;
      return true;
    }
  }
  return false;  // barrier, monitored_barrier_: no payload
}

// Some c10d ops reach RecordFunction callbacks without their inputs (the dispatcher cannot box
// their arguments: a Tensor[][], as allgather_'s; _reduce_scatter_base_, once thought to be one,
// has them: it was refused by the NDEBUG mismatch that build.rs now avoids). When Python calls
// the process group, memprof's wrapper says beforehand what the next c10d op on this thread
// carries (`mp_collectives_expect`); the op is counted from its own inputs when it has them, else
// from that.
thread_local int expected_kind = -1;
thread_local int64_t expected_bytes = 0;

void count_collective(int kind, int64_t bytes) {
  collective_bytes[kind].fetch_add(bytes, std::memory_order_relaxed);
  collective_count[kind].fetch_add(1, std::memory_order_relaxed);
}

// Runs for every dispatched op while --collectives is on (the op's name is checked first, so
// other ops cost a string compare); never throws into the dispatcher.
std::unique_ptr<at::ObserverContext> on_op(const at::RecordFunction& fn) {
  const char* name = fn.name();
  if (name == nullptr || std::strncmp(name, "c10d::", 6) != 0 ||
      !collectives_on.load(std::memory_order_relaxed)) {
    return nullptr;
  }
  int kind = expected_kind;
  int64_t bytes = expected_bytes;
  expected_kind = -1;
  try {
    Kind k;
    size_t arg;
    if (classify(name + 6, k, arg)) {
      auto inputs = fn.inputs();  // throws when the dispatcher had none to give
      if (arg < inputs.size()) {
        kind = k;
        bytes = tensor_bytes(inputs[arg]);
      }
    } else {
      kind = -1;
    }
  } catch (...) {
  }
  if (kind >= 0) count_collective(kind, bytes);
  return nullptr;
}
}  // namespace

extern "C" {

/// Copies the message of the last failed call on this thread into buf (NUL-terminated).
void mp_last_error(char* buf, size_t len) {
  if (len == 0) return;
  std::strncpy(buf, last_error.c_str(), len - 1);
  buf[len - 1] = '\0';
}

/// Hands the shim memprof's functions (callbacks.h); called once, right after loading.
void mp_set_callbacks(const MpCallbacks* callbacks) { mp_callbacks = *callbacks; }

/// The libtorch version this binary was compiled against, e.g. "2.11.0".
const char* mp_torch_version() { return TORCH_VERSION; }

/// The path of the libc10.so that this process loaded.
int mp_libc10_path(char* buf, size_t len) {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&c10::reportMemoryUsageToProfiler), &info) == 0 ||
      info.dli_fname == nullptr) {
    return -1;
  }
  std::strncpy(buf, info.dli_fname, len - 1);
  buf[len - 1] = '\0';
  return 0;
}

/// Number of CUDA devices, or -1 on error. Does not create a CUDA context.
int mp_cuda_device_count(int* out) {
  return guarded([&] {
    auto acc = at::accelerator::getAccelerator(false);
    *out = (acc.has_value() && *acc == c10::DeviceType::CUDA) ? (int)at::accelerator::deviceCount()
                                                               : 0;
  });
}

/// Whether the device's caching allocator has been initialised (CUDA initialised by the program).
int mp_allocator_initialized(int* out) {
  return guarded([&] {
    auto* alloc = c10::getDeviceAllocator(c10::DeviceType::CUDA);
    *out = alloc != nullptr && alloc->initialized() ? 1 : 0;
  });
}

/// Fills out[122] with the device's allocator stats in src/model/stats.rs order.
int mp_device_stats(int device, int64_t* out) {
  return guarded([&] {
    auto s = at::accelerator::getDeviceStats((c10::DeviceIndex)device);
    int64_t* p = out;
    flatten_array(s.allocation, p);
    flatten_array(s.segment, p);
    flatten_array(s.active, p);
    flatten_array(s.inactive_split, p);
    flatten_array(s.allocated_bytes, p);
    flatten_array(s.reserved_bytes, p);
    flatten_array(s.active_bytes, p);
    flatten_array(s.inactive_split_bytes, p);
    flatten_array(s.requested_bytes, p);
    flatten_stat(s.oversize_allocations, p);
    flatten_stat(s.oversize_segments, p);
    *p++ = s.num_alloc_retries;
    *p++ = s.num_ooms;
    *p++ = s.max_split_size;
    *p++ = s.num_sync_all_streams;
    *p++ = s.num_device_alloc;
    *p++ = s.num_device_free;
  });
}


/// The CUDA device the calling thread uses now, or -1 before the program initialised CUDA
/// (asking earlier could initialise it).
int mp_current_device(int* out) {
  return guarded([&] {
    auto* alloc = c10::getDeviceAllocator(c10::DeviceType::CUDA);
    *out = alloc != nullptr && alloc->initialized() ? (int)at::accelerator::getDeviceIndex() : -1;
  });
}

/// The device's free and total memory as the CUDA driver reads them (device-wide: every
/// process's use counts), or -1 where the allocator cannot say.
/// torch 2.9's DeviceAllocator has no getMemoryInfo: there it cannot say (-1, as without CUDA).
/// MEMPROF_HAS_MEMORY_INFO comes from src/torch/releases.tsv (build/shim.rs).
int mp_device_memory_info(int device, int64_t* free, int64_t* total) {
#if MEMPROF_HAS_MEMORY_INFO
  return guarded([&] {
    auto [f, t] = c10::getDeviceAllocator(c10::DeviceType::CUDA)
                      ->getMemoryInfo((c10::DeviceIndex)device);
    *free = (int64_t)f;
    *total = (int64_t)t;
  });
#else
  (void)device;
  (void)free;
  (void)total;
  return -1;
#endif
}

/// The CUDA device the reporter counts (-1: none, the CPU).
int mp_reporter_device() { return device_index.load(std::memory_order_relaxed); }

/// Makes the reporter count `device` from now on; its tally restarts at that device's current
/// allocated and reserved bytes, so no maximum of the previous device carries over.
int mp_reporter_set_device(int device) {
  return guarded([&] {
    auto s = at::accelerator::getDeviceStats((c10::DeviceIndex)device);
    int64_t allocated = s.allocated_bytes[0].current;
    int64_t reserved = s.reserved_bytes[0].current;
    TakeGuard guard;
    device_index.store(device);
    device_tally.allocated_current.store(allocated);
    device_tally.allocated_max.store(allocated);
    device_tally.allocated_max_for_lines.store(INT64_MIN);
    device_tally.allocated_max_for_scopes.store(INT64_MIN);
    device_tally.reserved_current.store(reserved);
    device_tally.reserved_max.store(reserved);
  });
}

/// Starts counting collectives (a global RecordFunction callback that needs the ops' inputs).
int mp_collectives_enable() {
  return guarded([&] {
    if (collectives_handle == 0) {
      collectives_handle = at::addGlobalCallback(
          at::RecordFunctionCallback(&on_op).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
    }
    collectives_on.store(true);
  });
}

/// Stops counting collectives and removes the callback, so ops run as without memprof.
void mp_collectives_disable() {
  collectives_on.store(false);
  if (collectives_handle != 0) {
    try {
      at::removeCallback(collectives_handle);
    } catch (...) {
    }
    collectives_handle = 0;
  }
}

/// The next c10d op this thread dispatches is a collective of `kind` with `bytes`, unless its
/// own inputs say otherwise (see `expected_kind`); kind -1 forgets it.
void mp_collectives_expect(int kind, int64_t bytes) {
  expected_kind = kind >= 0 && kind < KINDS ? kind : -1;
  expected_bytes = bytes;
}

/// Reads the collective counters: out[0..8) bytes per kind, out[8..16) calls per kind.
void mp_collectives_take(int64_t* out) {
  for (int k = 0; k < KINDS; k++) {
    out[k] = collective_bytes[k].load(std::memory_order_relaxed);
    out[KINDS + k] = collective_count[k].load(std::memory_order_relaxed);
  }
}

/// Resets the device's peak stats (peak = current). Only used when a chosen peak stat has no
/// other exact source; the report header says so.
int mp_reset_peak_stats(int device) {
  return guarded([&] { at::accelerator::resetPeakStats((c10::DeviceIndex)device); });
}

/// Creates the reporter and pushes it on the calling thread; sets which CUDA device it counts
/// (-1: none).
int mp_reporter_install(int device) {
  return guarded([&] {
    device_index.store(device);
    if (!reporter) reporter = std::make_shared<Reporter>();
    c10::ThreadLocalDebugInfo::_push(c10::DebugInfoKind::PROFILER_STATE, reporter);
    own_reporter = reporter.get();
  });
}

/// Pushes the reporter on the calling thread if that thread has no profiler state yet
/// (threads do not inherit libtorch's thread-local debug info).
int mp_reporter_attach_thread() {
  return guarded([&] {
    if (reporter && c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE) == nullptr) {
      // A reporter of its own (sharing the process's tallies), so that its lines' Δ counts
      // only what this thread allocated and freed.
      auto mine = std::make_shared<Reporter>();
      c10::ThreadLocalDebugInfo::_push(c10::DebugInfoKind::PROFILER_STATE, mine);
      own_reporter = mine.get();
    }
  });
}

/// The net bytes (CPU: device == 0; the counted CUDA device: 1) allocated by the calling thread
/// and the threads working for it, through its own reporter; 0 on a thread that has none yet
/// (it gets one now: a thread started without `threading` was not seen starting).
int64_t mp_own_net(int device) {
  if (own_reporter == nullptr) {
    // Once per thread: a thread whose profiler slot is taken (by torch's profiler) stays without.
    thread_local bool tried = false;
    if (tried) return 0;
    tried = true;
    mp_reporter_attach_thread();
    if (own_reporter == nullptr) return 0;
  }
  return (device ? own_reporter->own_device : own_reporter->own_cpu)
      .load(std::memory_order_relaxed);
}

/// Notes the site of the backward pass the calling thread is about to run (0: it ended) on its
/// reporter, which autograd's threads share; returns the previous one.
uint32_t mp_backward_site_set(uint32_t site) {
  if (own_reporter == nullptr) mp_reporter_attach_thread();
  if (own_reporter == nullptr) return 0;
  return own_reporter->backward_site.exchange(site, std::memory_order_relaxed);
}

/// Starts remembering which line allocated each block (see `tags`).
void mp_tags_enable() { tagging.store(true); }

/// The line now running (0: none), as `mp_tag_of` will return it.
void mp_tag_set(uint64_t tag) { current_tag.store(tag, std::memory_order_relaxed); }

/// The tag of the live block at ptr, 0 if unknown.
uint64_t mp_tag_of(const void* ptr) {
  std::lock_guard<std::mutex> lock(tags_mutex);
  auto it = tags.find(const_cast<void*>(ptr));
  return it == tags.end() ? 0 : it->second;
}

/// Blocks of the default CPU allocator that were live before memprof's reporter first listened
/// (the first in-process session starts after the program allocated): c10's CPU reporter learns
/// their sizes, as if it had seen them allocated, so that their frees are reported (instead of
/// torch's "Memory block of unknown size was allocated before the profiling started" warning on
/// the program's stderr), and the CPU tally counts them as live. `impls`: the StorageImpl
/// addresses of the CPU storages Python holds (UntypedStorage._cdata), alive during the call;
/// others (numpy's memory, shared memory) are left alone. Returns the bytes taken in.
int64_t mp_adopt_cpu_storages(const uint64_t* impls, size_t n) {
  c10::DeleterFnPtr deleter = c10::GetDefaultCPUAllocator()->raw_deleter();
  std::unordered_set<void*> seen;
  int64_t total = 0;
  // New() records a block's size only while reporting is on; its log line is INFO, below
  // c10's default level (WARNING): nothing is printed.
  bool was = FLAGS_caffe2_report_cpu_memory_usage;
  FLAGS_caffe2_report_cpu_memory_usage = true;
  for (size_t i = 0; i < n; i++) {
    auto* storage = reinterpret_cast<c10::StorageImpl*>((uintptr_t)impls[i]);
    const c10::DataPtr& data = storage->data_ptr();
    void* ptr = data.get();
    size_t nbytes = storage->nbytes();
    if (ptr == nullptr || nbytes == 0 || data.get_deleter() != deleter ||
        data.device().type() != c10::DeviceType::CPU || !seen.insert(ptr).second) {
      continue;
    }
    c10::profiledCPUMemoryReporter().New(ptr, nbytes);
    total += (int64_t)nbytes;
  }
  FLAGS_caffe2_report_cpu_memory_usage = was;
  int64_t now = cpu_tally.allocated_current.fetch_add(total, std::memory_order_relaxed) + total;
  atomic_max(cpu_tally.allocated_max, now);
  return total;
}

/// Reads a tally (0: CPU, 1: the CUDA device) and restarts its maxima at the current values.
/// out: [allocated_current, allocated_max, reserved_current, reserved_max, bytes_allocated,
///       bytes_freed, count_current, count_max, count_allocated, count_freed, events]
void mp_tally_take(int which, int64_t* out) {
  Tally& t = which == 0 ? cpu_tally : device_tally;
  TakeGuard guard;
  int64_t cur = t.allocated_current.load(std::memory_order_relaxed);
  int64_t res = t.reserved_current.load(std::memory_order_relaxed);
  int64_t n = t.count_current.load(std::memory_order_relaxed);
  out[0] = cur;
  out[1] = take_allocated_max(t.allocated_max, cur, t.allocated_max_for_scopes,
                              t.allocated_max_for_lines);
  out[2] = res;
  out[3] = std::max(t.reserved_max.exchange(res, std::memory_order_relaxed), res);
  out[4] = t.bytes_allocated.load(std::memory_order_relaxed);
  out[5] = t.bytes_freed.load(std::memory_order_relaxed);
  out[6] = n;
  out[7] = std::max(t.count_max.exchange(n, std::memory_order_relaxed), n);
  out[8] = t.count_allocated.load(std::memory_order_relaxed);
  out[9] = t.count_freed.load(std::memory_order_relaxed);
  out[10] = t.events.load(std::memory_order_relaxed);
}

/// A module scope's reading of a tally (0: CPU, 1: the CUDA device): its allocated bytes now
/// and their maximum since the previous scope take, restarting allocated_max at the current
/// value; the next full take (mp_tally_take) still sees that maximum.
void mp_tally_take_allocated(int which, int64_t* current, int64_t* max) {
  Tally& t = which == 0 ? cpu_tally : device_tally;
  TakeGuard guard;
  int64_t cur = t.allocated_current.load(std::memory_order_relaxed);
  *current = cur;
  *max = take_allocated_max(t.allocated_max, cur, t.allocated_max_for_lines,
                            t.allocated_max_for_scopes);
}

}  // extern "C"
