//! Fitting what memprof prints to a terminal's width: how wide it may be, stat keys over two
//! header lines, a table's last column (the source text) cut at the edge, text wrapped at spaces.
//! Files and pipes never come here: they get every column whole.
use std::fmt::Write;

/// How wide a table may be drawn: a terminal's columns. Files and pipes get full width (None).
#[derive(Clone, Copy, Debug)]
pub struct Fit {
    pub width: usize,
    /// Whether stat columns may be left out when even a short source text does not fit (the
    /// default columns may; the ones the user chose with --stat are kept).
    pub may_drop_stats: bool,
}

/// The narrowest source text worth showing before stat columns are left out.
pub(crate) const MIN_SOURCE: usize = 30;

/// A rendered table (`table::write`'s text) fitted to `width` columns: when the columns before
/// the last (the source text) leave room for some of it, every line is cut at the edge, with
/// `…`; otherwise the lines stay whole.
pub(crate) fn cut_table(text: &str, width: usize) -> String {
    let room =
        contents_column(text).is_some_and(|start| start < width.saturating_sub(MIN_SOURCE / 2));
    let mut out = String::new();
    for line in text.lines() {
        let _ = writeln!(
            out,
            "{}",
            match (room, line.starts_with('=')) {
                (true, true) => line.chars().take(width).collect(),
                (true, false) => cut(line, width),
                (false, _) => line.to_string(),
            }
        );
    }
    out
}

/// The column at which the last column, `Line Contents`, starts in a rendered table's header.
pub(crate) fn contents_column(text: &str) -> Option<usize> {
    text.lines()
        .find_map(|l| l.find("Line Contents").map(|i| l[..i].chars().count()))
}

/// A stat key over two header lines on a terminal (`allocated_bytes` over `all.peak`), else whole.
pub(crate) fn key_header(key: &str, width: Option<usize>) -> String {
    if width.is_some() {
        two_lines(key)
    } else {
        key.to_string()
    }
}

/// `text` in lines of at most `width` characters, broken at spaces (a longer word stays whole).
pub(crate) fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split(' ') {
        let last = lines.last_mut().expect("one line at least");
        if last.is_empty() {
            last.push_str(word);
        } else if last.chars().count() + 1 + word.chars().count() <= width {
            last.push(' ');
            last.push_str(word);
        } else {
            lines.push(word.to_string());
        }
    }
    lines
}

/// `allocated_bytes.all.peak` as `allocated_bytes` over `all.peak`: a stat key's header in half
/// the width.
pub(crate) fn two_lines(key: &str) -> String {
    match key.split_once('.') {
        Some((head, tail)) => format!("{head}\n{tail}"),
        None => key.to_string(),
    }
}

/// `text` in at most `width` characters, its end replaced by `…` when cut.
pub(crate) fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut s: String = text.chars().take(width.saturating_sub(1)).collect();
    s.push('…');
    s
}
