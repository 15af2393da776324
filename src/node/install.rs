//! `node install`: everything it writes is worked out first ([`look`]:
//! this binary, the wrapper link, the host config, each engine's setup or,
//! with `--nri`, the pre-registered plugin's files), then recorded in the
//! state file, then written ([`apply`]), then the runtimes that need it are
//! restarted ([`super::restart::after_install`]). Not here: taking it out
//! again ([`super::uninstall`]), the engine formats ([`crate::engine`]).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::preregister::{self, PluginFiles};
use super::{
    apply_engine, plan_engine, restart, state, write_err, Node, NodeError, Put, BINARY_NAME, HOST_CONFIG,
    NODE_ENGINES,
};
use crate::engine::change::ChangeSet;
use crate::engine::Engine;
use crate::files::{self, Durability, Perms};
use crate::names::DEFAULT_CONFIG_PATH;

/// Largest binary copied (the static release build is a few MiB; a debug
/// build with debug info, which the tests install, is about 90 MiB).
const MAX_BINARY_BYTES: u64 = 256 << 20;

/// Everything an install writes (the files to put, the engine edits to
/// make), worked out before its first write.
struct Writes {
    /// This binary: its path and bytes.
    this: PathBuf,
    bytes: Vec<u8>,
    binary: Put,
    wrapper: Put,
    host_config: Put,
    engines: Vec<(Engine, ChangeSet)>,
    /// `--nri`: the pre-registered plugin's entry and config.
    nri: Option<PluginFiles>,
}

/// Runs `node install` on the locked host root.
pub(super) fn install(node: &mut Node<'_>) -> Result<(), NodeError> {
    let old = state::load(node)?;
    node.state = old.clone().unwrap_or_default();
    // Every read, parse and plan first: a config that does not parse, a file
    // that is not ours, stops the run before anything is written.
    let writes = look(node)?;
    record(node, &writes);
    // The record is on the host before the files it names: a run cut short
    // leaves every file it may have written recorded, for uninstall.
    state::save(node, old.as_ref())?;
    let saved = node.state.clone();
    apply(node, &writes)?;
    state::save(node, Some(&saved))?;
    restart::after_install(node)?;
    if !node.changed {
        node.say("node: nothing changed");
    }
    Ok(())
}

/// Reads what is there and works out what to write; writes nothing.
fn look(node: &mut Node<'_>) -> Result<Writes, NodeError> {
    let this = files::this_binary().map_err(NodeError::ThisBinary)?;
    let bytes = files::read(None, &this, MAX_BINARY_BYTES)?.bytes;
    let binary = plan_binary(node, &bytes)?;
    let wrapper = plan_wrapper(node)?;
    let host_config = plan_host_config(node);
    let found: Vec<Engine> =
        NODE_ENGINES.into_iter().filter(|e| e.detect(&node.args.host_root, false).is_some()).collect();
    let nri = if node.args.nri { Some(preregister::look(node, &node.hook())?) } else { None };
    if nri.is_none() && found.is_empty() {
        node.say(format!(
            "node: no containerd or CRI-O config under {}: no engine registered",
            node.args.host_root.display()
        ));
    }
    let mut engines = Vec::new();
    for engine in found.into_iter().filter(|_| nri.is_none()) {
        engines.push((engine, plan_engine(node, engine, false)?));
    }
    Ok(Writes { this, bytes, binary, wrapper, host_config, engines, nri })
}

/// Puts into the state what [`look`] will write (and what it found right),
/// so that it is recorded before it is written.
fn record(node: &mut Node<'_>, writes: &Writes) {
    let own = [
        (node.hook(), writes.binary),
        (node.wrapper(), writes.wrapper),
        (PathBuf::from(DEFAULT_CONFIG_PATH), writes.host_config),
    ];
    let nri = writes.nri.as_ref().map(PluginFiles::puts).unwrap_or_default();
    for (host, put) in own.into_iter().chain(nri) {
        if put == Put::Same {
            node.state.add_found(&host);
        } else {
            node.note_missing_dirs(&host);
            node.state.add_file(&host);
        }
    }
    for (engine, set) in &writes.engines {
        for change in &set.changes {
            let host = node.host_path(&change.path);
            if change.before.is_none() {
                node.note_missing_dirs(&host);
                node.state.add_file(&host);
            }
            if let Some(b) = &change.backup {
                if !b.exists() {
                    node.state.add_file(&node.host_path(b));
                }
            }
        }
        let name = engine.to_string();
        if !node.state.engines.contains(&name) {
            node.state.engines.push(name.clone());
        }
        if !set.changes.is_empty() && restart::needs_restart(*engine) {
            node.state.set_pending(&name, true);
            node.restarts.push(*engine);
        }
    }
    if writes.nri.as_ref().is_some_and(PluginFiles::entry_changes) {
        node.state.set_pending(restart::PREREGISTERED, true);
    }
}

/// Writes what [`look`] worked out.
fn apply(node: &mut Node<'_>, writes: &Writes) -> Result<(), NodeError> {
    let bin_dir = node.args.bin_dir.clone();
    node.make_dirs(&bin_dir)?;
    let real = node.on_host(&node.hook());
    if writes.binary != Put::Same {
        files::replace(&real, &writes.bytes, Perms::new(0o755), Durability::Durable)?;
        let verb = if writes.binary == Put::Replace { "updated" } else { "created" };
        node.did(format!("node: {verb} {} (copied from {})", real.display(), writes.this.display()));
    }
    let real = node.on_host(&node.wrapper());
    if writes.wrapper != Put::Same {
        if writes.wrapper == Put::Replace {
            fs::remove_file(&real).map_err(write_err(&real))?;
        }
        std::os::unix::fs::symlink(BINARY_NAME, &real).map_err(write_err(&real))?;
        node.did(format!("node: created {} -> {BINARY_NAME}", real.display()));
    }
    if writes.host_config != Put::Same {
        let host = PathBuf::from(DEFAULT_CONFIG_PATH);
        node.make_dirs(host.parent().expect("the host config has a parent"))?;
        let real = node.on_host(&host);
        files::replace(&real, HOST_CONFIG.as_bytes(), Perms::new(0o644), Durability::Durable)?;
        node.did(format!("node: created {} (the commented defaults)", real.display()));
    }
    for (engine, set) in &writes.engines {
        apply_engine(node, *engine, set, false)?;
    }
    if let Some(nri) = &writes.nri {
        preregister::put(node, nri)?;
    }
    Ok(())
}

/// This binary at the host's `--bin-dir`: there already, to create, or ours
/// to update; another file there is refused.
fn plan_binary(node: &mut Node<'_>, bytes: &[u8]) -> Result<Put, NodeError> {
    let host = node.hook();
    let real = node.on_host(&host);
    match files::read(None, &real, MAX_BINARY_BYTES) {
        Ok(c) if c.bytes == bytes => {
            node.say(format!("node: {} is this binary; unchanged", real.display()));
            Ok(Put::Same)
        }
        Ok(_) if node.state.owns(&host) => Ok(Put::Replace),
        Ok(_) => Err(NodeError::NotOurs { path: real }),
        Err(e) if e.is_not_found() => Ok(Put::Create),
        Err(e) => Err(e.into()),
    }
}

/// The wrapper symlink `oci-tmpfs-runtime -> oci-tmpfs-hook` next to it.
fn plan_wrapper(node: &mut Node<'_>) -> Result<Put, NodeError> {
    let host = node.wrapper();
    let real = node.on_host(&host);
    match fs::read_link(&real) {
        Ok(target) if target == Path::new(BINARY_NAME) => {
            node.say(format!("node: {} -> {BINARY_NAME}; unchanged", real.display()));
            Ok(Put::Same)
        }
        Ok(_) if node.state.owns(&host) => Ok(Put::Replace),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Put::Create),
        _ => Err(NodeError::NotOurs { path: real }),
    }
}

/// The commented host config, when the host has none.
fn plan_host_config(node: &mut Node<'_>) -> Put {
    let real = node.on_host(Path::new(DEFAULT_CONFIG_PATH));
    if fs::symlink_metadata(&real).is_ok() {
        node.say(format!("node: {} exists; unchanged", real.display()));
        return Put::Same;
    }
    Put::Create
}
