// Included first in every file of the shim (-include): keeps the library loadable on the glibc
// of torch's own wheels (manylinux_2_28), whatever glibc builds it.
//
// - dlopen, dlsym, dladdr and dlclose moved from libdl into libc in glibc 2.34, under a new
//   symbol version; the shim binds their first version, which every glibc since 2.2.5 has
//   (libdl's before 2.34, a compatibility symbol of libc's since).
// - libstdc++'s headers (GCC 11 and newer) read glibc 2.32's __libc_single_threaded to skip
//   atomic operations in a process without threads. The shim has its own copy, always 0 ("not
//   single-threaded"), so the reference binds here, not to glibc 2.32: the atomics are always
//   used, which is always correct (memprof's processes have threads anyway).
#pragma once

#if defined(__x86_64__) && defined(__linux__)
__asm__(".symver dlopen,dlopen@GLIBC_2.2.5");
__asm__(".symver dlsym,dlsym@GLIBC_2.2.5");
__asm__(".symver dladdr,dladdr@GLIBC_2.2.5");
__asm__(".symver dlclose,dlclose@GLIBC_2.2.5");
__asm__(".symver dlerror,dlerror@GLIBC_2.2.5");
#endif

#ifdef __cplusplus
extern "C" {
#endif
__attribute__((visibility("hidden"), weak)) char __libc_single_threaded = 0;
#ifdef __cplusplus
}
#endif
