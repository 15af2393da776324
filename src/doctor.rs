//! `doctor`: what a platform engineer runs after installing, or when a
//! container still fails. Each check gives `ok` or `problem` plus the fix.
//!
//! The kernel checks really call what the hook needs, harmlessly:
//! `openat2(2)` with `RESOLVE_IN_ROOT` on `/`, `fsopen(2)` of a tmpfs context
//! that is closed without creating or mounting anything, `pidfd_open(2)` on
//! ourselves. Nothing here mounts or writes. The registration checks read the
//! engines' files (under `--root` when given) and compare the paths there with
//! this binary.

use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, ResolveFlags};
use serde_json::Value;

use crate::settings::Settings;
use crate::setup::{self, Engine, CONTAINERD_CONFIG, DAEMON_JSON, ETC_HOOKS_DIR, HOOKS_DIR, HOOK_FILE};
use crate::setup::{CRIO_CONF, CRIO_CONF_D, CRI_PLUGIN_V2, CRI_PLUGIN_V3, RUNTIME_NAME, WRAPPER_NAME};

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
    fn ok(what: &str, detail: impl Into<String>) -> Check {
        Check { ok: true, what: what.into(), detail: detail.into(), fix: None, info: Vec::new() }
    }

    fn problem(what: &str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
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
    /// The host config file, and whether it was named explicitly.
    pub config: PathBuf,
    pub config_explicit: bool,
    /// Detect engines by their binaries on PATH too (not under `--root`).
    pub search_path: bool,
}

/// Every check, in report order.
pub fn run_all(ctx: &Context) -> Vec<Check> {
    let mut checks = kernel_checks();
    checks.extend(privilege_checks());
    let (config_check, settings) = config_check(ctx);
    checks.push(config_check);
    let engines = detect_engines(ctx);
    if engines.is_empty() {
        checks.push(Check::ok("engines", "none found (podman, crio, docker, containerd); nothing to check"));
    }
    for (engine, why) in &engines {
        checks.push(Check::ok(engine.as_str(), format!("found ({why})")));
        checks.extend(engine_checks(*engine, ctx));
    }
    if engines.iter().any(|(e, _)| matches!(e, Engine::Docker | Engine::Containerd)) {
        checks.push(real_runtime_check(ctx, settings.as_ref()));
    }
    checks
}

// ---------------------------------------------------------------------------
// Kernel and privileges.

fn errno_fix(e: rustix::io::Errno, min_kernel: &str) -> String {
    match e {
        rustix::io::Errno::NOSYS => format!("the kernel lacks it: use Linux {min_kernel} or newer"),
        rustix::io::Errno::PERM | rustix::io::Errno::ACCESS => {
            "run as root with CAP_SYS_ADMIN (the engines run the hook that way); a seccomp filter may also block it"
                .into()
        }
        _ => "check seccomp/LSM policy for this process".into(),
    }
}

/// openat2 / fsopen / pidfd_open, each really called.
pub fn kernel_checks() -> Vec<Check> {
    let mut checks = Vec::new();
    let resolve = rustix::fs::open("/", OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .and_then(|root| {
            rustix::fs::openat2(
                &root,
                ".",
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
                ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS | ResolveFlags::NO_XDEV,
            )
        });
    checks.push(match resolve {
        Ok(_) => Check::ok("kernel", "openat2(RESOLVE_IN_ROOT) works"),
        Err(e) => {
            Check::problem("kernel", format!("openat2(RESOLVE_IN_ROOT) fails: {e}"), errno_fix(e, "5.6"))
        }
    });
    checks.push(match rustix::mount::fsopen("tmpfs", rustix::mount::FsOpenFlags::FSOPEN_CLOEXEC) {
        Ok(_fd) => {
            Check::ok("kernel", "fsopen(\"tmpfs\") works (new mount API: fsconfig/fsmount/move_mount)")
        }
        Err(e) => Check::problem("kernel", format!("fsopen(\"tmpfs\") fails: {e}"), errno_fix(e, "5.2")),
    });
    checks.push(
        match rustix::process::pidfd_open(rustix::process::getpid(), rustix::process::PidfdFlags::empty()) {
            Ok(_fd) => Check::ok("kernel", "pidfd_open works"),
            Err(e) => Check::problem("kernel", format!("pidfd_open fails: {e}"), errno_fix(e, "5.3")),
        },
    );
    checks
}

/// Root and CAP_SYS_ADMIN (the engines run the hook as root).
pub fn privilege_checks() -> Vec<Check> {
    let root = rustix::process::geteuid().is_root();
    let sys_admin = caps::has_cap(None, caps::CapSet::Effective, caps::Capability::CAP_SYS_ADMIN);
    let what = "privileges";
    vec![match (root, sys_admin) {
        (true, Ok(true)) => Check::ok(what, "running as root with CAP_SYS_ADMIN"),
        (_, Ok(has)) => Check::problem(
            what,
            format!(
                "running as {} {} CAP_SYS_ADMIN; the kernel checks above may not reflect the hook's view",
                if root { "root" } else { "non-root" },
                if has { "with" } else { "without" }
            ),
            "run doctor as root (sudo oci-tmpfs-hook doctor)",
        ),
        (_, Err(e)) => Check::problem(what, format!("reading capabilities: {e}"), "run doctor as root"),
    }]
}

// ---------------------------------------------------------------------------
// Host config.

/// Parses the host config and lists every effective value.
pub fn config_check(ctx: &Context) -> (Check, Option<Settings>) {
    let what = "config";
    let path = &ctx.config;
    let missing = !path.exists();
    match crate::input::read_settings(path, ctx.config_explicit) {
        Ok(settings) => {
            let detail = if missing {
                format!("{} is missing: built-in defaults", path.display())
            } else {
                format!("{} parsed", path.display())
            };
            let mut check = Check::ok(what, detail);
            check.info = effective_values(&settings);
            (check, Some(settings))
        }
        Err(e) => (
            Check::problem(
                what,
                crate::commands::chain(&e),
                format!("fix {} (see the example config.toml) or remove it for the defaults", path.display()),
            ),
            None,
        ),
    }
}

/// `key = value` for every setting, in declaration order.
pub fn effective_values(settings: &Settings) -> Vec<String> {
    let value = serde_json::to_value(settings).expect("serialising settings");
    value
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| match v {
                    Value::Null => format!("{k} = (unset)"),
                    Value::String(s) => format!("{k} = {s}"),
                    other => format!("{k} = {other}"),
                })
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------
// Engines.

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")
        .unwrap_or_else(|| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin".into());
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

/// The engines on this host: by binary on PATH (not under `--root`), or by
/// their config files.
pub fn detect_engines(ctx: &Context) -> Vec<(Engine, String)> {
    let r = |p: &str| setup::rooted(&ctx.root, Path::new(p));
    Engine::ALL
        .into_iter()
        .filter_map(|engine| {
            let (binary, files): (&str, Vec<PathBuf>) = match engine {
                Engine::Podman => (
                    "podman",
                    vec![
                        r(HOOKS_DIR).join(HOOK_FILE),
                        r(ETC_HOOKS_DIR).join(HOOK_FILE),
                        r("/etc/containers/containers.conf"),
                    ],
                ),
                Engine::Crio => ("crio", vec![r(CRIO_CONF), r(CRIO_CONF_D)]),
                Engine::Docker => ("dockerd", vec![r(DAEMON_JSON)]),
                Engine::Containerd => ("containerd", vec![r(CONTAINERD_CONFIG)]),
            };
            if ctx.search_path {
                if let Some(p) = on_path(binary) {
                    return Some((engine, format!("{} on PATH", p.display())));
                }
            }
            files.into_iter().find(|f| f.exists()).map(|f| (engine, f.display().to_string()))
        })
        .collect()
}

/// Whether `path` (as the engine sees it) is this binary.
fn is_this_binary(ctx: &Context, path: &Path) -> Result<(), String> {
    if !path.is_absolute() {
        return Err(format!("{} is not an absolute path", path.display()));
    }
    let on_disk = setup::rooted(&ctx.root, path);
    match on_disk.canonicalize() {
        Ok(real) if real == ctx.binary => Ok(()),
        Ok(real) => {
            Err(format!("{} is {}, not this binary {}", path.display(), real.display(), ctx.binary.display()))
        }
        Err(e) => Err(format!("{}: {e}", on_disk.display())),
    }
}

fn setup_fix(engine: Engine) -> String {
    match engine.restart_command() {
        Some(cmd) => format!("oci-tmpfs-hook setup {engine} && {cmd}"),
        None => format!("oci-tmpfs-hook setup {engine}"),
    }
}

/// The registration checks of one engine.
pub fn engine_checks(engine: Engine, ctx: &Context) -> Vec<Check> {
    match engine {
        Engine::Podman => {
            let dirs = [HOOKS_DIR, ETC_HOOKS_DIR].map(|d| setup::rooted(&ctx.root, Path::new(d)));
            vec![hooks_dir_check(engine, ctx, &dirs)]
        }
        Engine::Crio => {
            let dir = setup::crio_config_files(&ctx.root)
                .and_then(|files| setup::crio_hooks_dir(&files))
                .map(|d| {
                    d.map_or_else(
                        || setup::rooted(&ctx.root, Path::new(HOOKS_DIR)),
                        |d| setup::rooted(&ctx.root, &d),
                    )
                });
            match dir {
                Ok(dir) => vec![hooks_dir_check(engine, ctx, &[dir])],
                Err(e) => {
                    vec![Check::problem(engine.as_str(), crate::commands::chain(&e), "fix CRI-O's config")]
                }
            }
        }
        Engine::Docker => vec![docker_check(ctx)],
        Engine::Containerd => containerd_checks(ctx),
    }
}

/// The hook JSON in the first of `dirs` that has it: valid, at prestart for
/// every container, running this binary.
fn hooks_dir_check(engine: Engine, ctx: &Context, dirs: &[PathBuf]) -> Check {
    let what = engine.as_str();
    let Some(path) = dirs.iter().map(|d| d.join(HOOK_FILE)).find(|p| p.exists()) else {
        let names: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        return Check::problem(what, format!("no {HOOK_FILE} in {}", names.join(" or ")), setup_fix(engine));
    };
    let text = match setup::read_text(&path) {
        Ok(Some(t)) => t,
        Ok(None) => return Check::problem(what, format!("{} vanished", path.display()), setup_fix(engine)),
        Err(e) => return Check::problem(what, crate::commands::chain(&e), setup_fix(engine)),
    };
    let doc: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            return Check::problem(what, format!("{}: invalid JSON: {e}", path.display()), setup_fix(engine))
        }
    };
    let hook_path = doc.pointer("/hook/path").and_then(Value::as_str).unwrap_or("");
    let expected: Value =
        serde_json::from_str(&setup::hooks_json(Path::new(hook_path))).expect("our own JSON");
    if doc != expected {
        return Check::problem(
            what,
            format!("{} differs from what setup writes (stage, args, env or when)", path.display()),
            setup_fix(engine),
        );
    }
    match is_this_binary(ctx, Path::new(hook_path)) {
        Ok(()) => Check::ok(what, format!("{} runs this binary at prestart", path.display())),
        Err(why) => Check::problem(what, format!("{}: {why}", path.display()), setup_fix(engine)),
    }
}

/// A wrapper path registered with Docker or containerd: named
/// `oci-tmpfs-runtime` (the name selects the wrapper behaviour) and resolving
/// to this binary.
fn wrapper_check(engine: Engine, ctx: &Context, file: &Path, wrapper: &str) -> Check {
    let what = engine.as_str();
    let path = Path::new(wrapper);
    if path.file_name().and_then(|n| n.to_str()) != Some(WRAPPER_NAME) {
        return Check::problem(
            what,
            format!(
                "{}: the {RUNTIME_NAME} runtime is {wrapper}, not a path named {WRAPPER_NAME}",
                file.display()
            ),
            setup_fix(engine),
        );
    }
    match is_this_binary(ctx, path) {
        Ok(()) => Check::ok(
            what,
            format!("{}: runtime {RUNTIME_NAME} = {wrapper}, which resolves to this binary", file.display()),
        ),
        Err(why) => Check::problem(
            what,
            format!("{}: runtime {RUNTIME_NAME}: {why}", file.display()),
            format!("ln -sf oci-tmpfs-hook {wrapper} (next to the binary), or {}", setup_fix(engine)),
        ),
    }
}

fn docker_check(ctx: &Context) -> Check {
    let engine = Engine::Docker;
    let path = setup::rooted(&ctx.root, Path::new(DAEMON_JSON));
    let text = match setup::read_text(&path) {
        Ok(Some(t)) => t,
        Ok(None) => {
            return Check::problem("docker", format!("{} is missing", path.display()), setup_fix(engine))
        }
        Err(e) => return Check::problem("docker", crate::commands::chain(&e), setup_fix(engine)),
    };
    let doc: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            return Check::problem(
                "docker",
                format!("{}: invalid JSON at line {}, column {}", path.display(), e.line(), e.column()),
                format!("fix the file, then {}", setup_fix(engine)),
            )
        }
    };
    match doc.pointer(&format!("/runtimes/{RUNTIME_NAME}/path")).and_then(Value::as_str) {
        Some(wrapper) => wrapper_check(engine, ctx, &path, wrapper),
        None => Check::problem(
            "docker",
            format!("{} has no runtimes.{RUNTIME_NAME}.path", path.display()),
            setup_fix(engine),
        ),
    }
}

fn containerd_checks(ctx: &Context) -> Vec<Check> {
    let engine = Engine::Containerd;
    let what = "containerd";
    let path = setup::rooted(&ctx.root, Path::new(CONTAINERD_CONFIG));
    let text = match setup::read_text(&path) {
        Ok(Some(t)) => t,
        Ok(None) => {
            return vec![Check::problem(what, format!("{} is missing", path.display()), setup_fix(engine))]
        }
        Err(e) => return vec![Check::problem(what, crate::commands::chain(&e), setup_fix(engine))],
    };
    // containerd's own view (imports merged, defaults filled) beats our
    // reading of one file; not under --root, where the binary is not the one
    // that will read the file.
    let mut checks = Vec::new();
    let mut text = text;
    let mut source = path.display().to_string();
    if ctx.search_path {
        if let Some(bin) = on_path("containerd") {
            match containerd_dump(&bin, &path) {
                Ok(dump) => {
                    text = dump;
                    source = format!("{} (as `containerd config dump` merges it)", path.display());
                }
                Err(why) => checks.push(Check::problem(
                    what,
                    format!("`containerd --config {} config dump` fails: {why}", path.display()),
                    "fix the config until `containerd config dump` accepts it",
                )),
            }
        }
    }
    let path = PathBuf::from(source);
    let doc: toml::Table = match toml::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            let msg = e.message().to_string();
            return vec![Check::problem(
                what,
                format!("{}: invalid TOML: {msg}", path.display()),
                "fix the file",
            )];
        }
    };
    let plugin = match doc.get("version").and_then(toml::Value::as_integer) {
        Some(2) => CRI_PLUGIN_V2,
        Some(3) => CRI_PLUGIN_V3,
        v => {
            return vec![Check::problem(
                what,
                format!("{}: config version {v:?} is not 2 or 3", path.display()),
                "convert the config to version 2 (containerd 1.x) or 3 (containerd 2.x)",
            )]
        }
    };
    let ctd = doc.get("plugins").and_then(|p| p.get(plugin)).and_then(|c| c.get("containerd"));
    let runtimes = ctd.and_then(|c| c.get("runtimes")).and_then(toml::Value::as_table);
    let ours = runtimes.and_then(|r| r.get(RUNTIME_NAME));
    match ours {
        None => checks.push(Check::problem(
            what,
            format!("{} has no plugins.\"{plugin}\".containerd.runtimes.{RUNTIME_NAME}", path.display()),
            setup_fix(engine),
        )),
        Some(rt) => {
            let rtype = rt.get("runtime_type").and_then(toml::Value::as_str);
            let binary = rt.get("options").and_then(|o| o.get("BinaryName")).and_then(toml::Value::as_str);
            match (rtype, binary) {
                (Some("io.containerd.runc.v2"), Some(b)) => checks.push(wrapper_check(engine, ctx, &path, b)),
                _ => checks.push(Check::problem(
                    what,
                    format!(
                        "{}: runtime {RUNTIME_NAME} needs runtime_type = \"io.containerd.runc.v2\" and options.BinaryName",
                        path.display()
                    ),
                    setup_fix(engine),
                )),
            }
        }
    }
    let default =
        ctd.and_then(|c| c.get("default_runtime_name")).and_then(toml::Value::as_str).unwrap_or("runc");
    if let Some(r) = runtimes {
        if !r.contains_key(default) {
            checks.push(Check::problem(
                what,
                format!(
                    "{}: default_runtime_name {default:?} is not among the configured runtimes, so the CRI plugin \
                     will not load",
                    path.display()
                ),
                format!("add [plugins.\"{plugin}\".containerd.runtimes.{default}] or {}", setup_fix(engine)),
            ));
        }
    }
    checks
}

/// `containerd --config PATH config dump`, bounded to ten seconds.
fn containerd_dump(bin: &Path, config: &Path) -> Result<String, String> {
    use std::process::{Command, Stdio};
    let mut child = Command::new(bin)
        .arg("--config")
        .arg(config)
        .args(["config", "dump"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("timed out".into());
            }
        }
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(err.lines().last().unwrap_or("failed").trim().to_string());
    }
    String::from_utf8(out.stdout).map_err(|_| "not UTF-8".into())
}

/// The wrapper execs the host config's `runtime_path`, else `runc` on PATH.
fn real_runtime_check(ctx: &Context, settings: Option<&Settings>) -> Check {
    let what = "runtime";
    match settings.and_then(|s| s.runtime_path.clone()) {
        Some(p) => {
            if setup::rooted(&ctx.root, &p).is_file() {
                Check::ok(what, format!("the wrapper runs {} (runtime_path)", p.display()))
            } else {
                Check::problem(
                    what,
                    format!("runtime_path {} does not exist", p.display()),
                    "install runc or fix runtime_path in the host config",
                )
            }
        }
        None if !ctx.search_path => {
            Check::ok(what, "the wrapper runs runc from PATH (not checked under --root)")
        }
        None => match on_path("runc") {
            Some(p) => Check::ok(what, format!("the wrapper runs {} (runc on PATH)", p.display())),
            None => Check::problem(
                what,
                "no runc on PATH for the wrapper to run",
                "install runc or set runtime_path in the host config",
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_format() {
        assert_eq!(Check::ok("kernel", "fine").line(), "ok       kernel: fine");
        assert_eq!(Check::problem("docker", "bad", "do x").line(), "problem  docker: bad; fix: do x");
    }

    #[test]
    fn effective_values_name_every_key() {
        let lines = effective_values(&Settings::default());
        let keys: Vec<&str> = lines.iter().map(|l| l.split(" = ").next().unwrap()).collect();
        assert_eq!(
            keys,
            [
                "tmp_size",
                "shm_size",
                "max_tmp_size",
                "max_shm_size",
                "annotations",
                "mode",
                "extra_targets",
                "noexec",
                "nr_inodes",
                "on_error",
                "log_file",
                "log_level",
                "runtime_path"
            ]
        );
        assert!(lines.contains(&"tmp_size = 25%".to_string()), "{lines:?}");
        assert!(lines.contains(&"runtime_path = (unset)".to_string()), "{lines:?}");
    }

    #[test]
    fn kernel_checks_pass_here() {
        // This machine runs kernel 6.x as root (CI too): every probe must work.
        for c in kernel_checks() {
            assert!(c.ok, "{}", c.line());
        }
    }
}
