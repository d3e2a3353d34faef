//! Another batch size: traces of one program at two or three batch sizes, their allocations
//! matched to the template's (the larger batch's of the first two; `align`: by line and stream, in order, through allocations one
//! trace has and the other has not, and reorders), each matched size fitted as an affine function
//! of the batch from the first two, and the template synthesized at another batch. A third
//! trace checks the fit: where its sizes are not on the line (beyond the allocator's 512-byte
//! rounding), the line is named, and the fit synthesized at its batch is handed back to be
//! replayed against it.
use super::Event;
use std::collections::HashMap;

/// One traced run: its batch size, its events, and each event's line (allocations).
#[derive(Clone, Copy)]
pub struct Traced<'a> {
    pub batch: u64,
    pub events: &'a [Event],
    pub at: &'a [Option<String>],
}

/// The synthesized trace, the lines whose sizes a third trace puts off the fitted line, what
/// could not be matched, and (with a third trace) the fit synthesized at its batch.
pub struct Scaled {
    pub events: Vec<Event>,
    pub not_affine: Vec<String>,
    pub unmatched: Unmatched,
    /// (the third trace's batch, the template synthesized at it).
    pub third: Option<(u64, Vec<Event>)>,
}

/// Allocations the alignment left without a partner: the template's are sized as their
/// line's like allocations where it has some, else keep their own size in the synthesized trace;
/// the others' are not in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unmatched {
    /// The template's allocations that the other trace has not, and their bytes (template).
    pub first_allocations: u64,
    pub first_bytes: u64,
    /// Of those, the ones sized as their line's like allocations are (same line, stream and
    /// size in the template); the rest keep the template's size.
    pub first_sized_alike: u64,
    /// The other trace's allocations that the template has not, and their bytes.
    pub other_allocations: u64,
    pub other_bytes: u64,
}

/// How far a third trace's size may be from the line (the allocator rounds to 512 bytes).
const ROUNDING: i128 = 512;

/// Which of the first two traces the synthesized ones are made from (its events, its lines):
/// the larger batch's, so that where the program's allocations change with the batch (an
/// algorithm and its workspace that only larger batches take) it has the ones a larger batch
/// makes.
pub fn template(traces: &[Traced]) -> usize {
    match traces {
        [first, second, ..] if second.batch > first.batch => 1,
        _ => 0,
    }
}

/// The trace at `batch`, from `traces` (two or three, distinct batches).
pub fn synthesize(traces: &[Traced], batch: u64) -> Result<Scaled, String> {
    let fitted = Fitted::new(traces)?;
    Ok(Scaled {
        events: fitted.events_at(batch),
        third: traces.get(2).map(|c| (c.batch, fitted.events_at(c.batch))),
        not_affine: fitted.not_affine,
        unmatched: fitted.unmatched,
    })
}

/// The traces matched and each allocation's size fitted, once: then asked at any batch.
struct Fitted<'a> {
    /// The template's events, those of every synthesized trace.
    events: &'a [Event],
    /// The two traces the line goes through: (batch, each allocation's size, None where the
    /// second trace has no partner for it).
    points: [(i128, Vec<Option<u64>>); 2],
    not_affine: Vec<String>,
    unmatched: Unmatched,
}

impl<'a> Fitted<'a> {
    fn new(traces: &[Traced<'a>]) -> Result<Self, String> {
        let [first, second, rest @ ..] = traces else {
            return Err("another batch size needs traces at two or three batch sizes".into());
        };
        let (a, b) = if template(traces) == 1 {
            (second, first)
        } else {
            (first, second)
        };
        if rest.len() > 1 {
            return Err("at most three traces".into());
        }
        let mut batches: Vec<u64> = traces.iter().map(|t| t.batch).collect();
        batches.sort_unstable();
        batches.dedup();
        if batches.len() != traces.len() {
            return Err("the traces' batch sizes must differ".into());
        }
        let mut unmatched = Unmatched::default();
        let second = align(b, a, &mut unmatched)?;
        let mut fitted = Fitted {
            events: a.events,
            points: [
                (
                    a.batch as i128,
                    allocations(a).map(|(_, s)| Some(s)).collect(),
                ),
                (b.batch as i128, second),
            ],
            not_affine: Vec::new(),
            unmatched,
        };
        if let [c] = rest {
            let lines: Vec<&Option<String>> = a
                .events
                .iter()
                .zip(a.at)
                .filter(|(e, _)| matches!(e, Event::Alloc { .. }))
                .map(|(_, at)| at)
                .collect();
            // The third trace checks the fit; what it alone has is its replay's to show.
            let thirds = align(c, a, &mut Unmatched::default())?;
            for (j, third) in thirds.into_iter().enumerate() {
                let (Some(third), Some(_)) = (third, fitted.points[1].1[j]) else {
                    continue;
                };
                let off = fitted.size(j, c.batch) as i128 - third as i128;
                if off.abs() > ROUNDING {
                    let line = lines[j].clone().unwrap_or_else(|| "an unknown line".into());
                    if !fitted.not_affine.contains(&line) {
                        fitted.not_affine.push(line);
                    }
                }
            }
        }
        Ok(fitted)
    }

    /// The `j`th allocation's size at `batch`, on the line through the two points, rounded up:
    /// a prediction must not promise less than the run would take. One the second trace has no
    /// partner for keeps the template's size.
    fn size(&self, j: usize, batch: u64) -> u64 {
        let [(b1, s1), (b2, s2)] = &self.points;
        let first = s1[j].unwrap_or(1);
        let Some(second) = s2[j] else {
            return first;
        };
        let (s1, s2) = (first as i128, second as i128);
        let (num, den) = (s1 * (b2 - b1) + (s2 - s1) * (batch as i128 - b1), b2 - b1);
        let (num, den) = if den < 0 { (-num, -den) } else { (num, den) };
        let v = num.div_euclid(den) + i128::from(num.rem_euclid(den) != 0);
        v.max(1) as u64
    }

    /// The template's events with every allocation's size at `batch`.
    fn events_at(&self, batch: u64) -> Vec<Event> {
        let mut j = 0;
        self.events
            .iter()
            .map(|e| match *e {
                Event::Alloc { id, stream, .. } => {
                    let size = self.size(j, batch);
                    j += 1;
                    Event::Alloc { id, size, stream }
                }
                free => free,
            })
            .collect()
    }
}

/// How far ahead the alignment looks for an allocation's partner: further than the allocations
/// a cuDNN algorithm or a prefetched batch inserts, nearer than a step.
const LOOK_AHEAD: usize = 64;
/// How many matches apart two unmatched allocations of one line may be and still be partners
/// (a reorder within a line or an op).
const REORDER: usize = 2;

/// An allocation's line and stream: what the alignment matches by.
type Key<'t> = (Option<&'t str>, u64);
/// An allocation as the alignment sees it: (line and stream, size).
type Alloc<'t> = (Key<'t>, u64);
/// An unmatched allocation: (the matches before it, its index).
type Placed = (usize, usize);

/// Whether an allocation of `sa` bytes at batch `ba` and one of `sb` at batch `bb` can be one
/// allocation of the program: its size between constant and proportional to the batch (an
/// affine size), within the allocator's rounding. At a line that allocates several kinds (a
/// backward's gradients and an algorithm's workspace that only some batch sizes take), this
/// keeps one kind from being matched with another.
fn plausible(sa: u64, sb: u64, ba: u64, bb: u64) -> bool {
    let (lo, hi) = if bb >= ba {
        (sa, sa * bb / ba.max(1))
    } else {
        (sa * bb / ba.max(1), sa)
    };
    let slack = ROUNDING as u64 + hi / 20;
    sb + slack >= lo && sb <= hi + slack
}

/// `t`'s allocations in order: (line and stream, size).
fn allocations<'t>(t: &'t Traced) -> impl Iterator<Item = Alloc<'t>> + 't {
    t.events.iter().zip(t.at).filter_map(|(e, at)| match *e {
        Event::Alloc { size, stream, .. } => Some(((at.as_deref(), stream), size)),
        Event::Free { .. } => None,
    })
}

/// `t`'s size for each of `reference`'s allocations (None: no partner), matching them by line
/// and stream in order: where one trace has allocations the other has not (a cuDNN algorithm's
/// workspace at one batch size, a batch the DataLoader prefetched sooner, another number of
/// steps), the nearer partner ahead is taken and what was passed is left unmatched; then the
/// unmatched of one line are paired in order where they lie among the same matches (a reorder).
/// What stays unmatched is counted into `unmatched`; an error only when nothing matches.
fn align(
    t: &Traced,
    reference: &Traced,
    unmatched: &mut Unmatched,
) -> Result<Vec<Option<u64>>, String> {
    let a: Vec<_> = allocations(reference).collect();
    let b: Vec<_> = allocations(t).collect();
    // Partners in size: one allocation of the program at both batch sizes.
    let alike = |x: &Alloc, y: &Alloc| x.0 == y.0 && plausible(x.1, y.1, reference.batch, t.batch);
    let mut partner: Vec<Option<usize>> = vec![None; a.len()];
    let mut taken = vec![false; b.len()];
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        // How far ahead each side's partner is, or None where these two are partners: the same
        // line and stream, unless their sizes cannot be one allocation's and one whose can is
        // ahead (a workspace one trace alone has, at a line that also makes gradients).
        let ahead = |matches: &dyn Fn(&Alloc, &Alloc) -> bool| {
            (
                (1..=LOOK_AHEAD).find(|&d| a.get(i + d).is_some_and(|x| matches(x, &b[j]))),
                (1..=LOOK_AHEAD).find(|&d| b.get(j + d).is_some_and(|x| matches(&a[i], x))),
            )
        };
        let skip = if a[i].0 != b[j].0 {
            Some(ahead(&|x, y| x.0 == y.0))
        } else if alike(&a[i], &b[j]) {
            None
        } else {
            Some(ahead(&alike)).filter(|&(da, db)| da.is_some() || db.is_some())
        };
        let Some((ahead_a, ahead_b)) = skip else {
            partner[i] = Some(j);
            taken[j] = true;
            i += 1;
            j += 1;
            continue;
        };
        match (ahead_a, ahead_b) {
            (None, None) => {
                i += 1;
                j += 1;
            }
            (Some(da), Some(db)) if da < db => i += da,
            (_, Some(db)) => j += db,
            (Some(da), None) => i += da,
        }
    }
    // The unmatched of each line, with the matches before them, paired in order.
    let mut loose: HashMap<Key, (Vec<Placed>, Vec<Placed>)> = HashMap::new();
    let mut matches = 0;
    for (i, p) in partner.iter().enumerate() {
        match p {
            Some(_) => matches += 1,
            None => loose.entry(a[i].0).or_default().0.push((matches, i)),
        }
    }
    if matches == 0 && !a.is_empty() {
        return Err(format!(
            "the traces at batch {} and {} have no allocation in common (by line and stream): \
             they are not of one program",
            reference.batch, t.batch
        ));
    }
    matches = 0;
    for (j, &m) in taken.iter().enumerate() {
        match m {
            true => matches += 1,
            false => {
                if let Some(entry) = loose.get_mut(&b[j].0) {
                    entry.1.push((matches, j));
                }
            }
        }
    }
    for (mine, theirs) in loose.values() {
        let (mut x, mut y) = (0, 0);
        while x < mine.len() && y < theirs.len() {
            let (ma, i) = mine[x];
            let (mb, j) = theirs[y];
            if ma.abs_diff(mb) <= REORDER {
                partner[i] = Some(j);
                taken[j] = true;
                x += 1;
                y += 1;
            } else if ma < mb {
                x += 1;
            } else {
                y += 1;
            }
        }
    }
    // An allocation left without a partner takes the size its line's like allocations (same
    // line, stream and size in the template) have in `t`: a batch more or less prefetched.
    let mut like: HashMap<(Key, u64), u64> = HashMap::new();
    for (i, p) in partner.iter().enumerate() {
        if let Some(j) = p {
            like.entry((a[i].0, a[i].1)).or_insert(b[*j].1);
        }
    }
    let mut sizes: Vec<Option<u64>> = partner.iter().map(|p| p.map(|j| b[j].1)).collect();
    for (i, size) in sizes.iter_mut().enumerate() {
        if size.is_none() {
            unmatched.first_allocations += 1;
            unmatched.first_bytes += a[i].1;
            if let Some(&s) = like.get(&(a[i].0, a[i].1)) {
                *size = Some(s);
                unmatched.first_sized_alike += 1;
            }
        }
    }
    for (j, &m) in taken.iter().enumerate() {
        if !m {
            unmatched.other_allocations += 1;
            unmatched.other_bytes += b[j].1;
        }
    }
    Ok(sizes)
}

/// The largest batch whose synthesized trace fits in `capacity` with `settings` (at most
/// `limit`): doubling from the largest traced batch, then halving the gap. None when not even
/// batch 1 fits.
pub fn max_batch(
    traces: &[Traced],
    capacity: u64,
    settings: &super::Settings,
    limit: u64,
) -> Result<Option<u64>, String> {
    let fitted = Fitted::new(traces)?;
    let fits = |n: u64| -> Result<bool, String> {
        Ok(
            super::replay(&fitted.events_at(n), capacity, settings.clone())?
                .out_of_memory
                .is_none(),
        )
    };
    let start = traces
        .iter()
        .map(|t| t.batch)
        .max()
        .unwrap_or(1)
        .clamp(1, limit);
    let (mut good, mut bad) = if fits(start)? {
        let mut good = start;
        loop {
            let next = (good * 2).min(limit);
            if next == good {
                return Ok(Some(good));
            }
            if !fits(next)? {
                break (good, next);
            }
            good = next;
        }
    } else {
        if !fits(1)? {
            return Ok(None);
        }
        (1, start)
    };
    while bad - good > 1 {
        let mid = good + (bad - good) / 2;
        if fits(mid)? {
            good = mid;
        } else {
            bad = mid;
        }
    }
    Ok(Some(good))
}
