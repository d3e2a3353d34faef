//! memprof: line-level memory profiler for PyTorch programs. The command is the library's
//! `cli_main`; the same core is also the `memprof._native` Python extension.
fn main() {
    memprof::cli_main()
}
