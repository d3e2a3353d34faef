//! `memprof-embedded`: the `memprof` command with the native core linked in, libtorch and CPython
//! embedded. The `memprof` binary hands `memprof run` to it (the same arguments); it does the
//! other commands too, as `memprof` does.
#[path = "../version.rs"]
mod version;

fn main() {
    memprof::cli_main(memprof::cli::argv::from_env(), version::LONG)
}
