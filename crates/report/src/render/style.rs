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
