//! The end of `memprof run --simulate-gpu`: the simulated run's trace replayed on the
//! allocator's model of the GPU it stood in for, and said as `memprof fit` says a prediction
//! (the peak by line and category, the lines that read placeholder values), in the run's format
//! and to its -o file; the run's own report (of the CPU) is not the question asked.
use crate::cli::config::{RunConfig, Simulation};
use crate::cli::FitArgs;
use crate::error::exit_code;
use memprof_report::commands::fit;

/// The exit code: the program's failure first, then the prediction's (5: it does not fit).
pub fn finish(config: &RunConfig, simulation: &Simulation, program_exit: i32) -> i32 {
    let args = FitArgs {
        traces: vec![simulation.trace.clone()],
        batches: Vec::new(),
        scale: None,
        max_batch: false,
        memory: None,
        alloc_conf: None,
        format: config.report.printed.or(Some(config.report.file_format)),
        output: config.report.output.clone(),
    };
    let predicted = if simulation.trace.exists() {
        fit::fit(args).unwrap_or_else(|e| {
            eprintln!("{e}");
            e.code
        })
    } else {
        eprintln!(
            "memprof: the simulated run wrote no trace ({}): the program ended before memprof \
             could write it",
            simulation.trace.display()
        );
        exit_code::USAGE
    };
    if !simulation.keep_trace {
        let _ = std::fs::remove_file(&simulation.trace);
    }
    if program_exit != 0 {
        program_exit
    } else {
        predicted
    }
}
