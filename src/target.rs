//! Temp-dir targets: which paths inside the container may get a tmpfs.
//!
//! Pure text rules (docs/design.md#contract). Where a path really lands inside the
//! rootfs is checked again by `apply` with the same [`denied`] rule.

use std::fmt;

/// Environment variables that name a temp dir, in the order we read them.
pub const TEMP_VARS: [&str; 4] = ["TMPDIR", "TEMP", "TMP", "TEMPDIR"];

/// Trees that never get a tmpfs: system directories and kernel filesystems.
const DENIED: [&str; 7] = ["proc", "sys", "dev", "etc", "usr", "bin", "sbin"];

/// Longest target for which PyTorch's `<dir>/torch-shm-dir-XXXXXX/manager.sock`
/// still fits in a unix socket path (108 bytes with the NUL).
pub const TORCH_SOCKET_MAX: usize = 108 - 1 - "/torch-shm-dir-XXXXXX/manager.sock".len();

/// Longest path we accept at all.
const PATH_MAX: usize = 4095;

/// A normalised absolute path inside the container, never `/`, no `.`/`..`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct TargetPath(String);

impl TargetPath {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The path without its leading `/`, for resolving under a root fd.
    pub fn relative(&self) -> &str {
        &self.0[1..]
    }

    /// True when `self` lies strictly below `other`.
    pub fn is_under(&self, other: &str) -> bool {
        let other = other.trim_end_matches('/');
        self.0.len() > other.len() && self.0.starts_with(other) && self.0.as_bytes()[other.len()] == b'/'
    }
}

impl fmt::Display for TargetPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a path cannot be a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Reject {
    #[error("is empty")]
    Empty,
    #[error("is not an absolute path")]
    Relative,
    #[error("contains '..'")]
    DotDot,
    #[error("contains a NUL byte")]
    Nul,
    #[error("is longer than {PATH_MAX} bytes")]
    TooLong,
    #[error("is the root directory")]
    Root,
    #[error("lies in a system directory (/proc, /sys, /dev, /etc, /usr, /bin, /sbin, /lib*, /boot)")]
    Denied,
}

/// Normalises and checks a path: absolute, no `..`, not `/`, not denied.
///
/// # Errors
/// The [`Reject`] reason.
pub fn validate(path: &str) -> Result<TargetPath, Reject> {
    if path.is_empty() {
        return Err(Reject::Empty);
    }
    if path.contains('\0') {
        return Err(Reject::Nul);
    }
    if path.len() > PATH_MAX {
        return Err(Reject::TooLong);
    }
    if !path.starts_with('/') {
        return Err(Reject::Relative);
    }
    if path.split('/').any(|p| p == "..") {
        return Err(Reject::DotDot);
    }
    let normal = normalise(path);
    if normal == "/" {
        return Err(Reject::Root);
    }
    if denied(&normal) {
        return Err(Reject::Denied);
    }
    Ok(TargetPath(normal))
}

/// Collapses repeated and trailing slashes and `.` components of an absolute
/// path, for comparing paths (mount destinations, targets). Keeps `..`.
pub fn normalise(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    format!("/{}", parts.join("/"))
}

/// True for `/` and for paths in the denied trees. Takes a normalised path.
pub fn denied(normal: &str) -> bool {
    let first = normal.trim_start_matches('/').split('/').next().unwrap_or("");
    first.is_empty() || DENIED.contains(&first) || first.starts_with("lib") || first == "boot"
}

/// A temp dir named by the container's environment, or why it was skipped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnvTarget {
    Ok { var: &'static str, path: TargetPath },
    Skipped { var: &'static str, value: String, reason: Reject },
}

/// Reads `TMPDIR`, `TEMP`, `TMP`, `TEMPDIR` from `process.env` (first
/// occurrence of each, entries without `=` ignored) and validates them.
pub fn from_env<'a>(env: impl IntoIterator<Item = &'a str> + Clone) -> Vec<EnvTarget> {
    TEMP_VARS
        .iter()
        .filter_map(|&var| {
            let value = env.clone().into_iter().find_map(|entry| {
                let (k, v) = entry.split_once('=')?;
                (k == var).then_some(v)
            })?;
            Some(match validate(value) {
                Ok(path) => EnvTarget::Ok { var, path },
                Err(reason) => EnvTarget::Skipped { var, value: shorten(value), reason },
            })
        })
        .collect()
}

/// Keeps log lines short when a value is huge.
fn shorten(value: &str) -> String {
    if value.len() <= 80 {
        return value.to_string();
    }
    let mut end = 77;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &value[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_paths() {
        let cases: &[(&str, Result<&str, Reject>)] = &[
            ("/tmp", Ok("/tmp")),
            ("/var/tmp", Ok("/var/tmp")),
            ("//tmp", Ok("/tmp")),
            ("/var//tmp/", Ok("/var/tmp")),
            ("/var/./tmp", Ok("/var/tmp")),
            ("/library", Err(Reject::Denied)),
            ("/run", Ok("/run")),
            ("/scratch/x", Ok("/scratch/x")),
            ("", Err(Reject::Empty)),
            ("tmp", Err(Reject::Relative)),
            ("../../etc", Err(Reject::Relative)),
            ("/tmp/../etc", Err(Reject::DotDot)),
            ("/", Err(Reject::Root)),
            ("///", Err(Reject::Root)),
            ("/proc", Err(Reject::Denied)),
            ("/sys/fs/cgroup", Err(Reject::Denied)),
            ("/dev", Err(Reject::Denied)),
            ("/dev/shm", Err(Reject::Denied)),
            ("/etc/x", Err(Reject::Denied)),
            ("/usr/tmp", Err(Reject::Denied)),
            ("/bin", Err(Reject::Denied)),
            ("/sbin", Err(Reject::Denied)),
            ("/lib", Err(Reject::Denied)),
            ("/lib64", Err(Reject::Denied)),
            ("/lib32/x", Err(Reject::Denied)),
            ("/boot", Err(Reject::Denied)),
            ("/tm\0p", Err(Reject::Nul)),
        ];
        for (input, want) in cases {
            let got = validate(input);
            assert_eq!(got.as_ref().map(TargetPath::as_str), want.as_ref().map(|s| *s), "case {input:?}");
        }
        assert_eq!(validate(&format!("/{}", "a".repeat(5000))), Err(Reject::TooLong));
    }

    #[test]
    fn reads_env_in_order_first_occurrence() {
        let env = [
            "PATH=/bin",
            "TMPDIR=/scratch",
            "TMPDIR=/second",
            "TEMP=/var/tmp",
            "NOEQUALS",
            "TMP=",
            "TEMPDIR=../etc",
            "tmpdir=/lower",
        ];
        let got = from_env(env.iter().copied());
        assert_eq!(
            got,
            vec![
                EnvTarget::Ok { var: "TMPDIR", path: TargetPath("/scratch".into()) },
                EnvTarget::Ok { var: "TEMP", path: TargetPath("/var/tmp".into()) },
                EnvTarget::Skipped { var: "TMP", value: String::new(), reason: Reject::Empty },
                EnvTarget::Skipped { var: "TEMPDIR", value: "../etc".into(), reason: Reject::Relative },
            ]
        );
    }

    #[test]
    fn no_env_no_targets() {
        assert!(from_env(std::iter::empty::<&str>()).is_empty());
        assert!(from_env(["TMPDIR"].iter().copied()).is_empty());
    }

    #[test]
    fn long_values_are_shortened_in_notes() {
        let long = format!("TMPDIR=rel{}", "é".repeat(3000));
        let got = from_env([long.as_str()].iter().copied());
        let EnvTarget::Skipped { value, .. } = &got[0] else { panic!("{got:?}") };
        assert!(value.len() <= 80 && value.ends_with("..."));
    }

    #[test]
    fn under() {
        let t = validate("/tmp/a").unwrap();
        assert!(t.is_under("/tmp"));
        assert!(t.is_under("/tmp/"));
        assert!(!t.is_under("/tm"));
        assert!(!t.is_under("/tmp/a"));
        assert_eq!(TORCH_SOCKET_MAX, 73);
    }

    proptest::proptest! {
        #[test]
        fn valid_targets_are_normal(path in "[/a-z.]{0,30}") {
            if let Ok(t) = validate(&path) {
                let s = t.as_str();
                proptest::prop_assert!(s.starts_with('/') && s.len() > 1);
                proptest::prop_assert!(!s.contains("//") && !s.ends_with('/'));
                proptest::prop_assert!(!s.split('/').any(|p| p == ".." || p == "."));
                proptest::prop_assert!(!denied(s));
            }
        }
    }
}
