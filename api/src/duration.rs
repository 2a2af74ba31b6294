//! Go duration strings, as in `BGPPeer.spec.holdTime: 90s`.
//!
//! MetalLB's timers are `metav1.Duration`, which Go's `time.ParseDuration`
//! reads: a sequence of decimal numbers, each with a unit (`ns`, `us`, `µs`,
//! `ms`, `s`, `m`, `h`), such as `90s`, `1m30s` or `1.5h`; `0` alone is zero.
//! CEL's `duration()` reads the same syntax, so the schema rules and these
//! functions agree. Negative durations are rejected: no MetalLB timer takes
//! one. Pure parsing: no clock.

use std::time::Duration;

/// Parses a Go duration string into a [`Duration`].
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let rest = match text.strip_prefix('-') {
        Some(_) => return Err(DurationError::Negative),
        None => text.strip_prefix('+').unwrap_or(text),
    };
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(DurationError::Syntax);
    }
    let mut total: u128 = 0;
    let mut rest = rest;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or(DurationError::MissingUnit)?;
        let (number, tail) = rest.split_at(number_len);
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let nanos_per_unit: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(DurationError::Unit(unit.into())),
        };
        total = total
            .checked_add(decimal_times(number, nanos_per_unit)?)
            .ok_or(DurationError::Overflow)?;
        rest = tail;
    }
    // Go's durations are i64 nanoseconds: about 292 years.
    if total > i64::MAX as u128 {
        return Err(DurationError::Overflow);
    }
    Ok(Duration::from_nanos(total as u64))
}

/// Why a string is not a Go duration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Empty, or a number that is not decimal digits with at most one point.
    #[error("is not a duration such as \"90s\" or \"1m30s\"")]
    Syntax,
    /// A number with no unit after it.
    #[error("is missing a unit (ns, us, ms, s, m, h)")]
    MissingUnit,
    /// A unit other than ns, us, µs, ms, s, m, h.
    #[error("has unknown unit {0:?}")]
    Unit(String),
    /// Starts with `-`.
    #[error("is negative")]
    Negative,
    /// Longer than Go's duration type can hold.
    #[error("is too long")]
    Overflow,
}

/// `number` (digits, optional point, digits) times `scale`, truncated to
/// whole nanoseconds as Go does.
fn decimal_times(number: &str, scale: u128) -> Result<u128, DurationError> {
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && frac.is_empty()) || frac.contains('.') {
        return Err(DurationError::Syntax);
    }
    let digits = |s: &str| -> Result<u128, DurationError> {
        if s.is_empty() {
            return Ok(0);
        }
        s.parse::<u128>().map_err(|_| DurationError::Overflow)
    };
    let value = digits(whole)?
        .checked_mul(scale)
        .ok_or(DurationError::Overflow)?;
    // Fractions beyond nanosecond precision are dropped: with at most 18
    // digits the fraction times the largest scale (3.6e12 ns per hour)
    // stays below 3.6e30, far inside u128, but the sum with the whole part
    // may not be.
    let frac = &frac[..frac.len().min(18)];
    if frac.is_empty() {
        return Ok(value);
    }
    let denominator = 10u128.pow(frac.len() as u32);
    let part = digits(frac)?
        .checked_mul(scale)
        .ok_or(DurationError::Overflow)?
        / denominator;
    value.checked_add(part).ok_or(DurationError::Overflow)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_syntax() {
        let s = Duration::from_secs;
        assert_eq!(parse("90s"), Ok(s(90)));
        assert_eq!(parse("1m30s"), Ok(s(90)));
        assert_eq!(parse("1h"), Ok(s(3600)));
        assert_eq!(parse("1.5h"), Ok(s(5400)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse(".5s"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("1us"), Ok(Duration::from_micros(1)));
        assert_eq!(parse("1µs"), Ok(Duration::from_micros(1)));
        assert_eq!(parse("3ns"), Ok(Duration::from_nanos(3)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
        assert_eq!(parse("+10s"), Ok(s(10)));
        assert_eq!(parse("1h1m1s1ms"), Ok(Duration::from_millis(3_661_001)));
    }

    #[test]
    fn rejects() {
        assert_eq!(parse(""), Err(DurationError::Syntax));
        assert_eq!(parse("90"), Err(DurationError::MissingUnit));
        assert_eq!(parse("s"), Err(DurationError::Syntax));
        assert_eq!(parse("1d"), Err(DurationError::Unit("d".into())));
        assert_eq!(parse("-1s"), Err(DurationError::Negative));
        assert_eq!(parse("1..5s"), Err(DurationError::Syntax));
        assert_eq!(parse(".s"), Err(DurationError::Syntax));
        assert_eq!(parse("3000000h"), Err(DurationError::Overflow));
        assert_eq!(parse("90 s"), Err(DurationError::Unit(" s".into())));
    }

    /// Issue 14, finding 9: the whole part times the unit fits a u128 just
    /// under its limit, and adding the fraction went past it (a panic in
    /// debug builds, a wrap to about 36 minutes in release ones).
    #[test]
    fn a_fraction_that_overflows_is_an_error() {
        assert_eq!(
            parse("94522879700260684295381835.999999999999999999h"),
            Err(DurationError::Overflow)
        );
        // The same whole part without the fraction still fits u128 but not
        // Go's i64 nanoseconds.
        assert_eq!(
            parse("94522879700260684295381835h"),
            Err(DurationError::Overflow)
        );
        // Every digit of a long fraction is accepted, and truncated.
        assert_eq!(
            parse("1.999999999999999999999s"),
            Ok(Duration::from_nanos(1_999_999_999))
        );
        assert_eq!(
            parse("9223372036.854775807s"),
            Ok(Duration::from_nanos(i64::MAX as u64))
        );
        assert_eq!(parse("9223372036.854775808s"), Err(DurationError::Overflow));
    }
}
