//! The container engines the hook registers with, each behind one small
//! trait, [`Registrar`]: where its config lives, how the registration is
//! added and removed (pure functions from the file's text to the new text),
//! how `doctor` checks it, how to tell the engine is there, and how to make it
//! reload. One file per engine family: [`hooks_dir`] (Podman, CRI-O: an
//! oci-hooks(5) JSON in a hooks dir), [`docker`] (a runtime in
//! `daemon.json`), [`containerd`] (a runtime in `config.toml`).
//!
//! Adding an engine is one file here and one arm in [`Engine`] and
//! [`Engine::registrar`]. The engines read files (through
//! [`crate::files`]) and, for `doctor`, may run the engine's own binary; they
//! never write: planning, backups, atomic writes and diffs are
//! [`change`]'s, generic over the engine. Each engine's checks for `doctor`
//! are [`check::Check`]s.

pub(crate) mod change;
pub(crate) mod check;
pub(crate) mod containerd;
pub(crate) mod docker;
pub(crate) mod doctor;
pub mod hooks_dir;

use std::path::{Path, PathBuf};

use clap::ValueEnum;

use crate::files::FileError;
use crate::names::{rooted, DEFAULT_PATH, RUNTIME_NAME, WRAPPER_NAME};
use crate::stage::Stage;
use check::{Check, Context};

/// Largest engine config file read or edited.
pub(crate) const MAX_ENGINE_CONFIG_BYTES: u64 = 4 << 20;

/// An engine that `setup`, `doctor` and `engines` know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    Podman,
    Crio,
    Docker,
    Containerd,
}

/// How an engine reaches the hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    /// The engine runs hooks from an oci-hooks(5) dir: setup writes a file of
    /// its own there (Podman, CRI-O).
    HooksDir,
    /// The engine runs a configured OCI runtime: setup adds the wrapper
    /// (`oci-tmpfs-runtime`) as a runtime in the engine's own config file,
    /// which keeps everything else (Docker, containerd).
    RuntimeWrapper,
}

/// Where an engine's files are looked for.
#[derive(Clone, Copy, Debug)]
pub struct Site<'a> {
    /// Prefix of every default system path ("/" on a live system).
    pub root: &'a Path,
    /// The engine's config flag, when given (`--hooks-dir`, `--daemon-json`...).
    pub config: Option<&'a Path>,
}

/// What `setup` (and `node`) asks of an engine: its registration added at
/// `site`, or with `undo` removed.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub engine: Engine,
    pub site: Site<'a>,
    pub undo: bool,
}

/// What is registered.
#[derive(Clone, Copy, Debug)]
pub struct Registration<'a> {
    /// The hook binary, as the engine will see it.
    pub hook: &'a Path,
    /// The wrapper, as the engine will see it.
    pub wrapper: &'a Path,
    /// Make the wrapper the engine's default runtime.
    pub default: bool,
    /// Podman, CRI-O: the stage the hooks dir runs the hook at (docs/gpu.md).
    pub stage: Stage,
}

/// The file setup edits for an engine, and what the user should know about
/// the choice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    pub path: PathBuf,
    pub note: Option<String>,
}

impl Located {
    /// The file named by the engine's config flag, else `default` under the root.
    pub(crate) fn file(site: &Site<'_>, default: &str) -> Located {
        let path = site.config.map_or_else(|| rooted(site.root, Path::new(default)), Path::to_path_buf);
        Located { path, note: None }
    }
}

/// A config file that setup refuses to touch, or a failed read or write.
#[derive(Debug, thiserror::Error)]
pub enum EngineConfigError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error(
        "{path}: line {line}, column {column}: {msg}; fix the file and rerun setup (nothing was changed)"
    )]
    Syntax { path: PathBuf, line: usize, column: usize, msg: String },
    #[error("{path}: {what}; nothing was changed")]
    Shape { path: PathBuf, what: String },
}

impl EngineConfigError {
    pub(crate) fn shape(path: &Path, what: impl Into<String>) -> EngineConfigError {
        EngineConfigError::Shape { path: path.to_path_buf(), what: what.into() }
    }

    /// A syntax error at byte `offset` of `text`.
    pub(crate) fn syntax(path: &Path, text: &str, offset: Option<usize>, msg: &str) -> EngineConfigError {
        let (line, column) = offset.map(|o| line_col(text, o)).unwrap_or((0, 0));
        EngineConfigError::Syntax {
            path: path.to_path_buf(),
            line,
            column,
            msg: msg.trim().replace('\n', ": "),
        }
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text.as_bytes()[..offset.min(text.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = before.len() - before.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1) + 1;
    (line, column)
}

/// The facts about an engine that are plain data.
#[derive(Clone, Debug)]
pub struct Profile {
    /// How the engine reaches the hook.
    pub way: Way,
    /// The setup flag that names the engine's config (file or hooks dir).
    pub config_flag: &'static str,
    /// The engine's binary: on PATH, it says the engine is installed.
    pub binary: &'static str,
    /// System files whose presence says the engine is installed.
    pub files: Vec<PathBuf>,
    /// The command that makes the engine read its new config, if it needs one.
    pub restart: Option<&'static str>,
    /// Why no restart is needed, where the engine loads a change itself
    /// (said after a change).
    pub reloads: Option<&'static str>,
}

/// The new text of an engine's file: `None` removes it.
pub(crate) type NewText = Result<Option<String>, EngineConfigError>;

/// What each engine family implements.
pub trait Registrar: Sync {
    /// The facts that are data.
    fn profile(&self) -> Profile;
    /// The file setup edits.
    ///
    /// # Errors
    /// An engine config that cannot be read to find it (CRI-O's `hooks_dir`).
    fn config_file(&self, site: &Site<'_>) -> Result<Located, EngineConfigError>;
    /// The new text of the file (`None`: remove it), given its current text
    /// (`None`: missing), with the registration added. Idempotent; keeps
    /// everything else.
    ///
    /// # Errors
    /// A malformed file, or one setup will not edit.
    fn add(&self, path: &Path, text: Option<&str>, reg: &Registration<'_>) -> NewText;
    /// The new text with exactly what [`Registrar::add`] adds removed.
    ///
    /// # Errors
    /// A malformed file, or one setup will not edit.
    fn remove(&self, path: &Path, text: Option<&str>) -> NewText;
    /// Things the user should know about the current file.
    fn notes(&self, _path: &Path, _text: Option<&str>) -> Vec<String> {
        Vec::new()
    }
    /// `doctor`'s checks of the registration.
    fn check(&self, ctx: &Context) -> Vec<Check>;
}

impl Engine {
    /// Every engine, in the order `doctor` and `engines` list them.
    pub fn all() -> &'static [Engine] {
        Engine::value_variants()
    }

    /// The engine's implementation: the one place that matches on it.
    pub fn registrar(self) -> &'static dyn Registrar {
        match self {
            Engine::Podman => &hooks_dir::Podman,
            Engine::Crio => &hooks_dir::Crio,
            Engine::Docker => &docker::Docker,
            Engine::Containerd => &containerd::Containerd,
        }
    }

    pub fn way(self) -> Way {
        self.registrar().profile().way
    }

    /// The setup flag that names the engine's config.
    pub fn config_flag(self) -> &'static str {
        self.registrar().profile().config_flag
    }

    pub fn restart_command(self) -> Option<&'static str> {
        self.registrar().profile().restart
    }

    /// What the user is told after a change: the restart command, or why
    /// none is needed. `None`: nothing to say (Podman reads its hooks dirs
    /// at every container start).
    pub fn after_change(self) -> Option<String> {
        let Profile { restart, reloads, .. } = self.registrar().profile();
        match (restart, reloads) {
            (Some(cmd), _) => Some(format!("{self}: restart it to load the change: {cmd}")),
            (None, Some(why)) => Some(format!("{self}: no restart needed: {why}")),
            (None, None) => None,
        }
    }

    /// Why the engine looks installed: its binary on PATH (only when
    /// `search_path`, i.e. not under `--root`), else the first of its files
    /// under `root`. `None` when neither.
    pub fn detect(self, root: &Path, search_path: bool) -> Option<String> {
        let Profile { binary, files, .. } = self.registrar().profile();
        if search_path {
            if let Some(p) = on_path(binary) {
                return Some(format!("{} on PATH", p.display()));
            }
        }
        files.into_iter().map(|f| rooted(root, &f)).find(|f| f.exists()).map(|f| f.display().to_string())
    }

    /// The fix `doctor` prints for a missing or wrong registration.
    pub fn setup_fix(self) -> String {
        match self.restart_command() {
            Some(cmd) => format!("oci-tmpfs-hook setup {self} && {cmd}"),
            None => format!("oci-tmpfs-hook setup {self}"),
        }
    }
}

/// The name on the command line: `podman`, `crio`, `docker`, `containerd`.
impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.to_possible_value() {
            Some(v) => f.write_str(v.get_name()),
            None => unreachable!("no engine is skipped"),
        }
    }
}

/// The first `name` in the directories of `PATH` (or [`DEFAULT_PATH`]).
pub(crate) fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into());
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

/// Reads an engine config: `None` when missing.
///
/// # Errors
/// Not a regular file, too big, not UTF-8, unreadable.
pub(crate) fn read_engine_config(path: &Path) -> Result<Option<String>, FileError> {
    crate::files::read_text(path, MAX_ENGINE_CONFIG_BYTES)
}

/// `doctor`'s check of a wrapper path registered with a
/// [`Way::RuntimeWrapper`] engine: named `oci-tmpfs-runtime` (the name
/// selects the wrapper behaviour) and resolving to this binary.
pub(crate) fn wrapper_check(engine: Engine, ctx: &Context, file: &Path, wrapper: &str) -> Check {
    let what = &engine.to_string();
    let path = Path::new(wrapper);
    if path.file_name().and_then(|n| n.to_str()) != Some(WRAPPER_NAME) {
        return Check::problem(
            what,
            format!(
                "{}: the {RUNTIME_NAME} runtime is {wrapper}, not a path named {WRAPPER_NAME}",
                file.display()
            ),
            engine.setup_fix(),
        );
    }
    match ctx.is_this_binary(path) {
        Ok(()) => Check::ok(
            what,
            format!("{}: runtime {RUNTIME_NAME} = {wrapper}, which resolves to this binary", file.display()),
        ),
        Err(why) => Check::problem(
            what,
            format!("{}: runtime {RUNTIME_NAME}: {why}", file.display()),
            format!("ln -sf oci-tmpfs-hook {wrapper} (next to the binary), or {}", engine.setup_fix()),
        ),
    }
}

/// [`Registrar::add`] or, with `undo`, [`Registrar::remove`], registering
/// `wrapper` (for the engines' table tests).
#[cfg(test)]
pub(crate) fn new_text(
    engine: &dyn Registrar,
    path: &str,
    text: Option<&str>,
    wrapper: &str,
    default: bool,
    undo: bool,
) -> Result<Option<String>, EngineConfigError> {
    let path = Path::new(path);
    if undo {
        return engine.remove(path, text);
    }
    let reg = Registration {
        hook: Path::new("/unused"),
        wrapper: Path::new(wrapper),
        default,
        stage: Stage::Prestart,
    };
    engine.add(path, text, &reg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ways() {
        let names: Vec<String> = Engine::all().iter().map(Engine::to_string).collect();
        assert_eq!(names, ["podman", "crio", "docker", "containerd"]);
        let ways: Vec<Way> = Engine::all().iter().map(|e| e.way()).collect();
        assert_eq!(ways, [Way::HooksDir, Way::HooksDir, Way::RuntimeWrapper, Way::RuntimeWrapper]);
        assert_eq!(Engine::Podman.restart_command(), None);
        assert_eq!(Engine::Docker.setup_fix(), "oci-tmpfs-hook setup docker && systemctl restart docker");
    }

    #[test]
    fn detect_by_files_under_a_root() {
        let root = std::env::temp_dir().join(format!("oth-engine-detect-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("etc/docker")).unwrap();
        std::fs::write(root.join("etc/docker/daemon.json"), "{}").unwrap();
        let found: Vec<Engine> =
            Engine::all().iter().copied().filter(|e| e.detect(&root, false).is_some()).collect();
        assert_eq!(found, [Engine::Docker]);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn line_and_column() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
        assert_eq!(line_col("ab", 99), (1, 3));
    }
}
