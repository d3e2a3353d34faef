//! The device's memory outside torch's allocator, for the peak's device split: the driver's
//! count when the measured device's first block was allocated (the CUDA context and what came
//! before the allocator, less its first segment), taken once per device inside the reporter.
//! Uses `torch::driver`.
use crate::torch::driver::{self, DriverReading};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// The first allocation's reading: the driver's count then, and the allocator's reserved bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FirstReading {
    pub driver: DriverReading,
    pub reserved: i64,
}

static TAKEN: AtomicBool = AtomicBool::new(false);
static FIRST: Mutex<Option<FirstReading>> = Mutex::new(None);

/// Forgets the reading (a new run, or the measured device changed).
pub fn reset() {
    *FIRST.lock().unwrap_or_else(|e| e.into_inner()) = None;
    TAKEN.store(false, Ordering::Release);
}

/// The reporter saw an allocation on the measured CUDA device, `reserved` bytes reserved after
/// it: the first one reads the driver (once; later ones return at the flag).
pub fn first_allocation(reserved: i64) {
    if TAKEN.load(Ordering::Relaxed) || TAKEN.swap(true, Ordering::AcqRel) {
        return;
    }
    let device = crate::torch::reporter_device();
    if device < 0 {
        return;
    }
    if let Some(reading) = driver::device_use(device) {
        *FIRST.lock().unwrap_or_else(|e| e.into_inner()) = Some(FirstReading {
            driver: reading,
            reserved,
        });
    }
}

/// The first allocation's reading, if one was taken.
pub fn first() -> Option<FirstReading> {
    *FIRST.lock().unwrap_or_else(|e| e.into_inner())
}
