//! `oci-tmpfs-hook setup ENGINE`: register the hook (Podman, CRI-O) or the
//! runtime wrapper (Docker, containerd). Plans with [`crate::setup`], prints,
//! writes unless `--dry-run`. Never restarts a daemon.

use std::fmt::Write as _;
use std::process::ExitCode;

use crate::cli::SetupArgs;
use crate::engine::{Registration, Way};
use crate::names::{rooted, WRAPPER_NAME};
use crate::setup::{self, Plan};

/// Runs `setup`.
///
/// # Errors
/// This binary cannot be found, a config cannot be read, parsed or written.
pub fn run(args: &SetupArgs) -> Result<ExitCode, super::Error> {
    let hook = match &args.hook_path {
        Some(p) => p.clone(),
        None => super::this_binary()?,
    };
    let wrapper = args.runtime_path.clone().unwrap_or_else(|| hook.with_file_name(WRAPPER_NAME));
    let reg = Registration { hook: &hook, wrapper: &wrapper, default: args.default };
    let plan = setup::plan(args, &reg)?;
    print!("{}", report(args, &reg, &plan));
    if args.dry_run {
        return Ok(ExitCode::SUCCESS);
    }
    setup::apply(&plan)?;
    if !plan.changes.is_empty() {
        if let Some(cmd) = args.engine.restart_command() {
            println!("{}: restart it to load the change: {cmd}", args.engine);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What setup did (or, with `dry_run`, would do), for people.
fn report(args: &SetupArgs, reg: &Registration<'_>, plan: &Plan) -> String {
    let engine = args.engine;
    let mut out = String::new();
    for note in &plan.notes {
        let _ = writeln!(out, "{engine}: {note}");
    }
    if !args.undo {
        let target = match engine.way() {
            Way::HooksDir => reg.hook,
            Way::RuntimeWrapper => reg.wrapper,
        };
        if !rooted(args.site().root, target).exists() {
            let _ = writeln!(out, "{engine}: note: {} does not exist (yet)", target.display());
        }
    }
    let verb = |done: &str, would: &str| if args.dry_run { would.to_string() } else { done.to_string() };
    for path in &plan.unchanged {
        let state = if args.undo { "has no registration" } else { "is already set up" };
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
        if args.dry_run {
            out.push_str(&setup::diff(change));
        }
    }
    if args.dry_run {
        let _ = writeln!(out, "{engine}: dry run: nothing written");
    }
    if plan.changes.is_empty() && engine.restart_command().is_some() && !args.dry_run {
        let _ = writeln!(out, "{engine}: nothing to restart");
    }
    out
}
