//! Compiled graphs' line maps: for each file of code that inductor generated and loaded, from
//! which of its lines on which source frames its FX nodes came from (torch's own map,
//! `PyCodeCache.linemaps`, handed over by `py/compiled.py` as each graph loads, a fresh compile and
//! a cache hit alike). An allocation made on such a line stands for the frames it maps to, so
//! the site finder attributes a compiled graph's buffer to the line its node came from, as if
//! that line had run eagerly.
use super::{function_key, Class, Place, Rules};
use std::sync::Arc;

/// One source frame of an FX node's stack trace, classified as a real frame's code would be.
#[derive(Debug, PartialEq, Eq)]
pub struct Virtual {
    pub place: Place,
    pub class: Class,
    /// `function_key` of its file and function.
    pub function: u64,
}

/// A node's frames, innermost first.
pub type Chain = Arc<[Virtual]>;

/// One entry of torch's line map as handed over: the first line, and the node's frames
/// innermost first as (file, line, qualified name).
pub type Entry = (u32, Vec<(String, u32, String)>);

/// One generated file: `chains[i]` holds from line `starts[i]` up to the next start.
#[derive(Debug, Default)]
pub struct LineMap {
    starts: Vec<u32>,
    chains: Vec<Option<Chain>>,
    /// (first line, tag), by line: the module each line's buffers belong to, as
    /// `py/compiled_modules.py` numbered it (0: none; empty without `--modules`).
    tags: Vec<(u32, u32)>,
}

impl LineMap {
    /// The map of `entries` (line, frames innermost first as (file, line, function)), in the
    /// order torch wrote them; frames are classified by `rules`.
    pub fn new(entries: Vec<Entry>, tags: Vec<(u32, u32)>, rules: &Rules) -> LineMap {
        let mut entries = entries;
        let mut tags = tags;
        tags.sort_by_key(|(line, _)| *line);
        entries.sort_by_key(|(line, _)| *line);
        let mut map = LineMap {
            tags,
            ..LineMap::default()
        };
        for (line, frames) in entries {
            let chain: Option<Chain> = (!frames.is_empty()).then(|| {
                frames
                    .into_iter()
                    .map(|(file, line, function)| Virtual {
                        class: rules.classify(&file),
                        function: function_key(&file, &function),
                        place: Place {
                            file,
                            line,
                            function,
                        },
                    })
                    .collect()
            });
            map.starts.push(line);
            map.chains.push(chain);
        }
        map
    }

    /// The frames that `line` of the generated file stands for (None: no node's).
    pub fn chain_at(&self, line: u32) -> Option<Chain> {
        let after = self.starts.partition_point(|&start| start <= line);
        after.checked_sub(1).and_then(|i| self.chains[i].clone())
    }

    /// The tag of `line` (0: none).
    pub fn tag_at(&self, line: u32) -> u32 {
        let after = self.tags.partition_point(|&(start, _)| start <= line);
        after.checked_sub(1).map_or(0, |i| self.tags[i].1)
    }
}

impl LineMap {
    /// Every source frame some line of the file stands for.
    pub fn frames(&self) -> impl Iterator<Item = &Virtual> {
        self.chains.iter().flatten().flat_map(|c| c.iter())
    }
}
