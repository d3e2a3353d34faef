//! How the binary links CPython: the static `libpythonX.Y.a` where the Python installation ships
//! one (as `python3` itself is linked: the whole archive, symbols exported to extension modules,
//! no PIE), else the shared `libpythonX.Y.so`. The shared library costs pure-Python code 10-35%
//! (calls between its functions go through the PLT and it is built position-independent;
//! BENCHMARKS.md), which is why static is preferred.
//!
//! `MEMPROF_LIBPYTHON=static|shared|auto` (default auto) chooses; `auto` falls back to shared,
//! with a build warning saying why, when the archive or a library it needs is missing. Without a
//! Python to ask (a PyO3 config file, as the GPU build uses), static needs
//! `MEMPROF_LIBPYTHON_ARCHIVE` (the .a) and `MEMPROF_LIBPYTHON_LIBS` (the linker arguments for the
//! libraries it needs). pyo3-ffi's own link lines are switched off (`.cargo/config.toml` sets
//! PYO3_BUILD_EXTENSION_MODULE) so that this file alone decides.
use std::path::{Path, PathBuf};
use std::process::Command;

/// What `build.rs` links, and what it tells the program about it.
/// The binary that embeds CPython (the `memprof` binary links no Python: src/main.rs).
pub const EMBEDDED_BINARY: &str = "memprof-embedded";

pub enum Link {
    Shared {
        lib_dir: Option<String>,
        lib_name: String,
    },
    Static {
        archive: PathBuf,
        /// Linker arguments for the libraries the archive needs (`-lm -lz -lexpat ...`).
        libs: Vec<String>,
        /// CPython 3.12 builds its SHA-2 code (HACL*) into a separate archive that is not
        /// installed; memprof then supplies those functions (src/python/static_sha2.rs).
        supply_sha2: bool,
    },
}

impl Link {
    /// A line for `memprof --version`: which libpython the binary runs.
    pub fn describe(&self) -> String {
        match self {
            Link::Shared { lib_dir, lib_name } => match lib_dir {
                Some(dir) => format!("shared lib{lib_name}.so ({dir})"),
                None => format!("shared lib{lib_name}.so"),
            },
            Link::Static { archive, .. } => format!("static {}", archive.display()),
        }
    }

    pub fn emit(&self) {
        match self {
            Link::Shared { lib_dir, lib_name } => {
                if let Some(dir) = lib_dir {
                    println!("cargo:rustc-link-search=native={dir}");
                    // A pyenv or uv Python keeps libpython outside the loader's default path,
                    // where a system libpython of the same SONAME would otherwise win.
                    println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
                }
                println!("cargo:rustc-link-lib=dylib={lib_name}");
            }
            Link::Static {
                archive,
                libs,
                supply_sha2,
            } => {
                // As CPython links its own `python` (LINKFORSHARED): every object of the archive,
                // whether or not Rust calls it, and its symbols exported, because extension
                // modules (torch's included) resolve the C API against the executable. The
                // archive's objects may not be position-independent, as python3's are not. Only
                // the binary (and its unit tests): the integration tests run it, not Python.
                println!("cargo:rustc-link-arg-bin={EMBEDDED_BINARY}=-no-pie");
                println!("cargo:rustc-link-arg-bin={EMBEDDED_BINARY}=-Wl,--export-dynamic");
                println!("cargo:rustc-link-arg-bin={EMBEDDED_BINARY}=-Wl,--whole-archive");
                println!(
                    "cargo:rustc-link-arg-bin={EMBEDDED_BINARY}={}",
                    archive.display()
                );
                println!("cargo:rustc-link-arg-bin={EMBEDDED_BINARY}=-Wl,--no-whole-archive");
                for lib in libs {
                    println!("cargo:rustc-link-arg-bin={EMBEDDED_BINARY}={lib}");
                }
                if *supply_sha2 {
                    println!("cargo:rustc-cfg=memprof_static_sha2");
                }
            }
        }
    }
}

/// The interpreter's link-time facts (sysconfig), where there is an interpreter to ask.
struct Sysconfig {
    libpl: String,
    libdir: String,
    library: String,
    libs: Vec<String>,
}

fn sysconfig(python: &str) -> Option<Sysconfig> {
    let out = Command::new(python)
        .args([
            "-c",
            "import sysconfig as s\nfor k in ('LIBPL','LIBDIR','LIBRARY','MODLIBS','LIBS','SYSLIBS'): print(s.get_config_var(k) or '')",
        ])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let v: Vec<&str> = text.lines().collect();
    if v.len() < 6 {
        return None;
    }
    let libs = v[3..6]
        .iter()
        .flat_map(|s| s.split_whitespace())
        .map(str::to_string)
        .collect();
    Some(Sysconfig {
        libpl: v[0].to_string(),
        libdir: v[1].to_string(),
        library: v[2].to_string(),
        libs,
    })
}

/// Whether the archive's symbol index (the GNU `/` member, first in the file) defines `symbol`.
/// Reads only that index, not the archive's objects.
fn archive_defines(archive: &Path, symbol: &str) -> bool {
    use std::io::Read;
    let Ok(mut file) = std::fs::File::open(archive) else {
        return false;
    };
    let mut head = [0u8; 8 + 60];
    if file.read_exact(&mut head).is_err() || !head.starts_with(b"!<arch>\n") {
        return false;
    }
    let header = &head[8..];
    if !header.starts_with(b"/ ") {
        return false;
    }
    let Some(size) = std::str::from_utf8(&header[48..58])
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
    else {
        return false;
    };
    let mut body = vec![0u8; size];
    if size < 4 || file.read_exact(&mut body).is_err() {
        return false;
    }
    let count = u32::from_be_bytes([body[0], body[1], body[2], body[3]]) as usize;
    let names = body.get(4 + 4 * count..).unwrap_or(&[]);
    names.split(|b| *b == 0).any(|n| n == symbol.as_bytes())
}

/// Whether the C compiler's linker finds `-l<name>`.
fn linker_finds(name: &str) -> bool {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    ["so", "a"].iter().any(|ext| {
        let file = format!("lib{name}.{ext}");
        Command::new(&cc)
            .arg(format!("-print-file-name={file}"))
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim() != file)
            .unwrap_or(false)
    })
}

/// The archive's libraries as linker arguments; Err names what the linker cannot supply.
fn static_libs(tokens: &[String], supply_sha2: bool) -> Result<Vec<String>, String> {
    let mut libs = Vec::new();
    for t in tokens {
        if let Some(name) = t.strip_prefix("-l") {
            if !linker_finds(name) {
                return Err(format!("the linker cannot find {t}, which it needs"));
            }
            libs.push(t.clone());
        } else if t.starts_with("-L")
            || t.starts_with("-Wl,")
            || t == "-pthread"
            || (Path::new(t).is_absolute() && Path::new(t).is_file())
        {
            libs.push(t.clone());
        } else if t.ends_with(".a") || t.contains(".so") || t.ends_with(".o") {
            if supply_sha2 && t.ends_with("libHacl_Hash_SHA2.a") {
                // Left in CPython's build tree; memprof supplies these functions.
            } else {
                return Err(format!("it needs {t}, which is not installed"));
            }
        }
    }
    if !libs.iter().any(|l| l == "-lm") {
        libs.push("-lm".to_string());
    }
    Ok(libs)
}

fn shared(config: &pyo3_build_config::InterpreterConfig) -> Link {
    let v = config.version();
    Link::Shared {
        lib_dir: config.lib_dir().map(str::to_string),
        lib_name: config
            .lib_name()
            .map(str::to_string)
            .unwrap_or_else(|| format!("python{}.{}", v.major, v.minor)),
    }
}

pub fn choose(config: &pyo3_build_config::InterpreterConfig) -> Link {
    for var in [
        "MEMPROF_LIBPYTHON",
        "MEMPROF_LIBPYTHON_ARCHIVE",
        "MEMPROF_LIBPYTHON_LIBS",
        "CC",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let wanted = std::env::var("MEMPROF_LIBPYTHON").unwrap_or_else(|_| "auto".to_string());
    let minor = config.version().minor;
    match wanted.as_str() {
        "shared" => return shared(config),
        "static" | "auto" => {}
        other => panic!("MEMPROF_LIBPYTHON={other}: use static, shared or auto"),
    }
    let insist = wanted == "static";
    let fall_back = |why: String| -> Link {
        if insist {
            panic!("MEMPROF_LIBPYTHON=static: {why}");
        }
        println!("cargo:warning=linking the shared libpython (slower on pure Python): {why}");
        shared(config)
    };
    let facts = config.executable().and_then(sysconfig);
    let archive = match std::env::var_os("MEMPROF_LIBPYTHON_ARCHIVE") {
        Some(a) => PathBuf::from(a),
        None => match &facts {
            Some(f) if !f.library.ends_with(".a") => {
                return fall_back(format!("this Python's library is {}", f.library))
            }
            Some(f) => {
                let in_libpl = Path::new(&f.libpl).join(&f.library);
                if in_libpl.exists() {
                    in_libpl
                } else {
                    Path::new(&f.libdir).join(&f.library)
                }
            }
            None if !insist => return shared(config),
            None => panic!(
                "MEMPROF_LIBPYTHON=static without a Python to ask: set MEMPROF_LIBPYTHON_ARCHIVE and MEMPROF_LIBPYTHON_LIBS"
            ),
        },
    };
    println!("cargo:rerun-if-changed={}", archive.display());
    if !archive.is_file() {
        return fall_back(format!("{} does not exist", archive.display()));
    }
    let supply_sha2 =
        minor == 12 && !archive_defines(&archive, "python_hashlib_Hacl_Hash_SHA2_update_256");
    let tokens: Vec<String> = match std::env::var("MEMPROF_LIBPYTHON_LIBS") {
        Ok(libs) => libs.split_whitespace().map(str::to_string).collect(),
        Err(_) => facts.map(|f| f.libs).unwrap_or_default(),
    };
    match static_libs(&tokens, supply_sha2) {
        Ok(libs) => Link::Static {
            archive,
            libs,
            supply_sha2,
        },
        Err(why) => fall_back(format!("{}: {why}", archive.display())),
    }
}
