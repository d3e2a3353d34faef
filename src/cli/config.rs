//! Turns the parsed command line into a validated plan: which device, which stats.
use crate::capture::recorder::Source;
use crate::error::{Error, Result};
use crate::model::stats::{self, StatDef};

/// Parses `--device`: `cpu`, `N`, `cuda`, `cuda:N`. `None` picks cuda:0 when a GPU exists.
pub fn resolve_device(requested: Option<&str>, cuda_devices: i32) -> Result<Source> {
    let available = || -> String {
        if cuda_devices == 0 {
            "this machine has no CUDA device".to_string()
        } else {
            let names: Vec<String> = (0..cuda_devices).map(|i| format!("cuda:{i}")).collect();
            format!(
                "this machine has {} CUDA device{}: {}",
                cuda_devices,
                if cuda_devices == 1 { "" } else { "s" },
                names.join(", ")
            )
        }
    };
    let hint = || -> String {
        if cuda_devices == 0 {
            "pass --device cpu, or run on a machine with a GPU".to_string()
        } else {
            format!(
                "pass --device 0{} or --device cpu",
                if cuda_devices > 1 {
                    format!("..{}", cuda_devices - 1)
                } else {
                    String::new()
                }
            )
        }
    };
    let Some(text) = requested else {
        return Ok(if cuda_devices > 0 {
            Source::Cuda(0)
        } else {
            Source::Cpu
        });
    };
    let t = text.trim().to_ascii_lowercase();
    if t == "cpu" {
        return Ok(Source::Cpu);
    }
    let index = if t == "cuda" {
        Some(0)
    } else {
        t.strip_prefix("cuda:")
            .unwrap_or(&t)
            .parse::<i32>()
            .ok()
            .filter(|i| *i >= 0)
    };
    let Some(index) = index else {
        return Err(Error::usage(format!("'--device {text}' is not a device"))
            .hint("use a CUDA index (0, cuda:1) or cpu"));
    };
    if index >= cuda_devices {
        return Err(
            Error::usage(format!("'--device {text}' does not exist: {}", available())).hint(hint()),
        );
    }
    Ok(Source::Cuda(index))
}

/// Validates `--stat` keys for the device (defaults when none), without duplicates.
pub fn resolve_stats(requested: &[String], source: Source) -> Result<Vec<StatDef>> {
    let cuda = matches!(source, Source::Cuda(_));
    let known = stats::stats_for(cuda);
    let keys: Vec<String> = if requested.is_empty() {
        stats::default_keys(cuda)
            .into_iter()
            .map(String::from)
            .collect()
    } else {
        requested
            .iter()
            .flat_map(|s| s.split(','))
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    };
    let mut out: Vec<StatDef> = Vec::new();
    for key in keys {
        let Some(def) = known.iter().find(|s| s.key == key) else {
            let device = if cuda { "CUDA" } else { "--device cpu" };
            let mut err = Error::usage(format!("unknown stat '{key}' for {device}"));
            let is_cuda_key = !cuda && stats::cuda_stats().iter().any(|s| s.key == key);
            let near = stats::closest_keys(&key, &known, 3).join(", ");
            err = if is_cuda_key {
                err.hint(format!(
                    "'{key}' exists only on a CUDA device; on the CPU memprof measures: {}",
                    known
                        .iter()
                        .map(|s| s.key.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            } else {
                err.hint(format!(
                    "closest keys: {near} (`memprof stats` lists them all)"
                ))
            };
            return Err(err);
        };
        if !out.iter().any(|s| s.key == def.key) {
            out.push(def.clone());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_defaults_to_cuda0_when_a_gpu_exists_else_cpu() {
        assert_eq!(resolve_device(None, 2).unwrap(), Source::Cuda(0));
        assert_eq!(resolve_device(None, 0).unwrap(), Source::Cpu);
    }

    #[test]
    fn device_spellings() {
        assert_eq!(resolve_device(Some("1"), 2).unwrap(), Source::Cuda(1));
        assert_eq!(resolve_device(Some("cuda:1"), 2).unwrap(), Source::Cuda(1));
        assert_eq!(resolve_device(Some("cuda"), 1).unwrap(), Source::Cuda(0));
        assert_eq!(resolve_device(Some("CPU"), 0).unwrap(), Source::Cpu);
    }

    #[test]
    fn missing_device_lists_those_that_exist() {
        let e = resolve_device(Some("3"), 2).unwrap_err();
        assert_eq!(
            e.message,
            "'--device 3' does not exist: this machine has 2 CUDA devices: cuda:0, cuda:1"
        );
        let e = resolve_device(Some("0"), 0).unwrap_err();
        assert!(e.message.contains("no CUDA device"), "{}", e.message);
        assert!(resolve_device(Some("gpu"), 1).is_err());
    }

    #[test]
    fn stats_are_validated_with_suggestions() {
        let e = resolve_stats(&["reserved_bytes.all.peek".into()], Source::Cuda(0)).unwrap_err();
        assert!(e
            .hint
            .unwrap()
            .starts_with("closest keys: reserved_bytes.all.peak"));
        let e = resolve_stats(&["segment.all.peak".into()], Source::Cpu).unwrap_err();
        assert!(e.hint.unwrap().contains("exists only on a CUDA device"));
        let ok = resolve_stats(
            &[
                "num_ooms".into(),
                "num_ooms".into(),
                "oversize_allocations.peak".into(),
            ],
            Source::Cuda(0),
        )
        .unwrap();
        assert_eq!(ok.len(), 2);
    }
}
