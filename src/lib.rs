//! oci-tmpfs-hook: an OCI runtime hook that gives containers with a read-only
//! root a size-limited, writable `/tmp` (and the temp dirs their environment
//! names) and a bigger `/dev/shm`, mounted by file descriptor inside the
//! container's mount namespace before the user's process starts.
//!
//! Layers, each importing only the ones below it:
//! - [`cli`]: one file per subcommand, its flags and a thin `run`.
//! - the executors, each taking a [`plan::Plan`] from [`plan::plan_for`]:
//!   [`hook`] (by fd in the container's namespace, with the syscall layer),
//!   [`spec`] (tmpfs entries written into `config.json`), [`wrapper`] (the
//!   runtime wrapper that picks one), [`nri`] (the NRI plugin); beside them
//!   [`engine`] (each engine's registration, its changes and checks),
//!   [`node`] (the node installer) and [`doctor`].
//! - [`plan`], pure: what to mount, and [`landing`], the landing rule the
//!   hook and the spec executor share.
//! - values and helpers: [`input`] (bounded reads), [`bundle`]
//!   (`config.json` edits), [`settings`], [`size`], [`target`], [`stage`],
//!   [`names`], [`files`], [`logger`], [`error`].

pub mod bundle;
pub mod cli;
pub(crate) mod doctor;
pub mod engine;
pub mod error;
pub(crate) mod files;
pub(crate) mod hook;
pub mod input;
pub(crate) mod landing;
pub mod logger;
pub(crate) mod names;
pub(crate) mod node;
pub mod nri;
pub mod plan;
pub mod settings;
pub mod size;
pub(crate) mod spec;
pub mod stage;
pub mod target;
pub(crate) mod wrapper;
