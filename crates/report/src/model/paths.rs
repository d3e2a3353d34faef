//! Paths as the reports show them.

/// The file name without its directories (`train.py` for `/long/path/train.py`): how tables name
/// a function's file, and how merged reports match functions across ranks' machines.
pub fn file_name(path: &str) -> &str {
    path.rsplit_once('/').map(|(_, f)| f).unwrap_or(path)
}
