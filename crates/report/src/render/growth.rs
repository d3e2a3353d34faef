//! The "Growing" section: the sites whose live bytes rose at every step of the latest ones, by
//! their rise per step, only when something grows.
use super::style::{styled, write};
use crate::model::growth::Growth;
use crate::model::units;
use std::fmt::Write;

pub fn render(out: &mut String, g: &Growth) {
    if g.sites.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nGrowing: {} site{} whose live bytes rose at each {} for the last {} or more ({} so \
         far)",
        g.sites.len(),
        if g.sites.len() == 1 { "" } else { "s" },
        g.step,
        g.min_steps,
        g.steps
    );
    out.push('\n');
    let mut t = styled(&[
        "Per step",
        "Steps",
        "Grown",
        "Live now",
        "Category",
        "Site",
        "Line Contents",
    ]);
    for s in &g.sites {
        let category = s
            .categories
            .iter()
            .max_by_key(|(_, b)| **b)
            .map(|(c, _)| c.replace('_', " "))
            .unwrap_or_default();
        let per_step = if s.least_bytes == s.most_bytes {
            units::signed_bytes(s.bytes_per_step)
        } else {
            format!("~{}", units::signed_bytes(s.bytes_per_step))
        };
        t.add_row(vec![
            per_step,
            s.steps.to_string(),
            units::bytes(s.grown_bytes),
            units::bytes(s.live_bytes),
            category,
            s.at.label(),
            s.at.place.source.clone(),
        ]);
        if let Some(c) = &s.at.context {
            t.add_row(vec![
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                format!("  from {}", c.label()),
                c.source.clone(),
            ]);
        }
    }
    write(out, t, 0..4);
}
