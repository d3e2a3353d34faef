// `memprof run --modules`' saved-tensors hooks in C++, without Python in forward or backward.
//
// Why: autograd's Python saved-tensors hooks cost, per saved tensor, a Python object for the
// tensor, a call of the pack hook and a tuple in forward, and in backward the GIL on autograd's
// device thread twice (the unpack call, the packed object's release): about 3 ms of a resnet50
// step's 22 ms on an H100, the largest part of `--modules`' cost.
//
// How: autograd asks its engine for the default hooks of each tensor it saves
// (Engine::get_default_saved_variable_hooks, virtual; torch's Python engine answers with the
// Python hooks on top of the thread's stack). modules.py still pushes memprof's Python hooks
// (_memprof.saved_pack/saved_unpack), so that the stack, the program's own hooks on top of
// them, torch.func's disabling and every check that reads the stack see what they saw before;
// the engine's answer is changed only where memprof's hooks are on top of the stack: there it
// is a NativeSaved, which does what saved_pack/saved_unpack do (src/python/ext/saved.rs) in
// C++. Anywhere else (the program's own hooks on top, no hooks, tracing) the engine answers as
// before. The answer is changed by giving the one engine object a copy of its class's table of
// virtual functions with that one entry replaced (a C++ object's class cannot be changed
// otherwise, and the engine is a single object that libtorch_python.so creates); the copy lives
// for the process, and mp_native_saved_hooks(nullptr) puts the original table back.
//
// Every entry point catches every C++ exception: an exception crossing into Rust is undefined
// behaviour. The hooks' own methods may throw (unpack's in-place error): autograd calls them.
#include <ATen/SavedTensorHooks.h>
#include <ATen/SequenceNumber.h>
#include <c10/core/SafePyObject.h>
#include <c10/core/ScalarType.h>
#include <c10/core/impl/PyObjectSlot.h>
#include <c10/util/Exception.h>
#include <c10/util/python_stub.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/saved_variable_hooks.h>
#include <torch/csrc/autograd/variable.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <typeinfo>
#include <utility>

#include "callbacks.h"

namespace {

using torch::autograd::Engine;
using torch::autograd::SavedVariableHooks;

// The marker: the pack hook object (_memprof.saved_pack) that modules.py pushes; null when the
// native hooks are off.
std::atomic<PyObject*> marker{nullptr};

// The tensor's Python object, if it has one (an op's fresh output has none). PyObjectSlot's
// reader changed between releases: load_pyobj (2.10 on), check_pyobj before.
template <typename Slot>
auto slot_pyobj(const Slot* slot, int) -> decltype(slot->load_pyobj()) {
  return slot->load_pyobj();
}
template <typename Slot>
PyObject* slot_pyobj(const Slot* slot, long) {
  auto obj = slot->check_pyobj();
  return obj.has_value() ? *obj : nullptr;
}

PyObject* pyobj_of(const at::TensorBase& t) {
  return slot_pyobj(t.unsafeGetTensorImpl()->pyobj_slot(), 0);
}

// What Python's `t.type()` names (torch.FloatTensor, torch.cuda.HalfTensor), for the error.
std::string type_name(const at::Tensor& t) {
  std::string device = t.device().is_cpu() ? "torch" : "torch." + c10::DeviceTypeName(
                                                                  t.device().type(), true);
  return device + "." + c10::toString(t.scalar_type()) + "Tensor";
}

// One saved tensor, kept as autograd keeps it without a hook, with its version: a node's own
// output detached (the same storage and version counter without its graph: kept as itself it
// would hold the node, a cycle; autograd keeps such an output without its grad_fn too), any
// other tensor as itself. So the tensors a program's forward leaves alive, and the Python
// objects torch preserves for them, are those of a run without memprof. (saved.rs's Python
// hook cannot tell an output from an input and detaches every tensor with a grad_fn.)
struct NativeSaved final : SavedVariableHooks {
  at::Tensor kept;
  int64_t version = 0;

  void call_pack_hook(const at::Tensor& t) override {
    version = static_cast<int64_t>(t.unsafeGetTensorImpl()->version_counter().current_version());
    auto* meta =
        static_cast<torch::autograd::AutogradMeta*>(t.unsafeGetTensorImpl()->autograd_meta());
    // The node being built is this thread's newest: autograd numbers each node it makes from
    // the thread's counter, and saves an op's outputs after making its node; an input's node
    // was made before.
    const bool own_output = meta != nullptr && meta->grad_fn_ &&
                            meta->grad_fn_->sequence_nr() + 1 == at::sequence_number::peek();
    kept = own_output ? t.detach() : t;
    // The bytes it saves: the pass's bookkeeping is memprof's (src/capture/saved.rs).
    mp_rust_saved_tensor(t.unsafeGetTensorImpl());
  }

  at::Tensor call_unpack_hook() override {
    const auto now =
        static_cast<int64_t>(kept.unsafeGetTensorImpl()->version_counter().current_version());
    if (now != version) {
      std::ostringstream shape;
      shape << '[';
      const auto sizes = kept.sizes();
      for (size_t i = 0; i < sizes.size(); ++i) shape << (i ? ", " : "") << sizes[i];
      shape << ']';
      // The words saved.rs's saved_unpack used (and autograd's own check, which a hook skips).
      TORCH_CHECK(false,
                  "one of the variables needed for gradient computation has been modified by an "
                  "inplace operation: [",
                  type_name(kept), " ", shape.str(), "] is at version ", now,
                  "; expected version ", version,
                  " instead. (memprof --modules reports this through its saved-tensors hook; the "
                  "same program fails without memprof.)");
    }
    return kept;
  }

  // Compiled autograd asks hooked saved tensors for a Python unpack hook to put in its graph;
  // none: it unpacks this one as a saved tensor without hooks (call_unpack_hook above).
  std::optional<std::pair<c10::SafePyObject, c10::SafePyObject>> retrieve_unpack_hook_data()
      const override {
    return std::nullopt;
  }
};

// A member function with the engine method's signature: both take the object first and return
// through a pointer the caller gives (Itanium C++ ABI), so its address can take the method's
// place in the table. `this` is the engine.
struct Replacement {
  std::unique_ptr<SavedVariableHooks> hooks();
};
using HooksMethod = std::unique_ptr<SavedVariableHooks> (Replacement::*)();

// An Itanium member-function pointer: a function's address, or 1 + a virtual's byte offset.
struct MemberPointer {
  uintptr_t ptr;
  ptrdiff_t adj;
};

template <typename M>
MemberPointer raw(M method) {
  static_assert(sizeof(M) == sizeof(MemberPointer), "an Itanium member pointer");
  MemberPointer p;
  std::memcpy(&p, &method, sizeof p);
  return p;
}

// The table index of a virtual method, or -1.
template <typename M>
long slot_of(M method) {
  const MemberPointer p = raw(method);
  return (p.ptr & 1) ? static_cast<long>((p.ptr - 1) / sizeof(void*)) : -1;
}

// The last entry of Engine's table: the largest index of its virtual methods (its destructor's
// two come first, as it is declared first); the protected ones named through a subclass, as C++
// requires.
struct EngineAccess : Engine {
  static long last_slot() {
    long last = 1;
    for (long slot : {slot_of(&EngineAccess::execute),
                      slot_of(&EngineAccess::execute_with_graph_task),
                      slot_of(&EngineAccess::make_anomaly_metadata),
                      slot_of(&EngineAccess::get_default_saved_variable_hooks),
                      slot_of(&EngineAccess::thread_on_exception),
                      slot_of(&EngineAccess::thread_init), slot_of(&EngineAccess::thread_main)}) {
      if (slot > last) last = slot;
    }
    return last;
  }
};

std::mutex patch_mutex;
Engine* patched_engine = nullptr;
void** original_table = nullptr;  // the engine's vptr before
void* original_hooks = nullptr;   // the table's entry before
void** table_copy = nullptr;      // the copy's first function entry (never freed)

std::unique_ptr<SavedVariableHooks> original(Replacement* self) {
  MemberPointer p{reinterpret_cast<uintptr_t>(original_hooks), 0};
  HooksMethod method;
  std::memcpy(&method, &p, sizeof method);
  return (self->*method)();
}

std::unique_ptr<SavedVariableHooks> Replacement::hooks() {
  PyObject* ours = marker.load(std::memory_order_acquire);
  if (ours != nullptr) {
    const auto& tls = at::SavedTensorDefaultHooks::get_tls_state();
    if (!tls.stack.empty() && !tls.is_tracing) {
      const c10::SafePyObject& pack = tls.stack.top().first;
      if (pack.ptr(&pack.pyinterpreter()) == ours) return std::make_unique<NativeSaved>();
    }
  }
  return original(this);
}

}  // namespace

extern "C" {

/// The Python object of a tensor (its TensorImpl) and of its base when it is a view, each null
/// when it has none: saved.rs asks whether either is an nn.Parameter. 0, or -1 on error.
int mp_tensor_pyobjs(void* impl, void** obj, void** base_obj) {
  try {
    auto ptr =
        c10::intrusive_ptr<c10::TensorImpl>::reclaim_copy(static_cast<c10::TensorImpl*>(impl));
    at::Tensor t(std::move(ptr));
    *obj = pyobj_of(t);
    *base_obj = t.is_view() ? pyobj_of(t._base()) : nullptr;
    return 0;
  } catch (...) {
    return -1;
  }
}

/// Turns the native saved-tensors hooks on where `pack` (memprof's pack hook object) is on top
/// of a thread's hook stack, or off (null). 1 when on, 0 off, -1 when the engine is not torch's
/// Python engine or its table cannot be read (memprof's Python hooks then run as pushed).
int mp_native_saved_hooks(PyObject* pack) {
  try {
    std::lock_guard<std::mutex> guard(patch_mutex);
    if (pack == nullptr) {
      marker.store(nullptr, std::memory_order_release);
      if (patched_engine != nullptr) {
        *reinterpret_cast<void***>(patched_engine) = original_table;
        patched_engine = nullptr;
      }
      return 0;
    }
    Engine& engine = Engine::get_default_engine();
    if (patched_engine == nullptr) {
      // Only torch's Python engine, whose class adds no virtual method to Engine's (so that
      // Engine's declarations give the table's length).
      if (std::strstr(typeid(engine).name(), "PythonEngine") == nullptr) return -1;
      const long slot = slot_of(&Engine::get_default_saved_variable_hooks);
      const long last = EngineAccess::last_slot();
      if (slot < 0 || last < slot) return -1;
      void** table = *reinterpret_cast<void***>(&engine);
      if (table_copy == nullptr || original_table != table) {
        // The two entries before the functions: the offset to the object's top, its type_info.
        auto* copy = new void*[last + 3];
        std::memcpy(copy, table - 2, sizeof(void*) * (last + 3));
        table_copy = copy + 2;
        original_table = table;
        original_hooks = table[slot];
        table_copy[slot] = reinterpret_cast<void*>(raw(&Replacement::hooks).ptr);
      }
      marker.store(pack, std::memory_order_release);
      *reinterpret_cast<void***>(&engine) = table_copy;
      patched_engine = &engine;
    } else {
      marker.store(pack, std::memory_order_release);
    }
    return 1;
  } catch (...) {
    return -1;
  }
}

}  // extern "C"
