//! The GPU models `memprof run --simulate-gpu NAME` can stand in for: what torch.cuda reports for
//! each (name, memory, compute capability, SMs) and what differs for memory (cuBLAS's workspace,
//! what a process has on the device outside the caching allocator, the table of cuDNN's
//! workspaces measured on its architecture). Data, one row per model.
use serde::Serialize;

/// One GPU model, as the simulated run's torch.cuda answers for it.
#[derive(Serialize, Debug, Clone, Copy, PartialEq)]
pub struct GpuModel {
    /// What `--simulate-gpu` accepts (case does not matter).
    #[serde(skip)]
    pub key: &'static str,
    /// `torch.cuda.get_device_name()`.
    pub name: &'static str,
    /// `get_device_properties().total_memory`, bytes.
    pub total_memory: i64,
    pub major: i32,
    pub minor: i32,
    pub multi_processor_count: i32,
    /// cuBLAS's workspace per handle (thread and stream), through the caching allocator: torch's
    /// default for the architecture (CublasHandlePool.cpp: 32 MiB on sm90 and newer, else
    /// 4096 KiB x 2 + 16 KiB x 8).
    pub cublas_workspace: i64,
    /// cuBLASLt's workspace per handle (a matrix product with a bias takes its path): 1 MiB,
    /// measured on the H100 and H200 with torch 2.11 (torch's default on the others).
    pub cublaslt_workspace: i64,
    /// The device's memory a process holds outside the caching allocator: the CUDA context and
    /// libraries' handles (measured on the H100 and H200 at the end of a run; the others are
    /// estimates from the same driver and torch, and say so in docs/fit.md).
    pub outside_allocator: i64,
    /// The table of cuDNN's convolution workspaces measured on this architecture
    /// (`simulate_cudnn.py`; "" where none was measured: not modelled there).
    pub cudnn_workspaces: &'static str,
}

const MIB: i64 = 1 << 20;
const HOPPER_WORKSPACE: i64 = 32 * MIB;
const AMPERE_WORKSPACE: i64 = 4096 * 1024 * 2 + 16 * 1024 * 8;

/// The models, in the order `--simulate-gpu`'s error lists them.
pub const GPUS: &[GpuModel] = &[
    GpuModel {
        key: "H100",
        name: "NVIDIA H100 80GB HBM3",
        total_memory: 85_017_493_504,
        major: 9,
        minor: 0,
        multi_processor_count: 132,
        cublas_workspace: HOPPER_WORKSPACE,
        cublaslt_workspace: MIB,
        cudnn_workspaces: "sm90",
        outside_allocator: 808_255_488,
    },
    GpuModel {
        key: "H200",
        name: "NVIDIA H200",
        total_memory: 150_109_880_320,
        major: 9,
        minor: 0,
        multi_processor_count: 132,
        cublas_workspace: HOPPER_WORKSPACE,
        cublaslt_workspace: MIB,
        cudnn_workspaces: "sm90",
        outside_allocator: 808_255_488,
    },
    GpuModel {
        key: "A100-80GB",
        name: "NVIDIA A100-SXM4-80GB",
        total_memory: 85_089_697_792,
        major: 8,
        minor: 0,
        multi_processor_count: 108,
        cublas_workspace: AMPERE_WORKSPACE,
        cublaslt_workspace: MIB,
        cudnn_workspaces: "",
        outside_allocator: 600 * MIB,
    },
    GpuModel {
        key: "A100-40GB",
        name: "NVIDIA A100-SXM4-40GB",
        total_memory: 42_505_273_344,
        major: 8,
        minor: 0,
        multi_processor_count: 108,
        cublas_workspace: AMPERE_WORKSPACE,
        cublaslt_workspace: MIB,
        cudnn_workspaces: "",
        outside_allocator: 600 * MIB,
    },
    GpuModel {
        key: "L4",
        name: "NVIDIA L4",
        total_memory: 23_580_639_232,
        major: 8,
        minor: 9,
        multi_processor_count: 58,
        cublas_workspace: AMPERE_WORKSPACE,
        cublaslt_workspace: MIB,
        cudnn_workspaces: "",
        outside_allocator: 500 * MIB,
    },
    GpuModel {
        key: "RTX4090",
        name: "NVIDIA GeForce RTX 4090",
        total_memory: 25_386_352_640,
        major: 8,
        minor: 9,
        multi_processor_count: 128,
        cublas_workspace: AMPERE_WORKSPACE,
        cublaslt_workspace: MIB,
        cudnn_workspaces: "",
        outside_allocator: 500 * MIB,
    },
];

/// The model `name` names: its key in any case, with or without dashes and spaces
/// (`h100`, `A100-80GB`, `a100 80gb`, `rtx 4090`); `A100` alone is the 80 GB one.
pub fn find(name: &str) -> Option<&'static GpuModel> {
    let squash = |s: &str| {
        s.chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_uppercase()
    };
    let wanted = match squash(name).as_str() {
        "A100" => "A10080GB".to_string(),
        "4090" => "RTX4090".to_string(),
        other => other.to_string(),
    };
    GPUS.iter().find(|g| squash(g.key) == wanted)
}

/// The keys, for a message that lists them.
pub fn keys() -> String {
    GPUS.iter().map(|g| g.key).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_models_by_their_keys_in_any_spelling() {
        assert_eq!(find("H100").unwrap().name, "NVIDIA H100 80GB HBM3");
        assert_eq!(find("h100").unwrap().key, "H100");
        assert_eq!(find("a100 40gb").unwrap().key, "A100-40GB");
        assert_eq!(find("A100").unwrap().key, "A100-80GB");
        assert_eq!(find("rtx-4090").unwrap().key, "RTX4090");
        assert!(find("H300").is_none());
        assert_eq!(keys(), "H100, H200, A100-80GB, A100-40GB, L4, RTX4090");
    }

    #[test]
    fn workspaces_follow_the_architecture() {
        for g in GPUS {
            let want = if g.major >= 9 {
                HOPPER_WORKSPACE
            } else {
                AMPERE_WORKSPACE
            };
            assert_eq!(g.cublas_workspace, want, "{}", g.key);
            assert!(g.outside_allocator < g.total_memory / 10);
        }
    }
}
