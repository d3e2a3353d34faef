// What `memprof run --modules`' saved-tensors pack hook needs of a tensor, read from its
// TensorImpl (a tensor's `_cdata`) instead of through Python attributes: its version, and the
// storage it keeps alive when it is on the measured device. The hook runs for every tensor
// autograd saves, so this replaces several Python calls per saved tensor.
//
// Every entry point catches every C++ exception: an exception crossing into Rust is undefined
// behaviour.
#include <c10/core/TensorImpl.h>

#include <cstdint>

extern "C" {

// Returns -1 when the version cannot be read (an inference tensor: the caller asks Python,
// which raises torch's own error); else writes `version` and returns 1 when the tensor's storage
// counts (on the CPU when `device_index` < 0, else on that CUDA device), with its address and
// size in `storage_ptr` and `storage_nbytes`, and 0 when it does not (another device, or no
// storage that can be read, as `untyped_storage()` would refuse).
int mp_saved_info(void* impl, int device_index, int64_t* version, uintptr_t* storage_ptr,
                  uint64_t* storage_nbytes) {
  auto* t = static_cast<c10::TensorImpl*>(impl);
  try {
    *version = static_cast<int64_t>(t->version_counter().current_version());
  } catch (...) {
    return -1;
  }
  try {
    const c10::Device device = t->device();
    const bool counted = device_index < 0
                             ? device.is_cpu()
                             : device.is_cuda() && device.index() == device_index;
    if (!counted || !t->has_storage()) return 0;
    const c10::Storage& storage = t->storage();
    *storage_ptr = reinterpret_cast<uintptr_t>(storage.data());
    *storage_nbytes = static_cast<uint64_t>(storage.nbytes());
    return 1;
  } catch (...) {
    return 0;
  }
}

}  // extern "C"
