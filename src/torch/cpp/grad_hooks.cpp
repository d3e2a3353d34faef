// Gradient hooks for `memprof run --modules`, in C++: a module call's backward starts when the
// node that produced one of its outputs is about to run, and ends when the nodes of all its
// inputs are. The Python tensor hooks they replace cost a Python call per tensor to register
// (Tensor.register_hook) and, in backward, the GIL on autograd's device thread per gradient.
// These run without Python: each calls memprof (Rust) with the calls' tokens. One hook per node
// holds every call that waits on that node's gradient (a module's output is its parent's output
// and the next module's input: two or three calls at one node): one call into Rust when it
// fires, in the order the calls were hooked. Nothing is told when a hook is freed with its
// graph: an output's hook carries what memprof needs when the call's backward starts, so that
// memprof knows a call only while its backward runs (hooking one in forward takes no lock).
//
// Every entry point catches every C++ exception: an exception crossing into Rust is undefined
// behaviour.
#include <c10/core/GradMode.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <cstdint>
#include <memory>

// mp_rust_grad_events, implemented in Rust (src/capture/backward.rs): per call, kind 0, an
// output's gradient is ready (the call's backward starts); 1, an input's is; 2, the backward pass
// ended. Returns 1 when the engine should call back at the end of this backward pass (kind 2).
#include "callbacks.h"

namespace {

struct MemprofGradHook final : torch::autograd::FunctionPreHook {
  // Inline for the two or three calls a node usually has: no allocation beside the hook's own.
  c10::SmallVector<MpGradCall, 3> calls;
  explicit MemprofGradHook(const MpGradCall& call) { calls.push_back(call); }

  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& grads) override {
    if (mp_rust_grad_events(calls.data(), calls.size()) == 1) {
      try {
        torch::autograd::Engine::get_default_engine().queue_callback([] {
          const MpGradCall ended{0, 2, 0, 0};
          mp_rust_grad_events(&ended, 1);
        });
      } catch (...) {
      }
    }
    return grads;
  }

  // Under compiled autograd the hook is left out of the compiled graph (memprof then closes
  // the backward of such calls when the backward pass ends), instead of failing it.
  void compiled_args(torch::dynamo::autograd::CompiledNodeArgs& /*args*/) const override {}
};

// The virtual table of MemprofGradHook, read from the first one made (null before): an object
// whose first word is this address is one of ours, a final class. A hook of another type never
// has it; this check is one load where dynamic_cast walked the type's RTTI at every module call.
const void* our_vtable = nullptr;

const void* vtable_of(const void* object) { return *static_cast<const void* const*>(object); }

// Adds the call to the node's memprof hook when that hook is the node's latest (so that the
// order of every hook on the node stays the order they were added in), else a new hook. Runs
// with the GIL held (a module call's start or end), so `our_vtable` is written by one thread.
void hook(torch::autograd::Node* node, const MpGradCall& call) {
  auto& hooks = node->pre_hooks();
  if (!hooks.empty() && our_vtable != nullptr && vtable_of(hooks.back().get()) == our_vtable) {
    static_cast<MemprofGradHook*>(hooks.back().get())->calls.push_back(call);
    return;
  }
  auto ours = std::make_unique<MemprofGradHook>(call);
  if (our_vtable == nullptr) our_vtable = vtable_of(ours.get());
  node->add_pre_hook(std::move(ours));
}

}  // namespace

extern "C" {

/// Whether autograd records on this thread (torch.is_grad_enabled()): 1 or 0.
int mp_grad_enabled() { return c10::GradMode::is_enabled() ? 1 : 0; }

/// Hooks the nodes that produced the `n` tensors whose TensorImpls are `impls` (Python tensors'
/// `_cdata`) for `call` (its token, kind, entry and inputs): the number hooked (a tensor without a node, a leaf, is not), or
/// -1 on error. A view's node is asked of the tensor (autograd may make it anew after an
/// in-place change); any other tensor's is the field itself, read without touching its
/// reference counts: the caller holds the tensors, which hold their nodes.
int mp_grad_hooks(const uintptr_t* impls, size_t n, const MpGradCall* call) {
  try {
    int hooked = 0;
    for (size_t i = 0; i < n; ++i) {
      auto* impl = reinterpret_cast<c10::TensorImpl*>(impls[i]);
      auto* meta = static_cast<torch::autograd::AutogradMeta*>(impl->autograd_meta());
      if (meta == nullptr) continue;
      if (meta->is_view_) {
        at::Tensor tensor(c10::intrusive_ptr<c10::TensorImpl>::reclaim_copy(impl));
        auto node = tensor.grad_fn();
        if (!node) continue;
        hook(node.get(), *call);
      } else {
        torch::autograd::Node* node = meta->grad_fn_.get();
        if (node == nullptr) continue;
        hook(node, *call);
      }
      ++hooked;
    }
    return hooked;
  } catch (...) {
    return -1;
  }
}

/// Whether the tensor whose TensorImpl is `impl` has a node in the graph (its grad_fn, read from
/// the field: a view's is not regenerated): 1 or 0, -1 on error. A tensor without one (a
/// parameter, a buffer, an input, an op's non-differentiable output) holds no node.
int mp_has_grad_fn(void* impl) {
  try {
    auto* meta = static_cast<c10::TensorImpl*>(impl)->autograd_meta();
    if (meta == nullptr) return 0;
    return static_cast<torch::autograd::AutogradMeta*>(meta)->grad_fn_ ? 1 : 0;
  } catch (...) {
    return -1;
  }
}

}  // extern "C"
