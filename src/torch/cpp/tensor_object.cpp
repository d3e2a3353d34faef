// The TensorImpl of a Python tensor, read from the object itself instead of through Python's
// attribute lookup (`t._cdata`: a getattr and a new int per tensor). `--modules` reads the
// tensors of every module call's arguments and outputs, and the parameters and buffers of every
// root call, so this is on its per-call path.
//
// A Python tensor is a THPVariable (torch/csrc/autograd/python_variable.h): CPython's object
// header, then the tensor. Its header needs Python's headers, which this library (one per torch
// release, for every Python) does not build against, so the layout is declared here: the
// header of CPython's default build (a reference count and a type), then the field as the
// release declares it, an at::Tensor from 2.11 and a c10::MaybeOwned<at::Tensor> before
// (build/shim.rs reads which from the release's own header: MEMPROF_VARIABLE_CDATA). The caller
// checks the answer once per process against `_cdata` (src/python/ext/tensor_object.rs), so a
// build of Python with another header gets the attribute instead.
#include <ATen/core/Tensor.h>
#include <c10/util/MaybeOwned.h>

#include <cstdint>

namespace {

struct ObjectHeader {
  intptr_t reference_count;
  void* type;
};

#if MEMPROF_VARIABLE_CDATA == 1
struct Variable {
  ObjectHeader header;
  c10::MaybeOwned<at::Tensor> cdata;
};
const at::Tensor& tensor_of(const Variable* v) { return *v->cdata; }
#elif MEMPROF_VARIABLE_CDATA == 0
struct Variable {
  ObjectHeader header;
  at::Tensor cdata;
};
const at::Tensor& tensor_of(const Variable* v) { return v->cdata; }
#endif

}  // namespace

extern "C" {

/// The TensorImpl of the Python tensor `object` (an instance of torch.Tensor, checked by the
/// caller), or null where this release's layout is not known.
void* mp_tensor_impl_of(const void* object) {
#if MEMPROF_VARIABLE_CDATA == 0 || MEMPROF_VARIABLE_CDATA == 1
  return tensor_of(static_cast<const Variable*>(object)).unsafeGetTensorImpl();
#else
  (void)object;
  return nullptr;
#endif
}

}  // extern "C"
