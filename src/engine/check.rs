//! A check of an engine's registration and where it looks ([`Context`]),
//! as `doctor` prints it ([`Check`]): each engine's
//! [`super::Registrar::check`] returns these, and `doctor` loops over the
//! engines it finds.

use std::path::{Path, PathBuf};

use crate::input::HostConfigSource;
use crate::names::rooted;

/// One line of the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    pub ok: bool,
    /// What was checked: "kernel", "docker"...
    pub what: String,
    pub detail: String,
    /// How to fix a problem.
    pub fix: Option<String>,
    /// Extra lines printed under this one (the effective config).
    pub info: Vec<String>,
}

impl Check {
    pub(crate) fn ok(what: &str, detail: impl Into<String>) -> Check {
        Check { ok: true, what: what.into(), detail: detail.into(), fix: None, info: Vec::new() }
    }

    pub(crate) fn problem(what: &str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check { ok: false, what: what.into(), detail: detail.into(), fix: Some(fix.into()), info: Vec::new() }
    }

    /// The printed form: `ok       what: detail` or `problem  what: detail; fix: ...`.
    pub fn line(&self) -> String {
        let mut line =
            format!("{:<8} {}: {}", if self.ok { "ok" } else { "problem" }, self.what, self.detail);
        if let Some(fix) = &self.fix {
            line.push_str("; fix: ");
            line.push_str(fix);
        }
        for info in &self.info {
            line.push_str("\n         ");
            line.push_str(info);
        }
        line
    }
}

/// Where doctor looks.
#[derive(Clone, Debug)]
pub struct Context {
    /// Prefix of every system path ("/" on a live system).
    pub root: PathBuf,
    /// This binary, canonical.
    pub binary: PathBuf,
    /// The host config.
    pub config: HostConfigSource,
    /// Detect engines by their binaries on PATH too (not under `--root`).
    pub search_path: bool,
}

impl Context {
    /// Whether `path` (as the engine sees it) is this binary; why not.
    pub(crate) fn is_this_binary(&self, path: &Path) -> Result<(), String> {
        if !path.is_absolute() {
            return Err(format!("{} is not an absolute path", path.display()));
        }
        let on_disk = rooted(&self.root, path);
        match on_disk.canonicalize() {
            Ok(real) if real == self.binary => Ok(()),
            Ok(real) => Err(format!(
                "{} is {}, not this binary {}",
                path.display(),
                real.display(),
                self.binary.display()
            )),
            Err(e) => Err(format!("{}: {e}", on_disk.display())),
        }
    }
}
