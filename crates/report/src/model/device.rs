//! The device a run measures: a CUDA device by index, or the CPU.

/// Where the numbers come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Cuda(i32),
    Cpu,
}

impl Source {
    /// `cuda` or `cpu`, as torch names the device type.
    pub fn kind(self) -> &'static str {
        match self {
            Source::Cuda(_) => "cuda",
            Source::Cpu => "cpu",
        }
    }

    /// The CUDA index, None on the CPU.
    pub fn cuda_index(self) -> Option<i32> {
        match self {
            Source::Cuda(i) => Some(i),
            Source::Cpu => None,
        }
    }
}
