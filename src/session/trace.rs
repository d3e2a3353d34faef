//! `memprof run --trace FILE`: the measured device's allocations and frees as the peak tracker
//! saw them, in order, with the line of each allocation, written as an allocation trace
//! (`model::trace`) for `memprof fit`; with what the allocator itself read at the end.
use crate::capture::peak::{self, TraceKind};
use crate::model::profile::Profile;
use crate::model::trace::{Measured, Trace, TraceDevice, TraceEvent, TRACE_VERSION};
use crate::output::{self, file};
use crate::python::sites;
use std::path::Path;

/// The most events a trace keeps (32 bytes each while recording): beyond, it is cut and says so.
pub const MAX_EVENTS: usize = 20_000_000;

/// Writes the trace; a warning for the report when it could not be written, or is cut.
pub fn write(path: &Path, profile: &Profile) -> Option<String> {
    let log = peak::with(|t| t.take_trace()).flatten()?;
    crate::torch::cuda_trace_enable(false);
    let places = sites::sites();
    let at = |site: u32| {
        places
            .get((site as usize).wrapping_sub(1))
            .map(|s| format!("{}:{}", s.place.file, s.place.line))
    };
    let (mut requested, mut allocations) = (0usize, 0usize);
    let events = log
        .events
        .iter()
        .map(|r| {
            let stream = Some(u64::from(r.stream));
            // The allocator's own segment events: their bytes, and a new segment's stream.
            let bytes = Some(r.bytes.unsigned_abs());
            let mut e = TraceEvent::default();
            match r.kind {
                TraceKind::Block => {}
                TraceKind::SegmentAlloc => (e.segment_alloc, e.stream) = (bytes, stream),
                TraceKind::SegmentMap => (e.segment_map, e.stream) = (bytes, stream),
                TraceKind::SegmentFree => e.segment_free = bytes,
                TraceKind::SegmentUnmap => e.segment_unmap = bytes,
            }
            if r.kind != TraceKind::Block {
                return e;
            }
            if r.bytes > 0 {
                allocations += 1;
                // The size asked for where the allocator's trace entry gave it (CUDA) or the
                // tensor's bytes are exact (CPU), else the block's.
                let size = if r.requested > 0 {
                    requested += 1;
                    r.requested
                } else {
                    r.bytes
                };
                TraceEvent {
                    alloc: Some(r.serial),
                    size: Some(size as u64),
                    block: (r.bytes != size).then_some(r.bytes as u64),
                    stream,
                    at: at(r.site),
                    module: (r.module as usize)
                        .checked_sub(1)
                        .and_then(|e| log.module_names.get(e).cloned()),
                    ..TraceEvent::default()
                }
            } else {
                TraceEvent {
                    free: Some(r.serial),
                    ..TraceEvent::default()
                }
            }
        })
        .collect();
    let sizes = if requested == allocations {
        "requested".to_string()
    } else if requested == 0 {
        "block".to_string()
    } else {
        format!(
            "requested, block for {} of {allocations} allocations",
            allocations - requested
        )
    };
    let device = &profile.metadata.device;
    let cuda = device.kind == "cuda";
    let index = device.index.filter(|_| cuda);
    // Read once: the driver's free bytes move with the device's other users.
    let memory = index.and_then(crate::torch::device_memory_info);
    let measured = index.and_then(|i| measured(i, memory));
    let trace = Trace {
        memprof_trace: TRACE_VERSION,
        torch_version: Some(profile.metadata.torch_version.clone()),
        device: Some(TraceDevice {
            name: device.name.clone(),
            // What the allocator could have reserved in this run: the device less what was
            // in use outside it at the end.
            total_memory: memory.and_then(|(_, total)| {
                let outside = measured.as_ref()?.outside_allocator_bytes?;
                Some(total - outside)
            }),
            device_memory: memory.map(|(_, total)| total),
        }),
        settings: ["PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"]
            .iter()
            .find_map(|k| std::env::var(k).ok()),
        measured,
        events,
        truncated: log.truncated,
        sizes: Some(sizes),
        simulated: None,
    };
    let text = serde_json::to_string(&trace).expect("traces serialise") + "\n";
    if let Err(e) = file::write_atomically(path, &text, file::Written::Trace) {
        return Some(format!("the trace could not be written: {}", e.message));
    }
    output::note(&format!(
        "trace written to {} ({} events); replay it: memprof fit {} --memory SIZE",
        path.display(),
        log.events.len(),
        path.display()
    ));
    log.truncated.then(|| {
        format!(
            "the trace stopped at {MAX_EVENTS} events: it is not whole, and memprof fit refuses it \
             (record fewer steps: a trace covers the whole run)"
        )
    })
}

/// The allocator's own reading of the device at the end: what a replay on it must give; with
/// the driver's (free, total) bytes, what was in use outside it.
fn measured(index: i32, memory: Option<(i64, i64)>) -> Option<Measured> {
    let get = crate::torch::device_stats_now(index)?;
    let outside =
        memory.and_then(|(free, total)| Some(total - free - get("reserved_bytes.all.current")?));
    Some(Measured {
        reserved_bytes_peak: get("reserved_bytes.all.peak"),
        allocated_bytes_peak: get("allocated_bytes.all.peak"),
        num_alloc_retries: get("num_alloc_retries"),
        segment_peak: get("segment.all.peak"),
        outside_allocator_bytes: outside,
    })
}
