// The C ABI between memprof and libtorch: what tch does not expose.
//
// - the caching allocator's DeviceStats, flattened in the order of src/stats.rs (122 values);
// - a memory reporter in libtorch's PROFILER_STATE slot that sees every allocation and free of
//   the CUDA caching allocator and of the CPU allocator, exactly and without resetting any stat;
// - the libtorch version and the path of the loaded libc10, for the start-up check.
//
// Every entry point catches every C++ exception: an exception crossing into Rust is undefined
// behaviour. The reporter callback runs inside the allocator (with its mutex held, on whatever
// thread allocates), so it only touches atomics.
#include <ATen/DeviceAccelerator.h>
#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/csrc/profiler/orchestration/observer.h>
#include <torch/version.h>

#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

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
};

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

  void reportMemoryUsage(void* ptr, int64_t size, size_t total_allocated, size_t total_reserved,
                         c10::Device device) override {
    if (device.is_cpu()) {
      if (device_index.load(std::memory_order_relaxed) < 0) remember(ptr, size);
      Tally& t = cpu_tally;
      int64_t now = t.allocated_current.fetch_add(size, std::memory_order_relaxed) + size;
      atomic_max(t.allocated_max, now);
      count(t, size);
      return;
    }
    if (device.index() != device_index.load(std::memory_order_relaxed)) return;
    remember(ptr, size);
    Tally& t = device_tally;
    t.allocated_current.store((int64_t)total_allocated, std::memory_order_relaxed);
    t.reserved_current.store((int64_t)total_reserved, std::memory_order_relaxed);
    atomic_max(t.allocated_max, (int64_t)total_allocated);
    atomic_max(t.reserved_max, (int64_t)total_reserved);
    count(t, size);
  }

  void reportOutOfMemory(int64_t, size_t, size_t, c10::Device) override {}

  torch::profiler::impl::ActiveProfilerType profilerType() override {
    return torch::profiler::impl::ActiveProfilerType::NONE;
  }

 private:
  static void count(Tally& t, int64_t size) {
    t.events.fetch_add(1, std::memory_order_relaxed);
    if (size >= 0) {
      t.bytes_allocated.fetch_add(size, std::memory_order_relaxed);
      t.count_allocated.fetch_add(1, std::memory_order_relaxed);
      int64_t n = t.count_current.fetch_add(1, std::memory_order_relaxed) + 1;
      atomic_max(t.count_max, n);
    } else {
      t.bytes_freed.fetch_add(-size, std::memory_order_relaxed);
      t.count_freed.fetch_add(1, std::memory_order_relaxed);
      t.count_current.fetch_sub(1, std::memory_order_relaxed);
    }
  }
};

std::shared_ptr<Reporter> reporter;

void flatten_stat(const c10::CachingAllocator::Stat& s, int64_t*& out) {
  *out++ = s.current;
  *out++ = s.peak;
  *out++ = s.allocated;
  *out++ = s.freed;
}

void flatten_array(const c10::CachingAllocator::StatArray& a, int64_t*& out) {
  for (const auto& s : a) flatten_stat(s, out);
}

}  // namespace

extern "C" {

/// Copies the message of the last failed call on this thread into buf (NUL-terminated).
void mp_last_error(char* buf, size_t len) {
  if (len == 0) return;
  std::strncpy(buf, last_error.c_str(), len - 1);
  buf[len - 1] = '\0';
}

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

/// Fills out[122] with the device's allocator stats in src/stats.rs order.
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
  });
}

/// Pushes the reporter on the calling thread if that thread has no profiler state yet
/// (threads do not inherit libtorch's thread-local debug info).
int mp_reporter_attach_thread() {
  return guarded([&] {
    if (reporter && c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE) == nullptr) {
      c10::ThreadLocalDebugInfo::_push(c10::DebugInfoKind::PROFILER_STATE, reporter);
    }
  });
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

/// Reads a tally (0: CPU, 1: the CUDA device) and restarts its maxima at the current values.
/// out: [allocated_current, allocated_max, reserved_current, reserved_max, bytes_allocated,
///       bytes_freed, count_current, count_max, count_allocated, count_freed, events]
void mp_tally_take(int which, int64_t* out) {
  Tally& t = which == 0 ? cpu_tally : device_tally;
  int64_t cur = t.allocated_current.load(std::memory_order_relaxed);
  int64_t res = t.reserved_current.load(std::memory_order_relaxed);
  int64_t n = t.count_current.load(std::memory_order_relaxed);
  out[0] = cur;
  out[1] = std::max(t.allocated_max.exchange(cur, std::memory_order_relaxed), cur);
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

}  // extern "C"
