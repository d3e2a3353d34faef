//! Build script: compiles the C++ shim against the libtorch that memprof links (tch's, or the
//! build Python's: build/libtorch.rs), and writes the link arguments that make the binary load that libtorch and the intended libpython
//! (build/libpython.rs decides how CPython is linked).

#[path = "build/libpython.rs"]
mod libpython;
#[path = "build/libtorch.rs"]
mod libtorch;

fn main() {
    let lib = libtorch::lib_dir();
    let include = lib
        .parent()
        .expect("libtorch lib dir has a parent")
        .join("include");
    let std = libtorch::cxx_standard(&include);
    cc::Build::new()
        .cpp(true)
        .pic(true)
        .warnings(false)
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .flag(std)
        .flag("-D_GLIBCXX_USE_CXX11_ABI=1")
        // libtorch's release build defines NDEBUG, and its headers change with it: without it
        // the shim saw fields that libtorch's objects do not have (RecordFunction's
        // inputs_valid_, a padding byte there) and its debug checks read them, so a c10d op's
        // inputs were refused whenever that byte happened to be 0.
        .define("NDEBUG", None)
        .flag("-O2")
        .file("src/torch/cpp/shim.cpp")
        .file("src/torch/cpp/grad_hooks.cpp")
        .file("src/torch/cpp/saved_info.cpp")
        .compile("memprof_shim");
    // The CUDA allocator's trace entries: its class from torch's headers, which name CUDA
    // runtime types; cuda_decls/ declares them where the toolkit is absent (first on the path,
    // so that one build is the same everywhere).
    cc::Build::new()
        .cpp(true)
        .pic(true)
        .warnings(false)
        .include("src/torch/cpp/cuda_decls")
        .include(&include)
        // torch/version.h: which torch's trace entry to name.
        .include(include.join("torch/csrc/api/include"))
        .flag(std)
        .flag("-D_GLIBCXX_USE_CXX11_ABI=1")
        .define("NDEBUG", None)
        .flag("-O2")
        .file("src/torch/cpp/cuda_trace.cpp")
        .compile("memprof_cuda_trace");
    println!("cargo:rerun-if-changed=src/torch/cpp/cuda_trace.cpp");
    println!("cargo:rerun-if-changed=src/torch/cpp/cuda_decls");
    println!("cargo:rerun-if-changed=src/torch/cpp/shim.cpp");
    println!("cargo:rerun-if-changed=src/torch/cpp/grad_hooks.cpp");
    println!("cargo:rerun-if-changed=src/torch/cpp/saved_info.cpp");
    println!("cargo:rerun-if-env-changed=LIBTORCH_USE_PYTORCH");
    println!("cargo:rerun-if-env-changed=PYO3_PYTHON");
    println!("cargo:rerun-if-env-changed=PYO3_CONFIG_FILE");

    // The embedded `import torch` must load these same .so files: the rpath makes the binary
    // find them first, and --no-as-needed keeps libtorch_cuda even though Rust never calls it,
    // otherwise libtorch caches its CPU-only CUDA stub (see shared/gpu/README.md).
    // Only the artifacts with the native core get them: memprof-embedded and the Python extension
    // (the `memprof` binary reads reports, and must start without libtorch).
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    let mut core_args = vec![
        "-Wl,--no-as-needed".to_string(),
        format!("-L{}", lib.display()),
    ];
    if lib.join("libtorch_cuda.so").exists() {
        core_args.push("-ltorch_cuda".into());
    }
    core_args.extend(["-ltorch", "-ltorch_cpu", "-lc10"].map(String::from));
    for arg in &core_args {
        println!(
            "cargo:rustc-link-arg-bin={}={arg}",
            libpython::EMBEDDED_BINARY
        );
        println!("cargo:rustc-link-arg-cdylib={arg}");
    }

    // libpython: static where the installation ships the archive, else shared (build/libpython.rs).
    let config = pyo3_build_config::get();
    let link = libpython::choose(config);
    link.emit();
    println!("cargo:rustc-env=MEMPROF_LIBPYTHON_LINK={}", link.describe());
    // `#[cfg(Py_3_12)]` selects the line hook (sys.monitoring, or the C trace function).
    pyo3_build_config::use_pyo3_cfgs();
    println!(
        "cargo:rustc-env=MEMPROF_PYTHON_VERSION={}.{}",
        config.version().major,
        config.version().minor
    );
}
