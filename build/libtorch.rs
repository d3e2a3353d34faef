//! Where the libtorch that memprof's torch library is built against lives. With the
//! `tch` feature, torch-sys (tch's build) found it and exports its lib dir; without it (a torch
//! that no tch release builds against), memprof finds it as torch's C++ extensions do: the
//! `torch` package of the build's Python (`LIBTORCH` overrides, as for torch-sys).
use std::path::{Path, PathBuf};
use std::process::Command;

/// libtorch's lib dir (`.../torch/lib`), whose parent holds `include/`.
pub fn lib_dir() -> PathBuf {
    if std::env::var_os("CARGO_FEATURE_TCH").is_some() {
        // torch-sys exports the libtorch lib dir only to crates that depend on it directly.
        return PathBuf::from(std::env::var("DEP_TCH_LIBTORCH_LIB").expect(
            "torch-sys did not export DEP_TCH_LIBTORCH_LIB; build with LIBTORCH_USE_PYTORCH=1",
        ));
    }
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    println!("cargo:rerun-if-env-changed=VIRTUAL_ENV");
    if let Some(root) = std::env::var_os("LIBTORCH") {
        return PathBuf::from(root).join("lib");
    }
    let python = build_python();
    let out = Command::new(&python)
        .args([
            "-c",
            "import importlib.util as u; print(u.find_spec('torch').submodule_search_locations[0])",
        ])
        .output()
        .unwrap_or_else(|e| panic!("memprof's build could not run {python}: {e}"));
    if !out.status.success() {
        panic!(
            "memprof's build needs torch in the build's Python ({python}): activate the venv that \
             has your torch, or set LIBTORCH to a libtorch directory\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let torch = String::from_utf8_lossy(&out.stdout).trim().to_string();
    PathBuf::from(torch).join("lib")
}

/// The Python whose torch is linked: PyO3's (`PYO3_PYTHON`), the active venv's, else `python3`.
fn build_python() -> String {
    if let Ok(p) = std::env::var("PYO3_PYTHON") {
        return p;
    }
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV") {
        let p = Path::new(&venv).join("bin/python");
        if p.exists() {
            return p.display().to_string();
        }
    }
    "python3".into()
}
