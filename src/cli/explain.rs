//! `oci-tmpfs-hook explain`: the plan for a bundle, as text or JSON. Reads
//! only; no syscall here changes anything.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use super::{absolute_path, ConfigArg};
use crate::error::{chain, Error};
use crate::input;
use crate::plan::{self, Action, Origin, Plan, ShmSource, ShmWay, Sizing};
use crate::size::Basis;
use crate::spec::edit::preview;
use crate::spec::host::Route;

#[derive(Clone, Debug, Args)]
pub(crate) struct ExplainArgs {
    /// The bundle directory (holds config.json).
    #[arg(long, short = 'b', value_name = "DIR")]
    pub bundle: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub config: ConfigArg,
    /// The runtime that will run the bundle, for which executor carries
    /// each target [default: runc on PATH].
    #[arg(long, value_name = "PATH", value_parser = absolute_path)]
    pub runtime: Option<PathBuf>,
}

/// Runs `explain`.
///
/// # Errors
/// The host config or the bundle cannot be read, or no plan can be made.
pub(crate) fn run(args: &ExplainArgs) -> Result<ExitCode, Error> {
    let (bundle, json) = (args.bundle.as_path(), args.json);
    let settings = args.config.source(Path::new("/")).read()?;
    let spec = input::read_spec(bundle)?;
    let plan = plan::plan_for(&spec, None, &settings, input::host_facts()?)?;
    let rootfs = input::rootfs_path(&spec, bundle);
    let routes = match (&rootfs, plan.enabled) {
        (Some(r), true) => {
            let unsafe_runtime = crate::wrapper::bundle_runtime_unsafe(args.runtime.as_deref());
            crate::spec::host::routes(r, &plan, unsafe_runtime.as_deref())
                .map_err(|e| log::warn!("{}: the targets are not checked against the rootfs", chain(&e)))
                .ok()
        }
        _ => None,
    };
    if json {
        let spec = preview(&plan);
        let targets: Option<Vec<serde_json::Value>> = routes.as_ref().map(|rs| {
            rs.iter()
                .map(|(t, r)| {
                    let mut v = serde_json::to_value(r).expect("serialising a route");
                    v["target"] = serde_json::json!(t);
                    v
                })
                .collect()
        });
        let doc = serde_json::json!({ "bundle": bundle, "rootfs": rootfs, "plan": plan, "spec": spec, "targets": targets });
        println!("{}", serde_json::to_string_pretty(&doc).expect("serialising the plan"));
    } else {
        print!("{}", render(bundle, rootfs.as_deref(), &plan));
        if let Some(rs) = &routes {
            print!("{}", render_routes(rs));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Which executor carries out each temp target, and why.
fn render_routes(routes: &[(String, Route)]) -> String {
    let mut out = String::new();
    if routes.is_empty() {
        return out;
    }
    let _ = writeln!(out, "targets (checked against the rootfs and where the spec's mounts land):");
    for (target, route) in routes {
        let line = match route {
            Route::Spec { destination } if destination == target => {
                "by the spec executor (a tmpfs entry), or by the hook (by fd)".to_string()
            }
            Route::Spec { destination } => format!(
                "by the spec executor at {destination}, where it resolves (no symlink left for the runtime), or by the hook (by fd)"
            ),
            Route::Hook { why } => format!("by the hook, also under the wrapper: {why}"),
            Route::None { why, .. } => format!("left alone by every executor: {why}"),
        };
        let _ = writeln!(out, "  {target}: {line}");
    }
    out
}

fn sizing(s: &Sizing) -> String {
    let basis = match (s.basis, s.basis_bytes) {
        (Basis::MemoryLimit, Some(b)) => format!("{} of the memory limit {b}", s.requested),
        (Basis::HostRam, Some(b)) => format!("{} of host RAM {b}", s.requested),
        _ => s.requested.clone(),
    };
    match &s.capped {
        Some(cap) => format!("{} ({basis}, from {}; {cap})", s.bytes.approx(), s.from),
        None => format!("{} ({basis}, from {})", s.bytes.approx(), s.from),
    }
}

/// The text form of a plan.
pub(crate) fn render(bundle: &Path, rootfs: Option<&Path>, plan: &Plan) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "bundle:  {}", bundle.display());
    if let Some(r) = rootfs {
        let _ = writeln!(out, "rootfs:  {}", r.display());
    }
    let verdict = if plan.enabled { "acts" } else { "does nothing" };
    let _ = writeln!(out, "hook:    {verdict} ({})", plan.why);
    if let (Some(o), false) = (plan.owner, plan.actions.is_empty()) {
        let _ = writeln!(
            out,
            "owner:   host uid {} gid {} (root in the container's user namespace)",
            o.uid, o.gid
        );
    }
    if !plan.actions.is_empty() {
        let _ = writeln!(out, "actions:");
    }
    for action in &plan.actions {
        let _ = writeln!(out, "  {}", action_line(action));
        if let Action::MountTmpfs { target, tmpfs, subdirs, .. } = action {
            for dir in subdirs {
                let _ = writeln!(out, "    with directory {target}/{dir} (mode {:o}) inside it", tmpfs.mode);
            }
        }
    }
    if !plan.actions.is_empty() {
        executors(&mut out, plan);
    }
    if !plan.notes.is_empty() {
        let _ = writeln!(out, "left alone:");
    }
    for n in &plan.notes {
        let _ = writeln!(out, "  {}: {}", n.subject, n.reason);
    }
    if !plan.actions.is_empty() {
        let _ = writeln!(
            out,
            "at mount time, a target that is already a mount point, or that resolves to a system directory, is left alone too"
        );
    }
    out
}

/// One action as a line: what is mounted or grown, how big, with which options.
fn action_line(action: &Action) -> String {
    match action {
        Action::MountTmpfs { target, origins, tmpfs, .. } => {
            let from: Vec<String> = origins
                .iter()
                .map(|o| match o {
                    Origin::Default => "always".to_string(),
                    Origin::Env(v) => format!("${v}"),
                    Origin::HostConfig => "extra_targets".to_string(),
                })
                .collect();
            format!(
                "mount tmpfs on {target}: size {}, {} [{}]",
                sizing(&tmpfs.size),
                tmpfs.options().join(","),
                from.join(", ")
            )
        }
        Action::Shm { existing, way, writable, tmpfs } => {
            let what = match (way, existing) {
                (ShmWay::Fresh, _) => {
                    format!(
                        "mount tmpfs on /dev/shm (the spec has none): {}, size",
                        tmpfs.options().join(",")
                    )
                }
                (ShmWay::Grow, ShmSource::Tmpfs { size: Some(have) }) => {
                    format!("grow /dev/shm (the spec's tmpfs has {have}) to")
                }
                (ShmWay::Grow, ShmSource::Bind { source }) => {
                    format!("grow /dev/shm (bound from {source}) to at least")
                }
                (ShmWay::Grow, _) => "grow /dev/shm (the spec's tmpfs) to at least".to_string(),
            };
            let mut line = format!("{what} {}", sizing(&tmpfs.size));
            if *writable {
                line.push_str(", and make it writable (the spec mounts it read-only)");
            }
            line
        }
    }
}

/// What each executor does with the plan.
fn executors(out: &mut String, plan: &Plan) {
    let _ = writeln!(out, "executors:");
    let _ = writeln!(out, "  hook (Podman, CRI-O, inject, mode = \"hook\"): the actions above, by fd in the container's mount namespace");
    let preview = preview(plan);
    if !preview.expressible {
        let _ = writeln!(out, "  spec (oci-tmpfs-runtime, inject --mode spec): adds the hook instead (a directory inside a fresh tmpfs needs it)");
        return;
    }
    let mounts: Vec<String> = preview
        .mounts
        .iter()
        .map(|m| format!("a tmpfs entry for {} ({})", m.destination, m.options.join(",")))
        .collect();
    let mut line = format!(
        "  spec (oci-tmpfs-runtime, inject --mode spec): writes {} into config.json, for the targets the rootfs check lets through",
        mounts.join(", ")
    );
    if let Some(shm) = preview.shm {
        let _ = write!(line, "; {shm}");
    }
    let _ = writeln!(out, "{line}");
}
