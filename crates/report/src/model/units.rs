//! How sizes are written for people and read from them: binary units (KiB, MiB, GiB) through
//! humansize, one policy; and sizes as people type them (`20GiB`, `512MB`, `1048576`).
use humansize::{format_size_i, FormatSizeOptions, BINARY};

/// A byte count in binary units with two decimals, e.g. `4.00 MiB`, `-512 B`.
pub fn bytes(n: i64) -> String {
    if n.abs() < 1024 {
        return format!("{n} B");
    }
    let opts = FormatSizeOptions::from(BINARY)
        .decimal_places(2)
        .decimal_zeroes(2)
        .space_after_value(true);
    format_size_i(n, opts)
}

/// A signed byte count: `+4.00 MiB`, `-4.00 MiB`, `0 B`.
pub fn signed_bytes(n: i64) -> String {
    if n > 0 {
        format!("+{}", bytes(n))
    } else {
        bytes(n)
    }
}

/// The binary unit a chart's axis uses for values up to `max`: its divisor and name (one unit
/// for the whole axis, where `bytes` picks one per number).
pub fn axis_unit(max: i64) -> (f64, &'static str) {
    let max = max.unsigned_abs();
    if max >= 1 << 30 {
        ((1u64 << 30) as f64, "GiB")
    } else if max >= 1 << 20 {
        ((1u64 << 20) as f64, "MiB")
    } else if max >= 1 << 10 {
        (1024.0, "KiB")
    } else {
        (1.0, "bytes")
    }
}

/// A size as typed: plain bytes (`1048576`), or a number with a unit, binary (`KiB`, `MiB`,
/// `GiB`, `TiB`, also `K`, `M`, `G`, `T`) or decimal (`KB`, `MB`, `GB`, `TB`), any case, `B`
/// optional; fractions allowed (`1.5GiB`). None when it is not a size.
pub fn parse_size(text: &str) -> Option<i64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number.parse().ok()?;
    let factor: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024f64.powi(2),
        "g" | "gib" => 1024f64.powi(3),
        "t" | "tib" => 1024f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => return None,
    };
    let bytes = value * factor;
    (bytes.is_finite() && bytes >= 0.0 && bytes < i64::MAX as f64).then(|| bytes.round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(4 * 1024 * 1024), "4.00 MiB");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(signed_bytes(-4 * 1024 * 1024), "-4.00 MiB");
        assert_eq!(signed_bytes(1 << 30), "+1.00 GiB");
    }

    #[test]
    fn sizes_as_typed() {
        assert_eq!(parse_size("1048576"), Some(1 << 20));
        assert_eq!(parse_size("20GiB"), Some(20 << 30));
        assert_eq!(parse_size("512 MiB"), Some(512 << 20));
        assert_eq!(parse_size("1.5g"), Some(3 << 29));
        assert_eq!(parse_size("2MB"), Some(2_000_000));
        assert_eq!(parse_size("4k"), Some(4096));
        assert_eq!(parse_size("12 apples"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("-3MiB"), None);
    }
}
