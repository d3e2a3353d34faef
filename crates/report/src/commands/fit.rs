//! `memprof fit TRACE --memory SIZE [--alloc-conf KEY:VALUE,...]`: will it fit? The trace
//! replayed on the allocator's model (analysis::allocator) on a device of SIZE with those
//! settings; exit 5 when it runs out of memory there.
use super::files;
use crate::analysis::allocator::{self, Event, Settings};
use crate::cli::FitArgs;
use crate::error::{exit_code, Error, Result};
use crate::model::prediction::{PredictedOom, Prediction, PREDICTION_SEMANTICS};
use crate::model::trace::{Measured, Trace, TraceEvent, TRACE_VERSION};
use crate::model::units;
use crate::output::terminal;
use crate::render::{self, Format};
use std::path::Path;

pub fn fit(args: FitArgs) -> Result<i32> {
    let format = Format::resolve(args.format, args.output.as_deref());
    let trace = read_trace(&args.trace)?;
    let events = events_of(&trace)?;
    let conf = args
        .alloc_conf
        .clone()
        .or_else(|| trace.settings.clone())
        .unwrap_or_default();
    let settings = Settings::parse(&conf).map_err(|e| {
        Error::usage(format!("--alloc-conf: {}", e.0))
            .hint("write the settings as PYTORCH_CUDA_ALLOC_CONF does: KEY:VALUE,...")
    })?;
    let memory = match &args.memory {
        Some(text) => units::parse_size(text).filter(|&n| n > 0).ok_or_else(|| {
            Error::usage(format!("--memory {text} is not a size"))
                .hint("write it as 24GiB, 80GB or a number of bytes")
        })?,
        None => trace
            .device
            .as_ref()
            .and_then(|d| d.total_memory)
            .ok_or_else(|| {
                Error::usage("the trace does not say its device's memory")
                    .hint("pass the device's size: --memory 24GiB")
            })?,
    };
    let replay = allocator::replay(&events, memory as u64, settings).map_err(|e| {
        Error::usage(format!("'{}': {e}", args.trace.display()))
            .hint("pass a trace written by memprof, whole")
    })?;
    let s = &replay.stats;
    let prediction = Prediction {
        semantics: PREDICTION_SEMANTICS.into(),
        trace: args.trace.display().to_string(),
        events: events.len() as u64,
        memory_bytes: memory,
        settings: conf,
        fits: replay.out_of_memory.is_none(),
        predicted: Measured {
            reserved_bytes_peak: Some(s.reserved_bytes_peak as i64),
            allocated_bytes_peak: Some(s.allocated_bytes_peak as i64),
            num_alloc_retries: Some(s.num_alloc_retries as i64),
            segment_peak: Some(s.segment_peak as i64),
        },
        measured: trace.measured.clone(),
        out_of_memory: replay.out_of_memory.map(|(i, oom)| PredictedOom {
            event: i as u64,
            at: trace.events[i].at.clone(),
            requested_bytes: oom.requested as i64,
            allocation_bytes: oom.allocation as i64,
            allocated_bytes: oom.allocated_bytes as i64,
            reserved_bytes: oom.reserved_bytes as i64,
        }),
    };
    let width = args.output.is_none().then(terminal::width).flatten();
    files::deliver(
        &render::prediction::render(&prediction, format, width),
        args.output.as_deref(),
        "prediction",
    )?;
    Ok(if prediction.fits {
        0
    } else {
        exit_code::DOES_NOT_FIT
    })
}

fn read_trace(path: &Path) -> Result<Trace> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::usage(format!("cannot read '{}': {e}", path.display())))?;
    let parsed: std::result::Result<Trace, String> = if text.trim_start().starts_with('{') {
        serde_json::from_str(&text).map_err(|e| e.to_string())
    } else {
        serde_yaml::from_str(&text).map_err(|e| e.to_string())
    };
    let trace = parsed.map_err(|e| {
        Error::usage(format!(
            "'{}' is not a memprof allocation trace ({e})",
            path.display()
        ))
        .hint("pass a file with memprof_trace, events: [{alloc, size, stream}, {free}]")
    })?;
    if trace.truncated {
        return Err(Error::usage(format!(
            "'{}' is truncated: its recording stopped at its limit of events",
            path.display()
        ))
        .hint("record a shorter run (--warmup/--calls), or fewer steps"));
    }
    if trace.memprof_trace != TRACE_VERSION {
        return Err(Error::usage(format!(
            "'{}' is a version {} trace; this memprof reads version {TRACE_VERSION}",
            path.display(),
            trace.memprof_trace
        ))
        .hint("replay it with the memprof that wrote it"));
    }
    Ok(trace)
}

fn events_of(trace: &Trace) -> Result<Vec<Event>> {
    trace
        .events
        .iter()
        .enumerate()
        .map(|(i, e)| match e {
            TraceEvent {
                alloc: Some(id),
                free: None,
                size: Some(size),
                stream,
                ..
            } => Ok(Event::Alloc {
                id: *id,
                size: *size,
                stream: stream.unwrap_or(0),
            }),
            TraceEvent {
                free: Some(id),
                alloc: None,
                ..
            } => Ok(Event::Free { id: *id }),
            _ => Err(Error::usage(format!(
                "event {i} of the trace is neither {{alloc, size}} nor {{free}}"
            ))
            .hint("pass a trace written by memprof")),
        })
        .collect()
}
