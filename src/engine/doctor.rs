//! The checks the `doctor` command prints: what a platform engineer runs after installing, or when a
//! container still fails. Each check gives `ok` or `problem` plus the fix.
//!
//! The kernel checks really call what the hook needs, harmlessly, through
//! the syscall layer's probes ([`crate::sys::probe`]). Nothing here mounts
//! or writes. The registration checks are the
//! engines' own ([`crate::engine::Registrar::check`]): this module only loops
//! over the engines it finds, and parses no engine config itself.

use rustix::io::Errno;
use serde_json::Value;

use crate::engine::check::{Check, Context};
use crate::engine::{on_path, Engine, Way};
use crate::host_config::HostConfig;
use crate::names::rooted;
use crate::sys::probe;

/// Every check, in report order.
pub(crate) fn run_all(ctx: &Context) -> Vec<Check> {
    let mut checks = kernel_checks();
    checks.extend(privilege_checks());
    let (config_check, host_config) = config_check(ctx);
    checks.push(config_check);
    let engines: Vec<(Engine, String)> =
        Engine::all().iter().filter_map(|&e| Some((e, e.detect(&ctx.root, ctx.search_path)?))).collect();
    if engines.is_empty() {
        let known: Vec<String> = Engine::all().iter().map(Engine::to_string).collect();
        checks.push(Check::ok("engines", format!("none found ({}); nothing to check", known.join(", "))));
    }
    for (engine, why) in &engines {
        checks.push(Check::ok(&engine.to_string(), format!("found ({why})")));
        checks.extend(engine.registrar().check(ctx));
    }
    if engines.iter().any(|(e, _)| e.way() == Way::RuntimeWrapper) {
        checks.push(real_runtime_check(ctx, host_config.as_ref()));
    }
    checks
}

// ---------------------------------------------------------------------------
// Kernel and privileges.

fn errno_fix(e: Errno, min_kernel: &str) -> String {
    match e {
        Errno::NOSYS => format!("the kernel lacks it: use Linux {min_kernel} or newer"),
        Errno::PERM | Errno::ACCESS => {
            "run as root with CAP_SYS_ADMIN (the engines run the hook that way); a seccomp filter may also block it"
                .into()
        }
        _ => "check seccomp/LSM policy for this process".into(),
    }
}

/// openat2 / fsopen / pidfd_open, each really called ([`probe`]).
pub(crate) fn kernel_checks() -> Vec<Check> {
    let check = |name: &str, min_kernel: &str, result: Result<(), Errno>| match result {
        Ok(()) => Check::ok("kernel", format!("{name} works")),
        Err(e) => Check::problem("kernel", format!("{name} fails: {e}"), errno_fix(e, min_kernel)),
    };
    vec![
        check("openat2(RESOLVE_IN_ROOT)", "5.6", probe::openat2_in_root()),
        match probe::fsopen_tmpfs() {
            Ok(()) => {
                Check::ok("kernel", "fsopen(\"tmpfs\") works (new mount API: fsconfig/fsmount/move_mount)")
            }
            Err(e) => Check::problem("kernel", format!("fsopen(\"tmpfs\") fails: {e}"), errno_fix(e, "5.2")),
        },
        check("pidfd_open", "5.3", probe::pidfd_open_self()),
    ]
}

/// Root and CAP_SYS_ADMIN (the engines run the hook as root).
pub(crate) fn privilege_checks() -> Vec<Check> {
    let root = probe::is_root();
    let what = "privileges";
    vec![match (root, probe::has_sys_admin()) {
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
pub(crate) fn config_check(ctx: &Context) -> (Check, Option<HostConfig>) {
    let what = "config";
    let path = &ctx.config.path;
    let missing = !path.exists();
    match ctx.config.read() {
        Ok(host_config) => {
            let detail = if missing {
                format!("{} is missing: built-in defaults", path.display())
            } else if host_config.obsolete.is_empty() {
                format!("{} parsed", path.display())
            } else {
                format!(
                    "{} parsed; {} no longer has an effect (the caches under HOME replace it: docs/design.md#home-rule), remove it",
                    path.display(),
                    host_config.obsolete.join(", ")
                )
            };
            let mut check = Check::ok(what, detail);
            check.info = effective_values(&host_config);
            (check, Some(host_config))
        }
        Err(e) => (
            Check::problem(
                what,
                crate::error::chain(&e),
                format!("fix {} (see the example config.toml) or remove it for the defaults", path.display()),
            ),
            None,
        ),
    }
}

/// `key = value` for every setting, in declaration order.
pub(crate) fn effective_values(host_config: &HostConfig) -> Vec<String> {
    let value = serde_json::to_value(host_config).expect("serialising the host config");
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

/// The wrapper execs the host config's `runtime_path`, else `runc` on PATH.
fn real_runtime_check(ctx: &Context, host_config: Option<&HostConfig>) -> Check {
    let what = "runtime";
    match host_config.and_then(|s| s.runtime_path.clone()) {
        Some(p) => {
            if rooted(&ctx.root, &p).is_file() {
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
        let lines = effective_values(&HostConfig::default());
        let keys: Vec<&str> = lines.iter().map(|l| l.split(" = ").next().unwrap()).collect();
        assert_eq!(
            keys,
            [
                "tmp_size",
                "shm_size",
                "max_tmp_size",
                "max_shm_size",
                "home",
                "home_size",
                "max_home_size",
                "home_caches",
                "annotations",
                "mode",
                "extra_targets",
                "env_targets",
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
        let env = lines.iter().find(|l| l.starts_with("env_targets = ")).unwrap();
        assert!(env.starts_with("env_targets = [\"TRITON_CACHE_DIR\",\"TRITON_HOME\","), "{env}");
    }

    #[test]
    fn sys_admin_is_bit_21_of_cap_eff() {
        // The kernel's own account of the effective set, as hex in
        // /proc/self/status; CAP_SYS_ADMIN is capability 21.
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:")).unwrap().trim();
        let eff = u64::from_str_radix(hex, 16).unwrap();
        assert_eq!(probe::has_sys_admin().unwrap(), eff & (1 << 21) != 0, "CapEff {hex}");
    }

    #[test]
    fn kernel_checks_pass_here() {
        // This machine runs kernel 6.x as root (CI too): every probe must work.
        for c in kernel_checks() {
            assert!(c.ok, "{}", c.line());
        }
    }
}
