//! Host memory of this process: resident and virtual size from /proc/self/statm, and the
//! resident high-water mark (VmHWM) from /proc/self/status.
use std::fs::File;
use std::os::unix::fs::FileExt;

/// Reads /proc through files kept open: `pread` on them costs far less than opening the files
/// every time, which matters at one read per traced line.
pub struct HostReader {
    statm: Option<File>,
    /// Opened only when the peak is measured: status is the costlier read.
    status: Option<File>,
    page_size: i64,
}

/// One reading, in bytes (0 where /proc could not be read).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostMemory {
    pub rss: i64,
    pub vms: i64,
    /// The process's resident high-water mark; 0 unless the reader reads it.
    pub rss_high_water: i64,
}

impl HostReader {
    pub fn new(with_high_water: bool) -> Self {
        // SAFETY: sysconf has no preconditions.
        let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as i64;
        HostReader {
            statm: File::open("/proc/self/statm").ok(),
            status: if with_high_water {
                File::open("/proc/self/status").ok()
            } else {
                None
            },
            page_size,
        }
    }

    pub fn read(&self) -> HostMemory {
        let mut m = HostMemory::default();
        if let Some(file) = &self.statm {
            let mut buf = [0u8; 128];
            if let Ok(n) = file.read_at(&mut buf, 0) {
                // statm: size resident shared text lib data dt, in pages.
                let mut fields = buf[..n].split(|b| *b == b' ');
                m.vms = number(fields.next().unwrap_or_default()) * self.page_size;
                m.rss = number(fields.next().unwrap_or_default()) * self.page_size;
            }
        }
        if let Some(file) = &self.status {
            let mut buf = [0u8; 4096];
            if let Ok(n) = file.read_at(&mut buf, 0) {
                m.rss_high_water = status_kib(&buf[..n], b"VmHWM:") * 1024;
            }
        }
        m
    }
}

/// The leading decimal digits of `field` as a number.
fn number(field: &[u8]) -> i64 {
    field
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .fold(0i64, |acc, b| acc * 10 + i64::from(b - b'0'))
}

/// The kB value of a `Name:   1234 kB` line of /proc/self/status.
fn status_kib(status: &[u8], name: &[u8]) -> i64 {
    status
        .split(|b| *b == b'\n')
        .find(|line| line.starts_with(name))
        .map(|line| {
            let rest = &line[name.len()..];
            let digits = rest
                .iter()
                .position(|b| b.is_ascii_digit())
                .unwrap_or(rest.len());
            number(&rest[digits..])
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two tests that touch large buffers run one at a time: RSS is the process's, and one
    /// test's buffer freed while the other reads would move its numbers.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn rss_is_positive_and_follows_a_touched_allocation() {
        let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let r = HostReader::new(false);
        let before = r.read().rss;
        assert!(before > 0);
        let mut v = vec![0u8; 64 << 20];
        for i in (0..v.len()).step_by(4096) {
            v[i] = 1;
        }
        // Kept as if read: an optimised build would drop the untouched buffer and its writes.
        std::hint::black_box(&mut v);
        let after = r.read().rss;
        assert!(after >= before + (60 << 20), "{before} {after}");
        drop(v);
    }

    #[test]
    fn the_high_water_mark_keeps_a_freed_peak_and_vms_covers_rss() {
        let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let r = HostReader::new(true);
        let before = r.read();
        assert!(before.vms >= before.rss && before.rss > 0);
        let mut v = vec![0u8; 96 << 20];
        for i in (0..v.len()).step_by(4096) {
            v[i] = 1;
        }
        // Kept as if read: an optimised build would drop the untouched buffer and its writes.
        std::hint::black_box(&mut v);
        let touched = r.read().rss;
        drop(v);
        let after = r.read();
        // The kernel folds per-thread RSS counters in batches: allow a MiB of lag.
        assert!(
            after.rss_high_water >= touched - (1 << 20),
            "{after:?} {touched}"
        );
        assert!(
            after.rss_high_water >= before.rss + (90 << 20),
            "{after:?} {before:?}"
        );
    }

    #[test]
    fn status_lines_are_parsed_in_kib() {
        let status = b"Name:\tx\nVmPeak:\t  999 kB\nVmHWM:\t   2048 kB\nVmRSS:\t 1 kB\n";
        assert_eq!(status_kib(status, b"VmHWM:"), 2048);
        assert_eq!(status_kib(status, b"VmSwap:"), 0);
    }
}
