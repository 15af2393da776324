//! `node uninstall`: takes out what the state file says install put on the
//! host: each engine's registration (its files given back byte for byte),
//! the files install created (a host config edited since, a backup that
//! differs from the file it restored, is kept), the state file, the
//! directories install created, then restarts what needs it
//! ([`super::restart::after_uninstall`]). Nothing the state file does not
//! name is touched.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use clap::ValueEnum;

use super::{
    apply_engine, plan_engine, preregister, restart, state, write_err, Node, NodeError, HOST_CONFIG,
    STATE_FILE,
};
use crate::engine::change::BACKUP_SUFFIX;
use crate::engine::Engine;
use crate::files;
use crate::names::DEFAULT_CONFIG_PATH;

/// Runs `node uninstall` on the locked host root.
pub(super) fn uninstall(node: &mut Node<'_>) -> Result<(), NodeError> {
    let Some(state) = state::load(node)? else {
        let path = node.on_host(Path::new(STATE_FILE));
        node.say(format!("node: {} is missing: nothing was installed here by node install", path.display()));
        return Ok(());
    };
    node.state = state;
    let mut plans = Vec::new();
    for name in node.state.engines.clone() {
        let engine = Engine::from_str(&name, false).map_err(|_| NodeError::State {
            path: node.on_host(Path::new(STATE_FILE)),
            what: format!("unknown engine {name:?}"),
        })?;
        plans.push((engine, plan_engine(node, engine, true)?));
    }
    for (engine, set) in &plans {
        apply_engine(node, *engine, set, true)?;
        if !set.changes.is_empty() && restart::needs_restart(*engine) {
            node.restarts.push(*engine);
        }
    }
    let preregistered = node.owns(&preregister::entry());
    remove_files(node)?;
    let state_file = node.on_host(Path::new(STATE_FILE));
    fs::remove_file(&state_file).map_err(write_err(&state_file))?;
    node.did(format!("node: removed {}", state_file.display()));
    remove_dirs(node);
    restart::after_uninstall(node, preregistered)?;
    if !node.changed {
        node.say("node: nothing changed");
    }
    Ok(())
}

/// Removes the files install created; a host config edited since, or a
/// backup that differs from the restored file, is kept.
fn remove_files(node: &mut Node<'_>) -> Result<(), NodeError> {
    for host in node.state.files.clone() {
        let real = node.on_host(&host);
        let keep = if host == Path::new(DEFAULT_CONFIG_PATH) {
            let now = files::read_text(&real, 1 << 20).ok().flatten();
            now.is_some_and(|t| t != HOST_CONFIG).then_some("edited since install")
        } else if let Some(original) = backup_of(&host) {
            let restored = fs::read(node.on_host(&original)).ok();
            (fs::read(&real).ok() != restored).then_some("differs from the restored file")
        } else {
            None
        };
        if let Some(why) = keep {
            node.say(format!("node: kept {} ({why})", real.display()));
            continue;
        }
        match fs::remove_file(&real) {
            Ok(()) => node.did(format!("node: removed {}", real.display())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(write_err(&real)(e)),
        }
    }
    node.state.files.clear();
    Ok(())
}

/// The file a setup backup `FILE.bak-oci-tmpfs-hook[.N]` saves.
fn backup_of(path: &Path) -> Option<PathBuf> {
    let text = path.to_str()?;
    let (file, _) = text.split_once(BACKUP_SUFFIX)?;
    Some(PathBuf::from(file))
}

/// Removes the dirs install created, deepest first, when empty.
fn remove_dirs(node: &mut Node<'_>) {
    for host in node.state.dirs.clone().iter().rev() {
        let real = node.on_host(host);
        if fs::remove_dir(&real).is_ok() {
            node.did(format!("node: removed directory {}", real.display()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backup_names_map_to_their_file() {
        assert_eq!(
            backup_of(Path::new("/etc/containerd/config.toml.bak-oci-tmpfs-hook")),
            Some(PathBuf::from("/etc/containerd/config.toml"))
        );
        assert_eq!(
            backup_of(Path::new("/etc/c.toml.bak-oci-tmpfs-hook.2")),
            Some(PathBuf::from("/etc/c.toml"))
        );
        assert_eq!(backup_of(Path::new("/usr/local/bin/oci-tmpfs-hook")), None);
    }
}
