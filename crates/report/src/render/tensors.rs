//! The `--tensors` section of the table: per inventory, the totals by category against the
//! allocator (the gap named), then the largest storages.
use super::style::{styled, write};
use crate::model::profile::Inventory;
use crate::model::units;
use std::fmt::Write;

pub fn render(out: &mut String, inventories: &[Inventory]) {
    for inv in inventories {
        let _ = writeln!(out, "\nLive tensors at {}:", inv.when);
        for c in &inv.categories {
            let storages = match c.unsharded_bytes {
                Some(full) => format!(
                    "{} storages; local shards of {} sharded across ranks",
                    c.storages,
                    units::bytes(full)
                ),
                None => format!("{} storages", c.storages),
            };
            total(
                out,
                &c.category.replace('_', " "),
                units::bytes(c.bytes),
                &storages,
            );
        }
        let storages = format!(
            "{} storages, views and tied weights counted once",
            inv.storages
        );
        total(out, "tensors", units::bytes(inv.tensor_bytes), &storages);
        total(
            out,
            "allocated",
            units::bytes(inv.allocated_bytes),
            "allocated_bytes.all.current",
        );
        total(
            out,
            "gap",
            units::signed_bytes(inv.gap_bytes),
            "held by no Python tensor: saved for backward, cuBLAS/cuDNN workspaces, allocator rounding",
        );
        if inv.skipped_objects > 0 {
            let _ = writeln!(
                out,
                "  {} objects failed or vanished while inspected and were skipped",
                inv.skipped_objects
            );
        }
        if inv.tensors.is_empty() {
            continue;
        }
        out.push('\n');
        let header = [
            "Bytes",
            "Category",
            "Dtype",
            "Shape",
            "Views",
            "Name",
            "Created at",
        ];
        let mut table = styled(&header);
        for t in &inv.tensors {
            table.add_row(vec![
                units::bytes(t.bytes),
                t.category.replace('_', " "),
                t.dtype.clone(),
                format!("{:?}", t.shape),
                t.tensors.to_string(),
                match (&t.name, t.storages) {
                    (Some(name), 1) => name.clone(),
                    (None, 1) => "(unnamed)".into(),
                    (Some(name), n) => format!("{name} ({n} storages)"),
                    (None, n) => format!("(unnamed: {n} storages)"),
                },
                t.created_at
                    .as_deref()
                    .map(crate::model::profile::file_name)
                    .unwrap_or_default()
                    .to_string(),
            ]);
        }
        write(out, table, 0..1);
        if inv.unlisted_storages > 0 {
            let _ = writeln!(out, "  … and {} smaller storages", inv.unlisted_storages);
        }
    }
}

/// One line of the totals: a label, an amount and what it stands for.
fn total(out: &mut String, label: &str, amount: String, note: &str) {
    let _ = writeln!(out, "  {label:<16} {amount:>12}  ({note})");
}
