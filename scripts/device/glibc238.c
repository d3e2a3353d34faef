/* For linking the GPU machine's static libpython3.12.a (built on glibc 2.39) here, on glibc 2.36:
   the C23 entry points that glibc 2.38 added and the archive calls. Each one forwards to glibc's
   own where the running glibc has it (the GPU machine's does, so the binary behaves as python3
   there), else to the classic function (which differs only in C23's "0b" prefixes). Only
   scripts/build-device.sh links this; a build on the machine itself needs none of it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <wchar.h>

#define FORWARD(type, name, fallback) \
  static type resolve_##name(void) { \
    type f = (type)dlvsym(RTLD_NEXT, #name, "GLIBC_2.38"); \
    return f ? f : fallback; \
  }

typedef long (*strtol_fn)(const char *, char **, int);
typedef unsigned long (*strtoul_fn)(const char *, char **, int);
typedef long (*wcstol_fn)(const wchar_t *, wchar_t **, int);
typedef int (*vsscanf_fn)(const char *, const char *, va_list);
FORWARD(strtol_fn, __isoc23_strtol, strtol)
FORWARD(strtoul_fn, __isoc23_strtoul, strtoul)
FORWARD(wcstol_fn, __isoc23_wcstol, wcstol)
FORWARD(vsscanf_fn, __isoc23_vsscanf, vsscanf)

long __isoc23_strtol(const char *s, char **end, int base) {
  static strtol_fn f;
  if (!f) f = resolve___isoc23_strtol();
  return f(s, end, base);
}
unsigned long __isoc23_strtoul(const char *s, char **end, int base) {
  static strtoul_fn f;
  if (!f) f = resolve___isoc23_strtoul();
  return f(s, end, base);
}
long __isoc23_wcstol(const wchar_t *s, wchar_t **end, int base) {
  static wcstol_fn f;
  if (!f) f = resolve___isoc23_wcstol();
  return f(s, end, base);
}
int __isoc23_sscanf(const char *s, const char *fmt, ...) {
  static vsscanf_fn f;
  if (!f) f = resolve___isoc23_vsscanf();
  va_list ap;
  va_start(ap, fmt);
  int n = f(s, fmt, ap);
  va_end(ap);
  return n;
}
