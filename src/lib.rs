//! oci-tmpfs-hook: an OCI runtime hook that gives containers with a read-only
//! root a size-limited, writable `/tmp` (and the temp dirs their environment
//! names) and a bigger `/dev/shm`, mounted by file descriptor inside the
//! container's mount namespace before the user's process starts.
//!
//! Layout: `input` reads, `plan` decides (pure), `apply` mounts (the only
//! syscalls), `bundle` edits `config.json`, `engine` knows each container
//! engine's registration (one file per engine family), `setup` plans and
//! writes a registration, `doctor` checks one, `files` reads and writes
//! files safely, `names` holds shared names and paths, `commands` glue them
//! to the CLI (`cli`).

pub(crate) mod apply;
pub mod bundle;
pub mod cli;
pub mod commands;
pub(crate) mod doctor;
pub(crate) mod engine;
pub(crate) mod files;
pub mod input;
pub(crate) mod landing;
pub mod logger;
pub(crate) mod names;
pub mod node;
pub mod nri;
pub mod plan;
pub mod runtime;
pub mod settings;
pub(crate) mod setup;
pub mod size;
pub(crate) mod spec;
pub(crate) mod spec_mode;
pub mod stage;
pub mod target;

/// The oci-hooks(5) rendering under its former path, which `tests/engines.rs`
/// imports; the code is in [`engine::hooks_dir`].
pub mod registration {
    pub use crate::engine::hooks_dir::oci_hooks_json;
}
