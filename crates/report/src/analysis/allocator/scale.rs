//! Another batch size: traces of one program at two or three batch sizes, matched allocation by
//! allocation (the same events in the same order, each allocation at the same line), each size
//! fitted as an affine function of the batch from the first two, and the trace synthesized at
//! another batch. A third trace checks the fit: where its sizes are not on the line (beyond the
//! allocator's 512-byte rounding), the line is named.
use super::Event;

/// One traced run: its batch size, its events, and each event's line (allocations).
pub struct Traced<'a> {
    pub batch: u64,
    pub events: &'a [Event],
    pub at: &'a [Option<String>],
}

/// The synthesized trace, and the lines whose sizes a third trace puts off the fitted line.
pub struct Scaled {
    pub events: Vec<Event>,
    pub not_affine: Vec<String>,
}

/// How far a third trace's size may be from the line (the allocator rounds to 512 bytes).
const ROUNDING: i128 = 512;

/// The trace at `batch`, from `traces` (two or three, distinct batches).
pub fn synthesize(traces: &[Traced], batch: u64) -> Result<Scaled, String> {
    let fitted = Fitted::new(traces)?;
    Ok(Scaled {
        events: fitted.events_at(batch),
        not_affine: fitted.not_affine,
    })
}

/// The traces matched and each allocation's size fitted, once: then asked at any batch.
struct Fitted<'a> {
    /// The first trace's events, the template of every synthesized one.
    events: &'a [Event],
    /// The two traces the line goes through: (batch, each allocation's size).
    points: [(i128, Vec<u64>); 2],
    not_affine: Vec<String>,
}

impl<'a> Fitted<'a> {
    fn new(traces: &[Traced<'a>]) -> Result<Self, String> {
        let [a, b, rest @ ..] = traces else {
            return Err("another batch size needs traces at two or three batch sizes".into());
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
        let mut fitted = Fitted {
            events: a.events,
            points: [
                (a.batch as i128, allocation_sizes(a, a)?),
                (b.batch as i128, allocation_sizes(b, a)?),
            ],
            not_affine: Vec::new(),
        };
        if let [c] = rest {
            let lines: Vec<&Option<String>> = a
                .events
                .iter()
                .zip(a.at)
                .filter(|(e, _)| matches!(e, Event::Alloc { .. }))
                .map(|(_, at)| at)
                .collect();
            for (j, third) in allocation_sizes(c, a)?.into_iter().enumerate() {
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
    /// a prediction must not promise less than the run would take.
    fn size(&self, j: usize, batch: u64) -> u64 {
        let [(b1, s1), (b2, s2)] = &self.points;
        let (s1, s2) = (s1[j] as i128, s2[j] as i128);
        let (num, den) = (s1 * (b2 - b1) + (s2 - s1) * (batch as i128 - b1), b2 - b1);
        let (num, den) = if den < 0 { (-num, -den) } else { (num, den) };
        let v = num.div_euclid(den) + i128::from(num.rem_euclid(den) != 0);
        v.max(1) as u64
    }

    /// The first trace's events with every allocation's size at `batch`.
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

/// The sizes of `t`'s allocations in order, after checking that `t` has `reference`'s events:
/// the same kinds in the same order, allocations at the same lines, frees of the same
/// allocations.
fn allocation_sizes(t: &Traced, reference: &Traced) -> Result<Vec<u64>, String> {
    let differ = |i: usize, what: &str| {
        Err(format!(
            "the traces at batch {} and {} differ at event {i} ({what}): the program's \
             allocations must not depend on the batch size but by their sizes",
            reference.batch, t.batch
        ))
    };
    if t.events.len() != reference.events.len() {
        return differ(
            t.events.len().min(reference.events.len()),
            "one trace ends there",
        );
    }
    // Each trace's ids, as the ordinal of their allocation.
    let ordinals = |tr: &Traced| {
        let mut map = std::collections::HashMap::new();
        let mut n = 0usize;
        for e in tr.events {
            if let Event::Alloc { id, .. } = e {
                map.insert(*id, n);
                n += 1;
            }
        }
        map
    };
    let (mine, theirs) = (ordinals(t), ordinals(reference));
    let freed = |map: &std::collections::HashMap<u64, usize>, events: &[Event]| {
        let mut ordinals: Vec<Option<usize>> = events
            .iter()
            .map(|e| match e {
                Event::Free { id } => map.get(id).copied(),
                Event::Alloc { .. } => None,
            })
            .collect();
        ordinals.sort_unstable();
        ordinals
    };
    let mut sizes = Vec::new();
    let mut i = 0;
    while i < t.events.len() {
        match (&t.events[i], &reference.events[i]) {
            (Event::Alloc { size, .. }, Event::Alloc { .. }) => {
                if t.at[i] != reference.at[i] {
                    return differ(i, "allocations at different lines");
                }
                sizes.push(*size);
                i += 1;
            }
            (Event::Free { .. }, Event::Free { .. }) => {
                // A run of frees may come in another order (autocast's cache, a dict of
                // tensors, freed in hash order): the allocator ends in the same state whatever
                // the order of frees between two allocations, so the run is compared as a set.
                let end = (i..t.events.len())
                    .find(|&k| {
                        !matches!(t.events[k], Event::Free { .. })
                            || !matches!(reference.events[k], Event::Free { .. })
                    })
                    .unwrap_or(t.events.len());
                let run = i..end;
                if freed(&mine, &t.events[run.clone()]) != freed(&theirs, &reference.events[run]) {
                    return differ(i, "frees of different allocations");
                }
                i = end;
            }
            _ => return differ(i, "an allocation against a free"),
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
