//! `KEY=SIZE` as `--max` and `--max-increase` take it: one parser for both. `--max` also takes a
//! `FUNCTION:` scope before the key; `--max-increase` also takes a percentage (`KEY=5%`).
use crate::model::units;

/// A limit as typed: a number of bytes (or of counts), or a percentage of a base value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Amount {
    Size(i64),
    Percent(f64),
}

/// One parsed `[SCOPE:]KEY=AMOUNT`.
#[derive(Clone, Debug, PartialEq)]
pub struct Limit {
    /// The part before the last ':' of the key side (only when `scoped`), if not empty.
    pub scope: Option<String>,
    pub key: String,
    pub amount: Amount,
}

/// Which forms a limit may take.
#[derive(Clone, Copy)]
pub struct Forms {
    /// `FUNCTION:KEY=...` is allowed (`--max`).
    pub scoped: bool,
    /// `KEY=PERCENT%` is allowed (`--max-increase`).
    pub percent: bool,
}

/// Parses `spec`; the error says what is wrong with it, for the caller's message.
pub fn parse(spec: &str, forms: Forms) -> Result<Limit, String> {
    let (lhs, amount) = spec
        .rsplit_once('=')
        .ok_or_else(|| "no '=' between the key and the limit".to_string())?;
    let (scope, key) = match lhs.rsplit_once(':').filter(|_| forms.scoped) {
        Some((f, k)) if !f.trim().is_empty() => (Some(f.trim().to_string()), k.trim()),
        Some((_, k)) => (None, k.trim()),
        None => (None, lhs.trim()),
    };
    if key.is_empty() {
        return Err("no key before '='".into());
    }
    let amount = amount.trim();
    let amount = match amount.strip_suffix('%').filter(|_| forms.percent) {
        Some(p) => Amount::Percent(
            p.trim()
                .parse::<f64>()
                .ok()
                .filter(|p| *p >= 0.0)
                .ok_or_else(|| format!("'{amount}' is not a percentage"))?,
        ),
        None => Amount::Size(
            units::parse_size(amount).ok_or_else(|| format!("'{amount}' is not a size"))?,
        ),
    };
    Ok(Limit {
        scope,
        key: key.to_string(),
        amount,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: Forms = Forms {
        scoped: true,
        percent: false,
    };
    const INCREASE: Forms = Forms {
        scoped: false,
        percent: true,
    };

    #[test]
    fn both_flags_forms_parse_and_their_mistakes_are_named() {
        assert_eq!(
            parse("train_step:delta=16MiB", MAX),
            Ok(Limit {
                scope: Some("train_step".into()),
                key: "delta".into(),
                amount: Amount::Size(16 << 20)
            })
        );
        assert_eq!(parse(":delta=1", MAX).unwrap().scope, None);
        assert_eq!(
            parse("delta=5%", INCREASE).unwrap().amount,
            Amount::Percent(5.0)
        );
        assert_eq!(parse("delta=5%", MAX).unwrap_err(), "'5%' is not a size");
        assert_eq!(
            parse("a:b=1", INCREASE).unwrap().key,
            "a:b",
            "no scope for --max-increase"
        );
        assert!(parse("delta", MAX).unwrap_err().contains("no '='"));
        assert_eq!(parse("=1", MAX).unwrap_err(), "no key before '='");
        assert_eq!(
            parse("k=-1%", INCREASE).unwrap_err(),
            "'-1%' is not a percentage"
        );
    }
}
