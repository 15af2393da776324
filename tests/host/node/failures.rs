//! The node suite's failure cases (a bad config, a failed first install, a
//! refused restart, a host root that is our own): the installer run as a
//! process of this test (not in the node image), in a private mount namespace
//! where chosen dirs of the machine are bind-mounted into the fake host (a
//! test containerd's socket dir at the path the host's config names) and
//! chosen dirs of the fake host are read-only (a write that fails midway).
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::*;

/// `oci-tmpfs-hook node ACTION --host-root HOST ARGS`, with each of `binds`
/// (dirs of this machine, which must exist under `host` too) bind-mounted at
/// the same path under `host`, and each of `read_only` (dirs under `host`)
/// made read-only; the mounts go with the namespace.
pub fn node_in_ns(host: &Path, action: &str, args: &[&str], binds: &[&Path], read_only: &[&Path]) -> Output {
    let mut script = String::from("set -e; ");
    for b in binds {
        let at = host.join(b.strip_prefix("/").unwrap());
        script.push_str(&format!("mount --bind '{}' '{}'; ", b.display(), at.display()));
    }
    for r in read_only {
        script.push_str(&format!("mount --bind '{0}' '{0}'; mount -o remount,bind,ro '{0}'; ", r.display()));
    }
    script.push_str(&format!(
        "exec '{}' node {action} --host-root '{}'",
        hook_bin().display(),
        host.display()
    ));
    for a in args {
        script.push_str(&format!(" '{a}'"));
    }
    output(Command::new("unshare").args(["--mount", "--propagation", "private", "--", "sh", "-c", &script]))
}

/// stdout and stderr, for a message.
pub fn shown(out: &Output) -> String {
    format!("exit {:?}\nstdout:\n{}stderr:\n{}", out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// The installer's state file on `host`, as JSON (`null` when there is none).
pub fn state_of(host: &Path) -> serde_json::Value {
    let path = host.join("var/lib/oci-tmpfs-hook/node-install.json");
    match std::fs::read(&path) {
        Ok(b) => serde_json::from_slice(&b).unwrap(),
        Err(_) => serde_json::Value::Null,
    }
}

/// The engines the state file says still owe a restart.
pub fn pending(host: &Path) -> Vec<String> {
    let state = state_of(host);
    let list = state["pending_restart"]
        .as_array()
        .unwrap_or_else(|| panic!("{}: the state has no pending_restart list: {state}", host.display()));
    list.iter().filter_map(|v| v.as_str().map(str::to_string)).collect()
}

/// Creates `dir` (a path of this machine) under `host`, as a bind target.
pub fn bind_target(host: &Path, dir: &Path) -> PathBuf {
    let at = host.join(dir.strip_prefix("/").unwrap());
    std::fs::create_dir_all(&at).unwrap();
    at
}
