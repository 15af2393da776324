//! `oci-tmpfs-hook setup ENGINE`: register the hook (Podman, CRI-O) or the
//! runtime wrapper (Docker, containerd). Plans with [`crate::engine::change`],
//! prints, writes unless `--dry-run`. Never restarts a daemon.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use super::absolute_path;
use crate::engine::change::{self, ChangeSet};
use crate::engine::{Engine, Registration, Request, Site, Way};
use crate::error::Error;
use crate::names::{rooted, WRAPPER_NAME};
use crate::stage::Stage;

#[derive(Clone, Debug, Args)]
pub(crate) struct SetupArgs {
    /// The engine: podman, crio, docker or containerd.
    #[arg(value_enum)]
    pub engine: Engine,
    /// Print the change (a diff), write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Remove the registration instead (only what setup added).
    #[arg(long)]
    pub undo: bool,
    /// Docker, containerd: also make oci-tmpfs the default runtime.
    #[arg(long)]
    pub default: bool,
    /// Path of the hook binary the engine runs [default: this binary].
    #[arg(long, value_name = "PATH", value_parser = absolute_path)]
    pub hook_path: Option<PathBuf>,
    /// Path of the runtime wrapper (Docker, containerd) [default: oci-tmpfs-runtime next to the hook].
    #[arg(long, value_name = "PATH", value_parser = absolute_path)]
    pub runtime_path: Option<PathBuf>,
    /// Prefix every default system path with DIR (packaging, tests).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Podman, CRI-O: the hooks dir [default: /usr/share/containers/oci/hooks.d; CRI-O: its hooks_dir].
    #[arg(long, value_name = "DIR")]
    pub hooks_dir: Option<PathBuf>,
    /// Docker: the daemon config [default: /etc/docker/daemon.json].
    #[arg(long, value_name = "PATH")]
    pub daemon_json: Option<PathBuf>,
    /// containerd: the config [default: /etc/containerd/config.toml].
    #[arg(long, value_name = "PATH")]
    pub containerd_config: Option<PathBuf>,
    /// Podman, CRI-O: the stage the hook runs at: prestart, createRuntime or
    /// createContainer (after every vendor's createRuntime hook: docs/gpu.md) [default: prestart].
    #[arg(long, value_name = "STAGE")]
    pub stage: Option<Stage>,
}

impl SetupArgs {
    /// Every engine config flag, and its value when given.
    fn config_flags(&self) -> [(&'static str, Option<&Path>); 3] {
        [
            ("--hooks-dir", self.hooks_dir.as_deref()),
            ("--daemon-json", self.daemon_json.as_deref()),
            ("--containerd-config", self.containerd_config.as_deref()),
        ]
    }

    /// Where the engine's files are: `--root` and the engine's config flag.
    pub(crate) fn site(&self) -> Site<'_> {
        let flag = self.engine.config_flag();
        let config = self.config_flags().into_iter().find(|(f, _)| *f == flag).and_then(|(_, p)| p);
        Site { root: self.root.as_deref().unwrap_or(Path::new("/")), config }
    }

    /// The library's request: this engine at this site, added or removed.
    pub(crate) fn request(&self) -> Request<'_> {
        Request { engine: self.engine, site: self.site(), undo: self.undo }
    }

    /// A flag that does not apply to the engine.
    pub(super) fn misplaced(&self) -> Option<String> {
        let engine = self.engine;
        let flag = engine.config_flag();
        if let Some((other, _)) = self.config_flags().into_iter().find(|(f, p)| p.is_some() && *f != flag) {
            return Some(format!("{other} does not apply to {engine}"));
        }
        if self.stage.is_some() && engine.way() != Way::HooksDir {
            return Some(format!("--stage does not apply to {engine}"));
        }
        if self.stage == Some(Stage::StartContainer) {
            return Some(
                "--stage startContainer is too late: use prestart, createRuntime or createContainer".into(),
            );
        }
        (self.default && engine.way() != Way::RuntimeWrapper)
            .then(|| format!("--default does not apply to {engine}"))
    }
}

/// Runs `setup`.
///
/// # Errors
/// This binary cannot be found, a config cannot be read, parsed or written.
pub(crate) fn run(args: &SetupArgs) -> Result<ExitCode, Error> {
    let hook = match &args.hook_path {
        Some(p) => p.clone(),
        None => crate::files::this_binary()?,
    };
    let wrapper = args.runtime_path.clone().unwrap_or_else(|| hook.with_file_name(WRAPPER_NAME));
    let stage = args.stage.unwrap_or(Stage::Prestart);
    let reg = Registration { hook: &hook, wrapper: &wrapper, default: args.default, stage };
    let changes = change::propose(&args.request(), &reg)?;
    print!("{}", summary(args, &reg, &changes));
    if args.dry_run {
        return Ok(ExitCode::SUCCESS);
    }
    change::write(&changes)?;
    if !changes.changes.is_empty() {
        if let Some(line) = args.engine.after_change() {
            println!("{line}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What setup did (or, with `dry_run`, would do), for people.
fn summary(args: &SetupArgs, reg: &Registration<'_>, changes: &ChangeSet) -> String {
    let engine = args.engine;
    let mut out = String::new();
    for line in changes.note_lines(engine) {
        out.push_str(&line);
        out.push('\n');
    }
    if !args.undo {
        let target = match engine.way() {
            Way::HooksDir => reg.hook,
            Way::RuntimeWrapper => reg.wrapper,
        };
        if !rooted(args.site().root, target).exists() {
            out.push_str(&format!("{engine}: note: {} does not exist (yet)\n", target.display()));
        }
    }
    for line in changes.unchanged_lines(engine, args.undo) {
        out.push_str(&line);
        out.push('\n');
    }
    for c in &changes.changes {
        out.push_str(&c.line(engine, args.dry_run));
        out.push('\n');
        if args.dry_run {
            out.push_str(&change::diff(c));
        }
    }
    if args.dry_run {
        out.push_str(&format!("{engine}: dry run: nothing written\n"));
    }
    if changes.changes.is_empty() && engine.restart_command().is_some() && !args.dry_run {
        out.push_str(&format!("{engine}: nothing to restart\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{tests::parse_from, Command};

    fn setup(args: &[&str]) -> SetupArgs {
        match parse_from(&[&["setup"], args].concat()).unwrap().command {
            Command::Setup(a) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn setup_flags_that_do_not_apply() {
        assert_eq!(
            setup(&["podman", "--daemon-json", "/x"]).misplaced().as_deref(),
            Some("--daemon-json does not apply to podman")
        );
        assert_eq!(
            setup(&["crio", "--default"]).misplaced().as_deref(),
            Some("--default does not apply to crio")
        );
        assert_eq!(setup(&["docker", "--default", "--daemon-json", "/x"]).misplaced(), None);
        assert_eq!(setup(&["crio", "--hooks-dir", "/h"]).site().config, Some(Path::new("/h")));
        assert_eq!(setup(&["containerd"]).site().root, Path::new("/"));
    }
}
