//! A targeted function's compiled lines as a table: each line's share of the compiled graphs'
//! buffers (over the run, of which backward, and live at the function's peak), lines whose nodes
//! were fused away marked.
use super::style::{styled, write_fitted};
use crate::model::compiled::CompiledLines;
use crate::model::units;
use std::fmt::Write;

/// Writes `lines` of `function` (`ran_eagerly`: its eager lines were shown above).
pub fn render(
    out: &mut String,
    function: &str,
    lines: &CompiledLines,
    ran_eagerly: bool,
    width: Option<usize>,
) {
    let _ = writeln!(
        out,
        "\n{function}{} ran compiled (torch.compile): each line's share of the compiled graphs' \
         buffers, attributed to the line their FX nodes came from (not executions; fused: the \
         line's nodes have no buffer of their own)",
        if ran_eagerly { " also" } else { "" }
    );
    out.push('\n');
    let mut table = styled(&[
        "Line #",
        "Allocated",
        "Buffers",
        "Of which backward",
        "Live at peak",
        "Line Contents",
    ]);
    let bytes_or_dash = |b: i64| if b == 0 { "-".into() } else { units::bytes(b) };
    for l in &lines.lines {
        table.add_row(vec![
            l.line.to_string(),
            if l.fused {
                "fused".into()
            } else {
                units::bytes(l.allocated_bytes)
            },
            if l.fused {
                String::new()
            } else {
                l.allocations.to_string()
            },
            bytes_or_dash(l.backward_allocated_bytes),
            bytes_or_dash(l.peak_live_bytes),
            l.source.clone(),
        ]);
    }
    write_fitted(out, table, 0..5, width);
}
