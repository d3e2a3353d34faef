// What `memprof run --modules` needs of a tensor that autograd saves, read from its TensorImpl (a
// tensor's `_cdata`) instead of through Python attributes: the storage it keeps alive when it is
// on the measured device and, for the saved-tensors pack hook, its version. Counting runs for
// every tensor autograd saves, so this replaces several Python calls per saved tensor.
//
// Every entry point catches every C++ exception: an exception crossing into Rust is undefined
// behaviour.
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>

#include <cstddef>
#include <cstdint>

namespace {

// Whether the tensor's storage is on the measured device (the CPU when `device_index` < 0, else
// that CUDA device) and can be read; throws where the tensor has no device.
bool counts_on(const c10::TensorImpl* t, int device_index) {
  const c10::Device device = t->device();
  const bool on =
      device_index < 0 ? device.is_cpu() : device.is_cuda() && device.index() == device_index;
  return on && t->has_storage();
}

}  // namespace

extern "C" {

// Returns 1 when the tensor's storage counts (on the CPU when `device_index` < 0, else on that
// CUDA device), with its address and size in `storage_ptr` and `storage_nbytes`, and 0 when it
// does not (another device, or no storage that can be read, as `untyped_storage()` would
// refuse). The version is not read: the version counter is an object of its own, one more memory
// access for every tensor a pass saves or skips, which only the pack hook needs.
int mp_storage_on(void* impl, int device_index, uintptr_t* storage_ptr,
                  uint64_t* storage_nbytes) {
  auto* t = static_cast<c10::TensorImpl*>(impl);
  try {
    if (!counts_on(t, device_index)) return 0;
    const c10::Storage& storage = t->storage();
    *storage_ptr = reinterpret_cast<uintptr_t>(storage.data());
    *storage_nbytes = static_cast<uint64_t>(storage.nbytes());
    return 1;
  } catch (...) {
    return 0;
  }
}

// mp_storage_on's answer for `n` tensors at once (a root module's parameters and buffers, read
// at each of its calls), their sizes left out (no caller needs them): `counted[i]` is 1 where
// tensor i's storage counts, its address then in `storage_ptrs[i]`, else 0. In three passes, each prefetching what the
// next reads (the TensorImpls, then their StorageImpls), so that the misses of hundreds of
// tensors overlap instead of following one another: a root's state, untouched since its last
// call, is out of the cache by then, and read one tensor after another it was a chain of misses
// to memory at every root call (mp_storage_on, which these reads and every saved tensor's called,
// took 0.03 ms of an H100's resnet50 step under --modules).
void mp_storages_on(void* const* impls, size_t n, int device_index, uint8_t* counted,
                    uintptr_t* storage_ptrs) {
  for (size_t i = 0; i < n; ++i) {
    const char* t = static_cast<const char*>(impls[i]);
    for (size_t line = 0; line < sizeof(c10::TensorImpl); line += 64) __builtin_prefetch(t + line);
  }
  for (size_t i = 0; i < n; ++i) {
    counted[i] = 0;
    storage_ptrs[i] = 0;
    auto* t = static_cast<c10::TensorImpl*>(impls[i]);
    try {
      if (!counts_on(t, device_index)) continue;
      c10::StorageImpl* storage = t->storage().unsafeGetStorageImpl();
      if (storage == nullptr) continue;
      __builtin_prefetch(storage);
      storage_ptrs[i] = reinterpret_cast<uintptr_t>(storage);
      counted[i] = 1;
    } catch (...) {
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (counted[i] == 0) continue;
    auto* storage = reinterpret_cast<c10::StorageImpl*>(storage_ptrs[i]);
    try {
      storage_ptrs[i] = reinterpret_cast<uintptr_t>(storage->data());
    } catch (...) {
      counted[i] = 0;
      storage_ptrs[i] = 0;
    }
  }
}

// mp_storage_on with the version: -1 when the version cannot be read (an inference tensor: the
// caller asks Python, which raises torch's own error); else writes `version` and answers as
// mp_storage_on.
int mp_saved_info(void* impl, int device_index, int64_t* version, uintptr_t* storage_ptr,
                  uint64_t* storage_nbytes) {
  auto* t = static_cast<c10::TensorImpl*>(impl);
  try {
    *version = static_cast<int64_t>(t->version_counter().current_version());
  } catch (...) {
    return -1;
  }
  return mp_storage_on(impl, device_index, storage_ptr, storage_nbytes);
}

}  // extern "C"
