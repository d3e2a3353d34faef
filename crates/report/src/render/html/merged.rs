//! The merged ranks as one page (`memprof merge -o merged.html`): the ranks' peaks drawn one bar
//! per rank, grouped by host, with the median and p90 and the outliers marked; a click on a rank
//! shows its essentials (where it ran, its peak and what it was, a link to its own report); the
//! hosts, the peak's sites across the ranks, and the line and module tables as the terminal
//! prints them. Built as the run's page is (mod.rs): self-contained, no fetch.
use super::{page, script_json, REPORT_OPENS, TEXTS_OPENS};
use crate::model::merged::Merged;
use crate::render::merged::RankDetail;
use serde::Serialize;
use std::path::{Component, Path, PathBuf};

const STYLE: &str = include_str!("merged.css");
const SCRIPT: &str = include_str!("merged.js");

/// What the page shows as text, and where each rank's report is from the page.
#[derive(Serialize)]
struct Texts {
    /// The summary and the tables as the terminal prints them.
    terminal: String,
    /// Each rank's report file as a link from the page's folder, in the ranks' order.
    links: Vec<String>,
}

/// The page; `page_dir` is the folder it is written to (each rank's report is linked from
/// there), the working directory when None.
pub fn render(m: &Merged, page_dir: Option<&Path>) -> String {
    let texts = Texts {
        terminal: crate::render::merged::render(
            m,
            crate::render::Format::Table,
            None,
            &RankDetail::Auto,
        ),
        links: m
            .metadata
            .ranks
            .iter()
            .map(|r| link(Path::new(&r.file), page_dir))
            .collect(),
    };
    let script = m
        .metadata
        .script
        .as_deref()
        .map(crate::model::paths::file_name)
        .unwrap_or("run");
    let title = format!(
        "memprof merge: {script}, {} of {} ranks",
        m.metadata.ranks.len(),
        m.metadata.world_size
    );
    page(
        &title,
        &texts.terminal,
        &[
            (REPORT_OPENS, script_json(m)),
            (TEXTS_OPENS, script_json(&texts)),
        ],
        STYLE,
        SCRIPT,
    )
}

/// `file` as a relative link from `dir` (both made absolute from the working directory), with
/// `/` separators; the absolute path where no relative one exists.
fn link(file: &Path, dir: Option<&Path>) -> String {
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let file = normal(&absolute(file));
    let dir = normal(&absolute(dir.unwrap_or(Path::new("."))));
    let (f, d): (Vec<Component>, Vec<Component>) =
        (file.components().collect(), dir.components().collect());
    let common = f.iter().zip(&d).take_while(|(a, b)| a == b).count();
    if common == 0 {
        return file.to_string_lossy().into_owned();
    }
    let mut parts: Vec<String> = vec!["..".to_string(); d.len() - common];
    parts.extend(
        f[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    parts.join("/")
}

/// `a/./b/../c` as `a/c`, without touching the filesystem.
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_reports_are_linked_from_the_pages_folder() {
        let dir = Some(Path::new("/job/out"));
        assert_eq!(link(Path::new("/job/out/r.3.json"), dir), "r.3.json");
        assert_eq!(
            link(Path::new("/job/ranks/r.3.json"), dir),
            "../ranks/r.3.json"
        );
        assert_eq!(link(Path::new("/job/out/./a/../r.json"), dir), "r.json");
    }
}
