//! Host memory of this process: the resident set size, read from /proc/self/statm.
use std::fs::File;
use std::os::unix::fs::FileExt;

/// Reads RSS through a file kept open: `pread` on it costs far less than opening the file
/// every time, which matters at one read per traced line.
pub struct RssReader {
    file: Option<File>,
    page_size: i64,
}

impl RssReader {
    pub fn new() -> Self {
        // SAFETY: sysconf has no preconditions.
        let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as i64;
        RssReader {
            file: File::open("/proc/self/statm").ok(),
            page_size,
        }
    }

    /// Resident bytes, or 0 when /proc cannot be read.
    pub fn bytes(&self) -> i64 {
        let Some(file) = &self.file else { return 0 };
        let mut buf = [0u8; 128];
        let Ok(n) = file.read_at(&mut buf, 0) else {
            return 0;
        };
        // statm: size resident shared text lib data dt (pages); the second field is RSS.
        let mut fields = buf[..n].split(|b| *b == b' ');
        let resident = fields.nth(1).unwrap_or_default();
        let pages = resident
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .fold(0i64, |acc, b| acc * 10 + i64::from(b - b'0'));
        pages * self.page_size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rss_is_positive_and_follows_a_touched_allocation() {
        let r = RssReader::new();
        let before = r.bytes();
        assert!(before > 0);
        let mut v = vec![0u8; 64 << 20];
        for i in (0..v.len()).step_by(4096) {
            v[i] = 1;
        }
        assert!(r.bytes() >= before + (60 << 20), "{} {}", before, r.bytes());
        drop(v);
    }
}
