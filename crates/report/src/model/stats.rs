//! The catalogue of statistics memprof can report: every key of torch 2.11's
//! `torch.cuda.memory_stats()`, the CPU keys memprof measures itself, what each means, and how a
//! stat is measured over one execution of a line and aggregated over many.

/// The 9 per-pool arrays of `c10::CachingDeviceAllocator::DeviceStats`, in the shim's order.
const ARRAYS: [(&str, &str); 9] = [
    (
        "allocation",
        "number of blocks handed out by the caching allocator",
    ),
    (
        "segment",
        "number of segments reserved from the device (cudaMalloc calls held)",
    ),
    (
        "active",
        "number of active blocks (allocated, or freed but still used by a stream)",
    ),
    (
        "inactive_split",
        "number of inactive, non-releasable blocks (fragments of split segments)",
    ),
    (
        "allocated_bytes",
        "bytes in blocks handed out by the caching allocator",
    ),
    (
        "reserved_bytes",
        "bytes reserved from the device by the caching allocator (its cache)",
    ),
    ("active_bytes", "bytes in active blocks"),
    (
        "inactive_split_bytes",
        "bytes in inactive, non-releasable blocks",
    ),
    (
        "requested_bytes",
        "bytes the program asked for, before the allocator rounded them up",
    ),
];
const POOLS: [(&str, &str); 3] = [
    ("all", "all pools"),
    ("small_pool", "small pool, blocks of at most 1 MiB"),
    ("large_pool", "large pool, blocks over 1 MiB"),
];
const FIELDS: [Field; 4] = [Field::Current, Field::Peak, Field::Allocated, Field::Freed];
const SINGLE_STATS: [(&str, &str); 2] = [
    (
        "oversize_allocations",
        "allocations larger than max_split_size",
    ),
    ("oversize_segments", "segments larger than max_split_size"),
];
/// The six scalars, in the shim's order.
const SCALARS: [(&str, &str, Field); 6] = [
    (
        "num_alloc_retries",
        "cudaMalloc calls that failed and were retried after freeing the cache",
        Field::Counter,
    ),
    (
        "num_ooms",
        "out-of-memory errors raised by the allocator",
        Field::Counter,
    ),
    (
        "max_split_size",
        "blocks above this size are not split (allocator setting)",
        Field::Setting,
    ),
    (
        "num_sync_all_streams",
        "synchronize_and_free_events calls",
        Field::Counter,
    ),
    ("num_device_alloc", "cudaMalloc calls", Field::Counter),
    ("num_device_free", "cudaFree calls", Field::Counter),
];

/// Number of values the shim writes for one device.
pub const CUDA_STAT_COUNT: usize = 122;

/// What one number of a stat is, which decides how a line's value is measured and aggregated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    /// Value at the end of the execution; the maximum over hits.
    Current,
    /// Highest value during the execution; the maximum over hits.
    Peak,
    /// Total increase during the execution; the sum over hits.
    Allocated,
    /// Total decrease during the execution; the sum over hits.
    Freed,
    /// A counter: its increase during the execution; the sum over hits.
    Counter,
    /// An allocator setting: its value at the end; the maximum over hits.
    Setting,
}

impl Field {
    fn name(self) -> &'static str {
        match self {
            Field::Current => "current",
            Field::Peak => "peak",
            Field::Allocated => "allocated",
            Field::Freed => "freed",
            Field::Counter | Field::Setting => "",
        }
    }

    fn meaning(self) -> &'static str {
        match self {
            Field::Current => "value at the end of the line",
            Field::Peak => "highest value while the line ran",
            Field::Allocated => "total increase while the line ran",
            Field::Freed => "total decrease while the line ran",
            Field::Counter => "increase while the line ran",
            Field::Setting => "value at the end of the line",
        }
    }

    /// Whether hits are combined by sum (amounts) rather than by maximum (levels).
    pub fn sums_over_hits(self) -> bool {
        matches!(self, Field::Allocated | Field::Freed | Field::Counter)
    }
}

/// One stat key and where its value comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatDef {
    /// The key as `torch.cuda.memory_stats()` spells it.
    pub key: String,
    pub field: Field,
    /// Index into the shim's 122 CUDA values, for CUDA keys.
    pub cuda_index: Option<usize>,
    /// Whether the value is in bytes (shown with binary units) rather than a count.
    pub is_bytes: bool,
    pub meaning: String,
}

/// All 122 CUDA keys in the shim's order (not sorted).
pub fn cuda_stats() -> Vec<StatDef> {
    let mut out = Vec::with_capacity(CUDA_STAT_COUNT);
    for (name, what) in ARRAYS {
        for (pool, pool_what) in POOLS {
            for field in FIELDS {
                out.push(StatDef {
                    key: format!("{name}.{pool}.{}", field.name()),
                    field,
                    cuda_index: Some(out.len()),
                    is_bytes: name.ends_with("_bytes"),
                    meaning: format!("{what}, {pool_what}: {}", field.meaning()),
                });
            }
        }
    }
    for (name, what) in SINGLE_STATS {
        for field in FIELDS {
            out.push(StatDef {
                key: format!("{name}.{}", field.name()),
                field,
                cuda_index: Some(out.len()),
                is_bytes: false,
                meaning: format!("{what}: {}", field.meaning()),
            });
        }
    }
    for (name, what, field) in SCALARS {
        out.push(StatDef {
            key: name.to_string(),
            field,
            cuda_index: Some(out.len()),
            is_bytes: name == "max_split_size",
            meaning: format!("{what}: {}", field.meaning()),
        });
    }
    debug_assert_eq!(out.len(), CUDA_STAT_COUNT);
    out
}

/// Host memory of the whole process, measured on every device.
pub const HOST_RSS: &str = "host_rss_bytes.current";
pub const HOST_RSS_PEAK: &str = "host_rss_bytes.peak";
pub const HOST_VMS: &str = "host_vms_bytes.current";

/// The keys memprof measures on the CPU (libtorch's CPU allocator reports, and host RSS).
pub fn cpu_stats() -> Vec<StatDef> {
    let mut out = Vec::new();
    for (name, what) in [
        (
            "allocated_bytes",
            "bytes of CPU tensor storage allocated by libtorch",
        ),
        (
            "allocation",
            "number of CPU tensor storages allocated by libtorch",
        ),
    ] {
        for field in FIELDS {
            out.push(StatDef {
                key: format!("{name}.all.{}", field.name()),
                field,
                cuda_index: None,
                is_bytes: name == "allocated_bytes",
                meaning: format!("{what}: {}", field.meaning()),
            });
        }
    }
    out.extend(host_stats());
    out
}

fn host_stats() -> Vec<StatDef> {
    let def = |key: &str, field, meaning: &str| StatDef {
        key: key.to_string(),
        field,
        cuda_index: None,
        is_bytes: true,
        meaning: meaning.to_string(),
    };
    vec![
        def(
            HOST_RSS,
            Field::Current,
            "resident set size of the whole process (/proc/self/statm): value at the end of the line",
        ),
        def(
            HOST_RSS_PEAK,
            Field::Peak,
            "highest resident set size of the process while the line ran: exact when the line \
             raised the process's high-water mark (VmHWM in /proc/self/status), else the higher \
             of the line's start and end (the OS keeps no peak per interval without a reset)",
        ),
        def(
            HOST_VMS,
            Field::Current,
            "virtual memory size of the whole process (/proc/self/statm): value at the end of the line",
        ),
    ]
}

/// The keys `--stat` names: repeatable, each comma-separated, blanks ignored.
pub fn requested_keys(requested: &[String]) -> Vec<String> {
    requested
        .iter()
        .flat_map(|s| s.split(','))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Whether a key is one of the host memory stats (read from /proc, on every device).
pub fn is_host(key: &str) -> bool {
    key.starts_with("host_")
}

/// The keys valid for a device: CUDA keys plus host RSS, or the CPU keys.
pub fn stats_for(cuda: bool) -> Vec<StatDef> {
    if cuda {
        let mut all = cuda_stats();
        all.extend(host_stats());
        all
    } else {
        cpu_stats()
    }
}

/// Columns shown when no `--stat` is given.
pub fn default_keys(cuda: bool) -> Vec<&'static str> {
    if cuda {
        vec![
            "allocated_bytes.all.peak",
            "allocated_bytes.all.current",
            "reserved_bytes.all.peak",
        ]
    } else {
        vec![
            "allocated_bytes.all.peak",
            "allocated_bytes.all.current",
            HOST_RSS,
        ]
    }
}

/// CUDA peak keys that the allocator's own reports measure exactly: every report carries the
/// allocator's totals of allocated and reserved bytes. Any other CUDA peak needs peak resets.
pub fn cuda_peak_from_reports(key: &str) -> bool {
    matches!(key, "allocated_bytes.all.peak" | "reserved_bytes.all.peak")
}

/// Up to `n` known keys closest to `wanted`, closest first.
pub fn closest_keys<'a>(wanted: &str, known: &'a [StatDef], n: usize) -> Vec<&'a str> {
    let mut scored: Vec<(usize, &str)> = known
        .iter()
        .map(|s| (edit_distance(wanted, &s.key), s.key.as_str()))
        .collect();
    scored.sort();
    scored.into_iter().take(n).map(|(_, k)| k).collect()
}

/// Levenshtein distance over bytes.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_catalogue_has_the_122_keys_of_torch_2_11() {
        let stats = cuda_stats();
        assert_eq!(stats.len(), 122);
        let keys: Vec<&str> = stats.iter().map(|s| s.key.as_str()).collect();
        for k in [
            "allocation.all.current",
            "requested_bytes.large_pool.freed",
            "oversize_allocations.peak",
            "oversize_segments.freed",
            "num_alloc_retries",
            "num_ooms",
            "max_split_size",
            "num_device_free",
        ] {
            assert!(keys.contains(&k), "{k} missing");
        }
        assert_eq!(stats[0].key, "allocation.all.current");
        assert_eq!(stats[4 * 12 + 1].key, "allocated_bytes.all.peak");
        assert_eq!(stats[121].key, "num_device_free");
    }

    #[test]
    fn closest_keys_suggests_the_real_spelling() {
        let stats = cuda_stats();
        assert_eq!(
            closest_keys("allocated.all.peak", &stats, 1),
            vec!["allocation.all.peak"]
        );
        assert_eq!(
            closest_keys("reserved_bytes.all.peek", &stats, 1),
            vec!["reserved_bytes.all.peak"]
        );
    }

    #[test]
    fn amounts_sum_and_levels_take_the_maximum() {
        assert!(Field::Allocated.sums_over_hits());
        assert!(Field::Counter.sums_over_hits());
        assert!(!Field::Peak.sums_over_hits());
        assert!(!Field::Current.sums_over_hits());
    }
}
