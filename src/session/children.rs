//! The program's child processes in the report: the options a spawned child measures with, a
//! forked child's own report (written when it leaves), and the parent's reading of every
//! child's report into its own (each child's targeted functions, its peak, where its report
//! is kept). Where the children write is `capture::children`'s.
use crate::capture::children;
use crate::cli::config::RunConfig;
use crate::model::children::{ChildOf, ChildProcess};
use crate::model::device::Source;
use crate::model::profile::{Outcome, Profile};
use crate::output::{file, ranks};
use crate::python::runner;
use pyo3::prelude::*;
use serde::Deserialize;
use std::path::PathBuf;

/// The command's options for a spawned child's session: the run's device (when given), its
/// chosen stats, its targets, `--modules` and `--tensors`.
pub fn child_argv(config: &RunConfig) -> Vec<String> {
    let mut argv = Vec::new();
    if !config.follow_device {
        argv.push("--device".into());
        argv.push(match config.source {
            Source::Cpu => "cpu".into(),
            Source::Cuda(i) => i.to_string(),
        });
    }
    if !config.report.default_columns {
        for c in &config.columns {
            argv.push("--stat".into());
            argv.push(c.key.clone());
        }
    }
    argv.push("run".into());
    for t in &config.program.targets {
        argv.push("-f".into());
        argv.push(t.clone());
    }
    if config.modules {
        argv.push("--modules".into());
    }
    if config.tensors {
        argv.push("--tensors".into());
    }
    argv
}

/// A forked child's configuration: its report is JSON in the children's folder, and the run's
/// other files (trace, plot, history) are the parent's to write.
fn child_config(config: &RunConfig) -> RunConfig {
    let mut c = config.clone();
    c.trace = None;
    c.plot = None;
    c.history = None;
    c.budgets.clear();
    c
}

/// Registers what writes a forked child's report when it leaves through `os._exit`.
pub fn install_child_report(config: &RunConfig) {
    let config = child_config(config);
    children::set_child_report(Box::new(move |status| {
        let facts = Python::attach(|py| {
            let boot = py.import("_memprof_bootstrap").ok()?;
            let outcome = Outcome {
                status: "os_exit".into(),
                exit_code: status,
                exception: None,
            };
            Some(runner::collect(py, &boot, outcome))
        });
        if let Some(facts) = facts {
            write_child_report(super::finish(&config, facts).profile);
        }
    }));
}

/// Writes this forked child's report into the children's folder (JSON).
pub fn write_child_report(profile: Profile) {
    let (Some(path), Some(parent)) = (children::report_path(), children::main_pid()) else {
        return;
    };
    write_report_as_child(profile, &path, parent, "fork");
}

/// Writes a child's report to `path` (JSON), naming its parent and how it was started.
pub fn write_report_as_child(
    mut profile: Profile,
    path: &std::path::Path,
    parent: u32,
    start: &str,
) {
    profile.metadata.process.child = Some(ChildOf {
        parent,
        start: start.into(),
    });
    let text = serde_json::to_string(&profile).expect("reports serialise") + "\n";
    let _ = file::write_atomically(path, &text, file::Written::Report);
}

/// A forked child ended abruptly (SIGTERM: a Pool's `terminate()`, say): its report so far goes
/// to the children's folder, never to the run's own outputs.
pub fn write_child_emergency_report(
    ending: &crate::capture::interrupt::Ending,
    config: &RunConfig,
) {
    if let Some(profile) = super::report_so_far(ending, &child_config(config)) {
        write_child_report(profile);
    }
}

/// What a child that could not be followed writes instead of a report.
#[derive(Deserialize)]
struct NotFollowed {
    memprof_child: NotFollowedChild,
}

#[derive(Deserialize)]
struct NotFollowedChild {
    pid: u32,
    start: String,
    not_followed: String,
}

/// Reads the children's reports into the parent's `profile`: each child's targeted functions
/// that ran (marked with the child), a line per child with its peak, and the warnings of
/// functions that never ran here but ran there taken back. With `-o`, each child's report is
/// kept beside the parent's (`r.json` -> `r.child4242.json`). The folder is removed.
pub fn collect(profile: &mut Profile, config: &RunConfig) {
    let Some(dir) = children::dir() else {
        return;
    };
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid = name
                .strip_prefix("child-")?
                .strip_suffix(".json")?
                .parse()
                .ok()?;
            Some((pid, e.path()))
        })
        .collect();
    found.sort();
    let mut not_followed = 0;
    for (pid, path) in found {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        if let Ok(child) = serde_json::from_str::<Profile>(&text) {
            let kept = keep_beside(config, pid, &text);
            add_child(profile, pid, child, kept);
        } else if let Ok(n) = serde_json::from_str::<NotFollowed>(&text) {
            not_followed += 1;
            let c = n.memprof_child;
            profile.children.push(ChildProcess {
                pid: c.pid,
                start: c.start,
                outcome: "not followed".into(),
                peak_bytes: None,
                peak_reached: None,
                functions: Vec::new(),
                report: None,
                note: Some(c.not_followed),
            });
        }
    }
    if not_followed > 0 {
        // A target that never ran here may have run in a child memprof could not measure.
        for w in profile
            .warnings
            .iter_mut()
            .filter(|w| w.ends_with("but never ran"))
        {
            w.push_str(&format!(
                " in this process; {not_followed} child process{} could not be followed \
                 (see the children), and it may have run there",
                if not_followed == 1 { "" } else { "es" }
            ));
        }
    }
    children::clean_up();
}

/// The child's report kept beside the parent's (`-o`), or None.
fn keep_beside(config: &RunConfig, pid: u32, text: &str) -> Option<String> {
    let out = config.report.output.as_ref()?;
    let path = ranks::with_tag(out, &format!("child{pid}"));
    file::write_atomically(&path, text, file::Written::Report).ok()?;
    Some(path.display().to_string())
}

fn add_child(profile: &mut Profile, pid: u32, child: Profile, report: Option<String>) {
    let start = child
        .metadata
        .process
        .child
        .as_ref()
        .map_or_else(|| "fork".to_string(), |c| c.start.clone());
    let label = ChildProcess::label(pid, &start);
    let mut ran = Vec::new();
    for mut f in child.functions.into_iter().filter(|f| f.calls > 0) {
        let never_ran = format!(
            "{} ({}:{}) was targeted by",
            f.qualname, f.file, f.first_line
        );
        profile
            .warnings
            .retain(|w| !(w.starts_with(&never_ran) && w.ends_with("but never ran")));
        ran.push(f.qualname.clone());
        f.process = Some(label.clone());
        profile.functions.push(f);
    }
    let peak = child.peak.as_ref();
    profile.children.push(ChildProcess {
        pid,
        start,
        outcome: child.metadata.outcome.status.clone(),
        peak_bytes: peak.map(|p| p.allocated_bytes),
        peak_reached: peak.and_then(|p| p.reached.site.as_ref()).map(|s| {
            format!(
                "{}:{} {}",
                crate::model::profile::file_name(&s.file),
                s.line,
                s.function
            )
        }),
        functions: ran,
        report,
        note: None,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn a_childs_report_sits_beside_the_parents() {
        assert_eq!(
            ranks::with_tag(Path::new("/out/r.json"), "child42"),
            Path::new("/out/r.child42.json")
        );
        assert_eq!(
            ranks::with_tag(Path::new("rep"), "child7"),
            Path::new("rep.child7")
        );
    }
}
