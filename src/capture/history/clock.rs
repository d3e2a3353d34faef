//! The clock `--history` stamps its events with: a reading of the processor's time-stamp
//! counter at each event (x86-64; elsewhere the monotonic clock), made µs since the epoch when
//! the record stops, from readings of both clocks taken when it started and when it stopped, as
//! torch's own snapshots convert their `ApproximateClock`. The system clock at every event cost a
//! call into the vDSO and a conversion: 5-10% of the samples in memprof's own code under
//! `--history` on resnet50's step on an H100, and about 100 instructions an event.
use std::time::{SystemTime, UNIX_EPOCH};

/// The counter now, in its own ticks.
#[inline]
pub fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC is on every x86-64 processor and only reads the counter.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static BASE: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        let base = *BASE.get_or_init(std::time::Instant::now);
        u64::try_from(base.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// One reading of both clocks, together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Anchor {
    pub ticks: u64,
    /// µs since the epoch.
    pub unix_us: i64,
}

impl Anchor {
    pub fn now() -> Anchor {
        let unix_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
        Anchor {
            ticks: ticks(),
            unix_us,
        }
    }
}

/// Converts counter readings taken between two anchors to µs since the epoch, on the line
/// through both (a reading outside them is extrapolated on it; where no tick passed between
/// them, every reading is the first anchor's time).
#[derive(Clone, Copy, Debug)]
pub struct Converter {
    from: Anchor,
    to: Anchor,
}

impl Converter {
    pub fn new(from: Anchor, to: Anchor) -> Converter {
        Converter { from, to }
    }

    pub fn unix_us(&self, ticks: u64) -> i64 {
        let span_ticks = i128::from(self.to.ticks) - i128::from(self.from.ticks);
        if span_ticks <= 0 {
            return self.from.unix_us;
        }
        let span_us = i128::from(self.to.unix_us) - i128::from(self.from.unix_us);
        let since = i128::from(ticks) - i128::from(self.from.ticks);
        let us = i128::from(self.from.unix_us) + since * span_us / span_ticks;
        i64::try_from(us).unwrap_or(if us < 0 { i64::MIN } else { i64::MAX })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_between_the_anchors_fall_on_the_line_through_them() {
        let from = Anchor {
            ticks: 1_000,
            unix_us: 5_000_000,
        };
        let to = Anchor {
            ticks: 3_000,
            unix_us: 5_000_100,
        };
        let c = Converter::new(from, to);
        assert_eq!(c.unix_us(1_000), 5_000_000);
        assert_eq!(c.unix_us(2_000), 5_000_050);
        assert_eq!(c.unix_us(3_000), 5_000_100);
        assert_eq!(c.unix_us(3_200), 5_000_110);
        assert_eq!(c.unix_us(0), 4_999_950);
        let still = Converter::new(from, from);
        assert_eq!(still.unix_us(9_999), 5_000_000);
    }

    #[test]
    fn the_counter_and_the_system_clock_agree_over_a_sleep() {
        let from = Anchor::now();
        let before = Anchor::now().unix_us;
        let mid = ticks();
        let after = Anchor::now().unix_us;
        std::thread::sleep(std::time::Duration::from_millis(20));
        let to = Anchor::now();
        let at = Converter::new(from, to).unix_us(mid);
        // Between the system clock's readings on either side of it, however long the thread
        // waited between them (50 µs for the anchors' own two readings, a moment apart).
        assert!(
            at >= before - 50 && at <= after + 50,
            "{at} not within {before}..{after}"
        );
        assert!(to.unix_us - from.unix_us >= 20_000);
        assert!(to.ticks > from.ticks);
    }
}
