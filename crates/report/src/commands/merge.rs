//! `memprof merge FILE...`: the reports of a job's ranks as one summary.
use super::files;
use crate::analysis::merge;
use crate::cli::MergeArgs;
use crate::error::{Error, Result};
use crate::model::merged::{rank_list, Merged};
use crate::output::terminal;
use crate::render::merged::RankDetail;
use crate::render::Format;

/// `stats`: the `--stat` columns written before the subcommand (`memprof --stat K merge`).
pub fn merge(stats: &[String], args: MergeArgs) -> Result<i32> {
    let stats: Vec<String> = stats.iter().chain(&args.stats).cloned().collect();
    let format = Format::resolve(args.format, args.output.as_deref());
    let mut merged = merge::merge(files::read_rank_reports(&args.files)?)?;
    merge::keep_stats(&mut merged, &stats)?;
    let detail = match (&args.ranks, args.all_ranks) {
        (_, true) => RankDetail::All,
        (Some(list), _) => RankDetail::These(chosen_ranks(list, &merged)?),
        (None, false) => RankDetail::Auto,
    };
    // A file gets every column; the terminal a table fitted to it.
    let width = args.output.is_none().then(terminal::width).flatten();
    let text = super::show::merged_text(&merged, format, width, args.output.as_deref(), &detail);
    files::deliver(&text, args.output.as_deref(), "merged report")?;
    Ok(0)
}

/// `--ranks 3,17,0-7`: ranks that the reports have, ascending.
fn chosen_ranks(list: &str, merged: &Merged) -> Result<Vec<u32>> {
    let bad = |why: String| {
        Error::usage(format!("--ranks {list}: {why}"))
            .hint("give ranks and ranges separated by commas, e.g. --ranks 3,17 or --ranks 0-7,513")
    };
    let mut ranks = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let number = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| bad(format!("'{s}' is not a rank")))
        };
        match part.split_once(['-', '–']) {
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if a > b {
                    return Err(bad(format!("the range {part} is empty")));
                }
                ranks.extend(a..=b);
            }
            None => ranks.push(number(part)?),
        }
    }
    if ranks.is_empty() {
        return Err(bad("no rank given".into()));
    }
    ranks.sort_unstable();
    ranks.dedup();
    let have: Vec<u32> = merged.metadata.ranks.iter().map(|r| r.rank).collect();
    let absent: Vec<u32> = ranks
        .iter()
        .copied()
        .filter(|r| have.binary_search(r).is_err())
        .collect();
    if !absent.is_empty() {
        return Err(Error::usage(format!(
            "--ranks {list}: no report of rank{} {} among the files",
            if absent.len() == 1 { "" } else { "s" },
            rank_list(&absent)
        ))
        .hint(format!("the files have ranks {}", rank_list(&have))));
    }
    Ok(ranks)
}
