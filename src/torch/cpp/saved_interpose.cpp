// `memprof run --modules`' bytes saved for backward, counted without any saved-tensors hook:
// memprof stands in for SavedVariable's constructor in the symbol tables of torch's libraries.
//
// Why: a saved-tensors hook, even in C++ (saved_hooks.cpp), changes how autograd keeps every
// tensor it saves: a hook object per tensor, and in backward a new tensor made for each unpack
// and the hook object's release. On resnet50's step that was the largest part of what
// `--modules` cost (issue 53). Without a hook, autograd saves and unpacks as it does without
// memprof; memprof only needs to see which tensors are saved, and where.
//
// How: every place in libtorch that saves a tensor for backward constructs a SavedVariable
// (generated nodes, custom Functions in C++ and in Python, the optional overload), and each does
// so through its library's procedure linkage table: a call through a slot of the library's
// global offset table that the dynamic linker fills with the constructor's address (1016 call
// sites in torch 2.15's libtorch_cpu.so, all through the slot; libtorch_python.so's custom
// Functions through its own). memprof writes its stand-in into those slots. The stand-in
// constructs the SavedVariable with torch's own constructor (through this library's slot, which
// is left alone) and then, when this thread's forward pass counts (`mp_saved_counting`), hands
// the tensor to memprof's core exactly where the hook did: no hook of the program's on the
// thread's stack, hooks not disabled (torch.func), not tracing, not a wrapped number.
// `mp_saved_interpose(0)` writes the original addresses back.
//
// Every entry point catches every C++ exception: an exception crossing into Rust is undefined
// behaviour. The stand-in lets torch's constructor's own exceptions (an inference tensor) pass,
// as the call it replaces would.
#include <ATen/SavedTensorHooks.h>
#include <c10/core/TensorImpl.h>
#include <torch/csrc/autograd/saved_variable.h>

#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "callbacks.h"

namespace {

using torch::autograd::SavedVariable;

// SavedVariable(const Variable&, bool is_output, bool is_inplace_on_view), the complete-object
// constructor every saved tensor goes through (the optional overload calls it too).
constexpr const char* kConstructor = "_ZN5torch8autograd13SavedVariableC1ERKN2at6TensorEbb";

// Whether this thread's forward pass counts what it saves (src/capture/saved.rs sets it).
thread_local bool counting = false;

// The stand-in: the Itanium ABI calls a constructor as a function of (this, arguments...).
void construct_saved_variable(SavedVariable* self, const at::Tensor& variable, bool is_output,
                              bool is_inplace_on_view) {
  new (self) SavedVariable(variable, is_output, is_inplace_on_view);
  if (!counting) return;
  try {
    if (!variable.defined() || variable.unsafeGetTensorImpl()->is_wrapped_number()) return;
    // Where a hook would not have been memprof's: the program's own on the stack (activation
    // checkpointing, save_on_cpu), hooks disabled (torch.func), or dynamo tracing.
    const auto& tls = at::SavedTensorDefaultHooks::get_tls_state();
    if (!tls.stack.empty() || tls.disabled_error_message.has_value() || tls.is_tracing) return;
    mp_rust_saved_tensor(variable.unsafeGetTensorImpl());
  } catch (...) {
  }
}

struct Slot {
  void** address;
  void* original;
  bool read_only;  // in the object's RELRO range: made writable only to be written
};

std::mutex slots_mutex;
std::vector<Slot> slots;

// Where a dynamic entry's address points: glibc relocates the ones it uses in place; an
// unrelocated one is an offset from the object's base.
template <typename T>
T* at_address(ElfW(Addr) base, ElfW(Addr) value) {
  return reinterpret_cast<T*>(value < base ? base + value : value);
}

bool write_slot(const Slot& slot, void* value) {
  const long page = sysconf(_SC_PAGESIZE);
  auto start = reinterpret_cast<uintptr_t>(slot.address) & ~static_cast<uintptr_t>(page - 1);
  if (slot.read_only &&
      mprotect(reinterpret_cast<void*>(start), page, PROT_READ | PROT_WRITE) != 0) {
    return false;
  }
  __atomic_store_n(slot.address, value, __ATOMIC_RELEASE);
  if (slot.read_only) mprotect(reinterpret_cast<void*>(start), page, PROT_READ);
  return true;
}

// The slots of one loaded object that hold the constructor's address (its JUMP_SLOT and
// GLOB_DAT relocations of the symbol).
void find_slots(const dl_phdr_info* info, std::vector<Slot>* found) {
  const ElfW(Addr) base = info->dlpi_addr;
  const ElfW(Dyn)* dynamic = nullptr;
  ElfW(Addr) relro_start = 0, relro_end = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_DYNAMIC) dynamic = reinterpret_cast<const ElfW(Dyn)*>(base + ph.p_vaddr);
    if (ph.p_type == PT_GNU_RELRO) {
      relro_start = base + ph.p_vaddr;
      relro_end = relro_start + ph.p_memsz;
    }
  }
  if (dynamic == nullptr) return;
  const ElfW(Sym)* symbols = nullptr;
  const char* names = nullptr;
  const ElfW(Rela)* tables[2] = {nullptr, nullptr};
  size_t sizes[2] = {0, 0};
  bool rela = true;
  for (const ElfW(Dyn)* d = dynamic; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB: symbols = at_address<const ElfW(Sym)>(base, d->d_un.d_ptr); break;
      case DT_STRTAB: names = at_address<const char>(base, d->d_un.d_ptr); break;
      case DT_JMPREL: tables[0] = at_address<const ElfW(Rela)>(base, d->d_un.d_ptr); break;
      case DT_PLTRELSZ: sizes[0] = d->d_un.d_val; break;
      case DT_PLTREL: rela = d->d_un.d_val == DT_RELA; break;
      case DT_RELA: tables[1] = at_address<const ElfW(Rela)>(base, d->d_un.d_ptr); break;
      case DT_RELASZ: sizes[1] = d->d_un.d_val; break;
      default: break;
    }
  }
  if (symbols == nullptr || names == nullptr || !rela) return;
  for (int t = 0; t < 2; ++t) {
    if (tables[t] == nullptr) continue;
    for (size_t i = 0; i < sizes[t] / sizeof(ElfW(Rela)); ++i) {
      const ElfW(Rela)& r = tables[t][i];
      const auto type = ELF64_R_TYPE(r.r_info);
      if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
      const ElfW(Sym)& sym = symbols[ELF64_R_SYM(r.r_info)];
      if (sym.st_name == 0 || std::strcmp(names + sym.st_name, kConstructor) != 0) continue;
      auto** address = reinterpret_cast<void**>(base + r.r_offset);
      const auto where = reinterpret_cast<ElfW(Addr)>(address);
      found->push_back({address, *address, where >= relro_start && where < relro_end});
    }
  }
}

// Whether the object holds `address` in one of its loaded segments.
bool holds(const dl_phdr_info* info, uintptr_t address) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && address >= start && address < start + ph.p_memsz) return true;
  }
  return false;
}

int visit(dl_phdr_info* info, size_t, void* found) {
  // This library's own slot is how the stand-in reaches torch's constructor.
  if (!holds(info, reinterpret_cast<uintptr_t>(&construct_saved_variable))) {
    find_slots(info, static_cast<std::vector<Slot>*>(found));
  }
  return 0;
}

}  // namespace

extern "C" {

/// Stands in for SavedVariable's constructor in every loaded library that calls it through its
/// symbol table (1), or writes the original addresses back (0). The number of slots written
/// (0 when none was found: torch's libraries could not be read), or -1 on error.
int mp_saved_interpose(int on) {
  try {
    std::lock_guard<std::mutex> guard(slots_mutex);
    if (!on) {
      for (const Slot& slot : slots) write_slot(slot, slot.original);
      slots.clear();
      return 0;
    }
    if (!slots.empty()) return static_cast<int>(slots.size());
    std::vector<Slot> found;
    dl_iterate_phdr(visit, &found);
    for (const Slot& slot : found) {
      if (write_slot(slot, reinterpret_cast<void*>(&construct_saved_variable))) {
        slots.push_back(slot);
      }
    }
    return static_cast<int>(slots.size());
  } catch (...) {
    return -1;
  }
}

/// Whether the calling thread's forward pass counts the tensors it saves (1) or not (0).
void mp_saved_counting(int on) { counting = on != 0; }

}  // extern "C"
