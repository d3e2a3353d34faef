//! `memprof fit TRACE --memory SIZE [--alloc-conf KEY:VALUE,...]`: will it fit? The trace
//! replayed on the allocator's model (analysis::allocator) on a device of SIZE with those
//! settings; exit 5 when it runs out of memory there.
use super::files;
use crate::analysis::allocator::{self, scale, Allocator, Event, Settings};
use crate::cli::FitArgs;
use crate::error::{exit_code, Error, Result};
use crate::model::prediction::{
    FitCheck, LiveAt, PredictedOom, Prediction, UnmatchedAllocations, PREDICTION_SEMANTICS,
};
use crate::model::saved::from_json_or_yaml;
use crate::model::trace::{Measured, Trace, TraceEvent, TRACE_VERSION};
use crate::model::units;
use crate::output::terminal;
use crate::render::{self, Format};
use std::path::Path;

pub fn fit(args: FitArgs) -> Result<i32> {
    let format =
        Format::resolve(args.format, args.output.as_deref()).for_document("a prediction")?;
    let traces: Vec<Trace> = args
        .traces
        .iter()
        .map(|p| read_trace(p))
        .collect::<Result<_>>()?;
    let mut events: Vec<Vec<Event>> = traces.iter().map(events_of).collect::<Result<_>>()?;
    let first = &traces[0];
    let conf = args
        .alloc_conf
        .clone()
        .or_else(|| first.settings.clone())
        .unwrap_or_default();
    let settings = Settings::parse(&conf).map_err(|e| {
        Error::usage(format!("--alloc-conf: {}", e.0))
            .hint("write the settings as PYTORCH_CUDA_ALLOC_CONF does: KEY:VALUE,...")
    })?;
    let memory = memory_of(&args, first)?;
    let name = args
        .traces
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let scaling = args.scale.is_some() || args.max_batch;
    let mut unmatched = None;
    let mut third = None;
    // The trace whose events were replayed (a synthesized trace keeps its template's): where an
    // event's line is read.
    let mut replayed_from = first;
    let (replayed, batch, max_batch, not_affine, measured) = if scaling || args.traces.len() > 1 {
        let ats: Vec<Vec<Option<String>>> = traces
            .iter()
            .map(|t| t.events.iter().map(|e| e.at.clone()).collect())
            .collect();
        let traced = traced(&args, &events, &ats)?;
        let bad =
            |e: String| Error::usage(e).hint("record the traces from the same program and steps");
        let (batch, max_batch) = if args.max_batch {
            match scale::max_batch(&traced, memory as u64, &settings, MAX_BATCH).map_err(bad)? {
                Some(n) => (n, Some(n)),
                None => {
                    return Err(Error {
                        message: format!(
                            "not even batch 1 fits in {} with these traces",
                            units::bytes(memory)
                        ),
                        hint: Some("a larger --memory, or other --alloc-conf settings".into()),
                        code: exit_code::DOES_NOT_FIT,
                    })
                }
            }
        } else {
            (args.scale.expect("--scale or --max-batch"), None)
        };
        let scaled = scale::synthesize(&traced, batch).map_err(bad)?;
        replayed_from = &traces[scale::template(&traced)];
        let u = scaled.unmatched;
        unmatched = Some(UnmatchedAllocations {
            first_allocations: u.first_allocations,
            first_bytes: u.first_bytes,
            first_sized_alike: u.first_sized_alike,
            second_allocations: u.other_allocations,
            second_bytes: u.other_bytes,
        });
        third = scaled
            .third
            .map(|(b, events)| (b, events, traced[2].events.to_vec()));
        (
            scaled.events,
            Some(batch),
            max_batch,
            scaled.not_affine,
            None,
        )
    } else {
        (
            std::mem::take(&mut events[0]),
            None,
            None,
            Vec::new(),
            first.measured.clone(),
        )
    };
    let check = match third {
        Some((batch, synthesized, traced)) => {
            let replayed = |events: &[Event]| {
                allocator::replay(events, memory as u64, settings.clone())
                    .map(|r| measured_of(&r.stats))
                    .map_err(|e| Error::usage(format!("'{name}': {e}")))
            };
            Some(FitCheck {
                batch,
                predicted: replayed(&synthesized)?,
                traced: replayed(&traced)?,
            })
        }
        None => None,
    };
    let settings_kept = settings.clone();
    let replay = allocator::replay(&replayed, memory as u64, settings).map_err(|e| {
        Error::usage(format!("'{name}': {e}")).hint("pass a trace written by memprof, whole")
    })?;
    let s = &replay.stats;
    let prediction = Prediction {
        semantics: PREDICTION_SEMANTICS.into(),
        trace: name,
        events: replayed.len() as u64,
        memory_bytes: memory,
        settings: conf,
        fits: replay.out_of_memory.is_none(),
        predicted: measured_of(s),
        measured,
        out_of_memory: replay.out_of_memory.map(|(i, oom)| PredictedOom {
            event: i as u64,
            at: replayed_from.events[i].at.clone(),
            requested_bytes: oom.requested as i64,
            allocation_bytes: oom.allocation as i64,
            allocated_bytes: oom.allocated_bytes as i64,
            reserved_bytes: oom.reserved_bytes as i64,
            live: live_by_line(&replay.live_at_oom, replayed_from),
        }),
        batch,
        traced_batches: if batch.is_some() {
            args.batches.clone()
        } else {
            Vec::new()
        },
        max_batch,
        not_affine,
        unmatched,
        check,
        simulated: first.simulated.clone(),
        peak_live: match (&first.simulated, batch) {
            (Some(_), None) => live_at_peak(first, &Allocator::new(memory as u64, settings_kept)),
            _ => Vec::new(),
        },
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

/// A replay's numbers, as a traced run's are written.
fn measured_of(s: &allocator::Stats) -> Measured {
    Measured {
        reserved_bytes_peak: Some(s.reserved_bytes_peak as i64),
        allocated_bytes_peak: Some(s.allocated_bytes_peak as i64),
        num_alloc_retries: Some(s.num_alloc_retries as i64),
        segment_peak: Some(s.segment_peak as i64),
        outside_allocator_bytes: None,
    }
}

/// The allocations live at an out-of-memory error, summed by the line that made them (the
/// lines of the trace replayed: a synthesized trace keeps its template's events), largest first.
fn live_by_line(live: &[(u64, u64)], trace: &Trace) -> Vec<LiveAt> {
    let at: std::collections::HashMap<u64, &str> = trace
        .events
        .iter()
        .filter_map(|e| Some((e.alloc?, e.at.as_deref().unwrap_or("unknown"))))
        .collect();
    let mut by_line: Vec<LiveAt> = Vec::new();
    for &(id, bytes) in live {
        let line = at.get(&id).copied().unwrap_or("unknown");
        match by_line.iter_mut().find(|l| l.at == line) {
            Some(l) => {
                l.bytes += bytes as i64;
                l.blocks += 1;
            }
            None => by_line.push(LiveAt {
                at: line.to_string(),
                bytes: bytes as i64,
                blocks: 1,
                category: None,
            }),
        }
    }
    by_line.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.at.cmp(&b.at)));
    by_line
}

/// What was live when the allocated bytes peaked (each allocation as the allocator rounds it),
/// by line and category, largest first: a simulated run's peak, explained.
fn live_at_peak(trace: &Trace, model: &Allocator) -> Vec<LiveAt> {
    let block = |e: &TraceEvent| model.round_size(e.size.unwrap_or(0));
    let (mut now, mut peak, mut peak_at) = (0u64, 0u64, 0usize);
    let mut sizes = std::collections::HashMap::new();
    for (i, e) in trace.events.iter().enumerate() {
        if let Some(id) = e.alloc {
            let b = block(e);
            sizes.insert(id, b);
            now += b;
            if now > peak {
                (peak, peak_at) = (now, i);
            }
        } else if let Some(id) = e.free {
            now -= sizes.remove(&id).unwrap_or(0);
        }
    }
    let mut live = std::collections::BTreeMap::new();
    for e in trace.events.iter().take(peak_at + 1) {
        if let Some(id) = e.alloc {
            live.insert(id, e);
        } else if let Some(id) = e.free {
            live.remove(&id);
        }
    }
    let mut rows: Vec<LiveAt> = Vec::new();
    for e in live.values() {
        let at = e.at.as_deref().unwrap_or("unknown");
        let category = e.category.clone();
        match rows
            .iter_mut()
            .find(|r| r.at == at && r.category == category)
        {
            Some(r) => {
                r.bytes += block(e) as i64;
                r.blocks += 1;
            }
            None => rows.push(LiveAt {
                at: at.to_string(),
                bytes: block(e) as i64,
                blocks: 1,
                category,
            }),
        }
    }
    rows.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.at.cmp(&b.at)));
    rows
}

/// The largest batch --max-batch tries.
const MAX_BATCH: u64 = 1 << 24;

/// --memory, or the traced device's.
fn memory_of(args: &FitArgs, trace: &Trace) -> Result<i64> {
    match &args.memory {
        Some(text) => units::parse_size(text).filter(|&n| n > 0).ok_or_else(|| {
            Error::usage(format!("--memory {text} is not a size"))
                .hint("write it as 24GiB, 80GB or a number of bytes")
        }),
        None => trace
            .device
            .as_ref()
            .and_then(|d| d.total_memory)
            .ok_or_else(|| {
                Error::usage("the trace does not say its device's memory")
                    .hint("pass the device's size: --memory 24GiB")
            }),
    }
}

/// The traces with their batch sizes, for --scale and --max-batch.
fn traced<'a>(
    args: &FitArgs,
    events: &'a [Vec<Event>],
    ats: &'a [Vec<Option<String>>],
) -> Result<Vec<scale::Traced<'a>>> {
    let usage = |m: &str| {
        Err(Error::usage(m.to_string())
            .hint("memprof fit a.json b.json --batches 8,16 --scale 64 (or --max-batch)"))
    };
    if args.scale.is_none() && !args.max_batch {
        return usage("several traces are for another batch size: add --scale N or --max-batch");
    }
    if events.len() < 2 {
        return usage("another batch size needs traces at two or three batch sizes");
    }
    if args.batches.len() != events.len() {
        return usage("--batches gives each trace's batch size, in their order");
    }
    Ok(args
        .batches
        .iter()
        .zip(events.iter().zip(ats))
        .map(|(&batch, (events, at))| scale::Traced { batch, events, at })
        .collect())
}

fn read_trace(path: &Path) -> Result<Trace> {
    let text = files::read_text(path)?;
    let mut trace: Trace = from_json_or_yaml(&text).map_err(|e| {
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
        .hint("record a shorter run (fewer steps: a trace covers the whole run)"));
    }
    if trace.memprof_trace != TRACE_VERSION {
        return Err(Error::usage(format!(
            "'{}' is a version {} trace; this memprof reads version {TRACE_VERSION}",
            path.display(),
            trace.memprof_trace
        ))
        .hint("replay it with the memprof that wrote it"));
    }
    // The allocator's own segment events are the run's, for reading: the model makes its own.
    trace.events.retain(|e| !e.is_segment_event());
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
