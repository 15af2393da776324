//! Size values: parsing the forms users write ("512Mi", "2g", "1048576",
//! "25%") and turning them into a byte count.
//!
//! The parser is strict ASCII and never hands text on: a [`Size`] is a number,
//! so nothing a user writes can reach a mount data string (docs/design.md#hostile-rootfs rule 5).
//! No I/O here: the basis for a percentage is passed in by the caller.

use std::fmt;
use std::str::FromStr;

/// Smallest tmpfs we ever create or grow to.
pub const MIN_BYTES: u64 = 1 << 20;

/// Longest size text we look at; anything longer is junk.
const MAX_LEN: usize = 32;

/// A byte count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct Bytes(pub u64);

/// The binary units we print, largest first.
const UNITS: [(&str, u64); 4] = [("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)];

impl Bytes {
    /// A tmpfs `size=` option as the kernel reads it: a number with an
    /// optional k/m/g/t suffix (powers of 1024). Percent sizes are unknown.
    pub fn from_tmpfs_option(text: &str) -> Option<Bytes> {
        let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
        let (digits, unit) = text.split_at(split);
        let n: u64 = digits.parse().ok()?;
        let shift = match unit {
            "" => 0,
            "k" | "K" => 10,
            "m" | "M" => 20,
            "g" | "G" => 30,
            "t" | "T" => 40,
            _ => return None,
        };
        n.checked_mul(1 << shift).map(Bytes)
    }

    /// "512Mi", or "6171024Ki (~5.9Gi)" when the exact form is hard to read.
    pub fn approx(self) -> String {
        let exact = self.to_string();
        match UNITS.iter().find(|(_, u)| self.0 >= *u) {
            Some((name, unit)) if !exact.ends_with(name) => {
                format!("{exact} (~{:.1}{name})", self.0 as f64 / *unit as f64)
            }
            _ => exact,
        }
    }
}

impl fmt::Display for Bytes {
    /// Exact, human-readable: the largest binary unit that divides evenly.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, unit) in UNITS {
            if self.0 >= unit && self.0 % unit == 0 {
                return write!(f, "{}{}", self.0 / unit, name);
            }
        }
        write!(f, "{}", self.0)
    }
}

/// A size as configured: absolute, or a share of a basis (memory limit or RAM).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    Absolute(Bytes),
    /// Percent of the basis, 1..=100.
    Percent(u8),
}

/// Why a size text was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("empty size")]
    Empty,
    #[error("size text longer than {MAX_LEN} bytes")]
    TooLong,
    #[error("size {0:?} is not a number with an optional unit (e.g. 512Mi, 2g, 25%)")]
    Syntax(String),
    #[error("size {0:?} has an unknown unit (use k/m/g/t, Ki/Mi/Gi/Ti, KiB/MiB/GiB/TiB or %)")]
    Unit(String),
    #[error("size {0:?} is zero (tmpfs would be unlimited)")]
    Zero(String),
    #[error("size {0:?} overflows 64 bits")]
    Overflow(String),
    #[error("size {0:?} is not a percentage from 1% to 100%")]
    Percent(String),
}

impl FromStr for Size {
    type Err = SizeError;

    /// Accepts `1048576`, `64k`/`64m`/`2g`/`1t` (also upper case, powers of
    /// 1024 as Docker reads them), `64Ki`/`512Mi`/`2Gi`/`1Ti`, `512MiB`, and `N%`.
    fn from_str(text: &str) -> Result<Self, SizeError> {
        if text.is_empty() {
            return Err(SizeError::Empty);
        }
        if text.len() > MAX_LEN {
            return Err(SizeError::TooLong);
        }
        let shown = || text.to_string();
        let split = text.bytes().position(|b| !b.is_ascii_digit()).unwrap_or(text.len());
        let (digits, unit) = text.split_at(split);
        if digits.is_empty() {
            return Err(SizeError::Syntax(shown()));
        }
        let number: u64 = digits.parse().map_err(|_| SizeError::Overflow(shown()))?;
        if unit == "%" {
            return match number {
                1..=100 => Ok(Size::Percent(number as u8)),
                _ => Err(SizeError::Percent(shown())),
            };
        }
        let shift = match unit {
            "" | "b" | "B" => 0,
            "k" | "K" | "Ki" | "KiB" | "kb" | "KB" => 10,
            "m" | "M" | "Mi" | "MiB" | "mb" | "MB" => 20,
            "g" | "G" | "Gi" | "GiB" | "gb" | "GB" => 30,
            "t" | "T" | "Ti" | "TiB" | "tb" | "TB" => 40,
            _ if unit.is_ascii() && unit.bytes().all(|b| b.is_ascii_alphabetic()) => {
                return Err(SizeError::Unit(shown()))
            }
            _ => return Err(SizeError::Syntax(shown())),
        };
        if number == 0 {
            return Err(SizeError::Zero(shown()));
        }
        let bytes = number.checked_mul(1u64 << shift).ok_or_else(|| SizeError::Overflow(shown()))?;
        Ok(Size::Absolute(Bytes(bytes)))
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Size::Absolute(b) => b.fmt(f),
            Size::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size such as \"512Mi\", \"2g\", \"25%\" or a byte count")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Size, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Size, E> {
                match u64::try_from(v) {
                    Ok(0) | Err(_) => Err(E::custom(format!("size {v} must be positive"))),
                    Ok(n) => Ok(Size::Absolute(Bytes(n))),
                }
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Size, E> {
                self.visit_i64(i64::try_from(v).map_err(|_| E::custom("size overflows"))?)
            }
        }
        d.deserialize_any(V)
    }
}

/// How a resolved size came about, for `explain`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// An absolute size, no basis needed.
    Absolute,
    /// A share of `linux.resources.memory.limit`.
    MemoryLimit,
    /// A share of the host's RAM.
    HostRam,
}

impl Size {
    /// Bytes for this size, given the container memory limit (if positive) and
    /// host RAM; clamped to `[MIN_BYTES, host_ram]` and rounded up to whole pages.
    pub fn resolve(self, memory_limit: Option<Bytes>, host_ram: Bytes) -> (Bytes, Basis) {
        let (raw, basis) = match self {
            Size::Absolute(b) => (b.0, Basis::Absolute),
            Size::Percent(p) => {
                let (base, basis) = match memory_limit {
                    Some(limit) if limit.0 > 0 => (limit.0, Basis::MemoryLimit),
                    _ => (host_ram.0, Basis::HostRam),
                };
                ((u128::from(base) * u128::from(p) / 100) as u64, basis)
            }
        };
        let upper = host_ram.0.max(MIN_BYTES);
        let clamped = raw.clamp(MIN_BYTES, upper);
        let page = 4096u64;
        let rounded = clamped.div_ceil(page).saturating_mul(page).min(upper);
        (Bytes(rounded), basis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tmpfs_option_sizes() {
        let cases = [
            ("65536k", Some(64 << 20)),
            ("2g", Some(2 << 30)),
            ("1048576", Some(1 << 20)),
            ("50%", None),
            ("", None),
            ("99999999999999999999t", None),
        ];
        for (text, want) in cases {
            assert_eq!(Bytes::from_tmpfs_option(text), want.map(Bytes), "{text}");
        }
    }

    #[test]
    fn approx_shows_a_rounded_unit_only_when_needed() {
        assert_eq!(Bytes(512 << 20).approx(), "512Mi");
        assert_eq!(Bytes(6_171_024 << 10).approx(), "6171024Ki (~5.9Gi)");
        assert_eq!(Bytes(100).approx(), "100");
    }

    const MI: u64 = 1 << 20;
    const GI: u64 = 1 << 30;

    #[test]
    fn accepts_every_documented_form() {
        let cases: &[(&str, Size)] = &[
            ("1048576", Size::Absolute(Bytes(MI))),
            ("64k", Size::Absolute(Bytes(64 << 10))),
            ("64K", Size::Absolute(Bytes(64 << 10))),
            ("64m", Size::Absolute(Bytes(64 * MI))),
            ("2g", Size::Absolute(Bytes(2 * GI))),
            ("2G", Size::Absolute(Bytes(2 * GI))),
            ("1t", Size::Absolute(Bytes(1 << 40))),
            ("64Ki", Size::Absolute(Bytes(64 << 10))),
            ("512Mi", Size::Absolute(Bytes(512 * MI))),
            ("2Gi", Size::Absolute(Bytes(2 * GI))),
            ("1Ti", Size::Absolute(Bytes(1 << 40))),
            ("512MiB", Size::Absolute(Bytes(512 * MI))),
            ("25%", Size::Percent(25)),
            ("100%", Size::Percent(100)),
            ("1%", Size::Percent(1)),
        ];
        for (text, want) in cases {
            assert_eq!(text.parse::<Size>().as_ref(), Ok(want), "case {text:?}");
        }
    }

    #[test]
    fn rejects_junk() {
        let cases: &[(&str, &str)] = &[
            ("", "empty"),
            ("0", "zero"),
            ("0g", "zero"),
            ("-1", "syntax"),
            ("1e30", "syntax"),
            ("99999999999999999999999", "overflow"),
            ("17179869184g", "overflow"),
            ("50%%", "syntax"),
            ("101%", "percent"),
            ("0%", "percent"),
            ("1G,mode=4777", "syntax"),
            ("1G,nr_inodes=0", "syntax"),
            ("１２３", "syntax"),
            ("12\u{0663}", "syntax"),
            (" 1G", "syntax"),
            ("1G ", "syntax"),
            ("1.5G", "syntax"),
            ("1G\0", "syntax"),
            ("+1G", "syntax"),
            ("G", "syntax"),
            ("1Gb2", "syntax"),
            ("1Pi", "unit"),
        ];
        for (text, kind) in cases {
            let err = text.parse::<Size>().expect_err(text);
            let got = match err {
                SizeError::Empty => "empty",
                SizeError::TooLong => "toolong",
                SizeError::Syntax(_) => "syntax",
                SizeError::Unit(_) => "unit",
                SizeError::Zero(_) => "zero",
                SizeError::Overflow(_) => "overflow",
                SizeError::Percent(_) => "percent",
            };
            assert_eq!(got, *kind, "case {text:?}: {err}");
        }
        assert_eq!("1".repeat(1 << 20).parse::<Size>(), Err(SizeError::TooLong));
    }

    #[test]
    fn resolves_against_limit_or_ram_and_clamps() {
        let ram = Bytes(16 * GI);
        let limit = Some(Bytes(4 * GI));
        let cases: &[(&str, Size, Option<Bytes>, Bytes, Basis)] = &[
            ("percent of limit", Size::Percent(25), limit, Bytes(GI), Basis::MemoryLimit),
            ("percent of ram", Size::Percent(50), None, Bytes(8 * GI), Basis::HostRam),
            ("zero limit means ram", Size::Percent(50), Some(Bytes(0)), Bytes(8 * GI), Basis::HostRam),
            ("absolute ignores limit", Size::Absolute(Bytes(GI)), limit, Bytes(GI), Basis::Absolute),
            ("clamped up to 1 MiB", Size::Absolute(Bytes(4096)), None, Bytes(MI), Basis::Absolute),
            ("clamped to ram", Size::Absolute(Bytes(1 << 40)), None, ram, Basis::Absolute),
            ("tiny limit", Size::Percent(1), Some(Bytes(MI)), Bytes(MI), Basis::MemoryLimit),
            ("rounded to pages", Size::Absolute(Bytes(MI + 1)), None, Bytes(MI + 4096), Basis::Absolute),
        ];
        for (name, size, lim, want, basis) in cases {
            assert_eq!(size.resolve(*lim, ram), (*want, *basis), "case {name}");
        }
    }

    #[test]
    fn displays_exact_units() {
        assert_eq!(Bytes(512 * MI).to_string(), "512Mi");
        assert_eq!(Bytes(GI + 4096).to_string(), "1048580Ki");
        assert_eq!(Bytes(1000).to_string(), "1000");
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics_and_never_zero(text in "\\PC{0,40}") {
            if let Ok(size) = text.parse::<Size>() {
                match size {
                    Size::Absolute(b) => proptest::prop_assert!(b.0 > 0),
                    Size::Percent(p) => proptest::prop_assert!((1..=100).contains(&p)),
                }
                proptest::prop_assert!(text.is_ascii());
                proptest::prop_assert!(!text.contains(','));
            }
        }

        #[test]
        fn resolve_stays_in_bounds(n in 1u64.., p in 1u8..=100, lim in proptest::option::of(0u64..), ram in (1u64 << 20)..(1u64 << 50)) {
            for size in [Size::Absolute(Bytes(n)), Size::Percent(p)] {
                let (b, _) = size.resolve(lim.map(Bytes), Bytes(ram));
                proptest::prop_assert!(b.0 >= MIN_BYTES && b.0 <= ram);
            }
        }
    }
}
