//! Temp-dir targets: which paths inside the container may get a tmpfs.
//!
//! Pure text rules (docs/design.md#contract). Where a path really lands inside the
//! rootfs is checked again by `apply` with the same [`denied`] rule.

use std::fmt;

/// Environment variables that name a temp dir, in the order we read them.
pub const TEMP_VARS: [&str; 4] = ["TMPDIR", "TEMP", "TMP", "TEMPDIR"];

/// The host config's default `env_targets`: variables naming a cache dir
/// that ML libraries write to instead of the temp dir (Triton, Inductor,
/// CuPy, Numba, Hugging Face, torch.hub, the CUDA JIT cache, Matplotlib,
/// the XDG cache; docs/design.md#home-triton).
pub const DEFAULT_ENV_TARGETS: [&str; 10] = [
    "TRITON_CACHE_DIR",
    "TRITON_HOME",
    "TORCHINDUCTOR_CACHE_DIR",
    "CUPY_CACHE_DIR",
    "XDG_CACHE_HOME",
    "HF_HOME",
    "TORCH_HOME",
    "CUDA_CACHE_PATH",
    "NUMBA_CACHE_DIR",
    "MPLCONFIGDIR",
];

/// Longest variable name we accept in the host config.
const ENV_VAR_MAX: usize = 128;

/// The name of an environment variable: `[A-Za-z_][A-Za-z0-9_]*`, at most
/// 128 bytes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct EnvVar(String);

impl EnvVar {
    /// Checks a variable's name.
    ///
    /// # Errors
    /// Why the name is not one.
    pub fn parse(name: &str) -> Result<EnvVar, String> {
        let mut chars = name.chars();
        let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("{name:?} is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)"));
        }
        if name.len() > ENV_VAR_MAX {
            return Err(format!("a variable name longer than {ENV_VAR_MAX} bytes"));
        }
        Ok(EnvVar(name.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True for `TMPDIR`, `TEMP`, `TMP` and `TEMPDIR`.
    pub fn is_temp_var(&self) -> bool {
        TEMP_VARS.contains(&self.0.as_str())
    }
}

impl fmt::Display for EnvVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for EnvVar {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        EnvVar::parse(&name).map_err(serde::de::Error::custom)
    }
}

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
    // Most paths are normal already (every spec's mounts, `/tmp`).
    let normal = path == "/"
        || (path.starts_with('/')
            && !path.ends_with('/')
            && path[1..].split('/').all(|p| !p.is_empty() && p != "."));
    if normal {
        return path.to_string();
    }
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    format!("/{}", parts.join("/"))
}

/// True for `/` and for paths in the denied trees. Takes a normalised path.
pub fn denied(normal: &str) -> bool {
    let first = normal.trim_start_matches('/').split('/').next().unwrap_or("");
    first.is_empty() || DENIED.contains(&first) || first.starts_with("lib") || first == "boot"
}

/// A directory named by the container's environment, or why it was skipped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnvTarget {
    Ok { var: EnvVar, path: TargetPath },
    Skipped { var: EnvVar, value: String, reason: Reject },
}

/// Reads `TMPDIR`, `TEMP`, `TMP`, `TEMPDIR` and then `cache_vars` (the host
/// config's `env_targets`; one already read is not read again) from
/// `process.env`, the last occurrence of each (what the process gets:
/// docs/design.md#env-last), entries without `=` ignored, and validates them.
pub fn from_env<'a>(cache_vars: &[EnvVar], env: impl IntoIterator<Item = &'a str> + Clone) -> Vec<EnvTarget> {
    // Names only: an `EnvVar` is made for a variable the env has (the hook
    // reads this at every start).
    let cache = cache_vars.iter().enumerate().map(|(i, v)| (i, v.as_str()));
    let cache =
        cache.filter(|&(i, v)| !TEMP_VARS.contains(&v) && !cache_vars[..i].iter().any(|w| w.as_str() == v));
    TEMP_VARS
        .iter()
        .copied()
        .chain(cache.map(|(_, v)| v))
        .filter_map(|name| {
            // The last entry: runc and crun set each in turn, so the
            // process gets the last (docs/design.md#env-last).
            let value = env
                .clone()
                .into_iter()
                .filter_map(|entry| {
                    let (k, v) = entry.split_once('=')?;
                    (k == name).then_some(v)
                })
                .last()?;
            let var = EnvVar(name.to_string());
            Some(match validate(value) {
                Ok(path) => EnvTarget::Ok { var, path },
                Err(reason) => EnvTarget::Skipped { var, value: shorten(value), reason },
            })
        })
        .collect()
}

/// The default `env_targets`, as names.
pub fn default_env_targets() -> Vec<EnvVar> {
    DEFAULT_ENV_TARGETS.iter().map(|v| EnvVar((*v).to_string())).collect()
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
    fn normalise_collapses_slashes_and_dots_and_keeps_dotdot() {
        for (path, want) in [
            ("/", "/"),
            ("", "/"),
            ("//", "/"),
            ("/tmp", "/tmp"),
            ("/tmp/", "/tmp"),
            ("//tmp//x/", "/tmp/x"),
            ("/./tmp/.", "/tmp"),
            ("tmp", "/tmp"),
            ("/a/../b", "/a/../b"),
            ("/.a/b.", "/.a/b."),
            ("/dev/shm", "/dev/shm"),
        ] {
            assert_eq!(normalise(path), want, "{path:?}");
        }
    }

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
    fn reads_env_in_order_last_occurrence() {
        let env = [
            "PATH=/bin",
            "TMPDIR=/first",
            "TMPDIR=/scratch",
            "TEMP=/var/tmp",
            "NOEQUALS",
            "TMP=",
            "TEMPDIR=../etc",
            "tmpdir=/lower",
        ];
        let got = from_env(&[], env.iter().copied());
        assert_eq!(
            got,
            vec![
                EnvTarget::Ok { var: var("TMPDIR"), path: TargetPath("/scratch".into()) },
                EnvTarget::Ok { var: var("TEMP"), path: TargetPath("/var/tmp".into()) },
                EnvTarget::Skipped { var: var("TMP"), value: String::new(), reason: Reject::Empty },
                EnvTarget::Skipped { var: var("TEMPDIR"), value: "../etc".into(), reason: Reject::Relative },
            ]
        );
    }

    fn var(name: &str) -> EnvVar {
        EnvVar::parse(name).unwrap()
    }

    /// The cache variables come after the temp ones, in the list's order;
    /// a temp variable in the list is read once, in its place.
    #[test]
    fn reads_cache_vars_after_the_temp_vars() {
        let env = ["XDG_CACHE_HOME=/root/.cache", "TMPDIR=/scratch", "TRITON_CACHE_DIR=/cache/triton"];
        let vars = [var("TRITON_CACHE_DIR"), var("TMPDIR"), var("XDG_CACHE_HOME"), var("HF_HOME")];
        let got: Vec<(String, String)> = from_env(&vars, env.iter().copied())
            .into_iter()
            .map(|t| match t {
                EnvTarget::Ok { var, path } => (var.to_string(), path.to_string()),
                EnvTarget::Skipped { .. } => panic!("{t:?}"),
            })
            .collect();
        let want = [
            ("TMPDIR", "/scratch"),
            ("TRITON_CACHE_DIR", "/cache/triton"),
            ("XDG_CACHE_HOME", "/root/.cache"),
        ];
        assert_eq!(got, want.map(|(k, v)| (k.to_string(), v.to_string())));
    }

    #[test]
    fn env_var_names() {
        for good in ["TMPDIR", "_x", "a1_B2", "TRITON_CACHE_DIR"] {
            assert_eq!(EnvVar::parse(good).map(|v| v.to_string()), Ok(good.to_string()));
        }
        let long = "A".repeat(129);
        for bad in ["", "1X", "A-B", "A=B", "A B", "É", "$HOME", long.as_str()] {
            assert!(EnvVar::parse(bad).is_err(), "{bad:?}");
        }
        assert!(var("TEMP").is_temp_var() && !var("XDG_CACHE_HOME").is_temp_var());
        assert!(default_env_targets().iter().all(|v| !v.is_temp_var()));
    }

    #[test]
    fn no_env_no_targets() {
        assert!(from_env(&default_env_targets(), std::iter::empty::<&str>()).is_empty());
        assert!(from_env(&[], ["TMPDIR"].iter().copied()).is_empty());
    }

    #[test]
    fn long_values_are_shortened_in_notes() {
        let long = format!("TMPDIR=rel{}", "é".repeat(3000));
        let got = from_env(&[], [long.as_str()].iter().copied());
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
