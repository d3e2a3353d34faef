//! Where memprof's own command line ends: in `memprof [OPTIONS] run [OPTIONS] SCRIPT ARGS...` (or
//! `-m MODULE ARGS...`) everything after the script belongs to the script, whatever it looks like
//! (`--device 3`, `-f`, `--help`), as with `python script.py ARGS`. clap alone would take options
//! it knows from anywhere, so the split is made before clap sees the line.
use clap::CommandFactory;
use std::collections::HashSet;

/// The options that take a value, as they may be written before the script (`--device`, `-f`).
fn options_with_values() -> HashSet<String> {
    let cli = crate::cli::Cli::command();
    let run = cli
        .find_subcommand("run")
        .expect("the run subcommand exists")
        .clone();
    cli.get_arguments()
        .chain(run.get_arguments())
        .filter(|a| !a.is_positional() && a.get_action().takes_values())
        .flat_map(|a| {
            let long = a.get_long().map(|l| format!("--{l}"));
            let short = a.get_short().map(|s| format!("-{s}"));
            long.into_iter().chain(short)
        })
        .collect()
}

/// This process's command line without the program's name.
pub fn from_env() -> Vec<String> {
    std::env::args_os()
        .skip(1)
        .map(|a| {
            a.into_string()
                .unwrap_or_else(|a| a.to_string_lossy().into_owned())
        })
        .collect()
}

/// Whether memprof's own options before any subcommand ask for the version (`--version`, `-V`):
/// the pip wheel's binary hands that to its Python before clap would answer it.
pub fn asks_version(args: &[String]) -> bool {
    let valued = options_with_values();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "--version" | "-V" => return true,
            "--" => return false,
            a if !a.starts_with('-') => return false,
            a if valued.contains(a) => i += 2,
            _ => i += 1,
        }
    }
    false
}

/// Splits `args` (without the program name) into what memprof parses, up to and including the
/// script (or module) of `run`, and the script's own arguments. Other subcommands are not split.
pub fn split(args: Vec<String>) -> (Vec<String>, Vec<String>) {
    let valued = options_with_values();
    let takes_value = |a: &str| valued.contains(a);
    let mut in_run = false;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" {
            // `memprof run [OPTIONS] -- SCRIPT ARGS...`: the next word is the script.
            if in_run && i + 1 < args.len() {
                return (args[..=i + 1].to_vec(), args[i + 2..].to_vec());
            }
            break;
        }
        if !a.starts_with('-') || a == "-" {
            if !in_run {
                if a != "run" {
                    break; // another subcommand (show, merge, ...): clap parses it all
                }
                in_run = true;
                i += 1;
                continue;
            }
            // The script (or, after -m, the module).
            return (args[..=i].to_vec(), args[i + 1..].to_vec());
        }
        if a.contains('=') && a.starts_with("--") {
            i += 1;
        } else if takes_value(a) {
            i += 2;
        } else {
            i += 1;
        }
    }
    (args, Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn check(line: &str, own: &str, script: &str) {
        let (a, b) = split(words(line));
        assert_eq!((a, b), (words(own), words(script)), "{line}");
    }

    #[test]
    fn everything_after_the_script_is_the_scripts() {
        check(
            "run argv.py -f x --device 3 --format json -o out --modules --help",
            "run argv.py",
            "-f x --device 3 --format json -o out --modules --help",
        );
        check(
            "--device 1 run -f step --format=json --calls 2 train.py --lr 3e-4",
            "--device 1 run -f step --format=json --calls 2 train.py",
            "--lr 3e-4",
        );
        check(
            "run --device cpu --stat a,b -o r.json -f step train.py --device 3",
            "run --device cpu --stat a,b -o r.json -f step train.py",
            "--device 3",
        );
        check(
            "run -f step -m pkg.mod --device 3 -m x",
            "run -f step -m pkg.mod",
            "--device 3 -m x",
        );
        check(
            "run --modules -- -weird.py --tensors",
            "run --modules -- -weird.py",
            "--tensors",
        );
    }

    #[test]
    fn the_version_is_asked_for_only_before_a_subcommand() {
        for line in ["--version", "-V", "--device 1 --version", "--stat a,b -V"] {
            assert!(asks_version(&words(line)), "{line}");
        }
        for line in [
            "run x.py --version",
            "--device --version run",
            "show r.json -V",
            "",
        ] {
            assert!(!asks_version(&words(line)), "{line}");
        }
    }

    #[test]
    fn other_subcommands_and_incomplete_lines_go_to_clap_whole() {
        check(
            "merge a.json b.json --format json",
            "merge a.json b.json --format json",
            "",
        );
        check("--stat x show r.json", "--stat x show r.json", "");
        check("run -f step", "run -f step", "");
        check("run --help", "run --help", "");
    }
}
