//! `--max [FUNCTION:]KEY=SIZE`: memory budgets that fail CI. Parsing the expressions, and checking
//! a finished report's lines against them; the report marks what broke a budget and memprof
//! exits with `exit_code::BUDGET_EXCEEDED`.
use super::limits::{self, Amount, Forms};
use crate::error::{Error, Result};
use crate::model::profile::{is_delta, BudgetResult, Exceeded, Profile};

/// One parsed `--max` expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Budget {
    /// As given.
    pub spec: String,
    /// A function's qualified name (or its last part); None: every targeted function.
    pub function: Option<String>,
    /// A stat key, `delta` (a line's Δ, summed over hits) or `delta_per_call` (that Δ divided
    /// by the hits: the same limit whatever the number of steps).
    pub key: String,
    pub limit: i64,
}

fn bad(spec: &str, why: &str) -> Error {
    Error::usage(format!("'--max {spec}': {why}")).hint(
        "write --max KEY=SIZE or --max FUNCTION:KEY=SIZE, e.g. --max allocated_bytes.all.peak=20GiB \
         or --max train_step:delta_per_call=512MiB (SIZE in bytes, or with KiB, MiB, GiB, KB, MB, GB)",
    )
}

/// Parses `--max` expressions; `known(key)` says whether a stat key exists on this device.
pub fn parse(specs: &[String], known: impl Fn(&str) -> bool) -> Result<Vec<Budget>> {
    specs
        .iter()
        .map(|spec| {
            let limit = limits::parse(
                spec,
                Forms {
                    scoped: true,
                    percent: false,
                },
            )
            .map_err(|why| bad(spec, &why))?;
            let key = limit.key.as_str();
            if !is_delta(key) && !known(key) {
                return Err(bad(
                    spec,
                    &format!(
                        "'{key}' is not a stat here (`memprof stats` lists them) nor `delta` or \
                         `delta_per_call`"
                    ),
                ));
            }
            let Amount::Size(size) = limit.amount else {
                unreachable!("--max takes no percentage")
            };
            Ok(Budget {
                spec: spec.clone(),
                function: limit.scope,
                key: limit.key,
                limit: size,
            })
        })
        .collect()
}

/// Whether a function's qualified name is the one a budget names (whole, or its last parts;
/// a `module:` prefix is left aside).
fn names(function: &str, qualname: &str) -> bool {
    let function = function.rsplit(':').next().unwrap_or(function);
    qualname == function || qualname.ends_with(&format!(".{function}"))
}

/// Checks every line of every function a budget applies to; the results, one per budget.
pub fn check(profile: &Profile, budgets: &[Budget]) -> Vec<BudgetResult> {
    budgets
        .iter()
        .map(|b| {
            let mut exceeded = Vec::new();
            let mut lines_checked = 0;
            for f in &profile.functions {
                if b.function
                    .as_deref()
                    .is_some_and(|name| !names(name, &f.qualname))
                {
                    continue;
                }
                for line in &f.lines {
                    let value = line.value(&b.key);
                    lines_checked += u64::from(value.is_some());
                    if let Some(value) = value.filter(|v| *v > b.limit) {
                        exceeded.push(Exceeded {
                            function: f.qualname.clone(),
                            line: line.line,
                            source: line.source.trim().to_string(),
                            value,
                        });
                    }
                }
            }
            BudgetResult {
                spec: b.spec.clone(),
                function: b.function.clone(),
                key: b.key.clone(),
                limit: b.limit,
                lines_checked: Some(lines_checked),
                exceeded,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_one(spec: &str) -> Result<Budget> {
        parse(&[spec.to_string()], |k| k.starts_with("allocated_bytes")).map(|mut v| v.remove(0))
    }

    #[test]
    fn expressions() {
        let b = parse_one("allocated_bytes.all.peak=20GiB").unwrap();
        assert_eq!(
            (b.function, b.key.as_str(), b.limit),
            (None, "allocated_bytes.all.peak", 20 << 30)
        );
        let b = parse_one("Net.forward:delta=1024").unwrap();
        assert_eq!(
            (b.function.as_deref(), b.key.as_str(), b.limit),
            (Some("Net.forward"), "delta", 1024)
        );
        let b = parse_one("pkg.mod:Net.forward:allocated_bytes.all.current=1MiB").unwrap();
        assert_eq!(b.function.as_deref(), Some("pkg.mod:Net.forward"));
        for (spec, why) in [
            ("allocated_bytes.all.peak", "no '='"),
            ("=5", "no key"),
            ("reserved_bytes.all.peek=1GiB", "is not a stat here"),
            ("delta=lots", "'lots' is not a size"),
        ] {
            let e = parse_one(spec).unwrap_err();
            assert!(e.message.contains(why), "{spec}: {}", e.message);
            assert_eq!(e.code, crate::error::exit_code::USAGE);
        }
    }

    #[test]
    fn a_budget_names_a_function_by_its_qualified_name_or_tail() {
        assert!(names("train_step", "train_step"));
        assert!(names("forward", "Net.forward"));
        assert!(!names("forward", "Net.forwarder"));
        assert!(names("pkg.mod:Net.forward", "Net.forward"));
    }
}
