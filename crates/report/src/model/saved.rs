//! A saved document read back: a run's report or several ranks' merged report, told apart by
//! its `schema` field (YAML or JSON).
use super::merged::{Merged, MERGED_SCHEMA};
use super::profile::Profile;
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

/// Whether the document's `schema` field names a merged report.
fn is_merged(text: &str, json: bool) -> Result<bool, String> {
    let kind: Kind = if json {
        serde_json::from_str(text).map_err(|e| e.to_string())?
    } else {
        serde_yaml::from_str(text).map_err(|e| e.to_string())?
    };
    Ok(kind.schema.as_deref() == Some(MERGED_SCHEMA))
}

/// Parses a saved report; the error is the parser's message.
pub fn parse(text: &str) -> Result<Saved, String> {
    let json = text.trim_start().starts_with('{');
    let merged = is_merged(text, json)?;
    match (json, merged) {
        (true, false) => serde_json::from_str(text)
            .map(|p| Saved::Run(Box::new(p)))
            .map_err(|e| e.to_string()),
        (true, true) => serde_json::from_str(text)
            .map(|m| Saved::Merged(Box::new(m)))
            .map_err(|e| e.to_string()),
        (false, false) => serde_yaml::from_str(text)
            .map(|p| Saved::Run(Box::new(p)))
            .map_err(|e| e.to_string()),
        (false, true) => serde_yaml::from_str(text)
            .map(|m| Saved::Merged(Box::new(m)))
            .map_err(|e| e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_field_not_a_mention_tells_the_kinds_apart() {
        // A run whose script's name mentions the merged schema is a run's report.
        let run = r#"{"schema": "memprof.profile/1", "metadata": {"script": "memprof.merged/1"}}"#;
        assert_eq!(is_merged(run, true), Ok(false));
        assert_eq!(
            is_merged("schema: memprof.merged/1\nmetadata: {}\n", false),
            Ok(true)
        );
        assert_eq!(is_merged("metadata: {}\n", false), Ok(false));
        assert!(is_merged("[1, 2", true).is_err());
    }
}
