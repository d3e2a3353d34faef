//! `memprof-shim-builder --torch-lib DIR --out DIR`: builds memprof's torch library
//! (src/torch/cpp) against the libtorch whose lib folder is DIR (its `include` beside it), as
//! the build script builds the one for the build's torch (the same file, build/shim.rs), and
//! prints the library's path. scripts/release.sh runs it once per row of src/torch/releases.tsv.
// The build script also reads the file list (INPUTS) for cargo; this builder does not.
#[allow(dead_code)]
#[path = "../../../build/shim.rs"]
mod shim;

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: memprof-shim-builder --torch-lib DIR --out DIR";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (mut torch_lib, mut out) = (None, None);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--torch-lib" => torch_lib = args.next().map(PathBuf::from),
            "--out" => out = args.next().map(PathBuf::from),
            _ => {
                eprintln!("memprof-shim-builder: unknown argument '{a}'\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let (Some(torch_lib), Some(out)) = (torch_lib, out) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the project's root");
    println!("{}", shim::build(&root, &torch_lib, &out, false).display());
    ExitCode::SUCCESS
}
