//! Loads memprof's torch library for the script's torch: libtorch's own libraries first, from
//! the torch the script will import (by path, so that the script's `import torch` finds them
//! loaded), then the library of src/torch/cpp built against that torch release's headers, one per
//! release in releases.tsv, from the folder beside memprof's core (`torch_shims/`) or the
//! build's own. Its functions go into ffi's table; memprof's callbacks into it.
use super::ffi;
use super::releases::{self, Release};
use crate::error::{Error, Result};
use std::ffi::{c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The folder of memprof's torch libraries beside its core (the wheel's `memprof/torch_shims`,
/// a build's `target/<profile>/torch_shims`).
pub const SHIM_FOLDER: &str = "torch_shims";

/// libtorch's libraries in the order torch's own import loads them; the CUDA ones where the
/// torch has them (libtorch checks for libtorch_cuda when it first looks for CUDA: loaded
/// later, it would keep its CPU-only stub).
const TORCH_LIBRARIES: [&str; 5] = [
    "libc10.so",
    "libtorch_cpu.so",
    "libc10_cuda.so",
    "libtorch_cuda.so",
    "libtorch.so",
];

/// The release whose library is loaded, once one is.
static LOADED: Mutex<Option<Release>> = Mutex::new(None);

/// Loads the library for the torch at `torch_root` (the package folder) whose version is
/// `version`, and hands it `callbacks`; again for the same release, nothing.
pub fn load(torch_root: &Path, version: &str, callbacks: &'static ffi::Callbacks) -> Result<()> {
    let Some(release) = releases::of_version(version) else {
        return Err(unsupported(version));
    };
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(have) = *loaded {
        if have == release {
            return Ok(());
        }
        return Err(Error::usage(format!(
            "this process already profiles torch {}; it cannot also load torch {version}",
            have.name()
        )));
    }
    let lib = torch_root.join("lib");
    for name in TORCH_LIBRARIES {
        let path = lib.join(name);
        if path.exists() {
            open(&path).map_err(|e| {
                Error::usage(format!("could not load torch's {}: {e}", path.display()))
                    .hint("check that `python -c 'import torch'` works in this environment")
            })?;
        }
    }
    let library = find_library(&release)?;
    let handle = open(&library).map_err(|e| {
        Error::usage(format!(
            "could not load memprof's library for torch {}: {e}",
            release.name()
        ))
        .hint(REINSTALL)
    })?;
    let shim = ffi::Shim::resolve(|name| {
        // SAFETY: dlsym on a live handle with a NUL-terminated name.
        let f = unsafe { libc::dlsym(handle, name.as_ptr()) };
        (!f.is_null()).then_some(f)
    })
    .map_err(|missing| {
        Error::usage(format!(
            "memprof's library {} lacks {missing}: it is not this memprof's",
            library.display()
        ))
        .hint(REINSTALL)
    })?;
    ffi::install(shim);
    // SAFETY: a static table of functions that live as long as the process.
    unsafe { ffi::mp_set_callbacks(callbacks) };
    *loaded = Some(release);
    Ok(())
}

const REINSTALL: &str =
    "reinstall memprof (`pip install --force-reinstall torch-memprof`), or build it from source \
     against this torch (docs/install.md)";

fn unsupported(version: &str) -> Error {
    Error::usage(format!(
        "the script's torch is {version}; memprof supports torch {}",
        releases::range()
    ))
    .hint(format!(
        "install a torch from {} (memprof never changes your torch), or build memprof from \
         source against this one: `pip install --no-build-isolation --no-binary torch-memprof \
         torch-memprof` (docs/install.md)",
        releases::range()
    ))
}

/// Where memprof's library for `release` is: beside memprof's core, else in the build's folder.
fn find_library(release: &Release) -> Result<PathBuf> {
    let name = release.library_name();
    let mut folders: Vec<PathBuf> = own_folder()
        .map(|f| f.join(SHIM_FOLDER))
        .into_iter()
        .collect();
    if let Some(built) = option_env!("MEMPROF_BUILT_SHIMS") {
        folders.push(PathBuf::from(built));
    }
    if let Some(found) = folders.iter().map(|f| f.join(&name)).find(|p| p.exists()) {
        return Ok(found);
    }
    let have: Vec<String> = folders
        .iter()
        .filter_map(|f| std::fs::read_dir(f).ok())
        .flatten()
        .filter_map(|e| {
            let n = e.ok()?.file_name().to_string_lossy().into_owned();
            Some(
                n.strip_prefix("libmemprof_torch-")?
                    .strip_suffix(".so")?
                    .to_string(),
            )
        })
        .collect();
    Err(Error::usage(format!(
        "this memprof has no library for torch {} (it has {}; looked in {})",
        release.name(),
        if have.is_empty() {
            "none".to_string()
        } else {
            have.join(", ")
        },
        folders
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ))
    .hint(REINSTALL))
}

/// The folder of the file that holds memprof's core: the wheel's extension, or a build's binary.
fn own_folder() -> Option<PathBuf> {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr fills `info` for an address inside this object (this function's own).
    let found = unsafe { libc::dladdr(own_folder as *const c_void, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr's file name is a NUL-terminated string owned by the loader.
    let file = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy();
    let path = std::fs::canonicalize(file.as_ref()).ok()?;
    path.parent().map(Path::to_path_buf)
}

fn open(path: &Path) -> std::result::Result<*mut c_void, String> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: a NUL-terminated path; the handle is never closed (the library stays for the
    // process: libtorch holds its reporter and hooks).
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if h.is_null() {
        // SAFETY: dlerror's message is NUL-terminated, valid until the next dl call.
        let e = unsafe { libc::dlerror() };
        return Err(if e.is_null() {
            "unknown error".into()
        } else {
            unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
        });
    }
    Ok(h)
}
