//! The timeline record: the run's allocated and reserved bytes over time, in points of equal
//! numbers of allocator events, with the live bytes per category and the changes per site at
//! each point, and the moments that shape a run (backward passes, optimizer steps, targeted
//! calls). Part of the report schema (`timeline:`); the HTML report draws it.
use super::peak::SiteAt;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the record means, written into every report that has one.
pub const TIMELINE_SEMANTICS: &str = "The run's memory on the profiled device over time, from \
every allocation and free the allocator reported, in points of events_per_point events each \
(points merge pairwise as a run grows, so a long run keeps at most 2048 points). Per point: \
allocations, the allocations seen by its end (the allocation index); seconds, from the start of \
tracking to its last event; allocated_max, allocated_min and allocated_end, the highest, lowest \
and last allocated_bytes.all.current within it (the highest allocated_max is the run's peak, \
exactly); reserved_max and reserved_end, the same of reserved_bytes.all.current (the allocated \
bytes on the CPU). categories: the live bytes per category at each point's end (as the peak names \
them; a block's category is learnt when it is freed or at the end, and counts from the point \
that allocated it); allocated_end less their sum is what memprof saw no allocation of. sites and \
site_changes: per point, [index into sites, change of its live bytes, ...] (the live bytes of a \
site at a point are its changes summed up to it). marks: backward passes begun, optimizer steps \
ended, targeted calls begun and ended (thinned evenly past 4096).";

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Timeline {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub semantics: String,
    pub events_per_point: u64,
    pub allocations: Vec<u64>,
    pub seconds: Vec<f64>,
    pub allocated_max: Vec<i64>,
    pub allocated_min: Vec<i64>,
    pub allocated_end: Vec<i64>,
    pub reserved_max: Vec<i64>,
    pub reserved_end: Vec<i64>,
    /// Live bytes per category at each point's end (the categories that held any).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub categories: BTreeMap<String, Vec<i64>>,
    /// The sites that held bytes at some point's end.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sites: Vec<SiteAt>,
    /// Per point, pairs of (index into `sites`, change of its live bytes), flattened.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub site_changes: Vec<Vec<i64>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub marks: Vec<TimelineMark>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct TimelineMark {
    /// `backward`, `step`, `call_start` or `call_end`.
    pub kind: String,
    /// The targeted function of a call's mark.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    pub allocation: u64,
    pub seconds: f64,
}

impl Timeline {
    /// The number of points.
    pub fn len(&self) -> usize {
        self.allocations.len()
    }

    pub fn is_empty(&self) -> bool {
        self.allocations.is_empty()
    }

    /// The highest allocated bytes of any point (the run's peak).
    pub fn highest(&self) -> Option<i64> {
        self.allocated_max.iter().copied().max()
    }
}
