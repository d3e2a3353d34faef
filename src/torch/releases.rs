//! The torch releases memprof supports, read from one table (releases.tsv): which minor releases
//! there are and which of memprof's torch libraries fits a given torch version.

/// The table, as the build and the release scripts read it.
const TABLE: &str = include_str!("releases.tsv");

/// One supported torch minor release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Release {
    pub major: u32,
    pub minor: u32,
}

impl Release {
    /// `2.11`.
    pub fn name(&self) -> String {
        format!("{}.{}", self.major, self.minor)
    }

    /// The file name of memprof's library for this release (src/torch/cpp, built against its
    /// headers): `libmemprof_torch-2.11.so`.
    pub fn library_name(&self) -> String {
        format!("libmemprof_torch-{}.so", self.name())
    }
}

/// Every supported release, oldest first.
pub fn all() -> Vec<Release> {
    TABLE
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| parse_minor(l.split('\t').next()?))
        .collect()
}

/// "2.9 to 2.15".
pub fn range() -> String {
    let all = all();
    match (all.first(), all.last()) {
        (Some(a), Some(b)) => format!("{} to {}", a.name(), b.name()),
        _ => "none".into(),
    }
}

/// The release of a torch version string (`2.11.0+cu130`, `2.12.0a0+git1234`), if supported.
pub fn of_version(version: &str) -> Option<Release> {
    let release = parse_minor(version)?;
    all().into_iter().find(|r| *r == release)
}

/// `2.11` from `2.11`, `2.11.0`, `2.11.0+cu130` or `2.12.0a0`.
fn parse_minor(version: &str) -> Option<Release> {
    let mut parts = version.split(['.', '+']);
    let major = parts.next()?.trim().parse().ok()?;
    let digits: String = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some(Release {
        major,
        minor: digits.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_torch_2_9_to_2_15_in_order() {
        let names: Vec<String> = all().iter().map(Release::name).collect();
        assert_eq!(
            names,
            ["2.9", "2.10", "2.11", "2.12", "2.13", "2.14", "2.15"]
        );
        assert_eq!(range(), "2.9 to 2.15");
    }

    #[test]
    fn a_version_string_finds_its_release() {
        let r = |v| of_version(v).map(|r| r.name());
        assert_eq!(r("2.11.0+cu130").as_deref(), Some("2.11"));
        assert_eq!(r("2.10.0").as_deref(), Some("2.10"));
        assert_eq!(r("2.12.0a0+git1234").as_deref(), Some("2.12"));
        assert_eq!(r("2.15"), Some("2.15".into()));
        assert_eq!(r("2.8.0"), None);
        assert_eq!(r("2.16.0"), None);
        assert_eq!(r("3.0.0"), None);
        assert_eq!(r("unknown"), None);
        assert_eq!(
            of_version("2.9.1").unwrap().library_name(),
            "libmemprof_torch-2.9.so"
        );
    }
}
