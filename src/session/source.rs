//! The program's source files as a report quotes them: each read once, by line (a file that
//! is not on disk, a notebook cell's, as Python's linecache had it).
use std::collections::HashMap;

#[derive(Default)]
pub struct SourceFiles {
    files: HashMap<String, Vec<String>>,
}

impl SourceFiles {
    /// Line `line` (1-based) of `file` as written ("" when the file or line cannot be read).
    pub fn line(&mut self, file: &str, line: u32) -> &str {
        let lines = self.files.entry(file.to_string()).or_insert_with(|| {
            std::fs::read_to_string(file)
                .ok()
                .or_else(|| crate::python::ext::file_text(file))
                .map(|t| t.lines().map(str::to_string).collect())
                .unwrap_or_default()
        });
        lines
            .get((line as usize).saturating_sub(1))
            .map_or("", String::as_str)
    }
}
