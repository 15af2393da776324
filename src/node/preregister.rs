//! `node install --nri`: the NRI plugin pre-registered on a host, so that
//! the runtime starts it itself, before it serves any container
//! (docs/nri.md#pre-registered). Two files, recorded in the node install's
//! state like every other file it writes (uninstall removes them):
//!
//! - `/opt/nri/plugins/90-oci-tmpfs-hook`, a relative symlink to the
//!   installed binary. containerd and CRI-O start each executable entry
//!   `NN-NAME` of that directory at their start, with no argument, the
//!   environment `NRI_PLUGIN_NAME=NAME`, `NRI_PLUGIN_IDX=NN`,
//!   `NRI_PLUGIN_SOCKET=3` and the connected socket as fd 3; the binary runs
//!   `nri` then ([`crate::cli`]).
//! - `/etc/nri/conf.d/oci-tmpfs-hook.conf`, the text the runtime hands the
//!   plugin at `Configure`. The plugin's settings are the host config's; this
//!   file says so.
//!
//! Relative, so that the link resolves the same under `--host-root` and on
//! the host. Not here: the binary's copy ([`super::install`]), the restart
//! that starts or stops the plugin ([`super::restart`]).

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use super::{write_err, Node, NodeError, Put};
use crate::files::{self, Durability, Perms};
use crate::names::{NRI_IDX, NRI_NAME};

/// The runtimes' default directory of pre-registered plugins.
pub(crate) const PLUGINS_DIR: &str = "/opt/nri/plugins";
/// The runtimes' default directory of their configs.
pub(crate) const CONF_DIR: &str = "/etc/nri/conf.d";
/// What the runtime hands the plugin at `Configure`.
pub(crate) const CONF_TEXT: &str = "\
# oci-tmpfs-hook's NRI plugin, pre-registered by `oci-tmpfs-hook node install --nri`
# (/opt/nri/plugins/90-oci-tmpfs-hook). The runtime passes this text to the plugin
# when it starts it; the plugin takes its settings from the host config,
# /etc/oci-tmpfs-hook/config.toml, and ignores this file.
";

/// The plugin's entry in [`PLUGINS_DIR`] (a host path).
pub(crate) fn entry() -> PathBuf {
    Path::new(PLUGINS_DIR).join(format!("{NRI_IDX}-{NRI_NAME}"))
}

/// The plugin's config in [`CONF_DIR`] (a host path).
pub(crate) fn conf() -> PathBuf {
    Path::new(CONF_DIR).join(format!("{NRI_NAME}.conf"))
}

/// The relative symlink target from `link` to `target`, both absolute host
/// paths.
pub(crate) fn relative(link: &Path, target: &Path) -> PathBuf {
    let up =
        link.parent().map_or(0, |p| p.components().filter(|c| matches!(c, Component::Normal(_))).count());
    let mut rel: PathBuf = std::iter::repeat_n("..", up).collect();
    rel.push(target.strip_prefix("/").unwrap_or(target));
    rel
}

/// The plugin's two files, with what install does to each, worked out
/// before any write.
#[derive(Debug)]
pub(crate) struct PluginFiles {
    /// The entry's link target (relative).
    target: PathBuf,
    entry: Put,
    conf: Put,
}

impl PluginFiles {
    /// The files (host paths) with what install does to each, for its record.
    pub(crate) fn puts(&self) -> Vec<(PathBuf, Put)> {
        vec![(entry(), self.entry), (conf(), self.conf)]
    }

    /// Whether the entry is new or changed: the runtime starts it at its next start.
    pub(crate) fn entry_changes(&self) -> bool {
        self.entry != Put::Same
    }
}

/// Reads what is there: the entry (a link to `binary`, a host path) and the
/// config. Writes nothing.
///
/// # Errors
/// A file there that install did not put.
pub(crate) fn look(node: &Node<'_>, binary: &Path) -> Result<PluginFiles, NodeError> {
    let entry = entry();
    let target = relative(&entry, binary);
    let real = node.on_host(&entry);
    let entry_put = match fs::read_link(&real) {
        Ok(t) if t == target => Put::Same,
        Ok(_) if node.owns(&entry) => Put::Replace,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Put::Create,
        _ => return Err(NodeError::NotOurs { path: real }),
    };
    let conf = conf();
    let real = node.on_host(&conf);
    let conf_put = match files::read_text(&real, 1 << 20)? {
        Some(t) if t == CONF_TEXT => Put::Same,
        Some(_) if !node.owns(&conf) => return Err(NodeError::NotOurs { path: real }),
        Some(_) => Put::Replace,
        None => Put::Create,
    };
    Ok(PluginFiles { target, entry: entry_put, conf: conf_put })
}

/// Writes what [`look`] found missing or changed.
///
/// # Errors
/// A write failed.
pub(crate) fn put(node: &mut Node<'_>, plugin: &PluginFiles) -> Result<(), NodeError> {
    let real = node.on_host(&entry());
    if plugin.entry == Put::Same {
        node.say(format!("node: {} -> {}; unchanged", real.display(), plugin.target.display()));
    } else {
        node.make_dirs(Path::new(PLUGINS_DIR))?;
        if plugin.entry == Put::Replace {
            fs::remove_file(&real).map_err(write_err(&real))?;
        }
        std::os::unix::fs::symlink(&plugin.target, &real).map_err(write_err(&real))?;
        node.did(format!(
            "node: created {} -> {} (the pre-registered NRI plugin)",
            real.display(),
            plugin.target.display()
        ));
    }
    let real = node.on_host(&conf());
    if plugin.conf == Put::Same {
        node.say(format!("node: {} unchanged", real.display()));
    } else {
        node.make_dirs(Path::new(CONF_DIR))?;
        files::replace(&real, CONF_TEXT.as_bytes(), Perms::new(0o644), Durability::Durable)?;
        node.did(format!("node: wrote {} (the plugin's NRI config)", real.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_links_back_to_the_binary_relatively() {
        let entry = entry();
        assert_eq!(entry, Path::new("/opt/nri/plugins/90-oci-tmpfs-hook"));
        let rel = relative(&entry, Path::new("/usr/local/bin/oci-tmpfs-hook"));
        assert_eq!(rel, Path::new("../../../usr/local/bin/oci-tmpfs-hook"));
        // Resolved from the entry's directory, it is the binary.
        let mut at = PathBuf::from("/opt/nri/plugins");
        for c in rel.components() {
            match c {
                Component::ParentDir => {
                    at.pop();
                }
                Component::Normal(n) => at.push(n),
                _ => panic!("{rel:?}"),
            }
        }
        assert_eq!(at, Path::new("/usr/local/bin/oci-tmpfs-hook"));
    }

    #[test]
    fn names_follow_the_runtimes_rules() {
        let file = entry().file_name().unwrap().to_string_lossy().into_owned();
        let (idx, base) = file.split_once('-').unwrap();
        assert!(crate::nri::stub::session::valid_idx(idx));
        assert_eq!(base, NRI_NAME);
        assert_eq!(conf(), Path::new("/etc/nri/conf.d/oci-tmpfs-hook.conf"));
    }
}
