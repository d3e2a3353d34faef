//! The child processes section of the table: each child memprof followed, its peak, the
//! targeted functions that ran in it (their tables are above, marked with the child), and where
//! its own report is.
use crate::model::children::ChildProcess;
use crate::model::units;
use std::fmt::Write;

pub fn render(out: &mut String, children: &[ChildProcess]) {
    if children.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nChild processes (their own peaks, on their own device):"
    );
    for c in children {
        let mut line = format!("  {}", ChildProcess::label(c.pid, &c.start));
        match (c.peak_bytes, &c.note) {
            (_, Some(note)) => {
                let _ = write!(line, ": not followed ({note})");
            }
            (Some(peak), None) => {
                let _ = write!(line, ": peak {}", units::bytes(peak));
                if let Some(at) = &c.peak_reached {
                    let _ = write!(line, " reached at {at}");
                }
            }
            (None, None) => line.push_str(": nothing allocated"),
        }
        if !c.functions.is_empty() {
            let _ = write!(line, "; ran {}", c.functions.join(", "));
        }
        if let Some(report) = &c.report {
            let _ = write!(line, "; report {report}");
        }
        let _ = writeln!(out, "{line}");
    }
}
