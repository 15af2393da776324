//! The command line: clap structs whose doc comments are the `--help` text.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::settings::DEFAULT_CONFIG_PATH;
use crate::stage::Stage;

/// Give read-only OCI containers a sized, writable /tmp, their TMPDIR and a
/// bigger /dev/shm, from an OCI runtime hook.
#[derive(Debug, Parser)]
#[command(name = "oci-tmpfs-hook", version, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run as an OCI hook: read the state on stdin, decide, mount.
    Hook {
        /// The stage the hook is registered at. Without it the stage is
        /// inferred, and refused when it cannot be told safely.
        #[arg(long, value_parser = clap::value_parser!(Stage))]
        stage: Option<Stage>,
        /// Host config file.
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
    },
    /// Print what the hook would do for a bundle, changing nothing.
    Explain {
        /// The bundle directory (holds config.json).
        #[arg(long, short = 'b', value_name = "DIR")]
        bundle: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Host config file.
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
    },
    /// Add this hook to a bundle's config.json (for plain runc/crun); idempotent.
    Inject {
        /// The bundle directory (holds config.json).
        #[arg(long, short = 'b', value_name = "DIR")]
        bundle: PathBuf,
        /// The stage to register at.
        #[arg(long, default_value = "prestart", value_parser = clap::value_parser!(Stage))]
        stage: Stage,
        /// Path of the hook binary written into config.json [default: this binary].
        #[arg(long, value_name = "PATH")]
        hook_path: Option<PathBuf>,
        /// Host config file the hook should read (passed as --config).
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
    },
    /// Register the hook with podman, crio, docker or containerd.
    ///
    /// Podman / CRI-O: the hook JSON in the hooks dir. Docker: a runtime in
    /// daemon.json. containerd: a runtime in config.toml. Idempotent; never
    /// restarts a daemon (prints the command).
    Setup {
        /// The engine: podman, crio, docker or containerd.
        #[arg(value_enum)]
        engine: crate::setup::Engine,
        /// Print the change (a diff), write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Remove the registration instead (only what setup added).
        #[arg(long)]
        undo: bool,
        /// Docker, containerd: also make oci-tmpfs the default runtime.
        #[arg(long)]
        default: bool,
        /// Path of the hook binary the engine runs [default: this binary].
        #[arg(long, value_name = "PATH")]
        hook_path: Option<PathBuf>,
        /// Path of the runtime wrapper (Docker, containerd) [default: oci-tmpfs-runtime next to the hook].
        #[arg(long, value_name = "PATH")]
        runtime_path: Option<PathBuf>,
        /// Prefix every default system path with DIR (packaging, tests).
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
        /// Podman, CRI-O: the hooks dir [default: /usr/share/containers/oci/hooks.d; CRI-O: its hooks_dir].
        #[arg(long, value_name = "DIR")]
        hooks_dir: Option<PathBuf>,
        /// Docker: the daemon config [default: /etc/docker/daemon.json].
        #[arg(long, value_name = "PATH")]
        daemon_json: Option<PathBuf>,
        /// containerd: the config [default: /etc/containerd/config.toml].
        #[arg(long, value_name = "PATH")]
        containerd_config: Option<PathBuf>,
    },
    /// Check the kernel, privileges, host config and engine registrations.
    ///
    /// One line per check, `ok` or `problem` with the fix. Exit 0 when all is
    /// well, 1 otherwise.
    Doctor {
        /// Host config file [default: /etc/oci-tmpfs-hook/config.toml].
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
        /// Look for engine configs (and the default host config) under DIR;
        /// engines are then detected by their config files only.
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
    },
    /// Act as an OCI runtime (for Docker and containerd): add the hook to the
    /// bundle on `create`/`run`, then exec the real runtime (the host config's
    /// `runtime_path`, else `runc` on PATH) with ARGS unchanged. Installed as
    /// `oci-tmpfs-runtime`, the binary does this without the `runtime --`.
    #[command(disable_help_flag = true, disable_version_flag = true)]
    Runtime {
        /// The runtime's arguments, e.g. `--root R create --bundle DIR ID`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "ARGS")]
        args: Vec<OsString>,
    },
}

impl clap::builder::ValueParserFactory for Stage {
    type Parser = clap::builder::ValueParser;
    fn value_parser() -> Self::Parser {
        clap::builder::ValueParser::new(|s: &str| s.parse::<Stage>())
    }
}

/// The host config path and whether it was named explicitly.
pub fn config_path(flag: &Option<PathBuf>) -> (PathBuf, bool) {
    match flag {
        Some(p) => (p.clone(), true),
        None => (PathBuf::from(DEFAULT_CONFIG_PATH), false),
    }
}
