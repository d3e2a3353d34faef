//! memprof's native core: the capture (recorder, allocator hooks, the libtorch shim), the embedded
//! interpreter and the profiling session, on top of `memprof_report` (the schema, the command
//! line, analyses and renderings, re-exported here under their own names). Two front ends share
//! it: `memprof run`, which embeds CPython (`cli_main`, the `memprof-embedded` binary that the
//! `memprof` command hands `run` to), and the `memprof._native` Python extension, loaded into
//! an interpreter that is already running (`inprocess`).
// The allocator's hook reads the allocating thread's frames while other threads run Python; with
// the GIL that is safe, since each thread's frames change only on that thread and code objects
// stay alive while they run. Free-threaded CPython gives neither guarantee (and thread-local
// bytecode moves the instructions), so memprof refuses it instead of reading frames wrongly.
#[cfg(Py_GIL_DISABLED)]
compile_error!(
    "memprof does not support free-threaded CPython (3.13t, 3.14t): it reads Python frames from \
     libtorch's allocator, which needs the GIL's guarantees; build with the default (GIL) CPython"
);

mod capture;
mod commands;
mod inprocess;
mod python;
mod session;
mod torch;

pub use memprof_report::{analysis, cli, error, model, output, render};

/// The `memprof` command in full (`run` included, with the embedded interpreter), for `args`
/// (without the program's name); `long_version`: what `--version` says. Never returns.
pub fn cli_main(args: Vec<String>, long_version: &'static str) -> ! {
    python::launcher::take_over();
    let cli = memprof_report::commands::parse(args, long_version);
    let code = match memprof_report::commands::dispatch(cli, commands::run::run) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e}");
            e.code
        }
    };
    python::exit(code);
}
