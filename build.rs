//! Build script: builds memprof's torch library for the build's torch (build/shim.rs; tch's
//! libtorch, or the build Python's: build/libtorch.rs), which the core loads at run time
//! (src/torch/loader.rs), and links the intended libpython (build/libpython.rs decides how).
//! The core itself links no libtorch: one build of it serves every supported torch.

#[path = "build/libpython.rs"]
mod libpython;
#[path = "build/libtorch.rs"]
mod libtorch;
#[path = "build/shim.rs"]
mod shim;

use std::path::{Path, PathBuf};

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    for input in shim::INPUTS {
        println!("cargo:rerun-if-changed={input}");
    }
    println!("cargo:rerun-if-env-changed=LIBTORCH_USE_PYTORCH");
    println!("cargo:rerun-if-env-changed=PYO3_PYTHON");
    println!("cargo:rerun-if-env-changed=PYO3_CONFIG_FILE");
    println!("cargo:rerun-if-env-changed=MEMPROF_PREBUILT_SHIMS");
    // scripts/release.sh builds every release's library itself (crates/shim-builder) and puts
    // them in the wheel: the core is then built once, with no torch at hand.
    let wheel = std::env::var_os("CARGO_FEATURE_WHEEL").is_some();
    if std::env::var_os("MEMPROF_PREBUILT_SHIMS").is_none() {
        build_torch_library(&root, wheel);
    }

    // libpython: static where the installation ships the archive, else shared (build/libpython.rs).
    // Not for the wheel's extension, which the user's python loads: that python is its Python.
    let config = pyo3_build_config::get();
    let link = libpython::choose(config);
    if !wheel {
        link.emit();
    }
    println!("cargo:rustc-env=MEMPROF_LIBPYTHON_LINK={}", link.describe());
    // `#[cfg(Py_3_12)]` selects the line hook (sys.monitoring, or the C trace function).
    pyo3_build_config::use_pyo3_cfgs();
    println!(
        "cargo:rustc-env=MEMPROF_PYTHON_VERSION={}.{}",
        config.version().major,
        config.version().minor
    );
}

/// The library for the build's torch, into OUT_DIR/torch_shims (the core looks there, by the
/// path compiled in) and beside the build's binaries (`target/<profile>/torch_shims`, where the
/// core looks first: a copied build folder keeps working), and for a wheel (the `wheel` feature:
/// maturin's build of the sdist) into the Python package's folder, which the wheel takes.
fn build_torch_library(root: &Path, wheel: bool) {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
    let folder = out.join("torch_shims");
    let library = shim::build(root, &libtorch::lib_dir(), &folder, true);
    let name = library.file_name().expect("a file name");
    // OUT_DIR is target/<profile>/build/<crate>-<hash>/out.
    let mut copies: Vec<PathBuf> = out
        .ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .into_iter()
        .collect();
    if wheel {
        copies.push(root.join("src/wheel/memprof"));
    }
    for dir in copies {
        let dir = dir.join("torch_shims");
        std::fs::create_dir_all(&dir).expect("the torch_shims folder can be made");
        std::fs::copy(&library, dir.join(name)).expect("the library can be copied");
    }
    println!("cargo:rustc-env=MEMPROF_BUILT_SHIMS={}", folder.display());
}
