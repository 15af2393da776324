//! oci-tmpfs-hook: an OCI runtime hook that gives containers with a read-only
//! root a size-limited, writable `/tmp` (and the temp dirs their environment
//! names) and a bigger `/dev/shm`, mounted by file descriptor inside the
//! container's mount namespace before the user's process starts.
//!
//! Layout: `input` reads, `plan` decides (pure), `apply` mounts (the only
//! syscalls), `bundle` edits `config.json`, `commands` glue them to the CLI.

pub mod apply;
pub mod bundle;
pub mod cli;
pub mod commands;
pub mod doctor;
pub mod files;
pub mod input;
pub mod logger;
pub mod names;
pub mod plan;
pub mod registration;
pub mod runtime;
pub mod settings;
pub mod setup;
pub mod size;
pub mod stage;
pub mod target;
