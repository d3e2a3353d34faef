//! `--gather`: every rank's report on rank 0's node, through torchrun's own store and no shared
//! filesystem. Each rank other than 0 hands its report (as written to its file) to the store at
//! exit; rank 0 waits for them up to `--gather-timeout`, writes each by `-o`'s name for that
//! rank as it arrives, and names the ranks that never reported. The store's side is Python's
//! `torch.distributed.TCPStore` (src/python/py/gather.py); a failure is said and never loses the
//! rank's own file, which was written first.
use crate::cli::config::{Gather, RunConfig};
use crate::model::merged::rank_list;
use crate::model::profile::ProcessInfo;
use crate::output::file::{self, Written};
use crate::output::{self, ranks};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCFunction, PyTuple};
use std::ffi::CString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

const GATHER: &str = include_str!("../python/py/gather.py");

/// Hands this rank's report (`text`, as its file has it) to rank 0, or (rank 0) gathers the
/// others'.
pub fn gather(text: &str, config: &RunConfig, plan: &Gather) {
    let me = &config.process;
    let format = config.report.file_format;
    let outcome = Python::attach(|py| -> PyResult<()> {
        let code = CString::new(GATHER).expect("no NUL");
        let module = PyModule::from_code(py, &code, c"<memprof gather>", c"_memprof_gather")?;
        if me.rank != 0 {
            let header = serde_json::to_string(me).expect("process info serialises");
            module.call_method1(
                "hand_over",
                (me.rank, header, PyBytes::new(py, text.as_bytes())),
            )?;
            return Ok(());
        }
        let kept = Arc::new(Mutex::new(Kept::default()));
        let take = {
            let kept = Arc::clone(&kept);
            let plan = plan.clone();
            let extension = format.extension();
            PyCFunction::new_closure(
                py,
                None,
                None,
                move |args: &Bound<'_, PyTuple>, _| -> PyResult<()> {
                    let (rank, header, payload): (u32, String, Vec<u8>) = args.extract()?;
                    let written = write_rank_report(&plan, extension, &header, &payload);
                    let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
                    match written {
                        Ok(path) => kept.written.push(path),
                        Err(why) => kept.failed.push(format!("rank {rank}: {why}")),
                    }
                    Ok(())
                },
            )?
        };
        let others: Vec<u32> = (1..me.world_size).collect();
        let missing: Vec<u32> = module
            .call_method1("collect", (others, plan.timeout_seconds as f64, take))?
            .extract()?;
        let kept = kept.lock().unwrap_or_else(|e| e.into_inner());
        say_what_was_gathered(config, plan, &kept, &missing);
        Ok(())
    });
    if let Err(e) = outcome {
        let why = Python::attach(|py| e.value(py).to_string());
        output::note(&if me.rank == 0 {
            format!(
                "--gather: rank 0 could not gather the other ranks' reports ({why}); each is on \
                 its own node"
            )
        } else {
            format!(
                "--gather: rank {} could not hand its report to rank 0 ({why}); it is on this \
                 node only",
                me.rank
            )
        });
    }
}

/// What rank 0 did with the reports that arrived.
#[derive(Default)]
struct Kept {
    written: Vec<PathBuf>,
    failed: Vec<String>,
}

/// Writes a rank's report where `-o` names it for that rank; the path.
fn write_rank_report(
    plan: &Gather,
    extension: &str,
    header: &str,
    payload: &[u8],
) -> Result<PathBuf, String> {
    let process: ProcessInfo = serde_json::from_str(header).map_err(|e| e.to_string())?;
    let (path, _) = ranks::output_path(Some(&plan.template), &process, extension)
        .map_err(|e| e.message.clone())?;
    let path = path.expect("a template names a file");
    file::write_bytes_atomically(&path, payload, Written::Report).map_err(|e| e.message)?;
    Ok(path)
}

fn say_what_was_gathered(config: &RunConfig, plan: &Gather, kept: &Kept, missing: &[u32]) {
    let world = config.process.world_size;
    let folder = plan
        .template
        .parent()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    output::note(&format!(
        "gathered {} of {world} ranks' reports into {folder} through torchrun's store{}",
        kept.written.len() + 1,
        if missing.is_empty() && kept.failed.is_empty() {
            String::new()
        } else {
            " (see below)".to_string()
        }
    ));
    if !missing.is_empty() {
        output::note(&format!(
            "--gather: no report from rank{} {} within {} s (a rank that died before its end, or \
             ran without memprof; what it wrote is on its own node)",
            if missing.len() == 1 { "" } else { "s" },
            rank_list(missing),
            plan.timeout_seconds
        ));
    }
    for failure in &kept.failed {
        output::note(&format!(
            "--gather: could not write the report of {failure}"
        ));
    }
}
