//! Which process of a distributed job this is (torchrun's `RANK`, `LOCAL_RANK`, `WORLD_SIZE`),
//! and where its report goes: `-o` templates (`{rank}`, `{local_rank}`, `{world_size}`, `{host}`,
//! `{pid}`), the rank inserted into a plain path, the default file of a rank, and who prints.
use crate::error::{Error, Result};
use crate::model::profile::ProcessInfo;
use std::path::{Path, PathBuf};

/// This process, from the launcher's environment (torchrun and most launchers set `RANK` and
/// `WORLD_SIZE`); rank 0 of 1 without them.
pub fn this_process() -> ProcessInfo {
    let var = |name: &str| -> Option<u32> { std::env::var(name).ok()?.trim().parse().ok() };
    let rank = var("RANK");
    let world_size = var("WORLD_SIZE");
    let distributed = rank.is_some() && world_size.is_some();
    ProcessInfo {
        rank: rank.unwrap_or(0),
        local_rank: var("LOCAL_RANK").unwrap_or(if distributed { rank.unwrap_or(0) } else { 0 }),
        world_size: world_size.unwrap_or(1),
        host: host_name(),
        pid: std::process::id(),
        child: None,
    }
}

fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most len bytes into buf.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Whether several processes write reports: only rank 0 prints unless `--all-ranks`, and no
/// two ranks may write one file.
pub fn is_multi(p: &ProcessInfo) -> bool {
    p.world_size > 1
}

const PLACEHOLDERS: [&str; 5] = ["rank", "local_rank", "world_size", "host", "pid"];

/// Where this process writes its report, and a note when memprof chose or changed the name.
/// `template` is `-o` (placeholders filled in; under a multi-rank run a name that could be the
/// same for two ranks gets `.rank{N}` before its extension). Without `-o`, a multi-rank run
/// writes `memprof.rank{N}.{ext}` so that every rank's report is kept for `memprof merge`.
pub fn output_path(
    template: Option<&Path>,
    p: &ProcessInfo,
    extension: &str,
) -> Result<(Option<PathBuf>, Option<String>)> {
    let multi = is_multi(p);
    let Some(template) = template else {
        if !multi {
            return Ok((None, None));
        }
        let path = PathBuf::from(format!("memprof.rank{}.{extension}", p.rank));
        return Ok((Some(path), None));
    };
    let text = template.to_string_lossy();
    let used = placeholders_in(&text)?;
    let mut expanded = text.into_owned();
    for name in &used {
        let value = match name.as_str() {
            "rank" => p.rank.to_string(),
            "local_rank" => p.local_rank.to_string(),
            "world_size" => p.world_size.to_string(),
            "host" => p.host.clone(),
            _ => p.pid.to_string(),
        };
        expanded = expanded.replace(&format!("{{{name}}}"), &value);
    }
    let has = |n: &str| used.iter().any(|u| u == n);
    let unique = has("rank") || (has("host") && (has("local_rank") || has("pid")));
    if !multi || unique {
        return Ok((Some(PathBuf::from(expanded)), None));
    }
    let path = insert_rank(Path::new(&expanded), p.rank);
    let note = format!(
        "several ranks write reports: rank {} writes {} (put {{rank}} in -o to choose the name)",
        p.rank,
        path.display()
    );
    Ok((Some(path), Some(note)))
}

/// The `{name}` placeholders of an `-o` template; an unknown one is a usage error.
fn placeholders_in(text: &str) -> Result<Vec<String>> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            return Err(bad_template(text, "a '{' is never closed"));
        };
        let name = &after[..close];
        if !PLACEHOLDERS.contains(&name) {
            return Err(bad_template(
                text,
                &format!("'{{{name}}}' is not a placeholder"),
            ));
        }
        found.push(name.to_string());
        rest = &after[close + 1..];
    }
    Ok(found)
}

fn bad_template(text: &str, why: &str) -> Error {
    Error::usage(format!("'-o {text}': {why}")).hint(
        "-o takes a path with any of {rank}, {local_rank}, {world_size}, {host}, {pid}, \
         e.g. -o 'reports/step.{rank}.json'",
    )
}

/// `ddp.json` → `ddp.rank1.json`; `report` → `report.rank1`.
fn insert_rank(path: &Path, rank: u32) -> PathBuf {
    with_tag(path, &format!("rank{rank}"))
}

/// `path` with `tag` before its extension: a rank's report (`ddp.rank1.json`), a child
/// process's beside its parent's (`r.child4242.json`).
pub fn with_tag(path: &Path, tag: &str) -> PathBuf {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
    let name = match (stem, path.extension()) {
        (Some(stem), Some(ext)) => format!("{stem}.{tag}.{}", ext.to_string_lossy()),
        _ => format!(
            "{}.{tag}",
            path.file_name().unwrap_or_default().to_string_lossy()
        ),
    };
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(rank: u32, world_size: u32) -> ProcessInfo {
        ProcessInfo {
            rank,
            local_rank: rank % 8,
            world_size,
            host: "node7".into(),
            pid: 4242,
            child: None,
        }
    }

    fn path_of(template: &str, p: &ProcessInfo) -> (String, bool) {
        let (path, note) = output_path(Some(Path::new(template)), p, "json").unwrap();
        (path.unwrap().to_string_lossy().into_owned(), note.is_some())
    }

    #[test]
    fn a_plain_path_gets_the_rank_under_several_ranks_only() {
        assert_eq!(
            path_of("ddp.json", &process(1, 2)),
            ("ddp.rank1.json".into(), true)
        );
        assert_eq!(
            path_of("out/ddp", &process(3, 4)),
            ("out/ddp.rank3".into(), true)
        );
        assert_eq!(
            path_of("ddp.json", &process(0, 1)),
            ("ddp.json".into(), false)
        );
    }

    #[test]
    fn templates_are_filled_and_a_unique_one_is_kept() {
        assert_eq!(
            path_of("r{rank}-of-{world_size}.yaml", &process(2, 4)),
            ("r2-of-4.yaml".into(), false)
        );
        assert_eq!(
            path_of("{host}-{local_rank}.json", &process(9, 16)),
            ("node7-1.json".into(), false)
        );
        // {local_rank} alone repeats across hosts: the rank is inserted.
        assert_eq!(
            path_of("l{local_rank}.json", &process(9, 16)),
            ("l1.rank9.json".into(), true)
        );
        assert_eq!(
            path_of("p{pid}.json", &process(0, 1)),
            ("p4242.json".into(), false)
        );
    }

    #[test]
    fn unknown_placeholders_are_usage_errors() {
        let e = output_path(Some(Path::new("x{node}.json")), &process(0, 2), "json").unwrap_err();
        assert!(
            e.message.contains("'{node}' is not a placeholder"),
            "{}",
            e.message
        );
        let e = output_path(Some(Path::new("x{rank.json")), &process(0, 2), "json").unwrap_err();
        assert!(e.message.contains("never closed"), "{}", e.message);
    }

    #[test]
    fn without_o_each_rank_of_a_multi_rank_run_gets_a_file() {
        let (path, _) = output_path(None, &process(1, 2), "json").unwrap();
        assert_eq!(path.unwrap(), PathBuf::from("memprof.rank1.json"));
        assert_eq!(output_path(None, &process(0, 1), "json").unwrap().0, None);
    }
}
