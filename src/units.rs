//! How sizes are written for people: binary units (KiB, MiB, GiB) through humansize, one policy.
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
}
