//! The allocator's settings, as `PYTORCH_CUDA_ALLOC_CONF` writes them (`KEY:VALUE,...`), with
//! the checks torch makes (`c10/cuda/CUDAAllocatorConfig.cpp`).

/// The settings the model follows.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// `max_split_size_mb` in bytes (no limit: u64::MAX).
    pub max_split_size: u64,
    /// `roundup_power2_divisions` per interval of sizes, as the source indexes them: 0 for sizes
    /// below 2 MiB, then one per power of two, the last for 64 GiB and more (0: plain rounding).
    pub divisions: [u64; INTERVALS],
    /// `garbage_collection_threshold` (0: off).
    pub garbage_collection_threshold: f64,
    /// `expandable_segments`.
    pub expandable_segments: bool,
}

/// Power-of-two intervals from 1 MiB (2^20) to 64 GiB (2^36).
pub const INTERVALS: usize = 17;

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_split_size: u64::MAX,
            divisions: [0; INTERVALS],
            garbage_collection_threshold: 0.0,
            expandable_segments: false,
        }
    }
}

/// A setting the model cannot follow, or one that is not a setting.
#[derive(Debug, PartialEq)]
pub struct SettingsError(pub String);

impl Settings {
    /// `roundup_power2_divisions(size)`: the divisions of the interval `size` falls in.
    pub fn divisions_for(&self, size: u64) -> u64 {
        let log = 63 - size.leading_zeros() as usize;
        let index = log.saturating_sub(20).min(INTERVALS - 1);
        self.divisions[index]
    }

    /// Parses `KEY:VALUE,...` (`max_split_size_mb:128,garbage_collection_threshold:0.6`).
    pub fn parse(text: &str) -> Result<Settings, SettingsError> {
        let mut s = Settings::default();
        let err = |m: String| Err(SettingsError(m));
        for item in split_top_level(text) {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            let Some((key, value)) = item.split_once(':') else {
                return err(format!("`{item}` is not KEY:VALUE"));
            };
            let value = value.trim();
            match key.trim() {
                "max_split_size_mb" => {
                    let mb: u64 = value.parse().map_err(|_| {
                        SettingsError(format!("max_split_size_mb:{value} is not a number of MiB"))
                    })?;
                    if mb <= super::LARGE_BUFFER >> 20 {
                        return err(format!(
                            "max_split_size_mb:{mb} is too small: torch requires more than {}",
                            super::LARGE_BUFFER >> 20
                        ));
                    }
                    s.max_split_size = mb << 20;
                }
                "garbage_collection_threshold" => {
                    let t: f64 = value.parse().map_err(|_| {
                        SettingsError(format!(
                            "garbage_collection_threshold:{value} is not a number"
                        ))
                    })?;
                    if !(t > 0.0 && t < 1.0) {
                        return err(format!(
                            "garbage_collection_threshold:{value} must be between 0 and 1"
                        ));
                    }
                    s.garbage_collection_threshold = t;
                }
                "roundup_power2_divisions" => s.divisions = parse_divisions(value)?,
                "expandable_segments" => {
                    s.expandable_segments = match value.to_ascii_lowercase().as_str() {
                        "true" => true,
                        "false" => false,
                        _ => {
                            return err(format!("expandable_segments:{value} is not True or False"))
                        }
                    }
                }
                // Settings that do not change where blocks go.
                "release_lock_on_cudamalloc"
                | "pinned_use_cuda_host_register"
                | "pinned_num_register_threads"
                | "backend" => {}
                other => {
                    return err(format!(
                        "unknown allocator setting `{other}` (memprof fit knows max_split_size_mb, \
                         roundup_power2_divisions, garbage_collection_threshold, \
                         expandable_segments)"
                    ))
                }
            }
        }
        Ok(s)
    }
}

/// `a:1,b:[x:1,y:2],c:3` split at the commas outside brackets.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

/// `4` (every interval), or `[256:1,512:2,1024:4,>:8]`: intervals named by their lower power of
/// two in MiB, `>` for the rest, as torch reads them.
fn parse_divisions(value: &str) -> Result<[u64; INTERVALS], SettingsError> {
    let check = |d: u64| {
        if d == 0 || d == 1 || d.is_power_of_two() {
            Ok(d)
        } else {
            Err(SettingsError(format!(
                "roundup_power2_divisions: {d} is not a power of two"
            )))
        }
    };
    let bad = || {
        SettingsError(format!(
            "roundup_power2_divisions:{value} is not N or [MB:N,...,>:N]"
        ))
    };
    if let Some(list) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
        let mut out = [0; INTERVALS];
        let mut last = 0;
        for pair in list.split(',') {
            let (k, v) = pair.split_once(':').ok_or_else(bad)?;
            let d = check(v.trim().parse().map_err(|_| bad())?)?;
            if k.trim() == ">" {
                for slot in out.iter_mut().skip(last) {
                    *slot = d;
                }
                continue;
            }
            let mb: u64 = k.trim().parse().map_err(|_| bad())?;
            if !mb.is_power_of_two() {
                return Err(SettingsError(format!(
                    "roundup_power2_divisions: {mb} MiB is not a power of two"
                )));
            }
            let index = (63 - mb.leading_zeros() as usize).min(INTERVALS - 1);
            out[index] = d;
            last = index + 1;
        }
        Ok(out)
    } else {
        let d = check(value.parse().map_err(|_| bad())?)?;
        Ok([d; INTERVALS])
    }
}
