//! `--suggest-checkpoints N`: from the bytes each module saved for backward in one forward pass,
//! the N split points that minimise the largest segment (FairScale's `find_best_reset_points`,
//! on measured bytes of every dtype), with the activation memory estimated before and after.
use crate::model::profile::{CheckpointPlan, Segment};
use serde::Deserialize;

/// One forward pass of a root module as the module tracker saw it: its calls in start order.
#[derive(Deserialize, Debug, Clone)]
pub struct Chain {
    pub root: String,
    pub calls: Vec<ChainCall>,
}

#[derive(Deserialize, Debug, Clone)]
pub struct ChainCall {
    pub module: String,
    pub depth: u32,
    pub saved_bytes: i64,
    pub input_bytes: i64,
    pub leaf: bool,
}

/// The candidates to split between, in forward order: the outermost calls at `depth` or deeper,
/// and leaves above it (every leaf without a depth). Calls inside a chosen one are not candidates.
fn candidates(chain: &Chain, depth: Option<u32>) -> Vec<&ChainCall> {
    let limit = depth.unwrap_or(u32::MAX);
    let mut chosen: Vec<&ChainCall> = Vec::new();
    for c in chain.calls.iter().filter(|c| c.depth >= 1) {
        let inside = chosen.last().is_some_and(|p| {
            c.module.len() > p.module.len()
                && c.module.starts_with(p.module.as_str())
                && c.module.as_bytes()[p.module.len()] == b'.'
        });
        if !inside && (c.depth >= limit || c.leaf) {
            chosen.push(c);
        }
    }
    chosen
}

/// Splits `sizes` into `splits + 1` non-empty consecutive segments so that the largest sum is as
/// small as possible; returns the index where each segment after the first starts.
pub fn best_splits(sizes: &[i64], splits: usize) -> Vec<usize> {
    let n = sizes.len();
    let splits = splits.min(n.saturating_sub(1));
    let mut prefix = vec![0i64; n + 1];
    for (i, s) in sizes.iter().enumerate() {
        prefix[i + 1] = prefix[i] + s;
    }
    // best[k][i]: the smallest largest segment of sizes[..i] cut into k + 1 segments; from[k][i]:
    // where the last of them starts.
    let mut best = vec![vec![i64::MAX; n + 1]; splits + 1];
    let mut from = vec![vec![0usize; n + 1]; splits + 1];
    best[0][1..].copy_from_slice(&prefix[1..]);
    for k in 1..=splits {
        for i in (k + 1)..=n {
            for j in k..i {
                let prev = best[k - 1][j];
                if prev == i64::MAX {
                    continue;
                }
                let v = prev.max(prefix[i] - prefix[j]);
                if v < best[k][i] {
                    best[k][i] = v;
                    from[k][i] = j;
                }
            }
        }
    }
    let mut starts = Vec::with_capacity(splits);
    let mut i = n;
    for k in (1..=splits).rev() {
        i = from[k][i];
        starts.push(i);
    }
    starts.reverse();
    starts
}

/// The plan for `splits` split points, or None when the pass has fewer than two candidates.
pub fn plan(chain: &Chain, depth: Option<u32>, splits: u32) -> Option<CheckpointPlan> {
    let cands = candidates(chain, depth);
    if cands.len() < 2 || splits == 0 {
        return None;
    }
    let total = chain.calls.first().map(|c| c.saved_bytes).unwrap_or(0);
    let sizes: Vec<i64> = cands.iter().map(|c| c.saved_bytes).collect();
    let outside = total - sizes.iter().sum::<i64>();
    let starts = best_splits(&sizes, splits as usize);
    let mut bounds = vec![0];
    bounds.extend(&starts);
    bounds.push(cands.len());
    let segments: Vec<Segment> = bounds
        .windows(2)
        .map(|w| Segment {
            first: cands[w[0]].module.clone(),
            last: cands[w[1] - 1].module.clone(),
            modules: (w[1] - w[0]) as u32,
            saved_bytes: sizes[w[0]..w[1]].iter().sum(),
            input_bytes: cands[w[0]].input_bytes,
        })
        .collect();
    // Backward recomputes the segments last to first: while segment k is recomputed, the inputs
    // kept at the starts of segments 2..=k are still alive (later ones were freed), and so are
    // k's own activations.
    let mut kept = 0;
    let mut worst = 0;
    for (k, s) in segments.iter().enumerate() {
        if k > 0 {
            kept += s.input_bytes;
        }
        worst = worst.max(kept + s.saved_bytes);
    }
    Some(CheckpointPlan {
        root: chain.root.clone(),
        candidates: cands.len() as u32,
        requested: splits,
        segments,
        activation_bytes: total,
        estimated_activation_bytes: outside + worst,
        outside_candidates_bytes: outside,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every way to cut, for checking the search.
    fn brute(sizes: &[i64], splits: usize) -> i64 {
        fn go(sizes: &[i64], splits: usize) -> i64 {
            if splits == 0 {
                return sizes.iter().sum();
            }
            (1..sizes.len())
                .filter(|&i| sizes.len() - i >= splits)
                .map(|i| {
                    sizes[..i]
                        .iter()
                        .sum::<i64>()
                        .max(go(&sizes[i..], splits - 1))
                })
                .min()
                .unwrap_or(i64::MAX)
        }
        go(sizes, splits)
    }

    fn largest(sizes: &[i64], starts: &[usize]) -> i64 {
        let mut b = vec![0];
        b.extend(starts);
        b.push(sizes.len());
        b.windows(2)
            .map(|w| sizes[w[0]..w[1]].iter().sum())
            .max()
            .unwrap()
    }

    #[test]
    fn the_split_minimises_the_largest_segment() {
        let cases: Vec<Vec<i64>> = vec![
            vec![5, 1, 1, 1, 5],
            vec![1, 2, 3, 4, 5, 6, 7, 8],
            vec![8, 0, 0, 8, 0, 8],
            vec![3, 3, 3],
            vec![10, 1, 1, 1, 1, 1, 1, 1, 1, 10],
        ];
        for sizes in cases {
            for splits in 1..sizes.len() {
                let starts = best_splits(&sizes, splits);
                assert_eq!(starts.len(), splits);
                assert!(
                    starts.windows(2).all(|w| w[0] < w[1]),
                    "{sizes:?} {starts:?}"
                );
                assert_eq!(
                    largest(&sizes, &starts),
                    brute(&sizes, splits),
                    "{sizes:?} {splits}"
                );
            }
        }
    }

    #[test]
    fn candidates_are_the_leaves_or_the_modules_at_a_depth() {
        let call = |m: &str, depth, leaf| ChainCall {
            module: m.into(),
            depth,
            saved_bytes: 1,
            input_bytes: 0,
            leaf,
        };
        let chain = Chain {
            root: "Net".into(),
            calls: vec![
                call("", 0, false),
                call("stem", 1, true),
                call("blocks.0", 2, false),
                call("blocks.0.fc", 3, true),
                call("blocks.0.act", 3, true),
                call("head", 1, true),
            ],
        };
        let names = |d| {
            candidates(&chain, d)
                .iter()
                .map(|c| c.module.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(None), ["stem", "blocks.0.fc", "blocks.0.act", "head"]);
        assert_eq!(names(Some(2)), ["stem", "blocks.0", "head"]);
        // `blocks` itself is never called: its calls are the first below depth 1.
        assert_eq!(names(Some(1)), ["stem", "blocks.0", "head"]);
        assert_eq!(names(Some(3)), names(None));
    }
}
