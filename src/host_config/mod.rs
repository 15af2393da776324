//! The host configuration (`/etc/oci-tmpfs-hook/config.toml`): what the
//! platform engineer sets once per host. Parsing and validation only; the file
//! is read by `input`. The common file is read without the TOML parser
//! ([`flat`]: docs/design.md#flat-config).

mod flat;

use std::path::PathBuf;

use serde::Deserialize;

use crate::size::Size;
use crate::target::{self, EnvVar, TargetPath};

/// Default size of `/tmp` and the other temp targets.
pub const DEFAULT_TMP_SIZE: Size = Size::Percent(25);
/// Default size of `/dev/shm`.
pub const DEFAULT_SHM_SIZE: Size = Size::Percent(50);
/// Default size that the caches under the container user's `HOME` share.
pub const DEFAULT_HOME_SIZE: Size = Size::Percent(25);
/// The most variables `env_targets` may name.
pub const MAX_ENV_TARGETS: usize = 64;
/// The tool caches under `HOME`, the only paths there that get a tmpfs
/// (docs/design.md#home-rule): where torch.hub and PyTorch's kernel cache,
/// torch_extensions, Hugging Face, pip, numba, vLLM, matplotlib, Triton,
/// CuPy and CUDA's JIT write at run time by default
/// (docs/design.md#home-caches). Keras is not among them: it uses
/// `/tmp/.keras` when `HOME` itself is not writable.
pub const DEFAULT_HOME_CACHES: [&str; 12] = [
    ".cache/torch",
    ".cache/torch_extensions",
    ".cache/huggingface",
    ".cache/pip",
    ".cache/numba",
    ".cache/vllm",
    ".cache/matplotlib",
    ".config/matplotlib",
    ".config/vllm",
    ".triton",
    ".cupy",
    ".nv",
];
/// The most entries `home_caches` may name.
pub const MAX_HOME_CACHES: usize = 32;

/// What to do when the hook cannot do its job.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// Exit 1: the runtime aborts the container start.
    #[default]
    Fail,
    /// Log and exit 0: the container starts without the mounts.
    Warn,
}

/// Whether a container's `oci-tmpfs-hook/*` annotations count (any pod
/// author can set them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AnnotationPolicy {
    /// They count, within `max_tmp_size` / `max_shm_size`.
    #[default]
    Allow,
    /// They are ignored: only the host config decides.
    Ignore,
}

/// The host config's `mode`: the executor the runtime wrapper prefers.
/// Which one carries a container's temp targets is decided per container
/// ([`crate::spec::route::Executor`]): in spec mode it can still be the hook.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Write the mounts into `config.json`: the runtime makes them, and no
    /// hook process runs at the start.
    #[default]
    Spec,
    /// Add the hook to `config.json`: it mounts by fd in the container's
    /// namespace.
    Hook,
}

/// Log verbosity for the hook's own log lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Error,
    #[default]
    Warn,
    Info,
    Debug,
}

impl LogLevel {
    pub fn filter(self) -> log::LevelFilter {
        match self {
            LogLevel::Error => log::LevelFilter::Error,
            LogLevel::Warn => log::LevelFilter::Warn,
            LogLevel::Info => log::LevelFilter::Info,
            LogLevel::Debug => log::LevelFilter::Debug,
        }
    }
}

/// The file as written: every key optional, unknown keys refused.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHostConfig {
    tmp_size: Option<Size>,
    shm_size: Option<Size>,
    max_tmp_size: Option<Size>,
    max_shm_size: Option<Size>,
    home: Option<bool>,
    home_size: Option<Size>,
    max_home_size: Option<Size>,
    /// Obsolete: read and ignored ([`HostConfig::obsolete`]).
    home_fallback: Option<serde::de::IgnoredAny>,
    home_caches: Option<Vec<String>>,
    #[serde(default)]
    annotations: AnnotationPolicy,
    #[serde(default)]
    mode: Mode,
    #[serde(default)]
    extra_targets: Vec<String>,
    env_targets: Option<EnvTargets>,
    #[serde(default)]
    noexec: bool,
    nr_inodes: Option<u64>,
    #[serde(default)]
    on_error: OnError,
    log_file: Option<PathBuf>,
    #[serde(default)]
    log_level: LogLevel,
    runtime_path: Option<PathBuf>,
}

/// `env_targets` as written: valid names, at most [`MAX_ENV_TARGETS`],
/// checked while parsing so that the error names the line.
#[derive(Debug)]
struct EnvTargets(Vec<EnvVar>);

impl<'de> Deserialize<'de> for EnvTargets {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let vars = Vec::<EnvVar>::deserialize(d)?;
        if vars.len() > MAX_ENV_TARGETS {
            return Err(serde::de::Error::custom(format!(
                "env_targets names {} variables, more than {MAX_ENV_TARGETS}",
                vars.len()
            )));
        }
        let mut out: Vec<EnvVar> = Vec::new();
        for v in vars {
            if !out.contains(&v) {
                out.push(v);
            }
        }
        Ok(EnvTargets(out))
    }
}

/// The effective host config.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct HostConfig {
    #[serde(serialize_with = "display")]
    pub tmp_size: Size,
    #[serde(serialize_with = "display")]
    pub shm_size: Size,
    /// `tmp_size` was set in the file (even to the default's value).
    #[serde(skip)]
    pub tmp_size_set: bool,
    /// `shm_size` was set in the file.
    #[serde(skip)]
    pub shm_size_set: bool,
    /// The most an annotation may ask for `/tmp` and the temp targets.
    #[serde(serialize_with = "display_opt")]
    pub max_tmp_size: Option<Size>,
    /// The most an annotation may ask for `/dev/shm`.
    #[serde(serialize_with = "display_opt")]
    pub max_shm_size: Option<Size>,
    /// Give the container user's `HOME` a tmpfs (docs/design.md#home-plan).
    pub home: bool,
    #[serde(serialize_with = "display")]
    pub home_size: Size,
    /// `home_size` was set in the file.
    #[serde(skip)]
    pub home_size_set: bool,
    /// The most `oci-tmpfs-hook/home-size` may ask for.
    #[serde(serialize_with = "display_opt")]
    pub max_home_size: Option<Size>,
    /// Keys of the file that no longer have an effect (`home_fallback`),
    /// for `doctor` to name.
    #[serde(skip)]
    pub obsolete: Vec<&'static str>,
    /// The caches under `HOME`, relative to it, that get a tmpfs each when
    /// `HOME` itself is not made writable (docs/design.md#home-rule).
    pub home_caches: Vec<String>,
    pub annotations: AnnotationPolicy,
    /// The runtime wrapper's executor.
    pub mode: Mode,
    pub extra_targets: Vec<TargetPath>,
    /// Variables of the container's environment that name a cache dir to
    /// mount like a temp dir (`TMPDIR` and the other temp variables are
    /// always read).
    pub env_targets: Vec<EnvVar>,
    pub noexec: bool,
    pub nr_inodes: Option<u64>,
    pub on_error: OnError,
    pub log_file: Option<PathBuf>,
    pub log_level: LogLevel,
    pub runtime_path: Option<PathBuf>,
}

fn display<S: serde::Serializer, T: std::fmt::Display>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

fn display_opt<S: serde::Serializer, T: std::fmt::Display>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.collect_str(v),
        None => s.serialize_none(),
    }
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            tmp_size: DEFAULT_TMP_SIZE,
            shm_size: DEFAULT_SHM_SIZE,
            tmp_size_set: false,
            shm_size_set: false,
            max_tmp_size: None,
            max_shm_size: None,
            home: true,
            home_size: DEFAULT_HOME_SIZE,
            home_size_set: false,
            max_home_size: None,
            obsolete: Vec::new(),
            home_caches: default_home_caches(),
            annotations: AnnotationPolicy::Allow,
            mode: Mode::Spec,
            extra_targets: Vec::new(),
            env_targets: target::default_env_targets(),
            noexec: false,
            nr_inodes: None,
            on_error: OnError::Fail,
            log_file: None,
            log_level: LogLevel::Warn,
            runtime_path: None,
        }
    }
}

/// A host config that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum HostConfigError {
    #[error("{0}")]
    Toml(String),
    #[error("extra_targets: {path:?}: {reason}")]
    Target { path: String, reason: String },
    #[error("nr_inodes must be positive (0 means unlimited to tmpfs)")]
    NrInodes,
    #[error("{key} must be an absolute path")]
    Relative { key: &'static str },
    #[error("home_caches: {0:?}: {1}")]
    HomeCache(String, String),
}

/// [`DEFAULT_HOME_CACHES`], owned.
fn default_home_caches() -> Vec<String> {
    DEFAULT_HOME_CACHES.iter().map(|c| (*c).to_string()).collect()
}

/// `home_caches` as written, checked: at most [`MAX_HOME_CACHES`] paths,
/// each relative to `HOME`, without `.` or `..` components, deduplicated.
fn home_caches(list: Vec<String>) -> Result<Vec<String>, HostConfigError> {
    if list.len() > MAX_HOME_CACHES {
        return Err(HostConfigError::HomeCache(
            format!("{} entries", list.len()),
            format!("more than {MAX_HOME_CACHES}"),
        ));
    }
    let mut out: Vec<String> = Vec::new();
    for c in list {
        let bad = |why: &str| Err(HostConfigError::HomeCache(c.clone(), why.to_string()));
        if c.starts_with('/') {
            return bad("is absolute; name it relative to HOME (\".cache\")");
        }
        let parts: Vec<&str> = c.split('/').filter(|p| !p.is_empty()).collect();
        if parts.is_empty() {
            return bad("is empty");
        }
        if parts.iter().any(|p| *p == "." || *p == "..") {
            return bad("has a '.' or '..' component");
        }
        let clean = parts.join("/");
        if target::validate(&format!("/home/u/{clean}")).is_err() {
            return bad("is not a usable path under HOME");
        }
        if !out.contains(&clean) {
            out.push(clean);
        }
    }
    Ok(out)
}

impl HostConfig {
    /// Parses and validates the TOML text of a host config.
    ///
    /// # Errors
    /// Syntax errors (with line and column), unknown keys, invalid sizes,
    /// targets or `env_targets` names (with the line), `nr_inodes = 0`,
    /// relative paths.
    pub fn parse(text: &str) -> Result<HostConfig, HostConfigError> {
        // The common file without the TOML parser's code (docs/design.md#flat-config);
        // a value it would refuse goes to the TOML parser, which says where.
        let raw = match flat::read(text) {
            Some(keys) if keys.is_empty() => RawHostConfig::default(),
            Some(keys) => match serde_json::from_value(serde_json::Value::Object(keys)) {
                Ok(raw) => raw,
                Err(_) => from_toml(text)?,
            },
            None => from_toml(text)?,
        };
        HostConfig::check(raw)
    }

    /// The host config `raw`, checked.
    fn check(raw: RawHostConfig) -> Result<HostConfig, HostConfigError> {
        let mut extra_targets = Vec::new();
        for path in raw.extra_targets {
            let t = target::validate(&path).map_err(|reason| HostConfigError::Target {
                path: path.clone(),
                reason: reason.to_string(),
            })?;
            if !extra_targets.contains(&t) {
                extra_targets.push(t);
            }
        }
        if raw.nr_inodes == Some(0) {
            return Err(HostConfigError::NrInodes);
        }
        if raw.log_file.as_ref().is_some_and(|p| !p.is_absolute()) {
            return Err(HostConfigError::Relative { key: "log_file" });
        }
        if raw.runtime_path.as_ref().is_some_and(|p| !p.is_absolute()) {
            return Err(HostConfigError::Relative { key: "runtime_path" });
        }
        // `home_fallback` pointed HOME elsewhere for the whole-home rule,
        // which is gone: still read, so that a host's file keeps working.
        let obsolete = if raw.home_fallback.is_some() { vec!["home_fallback"] } else { Vec::new() };
        let home_caches = match raw.home_caches {
            None => default_home_caches(),
            Some(list) => home_caches(list)?,
        };
        Ok(HostConfig {
            tmp_size: raw.tmp_size.unwrap_or(DEFAULT_TMP_SIZE),
            shm_size: raw.shm_size.unwrap_or(DEFAULT_SHM_SIZE),
            tmp_size_set: raw.tmp_size.is_some(),
            shm_size_set: raw.shm_size.is_some(),
            max_tmp_size: raw.max_tmp_size,
            max_shm_size: raw.max_shm_size,
            home: raw.home.unwrap_or(true),
            home_size: raw.home_size.unwrap_or(DEFAULT_HOME_SIZE),
            home_size_set: raw.home_size.is_some(),
            max_home_size: raw.max_home_size,
            obsolete,
            home_caches,
            annotations: raw.annotations,
            mode: raw.mode,
            extra_targets,
            env_targets: raw.env_targets.map_or_else(target::default_env_targets, |e| e.0),
            noexec: raw.noexec,
            nr_inodes: raw.nr_inodes,
            on_error: raw.on_error,
            log_file: raw.log_file,
            log_level: raw.log_level,
            runtime_path: raw.runtime_path,
        })
    }
}

/// `text` read by the TOML parser.
fn from_toml(text: &str) -> Result<RawHostConfig, HostConfigError> {
    toml::from_str(text).map_err(|e| HostConfigError::Toml(one_line(&e.to_string())))
}

/// TOML errors span several lines (a source excerpt); a runtime shows one.
fn one_line(msg: &str) -> String {
    msg.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('|') && !l.chars().all(|c| c == '^'))
        .collect::<Vec<_>>()
        .join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::size::Bytes;

    #[test]
    fn empty_file_is_defaults() {
        assert_eq!(HostConfig::parse("").unwrap(), HostConfig::default());
        assert_eq!(format!("{:?}", from_toml("").unwrap()), format!("{:?}", RawHostConfig::default()));
    }

    /// A file read without the TOML parser gives what the TOML parser's
    /// reading gives: the same settings, or the same error.
    #[test]
    fn the_flat_reading_gives_what_toml_gives() {
        let by_toml = |text: &str| from_toml(text).and_then(HostConfig::check).map_err(|e| e.to_string());
        for text in [
            include_str!("../../hooks/config.toml"),
            "runtime_path = \"/usr/bin/crun\"\n",
            "tmp_size = \"2Gi\"\nshm_size = \"75%\"\nmax_tmp_size = 1073741824\nhome = false\n",
            "home_fallback = false\nhome_caches = [\".cache\", \".triton\"]\nmode = \"hook\"\n",
            "home_fallback = \"/home/u{uid}\"\nannotations = \"ignore\"\non_error = \"warn\"\n",
            "extra_targets = [\"/var/tmp\", \"/run\"]\nenv_targets = [\"MY_CACHE\"]\nnoexec = true\n",
            "nr_inodes = 100000\nlog_file = \"/var/log/x.log\"\nlog_level = \"debug\"\n",
            "tmp_size = 0\n",
            "tmp_size = -1\n",
            "tmp_size = \"lots\"\n",
            "nr_inodes = 0\n",
            "nr_inodes = -3\n",
            "mode = \"fast\"\n",
            "home = \"yes\"\n",
            "unknown_key = 1\n",
            "runtime_path = \"crun\"\n",
            "home_caches = [\"/abs\"]\n",
            "extra_targets = [\"relative\"]\n",
            "env_targets = [\"not a name\"]\n",
            "home_fallback = \"/home/{uid}/../x\"\n",
        ] {
            assert!(flat::read(text).is_some(), "not read flat: {text:?}");
            assert_eq!(HostConfig::parse(text).map_err(|e| e.to_string()), by_toml(text), "{text:?}");
        }
    }

    #[test]
    fn every_key() {
        let s = HostConfig::parse(
            r#"
            tmp_size = "2Gi"
            shm_size = "75%"
            extra_targets = ["/var/tmp", "/run", "/var/tmp/"]
            env_targets = ["TRITON_CACHE_DIR", "MY_CACHE", "TRITON_CACHE_DIR"]
            noexec = true
            nr_inodes = 100000
            on_error = "warn"
            log_file = "/var/log/oci-tmpfs-hook.log"
            log_level = "debug"
            runtime_path = "/usr/sbin/runc"
            "#,
        )
        .unwrap();
        assert_eq!(s.tmp_size, Size::Absolute(Bytes(2 << 30)));
        assert_eq!(s.shm_size, Size::Percent(75));
        let targets: Vec<_> = s.extra_targets.iter().map(|t| t.as_str()).collect();
        assert_eq!(targets, ["/var/tmp", "/run"]);
        let vars: Vec<_> = s.env_targets.iter().map(|v| v.as_str()).collect();
        assert_eq!(vars, ["TRITON_CACHE_DIR", "MY_CACHE"]);
        assert!(s.noexec);
        assert_eq!(s.nr_inodes, Some(100000));
        assert_eq!(s.on_error, OnError::Warn);
        assert_eq!(s.log_level, LogLevel::Debug);
        assert_eq!(s.runtime_path.as_deref(), Some(std::path::Path::new("/usr/sbin/runc")));
    }

    #[test]
    fn home_keys() {
        let d = HostConfig::default();
        assert!(d.home && d.obsolete.is_empty() && d.max_home_size.is_none());
        let s = HostConfig::parse(
            "home = false\nhome_size = \"2Gi\"\nmax_home_size = \"8Gi\"\nhome_fallback = \"/srv/home/{uid}\"",
        )
        .unwrap();
        assert!(!s.home && s.home_size_set);
        assert_eq!(s.home_size, Size::Absolute(Bytes(2 << 30)));
        assert_eq!(s.max_home_size, Some(Size::Absolute(Bytes(8 << 30))));
        // home_fallback is obsolete: any value is read and has no effect,
        // so a host's file written for an earlier version still works.
        assert_eq!(s.obsolete, ["home_fallback"]);
        for text in ["home_fallback = false", "home_fallback = true", "home_fallback = 1"] {
            let s = HostConfig::parse(text).unwrap();
            assert_eq!(HostConfig { obsolete: Vec::new(), ..s }, d, "{text}");
        }
    }

    #[test]
    fn rejects_bad_files() {
        let cases: &[(&str, &str)] = &[
            ("unknown key", "tmp_sise = \"1g\""),
            ("bad size", "tmp_size = \"1G,mode=4777\""),
            ("zero size", "shm_size = \"0\""),
            ("negative number", "shm_size = -1"),
            ("percent over", "tmp_size = \"101%\""),
            ("bad target", "extra_targets = [\"/etc\"]"),
            ("relative target", "extra_targets = [\"tmp\"]"),
            ("dotdot target", "extra_targets = [\"/tmp/../etc\"]"),
            ("zero inodes", "nr_inodes = 0"),
            ("bad on_error", "on_error = \"ignore\""),
            ("relative log", "log_file = \"x.log\""),
            ("not toml", "this is not toml"),
            ("wrong type", "noexec = \"yes\""),
            ("env_targets not a list", "env_targets = \"HF_HOME\""),
            ("env_targets not names", "env_targets = [1]"),
            ("home not a bool", "home = \"yes\""),
        ];
        for (name, text) in cases {
            let err = HostConfig::parse(text).expect_err(name);
            let msg = err.to_string();
            assert!(!msg.contains('\n'), "case {name}: multi-line error {msg:?}");
        }
    }

    /// The commented example in hooks/ parses, commented (defaults) and with
    /// every key uncommented.
    #[test]
    fn example_config_parses() {
        let text = include_str!("../../hooks/config.toml");
        assert_eq!(HostConfig::parse(text).unwrap(), HostConfig::default());
        let uncommented: String = text
            .lines()
            .map(|l| match l.strip_prefix('#') {
                Some(rest) if rest.contains(" = ") && !rest.starts_with(' ') => rest,
                _ => l,
            })
            .collect::<Vec<_>>()
            .join("\n");
        let s = HostConfig::parse(&uncommented).unwrap();
        assert_eq!(s.extra_targets.len(), 2);
        assert_eq!(s.env_targets, HostConfig::default().env_targets, "the comment shows the default");
        assert_eq!(s.nr_inodes, Some(1048576));
        assert!(s.log_file.is_some());
    }

    #[test]
    fn env_targets_default_empty_and_bad_names() {
        let defaults: Vec<String> = HostConfig::default().env_targets.iter().map(|v| v.to_string()).collect();
        assert_eq!(defaults, target::DEFAULT_ENV_TARGETS);
        assert!(HostConfig::parse("env_targets = []").unwrap().env_targets.is_empty());
        let too_many: Vec<String> = (0..=MAX_ENV_TARGETS).map(|i| format!("\"V{i}\"")).collect();
        let too_many = format!("noexec = true\nenv_targets = [{}]\n", too_many.join(", "));
        let cases = [
            ("noexec = true\nenv_targets = [\"HF_HOME\", \"TRITON-CACHE\"]\n", "TRITON-CACHE"),
            ("noexec = true\nenv_targets = [\"\"]\n", "not an environment variable name"),
            ("noexec = true\nenv_targets = [\"1X\"]\n", "not an environment variable name"),
            ("noexec = true\nenv_targets = [\"A=B\"]\n", "not an environment variable name"),
            (too_many.as_str(), "more than 64"),
        ];
        for (text, want) in cases {
            let msg = HostConfig::parse(text).expect_err(text).to_string();
            assert!(msg.contains("line 2") && msg.contains(want), "{text}: {msg}");
            assert!(!msg.contains('\n'), "{msg:?}");
        }
    }

    #[test]
    fn syntax_error_names_the_line() {
        let err = HostConfig::parse("tmp_size = \"1g\"\nnoexec = tru\n").unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
    }
}
