//! Builds memprof's torch library (src/torch/cpp: the allocator's reporter, hooks and stats, the
//! code that must be compiled against one torch release) as a shared library of its own,
//! `libmemprof_torch-<minor>.so`, against one torch's headers and libraries. The build script
//! builds the one for the build's torch; scripts/release.sh builds one per row of
//! src/torch/releases.tsv through crates/shim-builder. Both use this file, so every library is
//! built the same way.
use std::path::{Path, PathBuf};

/// The C++ sources of the library, relative to the project's root.
pub const SOURCES: [&str; 7] = [
    "src/torch/cpp/shim.cpp",
    "src/torch/cpp/grad_hooks.cpp",
    "src/torch/cpp/saved_info.cpp",
    "src/torch/cpp/saved_hooks.cpp",
    "src/torch/cpp/saved_interpose.cpp",
    "src/torch/cpp/cuda_trace.cpp",
    "src/torch/cpp/tensor_object.cpp",
];

/// Every file the library is built from (for cargo's rerun-if-changed).
pub const INPUTS: [&str; 11] = [
    "src/torch/cpp/shim.cpp",
    "src/torch/cpp/grad_hooks.cpp",
    "src/torch/cpp/saved_info.cpp",
    "src/torch/cpp/saved_hooks.cpp",
    "src/torch/cpp/saved_interpose.cpp",
    "src/torch/cpp/cuda_trace.cpp",
    "src/torch/cpp/tensor_object.cpp",
    "src/torch/cpp/callbacks.h",
    "src/torch/cpp/portable.h",
    "src/torch/cpp/cuda_decls",
    "src/torch/releases.tsv",
];

/// One torch release's row of src/torch/releases.tsv.
pub struct Release {
    /// `2.11`.
    pub minor: String,
    /// `c++17` or `c++20`: what its headers need.
    pub cxx_standard: String,
    /// Whether c10's DeviceAllocator has getMemoryInfo.
    pub memory_info: bool,
    /// The CUDA allocator's TraceEntry, fully qualified.
    pub trace_entry: String,
}

/// The rows of src/torch/releases.tsv.
pub fn releases(root: &Path) -> Vec<Release> {
    let table = std::fs::read_to_string(root.join("src/torch/releases.tsv"))
        .expect("src/torch/releases.tsv is readable");
    table
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            Release {
                minor: cols[0].to_string(),
                cxx_standard: cols[1].to_string(),
                memory_info: cols[4] == "1",
                trace_entry: cols[5].to_string(),
            }
        })
        .collect()
}

/// The row of the torch whose package folder is `torch` (its `version.py`, as the wheel has it).
pub fn release_of(root: &Path, torch: &Path) -> Release {
    let version_py = std::fs::read_to_string(torch.join("version.py"))
        .unwrap_or_else(|e| panic!("{}: {e}", torch.join("version.py").display()));
    let version = version_py
        .lines()
        .find_map(|l| l.strip_prefix("__version__"))
        .and_then(|v| v.split('=').nth(1))
        .map(|v| v.trim().trim_matches(['\'', '"']).to_string())
        .expect("__version__ in torch/version.py");
    let minor = version.split('.').take(2).collect::<Vec<_>>().join(".");
    releases(root)
        .into_iter()
        .find(|r| r.minor == minor)
        .unwrap_or_else(|| {
            panic!(
                "memprof supports the torch releases of src/torch/releases.tsv; {} is torch \
                 {version}",
                torch.display()
            )
        })
}

/// How a Python tensor (THPVariable) holds its tensor in this release, as its own header
/// declares it (src/torch/cpp/tensor_object.cpp): "0" an at::Tensor (2.11 on), "1" a
/// c10::MaybeOwned<at::Tensor> (before), "-1" neither (the shim then answers null, and memprof
/// reads `_cdata`).
fn variable_cdata(include: &Path) -> &'static str {
    let header = include.join("torch/csrc/autograd/python_variable.h");
    let text = std::fs::read_to_string(&header).unwrap_or_default();
    if text.contains("c10::MaybeOwned<at::Tensor> cdata;") {
        "1"
    } else if text.contains("at::Tensor cdata;") {
        "0"
    } else {
        "-1"
    }
}

/// Builds the library against the libtorch whose lib folder is `torch_lib` (its `include` and
/// `version.py` beside it) into `out_dir`, objects in `out_dir/objects`; returns its path. `in_build_script`:
/// cc reads cargo's target and profile from the environment; else x86_64 Linux, -O2.
pub fn build(root: &Path, torch_lib: &Path, out_dir: &Path, in_build_script: bool) -> PathBuf {
    let torch = torch_lib
        .parent()
        .expect("libtorch's lib folder has a parent");
    let include = torch.join("include");
    let release = release_of(root, torch);
    let objects = out_dir.join("objects");
    std::fs::create_dir_all(&objects).expect("the build folder can be made");
    let mut base = cc::Build::new();
    base.cpp(true)
        .pic(true)
        .warnings(false)
        .cargo_metadata(false)
        .out_dir(&objects)
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .flag(format!("-std={}", release.cxx_standard))
        .flag("-D_GLIBCXX_USE_CXX11_ABI=1")
        // libtorch's release build defines NDEBUG, and its headers change with it: without it
        // the shim saw fields that libtorch's objects do not have (RecordFunction's
        // inputs_valid_, a padding byte there) and its debug checks read them, so a c10d op's
        // inputs were refused whenever that byte happened to be 0.
        .define("NDEBUG", None)
        // What differs between releases, from the table (src/torch/releases.tsv).
        .define(
            "MEMPROF_HAS_MEMORY_INFO",
            if release.memory_info { "1" } else { "0" },
        )
        .define("MEMPROF_TRACE_ENTRY", release.trace_entry.as_str())
        .define("MEMPROF_VARIABLE_CDATA", variable_cdata(&include))
        .flag("-O2")
        .flag("-include")
        .flag(root.join("src/torch/cpp/portable.h").display().to_string());
    if !in_build_script {
        base.target("x86_64-unknown-linux-gnu")
            .host("x86_64-unknown-linux-gnu")
            .opt_level(2)
            .debug(false);
    }
    let mut objects = Vec::new();
    for source in SOURCES {
        let mut b = base.clone();
        // The CUDA allocator's trace entries: its class from torch's headers, which name CUDA
        // runtime types; cuda_decls/ declares them where the toolkit is absent (first on the
        // path, so that one build is the same everywhere).
        if source.ends_with("cuda_trace.cpp") {
            b.include(root.join("src/torch/cpp/cuda_decls"));
        }
        objects.extend(b.file(root.join(source)).compile_intermediates());
    }
    let name = format!("libmemprof_torch-{}.so", release.minor);
    let library = out_dir.join(&name);
    let mut link = base.get_compiler().to_command();
    link.arg("-shared")
        .arg("-o")
        .arg(&library)
        .args(&objects)
        .arg(format!("-Wl,-soname,{name}"))
        // libc10 and libtorch_cpu by name: the process has them loaded (memprof loads them
        // from the script's torch first), so the names bind to those.
        .arg(format!("-L{}", torch_lib.display()))
        .args(["-lc10", "-ltorch_cpu", "-ldl"]);
    let status = link
        .status()
        .unwrap_or_else(|e| panic!("could not run the C++ linker: {e}"));
    assert!(status.success(), "linking {} failed", library.display());
    library
}
