//! `memprof stats`: every stat key memprof can measure, with its meaning.
use crate::model::stats;

/// The listing, CUDA keys first, then the host's and the CPU's.
pub fn listing() -> String {
    let mut s = String::from("CUDA stats (the keys of torch.cuda.memory_stats(), torch 2.11):\n");
    let mut cuda = stats::cuda_stats();
    cuda.sort_by(|a, b| a.key.cmp(&b.key));
    let width = cuda.iter().map(|d| d.key.len()).max().unwrap_or(0);
    for d in &cuda {
        s.push_str(&format!("  {:width$}  {}\n", d.key, d.meaning));
    }
    s.push_str("\nOn every device:\n");
    for d in stats::cpu_stats().iter().filter(|d| stats::is_host(&d.key)) {
        s.push_str(&format!("  {:width$}  {}\n", d.key, d.meaning));
    }
    s.push_str("\nCPU stats (--device cpu, or no GPU):\n");
    for d in stats::cpu_stats()
        .iter()
        .filter(|d| !stats::is_host(&d.key))
    {
        s.push_str(&format!("  {:width$}  {}\n", d.key, d.meaning));
    }
    s.push_str("\nPeaks are exact per line: allocated_bytes.all.peak and reserved_bytes.all.peak (CUDA) and all\n\
CPU peaks come from the allocator's own reports; any other CUDA peak makes memprof reset the\n\
device's peak stats at every traced line, and the report says so.\n");
    s
}
