//! The record of what `node install` put on the host ([`Installed`], the
//! state file [`super::STATE_FILE`]), read and written under the lock, so
//! that uninstall takes out exactly that.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Node, NodeError, STATE_FILE};
use crate::files::{self, Durability, Perms};

/// What install put on the host: host paths (as the host sees them).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Installed {
    /// Files install created (binary, wrapper, host config, backups).
    pub files: Vec<PathBuf>,
    /// Directories install created, parents first.
    pub dirs: Vec<PathBuf>,
    /// Engines whose registration install wrote.
    pub engines: Vec<String>,
    /// Files install would have written that were already there (the right
    /// bytes, or a host config of the host's own): left at uninstall.
    #[serde(default)]
    pub found: Vec<PathBuf>,
    /// Engines whose config changed and whose restart has not succeeded
    /// yet: restarted at the next install, until one succeeds.
    #[serde(default)]
    pub pending_restart: Vec<String>,
}

impl Installed {
    pub(super) fn add_file(&mut self, p: &Path) {
        self.found.retain(|f| f != p);
        if !self.files.iter().any(|f| f == p) {
            self.files.push(p.to_path_buf());
        }
    }

    pub(super) fn owns(&self, p: &Path) -> bool {
        self.files.iter().any(|f| f == p)
    }

    /// Records a file that was there before install: uninstall leaves it.
    pub(super) fn add_found(&mut self, p: &Path) {
        if !self.owns(p) && !self.found.iter().any(|f| f == p) {
            self.found.push(p.to_path_buf());
        }
    }

    pub(super) fn pending(&self, engine: &str) -> bool {
        self.pending_restart.iter().any(|e| e == engine)
    }

    pub(super) fn set_pending(&mut self, engine: &str, pending: bool) {
        self.pending_restart.retain(|e| e != engine);
        if pending {
            self.pending_restart.push(engine.to_string());
        }
    }
}

/// Reads the state file, `None` when there is none.
pub(super) fn load(node: &Node<'_>) -> Result<Option<Installed>, NodeError> {
    let path = node.on_host(Path::new(STATE_FILE));
    let Some(text) = files::read_text(&path, 1 << 20)? else { return Ok(None) };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| NodeError::State { path, what: format!("not a node-install state file: {e}") })
}

/// Writes the state file when it changed.
pub(super) fn save(node: &mut Node<'_>, old: Option<&Installed>) -> Result<(), NodeError> {
    if old == Some(&node.state) {
        return Ok(());
    }
    let file = Path::new(STATE_FILE);
    node.make_dirs(file.parent().expect("the state file has a parent"))?;
    let path = node.on_host(file);
    let mut text = serde_json::to_string_pretty(&node.state).expect("serialising the state");
    text.push('\n');
    files::replace(&path, text.as_bytes(), Perms::new(0o644), Durability::Durable)?;
    let verb = if old.is_some() { "updated" } else { "created" };
    node.did(format!("node: {verb} {} (what install added, for uninstall)", path.display()));
    Ok(())
}
