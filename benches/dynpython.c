/* python3.12 linked against the shared libpython3.12.so, as memprof is: tells the shared
   library's cost from memprof's own set-up. */
#include <wchar.h>
extern int Py_BytesMain(int argc, char **argv);
int main(int argc, char **argv) { return Py_BytesMain(argc, argv); }
