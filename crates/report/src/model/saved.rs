//! A saved document read back: a run's report or several ranks' merged report, told apart by
//! its `schema` field (YAML or JSON).
use super::merged::{Merged, MERGED_SCHEMA};
use super::profile::Profile;
use serde::de::DeserializeOwned;
use serde::Deserialize;

/// A saved report: one run's, or several ranks' merged.
pub enum Saved {
    Run(Box<Profile>),
    Merged(Box<Merged>),
}

/// Only the field that names the document's kind.
#[derive(Deserialize)]
struct Kind {
    schema: Option<String>,
}

/// Parses what memprof saves (`-o`'s reports, traces): JSON when it starts with `{`, else YAML;
/// the error is the parser's message.
pub fn from_json_or_yaml<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| e.to_string())
    } else {
        serde_yaml::from_str(text).map_err(|e| e.to_string())
    }
}

/// Whether the document's `schema` field names a merged report.
fn is_merged(text: &str) -> Result<bool, String> {
    let kind: Kind = from_json_or_yaml(text)?;
    Ok(kind.schema.as_deref() == Some(MERGED_SCHEMA))
}

/// A run's report as `merge` reads it: the timeline, tensors, history and child processes are
/// skipped as they are parsed (never held: 1024 ranks' reports with their timelines would take
/// gigabytes).
#[derive(Deserialize)]
struct ForMerge {
    schema: String,
    metadata: super::profile::Metadata,
    functions: Vec<super::profile::FunctionProfile>,
    #[serde(default)]
    modules: Option<super::profile::ModulesProfile>,
    #[serde(default)]
    peak: Option<super::peak::Peak>,
    #[serde(default)]
    warnings: Vec<String>,
}

/// Parses a run's report for merging (what `merge` does not read left empty); a merged report,
/// or anything else, is the parser's message or `Ok(None)` for a merged one.
pub fn parse_for_merge(text: &str) -> Result<Option<Profile>, String> {
    match from_json_or_yaml::<ForMerge>(text) {
        Ok(m) if m.schema == MERGED_SCHEMA => Ok(None),
        Ok(m) => Ok(Some(Profile {
            schema: m.schema,
            metadata: m.metadata,
            functions: m.functions,
            modules: m.modules,
            tensors: None,
            budgets: None,
            oom: None,
            history: None,
            peak: m.peak,
            timeline: None,
            growth: None,
            children: Vec::new(),
            warnings: m.warnings,
        })),
        Err(_) if is_merged(text)? => Ok(None),
        Err(e) => Err(e),
    }
}

/// Parses a saved report; the error is the parser's message.
pub fn parse(text: &str) -> Result<Saved, String> {
    if is_merged(text)? {
        from_json_or_yaml(text).map(|m| Saved::Merged(Box::new(m)))
    } else {
        from_json_or_yaml(text).map(|p| Saved::Run(Box::new(p)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_field_not_a_mention_tells_the_kinds_apart() {
        // A run whose script's name mentions the merged schema is a run's report.
        let run = r#"{"schema": "memprof.profile/1", "metadata": {"script": "memprof.merged/1"}}"#;
        assert_eq!(is_merged(run), Ok(false));
        assert_eq!(
            is_merged("schema: memprof.merged/1\nmetadata: {}\n"),
            Ok(true)
        );
        assert_eq!(is_merged("metadata: {}\n"), Ok(false));
        assert!(is_merged("[1, 2").is_err());
    }
}
