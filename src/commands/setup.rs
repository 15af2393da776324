//! `oci-tmpfs-hook setup ENGINE`: register the hook (Podman, CRI-O) or the
//! runtime wrapper (Docker, containerd). Plans with `crate::setup`, prints,
//! writes unless `--dry-run`. Never restarts a daemon.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::setup::{self, Engine, Options, Plan, WRAPPER_NAME};

/// The flags of `setup`, as parsed.
#[derive(Clone, Debug)]
pub struct Args {
    pub engine: Engine,
    pub dry_run: bool,
    pub undo: bool,
    pub default: bool,
    pub hook_path: Option<PathBuf>,
    pub runtime_path: Option<PathBuf>,
    pub root: Option<PathBuf>,
    pub hooks_dir: Option<PathBuf>,
    pub daemon_json: Option<PathBuf>,
    pub containerd_config: Option<PathBuf>,
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("oci-tmpfs-hook: setup: {msg}");
    ExitCode::from(2)
}

/// This binary's canonical path.
pub fn this_binary() -> std::io::Result<PathBuf> {
    std::env::current_exe().and_then(|p| p.canonicalize())
}

/// Runs `setup`.
pub fn run(args: &Args) -> ExitCode {
    let engine = args.engine;
    let misplaced = [
        ("--hooks-dir", args.hooks_dir.is_some(), matches!(engine, Engine::Podman | Engine::Crio)),
        ("--daemon-json", args.daemon_json.is_some(), engine == Engine::Docker),
        ("--containerd-config", args.containerd_config.is_some(), engine == Engine::Containerd),
        ("--default", args.default, matches!(engine, Engine::Docker | Engine::Containerd)),
    ];
    if let Some((flag, ..)) = misplaced.iter().find(|(_, given, fits)| *given && !fits) {
        return usage(&format!("{flag} does not apply to {engine}"));
    }
    for (flag, p) in [("--hook-path", &args.hook_path), ("--runtime-path", &args.runtime_path)] {
        if p.as_ref().is_some_and(|p| !p.is_absolute()) {
            return usage(&format!("{flag} must be an absolute path"));
        }
    }
    let hook = match &args.hook_path {
        Some(p) => p.clone(),
        None => match this_binary() {
            Ok(p) => p,
            Err(e) => return super::fail(&e),
        },
    };
    let wrapper = args.runtime_path.clone().unwrap_or_else(|| hook.with_file_name(WRAPPER_NAME));
    let opts = Options {
        engine,
        undo: args.undo,
        default: args.default,
        hook,
        wrapper,
        root: args.root.clone().unwrap_or_else(|| PathBuf::from("/")),
        hooks_dir: args.hooks_dir.clone(),
        daemon_json: args.daemon_json.clone(),
        containerd_config: args.containerd_config.clone(),
    };
    let plan = match setup::plan(&opts) {
        Ok(p) => p,
        Err(e) => return super::fail(&e),
    };
    print!("{}", report(&opts, &plan, args.dry_run));
    if args.dry_run {
        return ExitCode::SUCCESS;
    }
    if let Err(e) = setup::apply(&plan) {
        return super::fail(&e);
    }
    if !plan.changes.is_empty() {
        if let Some(cmd) = engine.restart_command() {
            println!("{engine}: restart it to load the change: {cmd}");
        }
    }
    ExitCode::SUCCESS
}

/// What setup did (or, with `dry_run`, would do), for people.
fn report(opts: &Options, plan: &Plan, dry_run: bool) -> String {
    use std::fmt::Write as _;
    let engine = opts.engine;
    let mut out = String::new();
    for note in &plan.notes {
        let _ = writeln!(out, "{engine}: {note}");
    }
    if !opts.undo {
        let target = match engine {
            Engine::Podman | Engine::Crio => &opts.hook,
            Engine::Docker | Engine::Containerd => &opts.wrapper,
        };
        if !setup::rooted(&opts.root, target).exists() {
            let _ = writeln!(out, "{engine}: note: {} does not exist (yet)", target.display());
        }
    }
    let verb = |done: &str, would: &str| if dry_run { would.to_string() } else { done.to_string() };
    for path in &plan.unchanged {
        let state = if opts.undo { "has no registration" } else { "is already set up" };
        let _ = writeln!(out, "{engine}: {} {state}; unchanged", path.display());
    }
    for change in &plan.changes {
        let action = match (&change.before, &change.after) {
            (None, _) => verb("created", "would create"),
            (Some(_), None) => verb("removed", "would remove"),
            (Some(_), Some(_)) => verb("updated", "would update"),
        };
        let _ = write!(out, "{engine}: {action} {}", change.path.display());
        if let Some(b) = &change.backup {
            let _ = write!(out, " (backup: {})", b.display());
        }
        out.push('\n');
        if dry_run {
            out.push_str(&setup::diff(change));
        }
    }
    if dry_run {
        let _ = writeln!(out, "{engine}: dry run: nothing written");
    }
    if plan.changes.is_empty() && opts.engine.restart_command().is_some() && !dry_run {
        let _ = writeln!(out, "{engine}: nothing to restart");
    }
    out
}

/// For `doctor` and tests: the wrapper path next to a hook binary.
pub fn wrapper_for(hook: &Path) -> PathBuf {
    hook.with_file_name(WRAPPER_NAME)
}
