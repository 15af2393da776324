//! `oci-tmpfs-hook explain`: the plan for a bundle, or for the pods of a
//! Kubernetes manifest (`--manifest`, [`crate::manifest`]), as text or
//! JSON. Reads only; no syscall here changes anything.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use super::{absolute_path, HostConfigArg};
use crate::error::{chain, Error};
use crate::input;
use crate::plan::{self, Action, HomeFrom, Origin, Plan, ShmSource, ShmWay, Sizing};
use crate::size::{Basis, Bytes};
use crate::spec::edit::preview;
use crate::spec::host::Route;
use crate::spec::route;

#[derive(Clone, Debug, Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["bundle", "manifest"])))]
pub(crate) struct ExplainArgs {
    /// The bundle directory (holds config.json).
    #[arg(long, short = 'b', value_name = "DIR")]
    pub bundle: Option<PathBuf>,
    /// A Kubernetes manifest (YAML or JSON, multi-document; `-`: stdin):
    /// what each container of each pod template would get on a node.
    #[arg(long, short = 'm', value_name = "FILE", conflicts_with = "runtime")]
    pub manifest: Option<PathBuf>,
    /// With --manifest: the node's memory, a Kubernetes quantity (64Gi,
    /// 65842836Ki) [default: this host's RAM].
    #[arg(long, value_name = "QUANTITY", value_parser = node_memory)]
    pub node_memory: Option<Bytes>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub config: HostConfigArg,
    /// The runtime that will run the bundle, for which executor carries
    /// each target [default: the host config's runtime_path, else runc on PATH,
    /// as the wrapper finds it].
    #[arg(long, value_name = "PATH", value_parser = absolute_path)]
    pub runtime: Option<PathBuf>,
    /// The wrapper's executor to explain [default: the host config's
    /// `mode`].
    #[arg(long, value_enum, conflicts_with = "manifest")]
    pub mode: Option<crate::host_config::Mode>,
}

/// Runs `explain`.
///
/// # Errors
/// The host config or the bundle cannot be read, or no plan can be made.
pub(crate) fn run(args: &ExplainArgs) -> Result<ExitCode, Error> {
    let bundle = match (&args.bundle, &args.manifest) {
        (_, Some(file)) => return manifest(args, file),
        (Some(b), None) => b.as_path(),
        (None, None) => unreachable!("clap requires --bundle or --manifest"),
    };
    let json = args.json;
    let host_config = args.config.source(Path::new("/")).read()?;
    let (spec, hooks) = input::read_spec_and_hooks(bundle)?;
    let host = input::host_facts()?;
    let rootfs = input::rootfs_path(&spec, bundle);
    let mut root = rootfs.as_deref().map(crate::spec::host::LazyRoot::new);
    // As the runtime wrapper makes it, through the same function.
    let plan = crate::spec::plan_in(&spec, &host_config, host, root.as_mut())?;
    let carried = match (root.as_mut(), plan.enabled) {
        (Some(r), true) => {
            // The runtime the wrapper would exec: --runtime, else the host
            // config's runtime_path, else runc on PATH.
            let runtime = crate::wrapper::real_runtime::bundle_verdict(args.runtime.as_deref(), &host_config);
            let ours = crate::files::this_binary()?;
            let foreign = route::foreign_runtime_hooks(&hooks, &ours);
            let facts = route::Facts {
                mode: args.mode.unwrap_or(host_config.mode),
                spec_unsafe: runtime.spec_unsafe.as_deref(),
                foreign: &foreign,
            };
            // The wrapper's own verdict, on a read-only view of the rootfs:
            // it can move the temp targets to the hook too (what a target's
            // directory holds, docs/design.md#image-files).
            match crate::spec::host::routes(r, &plan, &facts, runtime.no_copy_up.as_deref()) {
                Ok((executor, routes)) => Some((facts.mode, executor, Some(routes))),
                Err(e) => {
                    log::warn!("{}: the targets are not checked against the rootfs", chain(&e));
                    Some((facts.mode, route::executor(&plan, &facts), None))
                }
            }
        }
        _ => None,
    };
    let routes = carried.as_ref().and_then(|(_, _, r)| r.as_ref());
    if json {
        let memory = plan.memory_use(plan::memory_limit(&spec));
        let spec = preview(&plan);
        let targets: Option<Vec<serde_json::Value>> = routes.map(|rs| {
            rs.iter()
                .map(|(t, r)| {
                    let mut v = serde_json::to_value(r).expect("serialising a route");
                    v["target"] = serde_json::json!(t);
                    v
                })
                .collect()
        });
        let wrapper = carried.as_ref().map(|(mode, executor, _)| match executor {
            route::Executor::Spec => serde_json::json!({"mode": mode, "executor": "spec"}),
            route::Executor::Hook { stage, why } => {
                serde_json::json!({"mode": mode, "executor": "hook", "stage": stage.as_str(), "why": why})
            }
        });
        let doc = serde_json::json!({
            "bundle": bundle, "rootfs": rootfs, "plan": plan, "spec": spec,
            "wrapper": wrapper, "targets": targets, "memory": memory,
        });
        println!("{}", serde_json::to_string_pretty(&doc).expect("serialising the plan"));
    } else {
        print!("{}", render(bundle, rootfs.as_deref(), &plan, plan::memory_limit(&spec)));
        if let Some((mode, executor, _)) = &carried {
            let mode = if *mode == crate::host_config::Mode::Hook { "hook" } else { "spec" };
            let line = match executor {
                route::Executor::Spec => "writes the mounts into config.json".to_string(),
                route::Executor::Hook { stage, why } => format!("adds the hook at {stage}: {why}"),
            };
            println!("wrapper: in {mode} mode, {line}");
        }
        if let Some(rs) = routes {
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
            Route::Spec { destination, copy_up } => {
                let copy = if *copy_up {
                    ", the runtime copying the image's entries into it (tmpcopyup)"
                } else {
                    ""
                };
                if destination == target {
                    format!("by the spec executor (a tmpfs entry{copy})")
                } else {
                    format!("by the spec executor at {destination}, where it resolves (no symlink left for the runtime){copy}")
                }
            }
            Route::Hook { destination, stage, why } => {
                let at = if destination == target { String::new() } else { format!(" at {destination}") };
                format!("by the hook at {stage} (by fd){at}: {why}")
            }
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
pub(crate) fn render(
    bundle: &Path,
    rootfs: Option<&Path>,
    plan: &Plan,
    memory_limit: Option<Bytes>,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "bundle:  {}", bundle.display());
    if let Some(r) = rootfs {
        let _ = writeln!(out, "rootfs:  {}", r.display());
    }
    let verdict = if plan.enabled { "acts" } else { "does nothing" };
    let _ = writeln!(out, "hook:    {verdict} ({})", plan.why);
    if let Some(home) = &plan.home {
        let _ = writeln!(out, "home:    {}", home.line());
    }
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
        let _ = writeln!(out, "memory:  {}", plan.memory_use(memory_limit).line());
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
                    Origin::HomeCache(HomeFrom::Env) => "a cache under $HOME (home_caches)".to_string(),
                    Origin::HomeCache(HomeFrom::Passwd) => {
                        "a cache under HOME, from /etc/passwd (home_caches)".to_string()
                    }
                    Origin::HomeCache(HomeFrom::NoEntry) => {
                        "a cache under the runtime's HOME=/ (home_caches)".to_string()
                    }
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
    let _ = writeln!(
        out,
        "  hook (Podman, CRI-O, inject, mode = \"hook\"): the actions above, by fd in the container's mount namespace"
    );
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
    let temp = preview.mounts.iter().filter(|m| m.destination != crate::plan::SHM_PATH).count();
    let mut instead = Vec::new();
    if temp > 0 {
        // docs/design.md#image-files
        instead.push("when one's directory holds files in the image, the runtime copies them up (tmpcopyup), or, past the copy bounds, with a device, socket or FIFO or on a runtime that does not copy as the hook does, the hook carries them instead");
    }
    if !instead.is_empty() {
        let _ = write!(line, " ({})", instead.join("; "));
    }
    if let Some(shm) = preview.shm {
        let _ = write!(line, "; {shm}");
    }
    let _ = writeln!(out, "{line}");
}

/// `--node-memory`: a Kubernetes quantity, more than zero.
fn node_memory(text: &str) -> Result<Bytes, String> {
    match crate::manifest::quantity::bytes(text) {
        Ok(0) => Err("must be more than zero".into()),
        Ok(b) => Ok(Bytes(b)),
        Err(e) => Err(e.to_string()),
    }
}

/// Most bytes a manifest may have.
const MANIFEST_MAX: u64 = 16 << 20;

/// `explain --manifest FILE`: a bad manifest is a usage error (one line,
/// exit 2), as a bad flag is.
fn manifest(args: &ExplainArgs, file: &Path) -> Result<ExitCode, Error> {
    let host_config = args.config.source(Path::new("/")).read()?;
    let (node, ram) = match args.node_memory {
        Some(b) => ("--node-memory", b),
        None => ("this host's RAM", input::host_ram()?),
    };
    let (name, text) = read_manifest(file)?;
    let found =
        crate::manifest::doc::load(&name, &text).and_then(|docs| crate::manifest::workloads(&name, &docs));
    let (workloads, skipped) = match found {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{}", crate::process::logger::prefixed(None, &chain(&e)));
            return Ok(ExitCode::from(crate::error::EXIT_USAGE));
        }
    };
    let reports: Vec<_> = workloads.iter().map(|w| crate::manifest::explain(w, &host_config, ram)).collect();
    if args.json {
        let doc = serde_json::json!({
            "manifest": name,
            "node": {"memory": ram, "from": node},
            "pods": reports,
            "skipped": skipped,
        });
        println!("{}", serde_json::to_string_pretty(&doc).expect("serialising the reports"));
    } else {
        print!("{}", render_manifest(&name, (node, ram), &reports, &skipped));
    }
    Ok(ExitCode::SUCCESS)
}

/// The manifest's name as shown and its text (`-`: stdin), bounded.
fn read_manifest(file: &Path) -> Result<(String, String), Error> {
    if file == Path::new("-") {
        use std::io::Read as _;
        let mut text = String::new();
        std::io::stdin()
            .take(MANIFEST_MAX + 1)
            .read_to_string(&mut text)
            .map_err(|e| format!("reading the manifest from stdin: {e}"))?;
        if text.len() as u64 > MANIFEST_MAX {
            return Err(format!("stdin: the manifest is larger than {}", Bytes(MANIFEST_MAX)).into());
        }
        return Ok(("stdin".into(), text));
    }
    let contents = crate::files::read(None, file, MANIFEST_MAX)?;
    let text =
        String::from_utf8(contents.bytes).map_err(|_| format!("{}: not UTF-8 text", file.display()))?;
    Ok((file.display().to_string(), text))
}

/// A container's assumed cache tmpfs under `HOME` (its image's
/// `/etc/passwd` unknown here), and its tmpfs sizes summed with them
/// against its memory limit.
fn assumed_home_and_memory(out: &mut String, c: &crate::manifest::ContainerReport) {
    if let Some(t) = &c.assumed_home {
        let uid = t.user.map_or(0, |u| u.uid);
        let _ = writeln!(
            out,
            "    assumed: cache tmpfs under HOME (uid {uid}'s home in the image's /etc/passwd, unknown here, holding none of the caches): {} together ({}), {}",
            t.size.bytes.approx(),
            t.size.requested,
            t.options().join(",")
        );
    }
    if let Some(m) = &c.memory {
        let with = if c.assumed_home.is_some() { " (with the assumed HOME)" } else { "" };
        let _ = writeln!(out, "    memory{with}: {}", m.line());
    }
}

/// The text form of the pods' plans.
fn render_manifest(
    name: &str,
    (node, ram): (&str, Bytes),
    reports: &[crate::manifest::PodReport],
    skipped: &[crate::manifest::doc::DocRef],
) -> String {
    use crate::manifest::{PodShm, Role};
    let mut out = String::new();
    let _ = writeln!(out, "manifest: {name}");
    let _ = writeln!(
        out,
        "node:     {} of memory ({node}); the images' own ENV is not in a manifest",
        ram.approx()
    );
    for r in reports {
        let what = if r.template.is_empty() { String::new() } else { format!(", template {}", r.template) };
        let _ = writeln!(out, "\n{}{what}: pod {}/{}", r.doc, r.namespace, r.name);
        for n in &r.notes {
            let _ = writeln!(out, "  note: {n}");
        }
        for c in &r.containers {
            let role = match c.role {
                Role::App => "container",
                Role::Init => "init container",
                Role::Sidecar => "sidecar (init container, restartPolicy Always)",
            };
            let limit = c
                .memory_limit
                .map_or("no memory limit".to_string(), |l| format!("memory limit {}", l.approx()));
            let _ = writeln!(out, "  {role} {} ({}; {limit}):", c.name, c.field);
            let root = match c.read_only_root_filesystem {
                Some(true) => "securityContext.readOnlyRootFilesystem: true",
                Some(false) => "securityContext.readOnlyRootFilesystem: false",
                None => "readOnlyRootFilesystem not set (a writable root)",
            };
            let plan = match &c.plan {
                Ok(p) => p,
                Err(e) => {
                    let _ = writeln!(
                        out,
                        "    fails: {} (on_error = \"fail\": the container does not start)",
                        chain(e)
                    );
                    continue;
                }
            };
            let verdict = if plan.enabled { "acts" } else { "does nothing" };
            match plan.why.as_str() {
                // The plan's words for the spec's root, in the manifest's.
                "root.readonly is true" | "the root filesystem is writable" => {
                    let _ = writeln!(out, "    {verdict}: {root}");
                }
                why => {
                    let _ = writeln!(out, "    {verdict}: {why} ({root})");
                }
            }
            for (path, v) in &c.volumes {
                let _ = writeln!(out, "    volume at {path}: {v}");
            }
            for a in &plan.actions {
                if let (Action::Shm { .. }, Some(why)) = (a, &c.shm_left_alone) {
                    let _ = writeln!(out, "    left alone: /dev/shm: {why}");
                    continue;
                }
                let line = action_line(a)
                    .replace(
                        &format!("(bound from {})", crate::manifest::pod::POD_SHM_SOURCE),
                        "(the pod's, bound from containerd's tmpfs)",
                    )
                    .replace(" of host RAM ", " of the node's RAM ");
                let _ = writeln!(out, "    {line}");
            }
            assumed_home_and_memory(&mut out, c);
            for n in &plan.notes {
                let volume = c.volumes.iter().find(|(p, _)| crate::target::normalise(p) == n.subject);
                let by = volume.map_or(String::new(), |(_, v)| format!(": {v}"));
                // What the plan assumes of the image's /etc/passwd, unknown here.
                let what = if n.subject == "HOME" && !n.warn { "assumed" } else { "left alone" };
                let _ = writeln!(out, "    {what}: {}: {}{by}", n.subject, n.reason);
            }
            for u in &c.unknown {
                let _ = writeln!(out, "    unknown here: {u}");
            }
        }
        let _ = writeln!(out, "  pause container: nothing (a pod sandbox)");
        let shm = match &r.shm {
            PodShm::Host => "the node's own (hostIPC), never resized".to_string(),
            PodShm::Sandbox { start, size, by: Some(by) } => {
                format!(
                    "{} (containerd's {start} tmpfs, grown to its largest container's: {by})",
                    size.approx()
                )
            }
            PodShm::Sandbox { start, .. } => format!("{start} (containerd's tmpfs, left as it is)"),
        };
        let _ = writeln!(out, "  pod /dev/shm: {shm}");
    }
    for s in skipped {
        let _ = writeln!(out, "\n{s}: no pod template, passed over");
    }
    out
}
