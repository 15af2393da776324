//! Kubernetes resource quantities (`512Mi`, `1G`, `1.5Gi`, `1e9`,
//! `128974848`) as bytes, the way kubelet turns a container's
//! `resources.limits.memory` into the cgroup limit it sends through CRI:
//! binary suffixes are powers of 1024, decimal ones powers of 1000 (`1G` is
//! 10^9 bytes, not our host config's `1g` = 2^30), a fraction is rounded up
//! to the next byte. Pure; strict ASCII.

/// Why a quantity is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum QuantityError {
    #[error("{0:?} is not a Kubernetes quantity (e.g. 512Mi, 1Gi, 1G, 1073741824)")]
    Syntax(String),
    #[error("{0:?} is negative")]
    Negative(String),
    #[error("{0:?} is more bytes than fit in 64 bits")]
    TooLarge(String),
}

/// Longest quantity text we look at.
const MAX_LEN: usize = 40;

/// `text` as bytes, rounded up.
///
/// # Errors
/// Not a quantity, negative, or too large.
pub(crate) fn bytes(text: &str) -> Result<u64, QuantityError> {
    let syntax = || QuantityError::Syntax(text.chars().take(MAX_LEN).collect());
    if text.is_empty() || text.len() > MAX_LEN || !text.is_ascii() {
        return Err(syntax());
    }
    let (negative, rest) = match text.as_bytes()[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let end = rest.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(end);
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && frac.is_empty() || frac.contains('.') {
        return Err(syntax());
    }
    // (power of 2, power of 10) the suffix multiplies by.
    let (pow2, pow10): (u32, i32) = match suffix {
        "" => (0, 0),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        s if s.starts_with(['e', 'E']) => {
            let exp = &s[1..];
            let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if digits.is_empty() || digits.len() > 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(syntax());
            }
            (0, exp.parse().map_err(|_| syntax())?)
        }
        _ => return Err(syntax()),
    };
    let digits = format!("{whole}{frac}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 30 {
        return Err(QuantityError::TooLarge(text.to_string()));
    }
    let mantissa: u128 = if digits.is_empty() { 0 } else { digits.parse().map_err(|_| syntax())? };
    if negative && mantissa != 0 {
        return Err(QuantityError::Negative(text.to_string()));
    }
    // value = mantissa * 2^pow2 * 10^(pow10 - frac digits), rounded up.
    let scale = pow10 - i32::try_from(frac.len()).map_err(|_| syntax())?;
    let too_large = || QuantityError::TooLarge(text.to_string());
    let mut num = mantissa.checked_shl(pow2).filter(|n| n >> pow2 == mantissa).ok_or_else(too_large)?;
    let mut den: u128 = 1;
    let ten = |e: i32| 10u128.checked_pow(e.unsigned_abs());
    if scale >= 0 {
        num = num.checked_mul(ten(scale).ok_or_else(too_large)?).ok_or_else(too_large)?;
    } else {
        // A divisor above 10^38 leaves at most one byte (rounded up).
        den = ten(scale).unwrap_or(u128::MAX);
    }
    let value = num.div_ceil(den);
    u64::try_from(value).map_err(|_| too_large())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantity_table() {
        let cases: &[(&str, Result<u64, &str>)] = &[
            ("1Gi", Ok(1 << 30)),
            ("512Mi", Ok(512 << 20)),
            ("64Ki", Ok(64 << 10)),
            ("1G", Ok(1_000_000_000)),
            ("1000M", Ok(1_000_000_000)),
            ("129M", Ok(129_000_000)),
            ("1k", Ok(1000)),
            ("1.5Gi", Ok(3 << 29)),
            ("0.5Ki", Ok(512)),
            (".5Ki", Ok(512)),
            ("1e9", Ok(1_000_000_000)),
            ("1E3", Ok(1000)),
            ("128974848", Ok(128_974_848)),
            ("+1Mi", Ok(1 << 20)),
            ("500m", Ok(1)),
            ("1500m", Ok(2)),
            ("0", Ok(0)),
            ("16Ei", Err("64 bits")),
            ("-1Gi", Err("negative")),
            ("1GB", Err("not a Kubernetes quantity")),
            ("1gi", Err("not a Kubernetes quantity")),
            ("", Err("not a Kubernetes quantity")),
            ("Gi", Err("not a Kubernetes quantity")),
            ("1.2.3", Err("not a Kubernetes quantity")),
            ("1 Gi", Err("not a Kubernetes quantity")),
            ("1e", Err("not a Kubernetes quantity")),
            ("1Gi,mode=4777", Err("not a Kubernetes quantity")),
        ];
        for (text, want) in cases {
            match (bytes(text), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, *want, "{text}"),
                (Err(e), Err(part)) => assert!(e.to_string().contains(part), "{text}: {e}"),
                (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
            }
        }
    }
}
