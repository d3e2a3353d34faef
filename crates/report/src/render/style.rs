//! How every table of memprof looks: line_profiler's style (no borders, a rule of '=' under the
//! header), right-aligned number columns, no trailing spaces, and the source column cut at a
//! terminal's edge; and how a number that may be bytes or a count is written.
use super::fit::{contents_column, cut_table};
use crate::model::units;
use comfy_table::{CellAlignment, ContentArrangement, Table};
use std::fmt::Write;

/// Only the rule under the header, made of '=' as line_profiler draws it.
const PRESET: &str = "     ==            ";

/// A table in line_profiler's style (no borders, a rule of '=' under the header), for every
/// section of the report.
pub fn styled<S: ToString>(header: &[S]) -> Table {
    let mut table = Table::new();
    table
        .load_preset(PRESET)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.iter().map(|h| h.to_string()).collect::<Vec<_>>());
    table
}

/// `write`, fitted to `width` columns when given (a terminal): the source text is cut at the
/// edge (`fit::cut_table`).
pub fn write_fitted(
    out: &mut String,
    table: Table,
    right: std::ops::Range<usize>,
    width: Option<usize>,
) {
    match width {
        None => write(out, table, right),
        Some(width) => {
            let mut whole = String::new();
            write(&mut whole, table, right);
            out.push_str(&cut_table(&whole, width));
        }
    }
}

/// The column at which the last column (Line Contents) starts in `table`'s header.
pub fn start_of_contents(table: &Table) -> usize {
    let mut out = String::new();
    write(&mut out, table.clone(), 0..0);
    contents_column(&out).unwrap_or(0)
}

/// Writes `table` with the columns in `right` right-aligned, without trailing spaces.
pub fn write(out: &mut String, mut table: Table, right: std::ops::Range<usize>) {
    for i in right {
        if let Some(col) = table.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    for line in table.lines() {
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// A table given as its header and rows, drawn with some of its columns left out to fit a
/// terminal: `drop_order` names the columns that may go, least useful first; each goes only
/// while `fits` says the table drawn so far does not fit. Returns the drawn table's text (with
/// `right` naming the right-aligned columns of the whole table) and the headers left out.
pub fn fitted_columns(
    header: &[String],
    rows: &[Vec<String>],
    right: &[usize],
    drop_order: &[usize],
    fits: impl Fn(&str) -> bool,
) -> (String, Vec<String>) {
    let draw = |kept: &[bool]| {
        let pick = |row: &[String]| -> Vec<String> {
            row.iter()
                .zip(kept)
                .filter(|(_, &k)| k)
                .map(|(c, _)| c.clone())
                .collect()
        };
        let mut table = styled(&pick(header));
        for row in rows {
            table.add_row(pick(row));
        }
        // The right-aligned columns, renumbered among those kept.
        let mut at = 0;
        for (i, &k) in kept.iter().enumerate() {
            if k {
                if right.contains(&i) {
                    if let Some(col) = table.column_mut(at) {
                        col.set_cell_alignment(CellAlignment::Right);
                    }
                }
                at += 1;
            }
        }
        let mut out = String::new();
        write(&mut out, table, 0..0);
        out
    };
    let mut kept = vec![true; header.len()];
    let mut text = draw(&kept);
    let mut left_out = Vec::new();
    for &i in drop_order {
        if fits(&text) {
            break;
        }
        kept[i] = false;
        left_out.push(header[i].replace('\n', " "));
        text = draw(&kept);
    }
    (text, left_out)
}

/// The note under a table some of whose columns were left out to fit `width` columns.
pub fn left_out_note(out: &mut String, width: usize, left_out: &[String], where_: &str) {
    if left_out.is_empty() {
        return;
    }
    let note = format!(
        "(left out to fit {width} columns: {}; {where_})",
        left_out.join(", ")
    );
    for line in super::fit::wrap(&note, width) {
        let _ = writeln!(out, "{line}");
    }
}

/// The widest line of a drawn table, in characters.
pub fn widest(text: &str) -> usize {
    text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// `v` as bytes (`4.00 MiB`) or as a plain count, as its stat is.
pub fn bytes_or_count(v: i64, bytes: bool) -> String {
    if bytes {
        units::bytes(v)
    } else {
        v.to_string()
    }
}

/// `v` with its sign, as bytes (`+4.00 MiB`) or as a count (`+3`).
pub fn signed_bytes_or_count(v: i64, bytes: bool) -> String {
    if bytes {
        units::signed_bytes(v)
    } else if v > 0 {
        format!("+{v}")
    } else {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_bytes_or_counts_with_a_sign_when_asked() {
        assert_eq!(bytes_or_count(4 << 20, true), "4.00 MiB");
        assert_eq!(bytes_or_count(3, false), "3");
        assert_eq!(signed_bytes_or_count(4 << 20, true), "+4.00 MiB");
        assert_eq!(signed_bytes_or_count(-512, true), "-512 B");
        assert_eq!(signed_bytes_or_count(3, false), "+3");
        assert_eq!(signed_bytes_or_count(0, false), "0");
    }

    #[test]
    fn a_styled_table_has_lineprofilers_rule_and_right_aligned_numbers() {
        let mut t = styled(&["Line #", "Hits", "Line Contents"]);
        t.add_row(vec!["7", "12", "x = f()"]);
        let mut out = String::new();
        write(&mut out, t, 0..2);
        assert_eq!(
            out,
            " Line #   Hits   Line Contents\n===============================\n      7     12   x = f()\n"
        );
    }
}
