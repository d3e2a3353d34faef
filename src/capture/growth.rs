//! Which sites grow step after step. At each boundary of a run's repeated work (an optimizer
//! step's end, a targeted call's end) every site's live bytes are compared with the previous
//! boundary's: a site whose live bytes rose at each of the latest boundaries is growing, by the
//! bytes it gained over that streak. The first boundary is the baseline, so what the first step
//! creates once (optimizer state, cuBLAS's workspace, the first segments) is never growth, and a
//! steady loop, whose sites come back to the same live bytes at each boundary, has none. Bounded:
//! a few numbers per site, whatever the run's length. Fed by `peak::Tracker` under its lock.

/// A site's current streak of boundaries at which its live bytes rose.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Streak {
    /// Consecutive boundaries, up to the latest, at which the site's live bytes rose.
    pub boundaries: u64,
    /// The boundary (1 = the baseline) before the streak's first rise.
    pub since: u64,
    /// The bytes gained over the streak.
    pub grown: i64,
    /// The smallest and largest rise of one boundary in the streak (equal: the same each time).
    pub least: i64,
    pub most: i64,
}

/// The boundaries of one kind of repeated work, and each site's streak.
#[derive(Clone, Debug, Default)]
pub struct Ledger {
    boundaries: u64,
    /// Each site's live bytes at the latest boundary, by site id.
    last: Vec<i64>,
    streaks: Vec<Streak>,
}

impl Ledger {
    /// A boundary: `levels` are the sites' live bytes now, by site id.
    pub fn boundary(&mut self, levels: &[i64]) {
        self.boundaries += 1;
        if self.last.len() < levels.len() {
            self.last.resize(levels.len(), 0);
            self.streaks.resize(levels.len(), Streak::default());
        }
        let baseline = self.boundaries == 1;
        for (i, &level) in levels.iter().enumerate() {
            let rise = level - self.last[i];
            self.last[i] = level;
            if baseline {
                continue;
            }
            let s = &mut self.streaks[i];
            if rise > 0 {
                if s.boundaries == 0 {
                    *s = Streak {
                        since: self.boundaries - 1,
                        least: rise,
                        most: rise,
                        ..Streak::default()
                    };
                }
                s.boundaries += 1;
                s.grown += rise;
                s.least = s.least.min(rise);
                s.most = s.most.max(rise);
            } else if s.boundaries > 0 {
                *s = Streak::default();
            }
        }
    }

    pub fn boundaries(&self) -> u64 {
        self.boundaries
    }

    /// The sites growing now: a streak of at least `min_boundaries` rises up to the latest
    /// boundary, by site id.
    pub fn growing(&self, min_boundaries: u64) -> Vec<(u32, Streak)> {
        self.streaks
            .iter()
            .enumerate()
            .filter(|(_, s)| s.boundaries >= min_boundaries)
            .map(|(i, s)| (i as u32, *s))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_site_that_rises_at_every_boundary_grows_by_its_rise() {
        let mut l = Ledger::default();
        // Site 0 leaks 100 a step; site 1 is steady (a workspace made in the first step);
        // site 2 grows for two steps, then stops.
        let mut levels = [0i64, 50, 0];
        for step in 0..10 {
            levels[0] += 100;
            if (1..3).contains(&step) {
                levels[2] += 7;
            }
            l.boundary(&levels);
        }
        assert_eq!(l.boundaries(), 10);
        let growing = l.growing(3);
        assert_eq!(
            growing,
            vec![(
                0,
                Streak {
                    boundaries: 9,
                    since: 1,
                    grown: 900,
                    least: 100,
                    most: 100
                }
            )]
        );
    }

    #[test]
    fn a_fall_ends_a_streak_and_a_new_site_starts_from_nothing() {
        let mut l = Ledger::default();
        l.boundary(&[10]);
        l.boundary(&[20]);
        l.boundary(&[5]);
        assert!(l.growing(1).is_empty());
        // Site 1 appears after the baseline: its first live bytes count as a rise.
        l.boundary(&[5, 8]);
        l.boundary(&[5, 16]);
        assert_eq!(l.growing(2)[0].0, 1);
        assert_eq!(l.growing(2)[0].1.grown, 16);
    }
}
