//! What `memprof --version` says beyond the version: the Python that `run` embeds and how its
//! libpython is linked (build/libpython.rs), the first thing to know about a speed or start-up
//! report. Included by both binaries (the `memprof` binary links nothing of the native core).
pub const LONG: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\nPython ",
    env!("MEMPROF_PYTHON_VERSION"),
    ", libpython: ",
    env!("MEMPROF_LIBPYTHON_LINK")
);
