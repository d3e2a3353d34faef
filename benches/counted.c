/* Marks for callgrind (benches/module_call_instructions.py, which builds this with cc): what
   runs between memprof_counted_begin() and memprof_counted_end(label) is collected, and its
   counts dumped under `label` (callgrind started with --collect-atstart=no). Outside valgrind
   both do nothing. */
#include <valgrind/callgrind.h>

void memprof_counted_begin(void) { CALLGRIND_TOGGLE_COLLECT; }

void memprof_counted_end(const char *label) {
  CALLGRIND_TOGGLE_COLLECT;
  CALLGRIND_DUMP_STATS_AT(label);
}
