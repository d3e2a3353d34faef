//! The whole device at the run's peak, from the driver's count down (CUDA): the context and
//! what lies outside torch's allocator (the driver's readings at the first allocation and at the
//! end, `capture::device_use`), the allocator's reservation at the peak, what it handed out and
//! what it kept cached; on the CPU, the resident high-water mark against the tensors' bytes.
use crate::capture::device_use;
use crate::capture::host::HostReader;
use crate::model::peak::{CudaSplit, DeviceSplit, HostSplit, Peak};
use crate::torch::{self, driver};

/// The split for `peak`, measured now (the run just ended); None where the driver cannot be
/// read (no first reading: nothing was allocated on the device while measuring).
pub fn measure(peak: &Peak) -> Option<DeviceSplit> {
    let device = torch::reporter_device();
    if device < 0 {
        let rss_peak = HostReader::new(true).read().rss_high_water;
        return (rss_peak > 0).then(|| {
            DeviceSplit::Cpu(HostSplit {
                rss_peak_bytes: rss_peak,
                tensor_bytes: peak.allocated_bytes,
                other_bytes: rss_peak - peak.allocated_bytes,
            })
        });
    }
    let first = device_use::first()?;
    let end = driver::device_use(device)?;
    let read = torch::device_stats_now(device)?;
    let stat = |key: &str| read(key).unwrap_or(0);
    let reserved_at_end = stat("reserved_bytes.all.current");
    // A per-process count at the end and a device-wide one at the start (or the reverse) do not
    // subtract: both are read the same way or the split is not made.
    if first.driver.per_process != end.per_process {
        return None;
    }
    let context = (first.driver.bytes - first.reserved).max(0);
    let outside = (end.bytes - reserved_at_end - context).max(0);
    Some(DeviceSplit::Cuda(CudaSplit {
        process_bytes: context + outside + peak.reserved_bytes,
        driver_bytes_at_end: end.bytes,
        driver_source: if end.per_process {
            "nvml_process"
        } else {
            "device_used"
        }
        .into(),
        context_bytes: context,
        outside_allocator_bytes: outside,
        reserved_bytes: peak.reserved_bytes,
        allocated_bytes: peak.allocated_bytes,
        cached_bytes: peak.reserved_bytes - peak.allocated_bytes,
        inactive_split_peak_bytes: stat("inactive_split_bytes.all.peak"),
        reserved_bytes_at_end: reserved_at_end,
    }))
}
