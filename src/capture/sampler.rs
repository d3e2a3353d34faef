//! How memprof measures one execution of a line: the plan that maps each chosen stat to the
//! numbers it is computed from, reading those numbers (a sample of the allocator's stats, the
//! allocation reporter's tally, host RSS and, with `--collectives`, the collective counters),
//! which CUDA device is read, the running peaks of an open execution (a
//! window), and how executions combine into a line's aggregate.
use crate::capture::host::HostReader;
use crate::model::stats::{self, Field, StatDef, CUDA_STAT_COUNT};
use crate::torch::{collectives, tally, Linked, Runtime, TALLY_LEN};

pub use crate::model::device::Source;

/// How one peak column learns the highest value reached since the previous sample.
#[derive(Clone, Copy, Debug)]
enum PeakSource {
    /// memprof's own tally of the allocator's reports (CPU), read at `max`.
    Tally { max: usize },
    /// The CUDA allocator's reports (their totals' maximum at `max`), checked against the
    /// device-wide peak at `global`: when that rose since the previous sample, it is exact.
    Reports { max: usize, global: usize },
    /// The device-wide peak at `global`, reset after every sample.
    Reset { global: usize },
    /// Host RSS: the process's high-water mark at `high_water` when it rose since the previous
    /// sample (the peak was reached then), else the sampled RSS.
    HostHighWater { high_water: usize },
}

/// How one column is read from a sample.
#[derive(Clone, Copy, Debug)]
enum Probe {
    /// The value at `at` at the end of the execution.
    Level { at: usize },
    /// The increase of the monotonic counter at `at` during the execution.
    Amount { at: usize },
    /// The running maximum kept per window; starts at the value at `current`.
    Peak {
        current: usize,
        source: PeakSource,
        slot: usize,
    },
}

/// One line's aggregate over its hits.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LineAgg {
    pub hits: u64,
    pub raised: u64,
    pub delta: i64,
    /// Per column (`Recorder::columns`), aggregated by the column's rule.
    pub values: Vec<i64>,
    /// With `--collectives`: bytes per kind, then calls per kind, summed over hits.
    pub collectives: Vec<i64>,
    measured: bool,
}

/// What an open execution of a line has measured so far.
pub struct Window {
    /// The sample at its start.
    start: Vec<i64>,
    /// Per peak column, the highest value reached so far.
    peaks: Vec<i64>,
}

/// The measurement plan and the latest sample, read through `R` (libtorch, or a test's stand-in).
pub struct Sampler<R: Runtime = Linked> {
    runtime: R,
    source: Source,
    /// The columns measured: the chosen stats, then allocated_bytes.all.peak if not chosen
    /// (the function's total peak in the header needs it).
    columns: Vec<StatDef>,
    probes: Vec<Probe>,
    shown: usize,
    total_peak_column: usize,
    delta_at: usize,
    /// Where the thread's own net allocated bytes are in a sample: a line's Δ.
    own_at: usize,
    /// Where the host block (RSS, VMS, RSS high-water mark) is in a sample, when a host stat
    /// is measured.
    host_at: Option<usize>,
    tally_at: usize,
    /// Where the collective counters are in a sample (`--collectives`).
    collectives_at: Option<usize>,
    reset_peaks: bool,
    /// Device-wide peak values at the previous sample, per peak slot.
    last_global: Vec<i64>,
    /// Per peak slot, the highest value reached since the previous sample.
    since: Vec<i64>,
    peak_slots: usize,
    sample: Vec<i64>,
    cuda_ready: bool,
    host: HostReader,
}

/// The host block of a sample: RSS, VMS, RSS high-water mark.
const HOST_LEN: usize = 3;

impl<R: Runtime> Sampler<R> {
    /// Plans how to measure `chosen` (validated keys of `stats::stats_for`) on `source`, and
    /// the collectives' bytes when `with_collectives`, read through `runtime`.
    pub fn new(runtime: R, source: Source, chosen: Vec<StatDef>, with_collectives: bool) -> Self {
        let cuda = matches!(source, Source::Cuda(_));
        let all = stats::stats_for(cuda);
        let find = |key: &str| {
            all.iter()
                .find(|s| s.key == key)
                .cloned()
                .expect("known stat key")
        };
        let shown = chosen.len();
        let mut columns = chosen;
        let total_peak_column = match columns
            .iter()
            .position(|c| c.key == "allocated_bytes.all.peak")
        {
            Some(i) => i,
            None => {
                columns.push(find("allocated_bytes.all.peak"));
                columns.len() - 1
            }
        };
        // Sample layout: CUDA stats (CUDA only), then the tally, then the host block, then the
        // collective counters (with --collectives), then the thread's own net bytes.
        let tally_at = if cuda { CUDA_STAT_COUNT } else { 0 };
        let host_at = tally_at + TALLY_LEN;
        let cpu_index = |key: &str| -> usize {
            tally_at
                + match key {
                    "allocated_bytes.all.current" => tally::ALLOCATED_CURRENT,
                    "allocated_bytes.all.allocated" => tally::BYTES_ALLOCATED,
                    "allocated_bytes.all.freed" => tally::BYTES_FREED,
                    "allocation.all.current" => tally::COUNT_CURRENT,
                    "allocation.all.allocated" => tally::COUNT_ALLOCATED,
                    "allocation.all.freed" => tally::COUNT_FREED,
                    other => unreachable!("{other} is not a CPU stat"),
                }
        };
        let mut reset_peaks = false;
        let mut peak_slots = 0;
        let mut probes = Vec::with_capacity(columns.len());
        let mut uses_host = false;
        let mut high_water = false;
        for col in &columns {
            let probe = if stats::is_host(&col.key) {
                uses_host = true;
                match col.key.as_str() {
                    stats::HOST_RSS_PEAK => {
                        high_water = true;
                        peak_slots += 1;
                        Probe::Peak {
                            current: host_at,
                            source: PeakSource::HostHighWater {
                                high_water: host_at + 2,
                            },
                            slot: peak_slots - 1,
                        }
                    }
                    stats::HOST_VMS => Probe::Level { at: host_at + 1 },
                    _ => Probe::Level { at: host_at },
                }
            } else if let Some(i) = col.cuda_index {
                match col.field {
                    Field::Peak => {
                        let source = if stats::cuda_peak_from_reports(&col.key) {
                            let max = if col.key.starts_with("allocated") {
                                tally::ALLOCATED_MAX
                            } else {
                                tally::RESERVED_MAX
                            };
                            PeakSource::Reports {
                                max: tally_at + max,
                                global: i,
                            }
                        } else {
                            reset_peaks = true;
                            PeakSource::Reset { global: i }
                        };
                        peak_slots += 1;
                        // In the shim's order `.current` directly precedes `.peak`.
                        Probe::Peak {
                            current: i - 1,
                            source,
                            slot: peak_slots - 1,
                        }
                    }
                    f if f.sums_over_hits() => Probe::Amount { at: i },
                    _ => Probe::Level { at: i },
                }
            } else {
                match col.field {
                    Field::Peak => {
                        let (current, max) = if col.key.starts_with("allocated_bytes") {
                            (tally::ALLOCATED_CURRENT, tally::ALLOCATED_MAX)
                        } else {
                            (tally::COUNT_CURRENT, tally::COUNT_MAX)
                        };
                        peak_slots += 1;
                        Probe::Peak {
                            current: tally_at + current,
                            source: PeakSource::Tally {
                                max: tally_at + max,
                            },
                            slot: peak_slots - 1,
                        }
                    }
                    f if f.sums_over_hits() => Probe::Amount {
                        at: cpu_index(&col.key),
                    },
                    _ => Probe::Level {
                        at: cpu_index(&col.key),
                    },
                }
            };
            probes.push(probe);
        }
        let delta_at = if cuda {
            all.iter()
                .position(|s| s.key == "allocated_bytes.all.current")
                .expect("known key")
        } else {
            tally_at + tally::ALLOCATED_CURRENT
        };
        let host = HostReader::new(high_water);
        let mut last_global = vec![i64::MIN; peak_slots];
        // A high-water mark counts from when memprof starts reading it, not from earlier highs.
        let start_high_water = host.read().rss_high_water;
        for probe in &probes {
            if let Probe::Peak {
                slot,
                source: PeakSource::HostHighWater { .. },
                ..
            } = *probe
            {
                last_global[slot] = start_high_water;
            }
        }
        let collectives_len = if with_collectives {
            collectives::LEN
        } else {
            0
        };
        Sampler {
            runtime,
            source,
            columns,
            probes,
            shown,
            total_peak_column,
            delta_at,
            own_at: host_at + HOST_LEN + collectives_len,
            host_at: uses_host.then_some(host_at),
            tally_at,
            collectives_at: with_collectives.then_some(host_at + HOST_LEN),
            reset_peaks,
            last_global,
            since: vec![i64::MIN; peak_slots],
            peak_slots,
            sample: vec![0; host_at + HOST_LEN + collectives_len + 1],
            cuda_ready: false,
            host,
        }
    }

    /// What the numbers are read through.
    pub fn runtime(&self) -> &R {
        &self.runtime
    }

    /// The CUDA device read, if any.
    pub fn device(&self) -> Option<i32> {
        self.source.cuda_index()
    }

    /// Whether the collectives are counted.
    pub fn counts_collectives(&self) -> bool {
        self.collectives_at.is_some()
    }

    /// Reads `device` from now on instead of the CUDA device read so far; false if nothing
    /// changed. Call only while no window is open: a window's start and end must come from one
    /// device.
    pub fn switch_device(&mut self, device: i32) -> bool {
        let Source::Cuda(current) = self.source else {
            return false;
        };
        if current == device || !self.runtime.set_reporter_device(device) {
            return false;
        }
        self.source = Source::Cuda(device);
        // The peak's sites were the old device's.
        crate::capture::peak::restart();
        self.read();
        // Only rises of the new device's peaks from now on count, not its earlier highs.
        for probe in &self.probes {
            if let Probe::Peak {
                slot,
                source: PeakSource::Reports { global, .. },
                ..
            } = *probe
            {
                self.last_global[slot] = self.sample[global];
            }
        }
        true
    }

    /// The columns shown in the report, in order.
    pub fn shown_columns(&self) -> &[StatDef] {
        &self.columns[..self.shown]
    }

    /// Why peak stats are reset, if they are.
    pub fn peak_reset_reason(&self) -> Option<String> {
        self.reset_peaks.then(|| {
            let keys: Vec<&str> = self
                .probes
                .iter()
                .zip(&self.columns)
                .filter(|(p, _)| matches!(p, Probe::Peak { source: PeakSource::Reset { .. }, .. }))
                .map(|(_, c)| c.key.as_str())
                .collect();
            format!(
                "{} cannot be measured from the allocator's reports, so memprof reset the device's \
                 peak stats at every traced line; the program's own max_memory_* readings were affected",
                keys.join(", ")
            )
        })
    }

    /// A new window for a frame.
    pub fn new_window(&self) -> Window {
        Window {
            start: vec![0; self.sample.len()],
            peaks: vec![0; self.peak_slots],
        }
    }

    /// Opens a window at the current sample: peaks start at the values at its start.
    pub fn open(&self, window: &mut Window) {
        window.start.copy_from_slice(&self.sample);
        for probe in &self.probes {
            if let Probe::Peak { current, slot, .. } = *probe {
                window.peaks[slot] = self.sample[current];
            }
        }
    }

    /// Adds the execution measured by `window`, ending at the current sample, to a line's
    /// aggregate: a new hit unless it continues an execution (a resumed generator).
    pub fn close(&self, window: &Window, agg: &mut LineAgg, new_hit: bool, raised: bool) {
        let end = &self.sample;
        if !agg.measured {
            agg.measured = true;
            if self.collectives_at.is_some() {
                agg.collectives = vec![0; collectives::LEN];
            }
            agg.values = self
                .probes
                .iter()
                .map(|p| {
                    if matches!(p, Probe::Amount { .. }) {
                        0
                    } else {
                        i64::MIN
                    }
                })
                .collect();
        }
        if new_hit {
            agg.hits += 1;
        }
        agg.raised += u64::from(raised);
        // The thread's own allocations and frees: other threads' do not belong to this line.
        agg.delta += end[self.own_at] - window.start[self.own_at];
        if let Some(at) = self.collectives_at {
            for (k, sum) in agg.collectives.iter_mut().enumerate() {
                *sum += end[at + k] - window.start[at + k];
            }
        }
        for (value, probe) in agg.values.iter_mut().zip(&self.probes) {
            match *probe {
                Probe::Level { at } => *value = (*value).max(end[at]),
                Probe::Amount { at } => {
                    let (a, b) = (window.start[at], end[at]);
                    // A counter that went down was reset by the program
                    // (reset_accumulated_memory_stats): count what accumulated since.
                    *value += if b >= a { b - a } else { b };
                }
                Probe::Peak { slot, .. } => *value = (*value).max(window.peaks[slot]),
            }
        }
    }

    /// Reads the allocator (a sample) and the highest values each peak reached since the
    /// previous sample.
    pub fn read(&mut self) {
        if let Source::Cuda(device) = self.source {
            if !self.cuda_ready {
                self.cuda_ready = self.runtime.allocator_initialized();
            }
            let stats: &mut [i64; CUDA_STAT_COUNT] = (&mut self.sample[..CUDA_STAT_COUNT])
                .try_into()
                .expect("sample layout");
            if !self.cuda_ready || !self.runtime.device_stats(device, stats) {
                stats.fill(0);
            }
        }
        let t: &mut [i64; TALLY_LEN] = (&mut self.sample[self.tally_at..self.tally_at + TALLY_LEN])
            .try_into()
            .expect("sample layout");
        let cuda = matches!(self.source, Source::Cuda(_));
        self.runtime.take_tally(cuda, t);
        // A line's Δ is its thread's.
        self.sample[self.own_at] = self.runtime.own_net(cuda);
        if let Some(at) = self.host_at {
            let m = self.host.read();
            self.sample[at] = m.rss;
            self.sample[at + 1] = m.vms;
            self.sample[at + 2] = m.rss_high_water;
        }
        if let Some(at) = self.collectives_at {
            let c: &mut [i64; collectives::LEN] = (&mut self.sample[at..at + collectives::LEN])
                .try_into()
                .expect("sample layout");
            self.runtime.take_collectives(c);
        }
        let since = &mut self.since;
        let s = &self.sample;
        for probe in &self.probes {
            if let Probe::Peak {
                current,
                source,
                slot,
            } = *probe
            {
                since[slot] = match source {
                    PeakSource::Tally { max } => s[max].max(s[current]),
                    PeakSource::Reports { max, global } => {
                        let mut v = s[max].max(s[current]);
                        if s[global] > self.last_global[slot] {
                            v = v.max(s[global]);
                        }
                        self.last_global[slot] = s[global];
                        v
                    }
                    PeakSource::Reset { global } => s[global],
                    PeakSource::HostHighWater { high_water } => {
                        let mut v = s[current];
                        if s[high_water] > self.last_global[slot] {
                            v = v.max(s[high_water]);
                        }
                        self.last_global[slot] = s[high_water];
                        v
                    }
                };
            }
        }
    }

    /// Raises a window's running peaks to the highest values reached since the previous
    /// sample (call for every open window after `read`).
    #[inline]
    pub fn fold(&self, window: &mut Window) {
        for (peak, &seen) in window.peaks.iter_mut().zip(&self.since) {
            *peak = (*peak).max(seen);
        }
    }

    /// Ends a sample after every open window was folded: resets the device's peak stats when a
    /// chosen peak needs it.
    pub fn after_fold(&mut self) {
        // Every sample reads the device's peaks before this reset (a reset before they are
        // read loses them).
        if self.reset_peaks && self.cuda_ready {
            if let Source::Cuda(device) = self.source {
                if self.runtime.reset_peak_stats(device) {
                    // After a reset every device-wide peak equals its current value.
                    for probe in &self.probes {
                        if let Probe::Peak {
                            current,
                            slot,
                            source: PeakSource::Reports { .. },
                        } = *probe
                        {
                            self.last_global[slot] = self.sample[current];
                        }
                    }
                }
            }
        }
    }

    /// allocated_bytes.all.current at the latest sample.
    pub fn allocated_current(&self) -> i64 {
        self.sample[self.delta_at]
    }

    /// A line's aggregated values for the shown columns, and the total-peak value.
    pub fn shown_values<'a>(&self, agg: &'a LineAgg) -> (&'a [i64], Option<i64>) {
        if !agg.measured {
            return (&[], None);
        }
        (
            &agg.values[..self.shown],
            Some(agg.values[self.total_peak_column]),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::test_torch::TestTorch;

    fn stat(key: &str) -> StatDef {
        stats::cpu_stats()
            .into_iter()
            .find(|s| s.key == key)
            .expect("a CPU stat")
    }

    #[test]
    fn amounts_sum_over_hits_levels_and_peaks_take_the_highest() {
        let torch = TestTorch::default();
        let chosen = vec![
            stat("allocated_bytes.all.allocated"),
            stat("allocation.all.current"),
            stat("allocation.all.peak"),
        ];
        let mut s = Sampler::new(torch.clone(), Source::Cpu, chosen, false);
        // allocated_bytes.all.peak is measured too: the header's peak needs it.
        assert_eq!(s.shown_columns().len(), 3);
        let mut agg = LineAgg::default();
        for bytes in [100, 200] {
            let mut w = s.new_window();
            s.read();
            s.open(&mut w);
            torch.alloc(bytes);
            torch.alloc(1);
            torch.free(1);
            s.read();
            s.fold(&mut w);
            s.after_fold();
            s.close(&w, &mut agg, true, false);
        }
        assert_eq!(agg.hits, 2);
        assert_eq!(agg.delta, 300);
        let (shown, _) = s.shown_values(&agg);
        // 101 + 201 bytes allocated; 2 blocks live at the end, 3 at the highest.
        assert_eq!(shown, &[302, 2, 3]);
    }
}
