//! The command line: one clap argument struct per subcommand, whose doc
//! comments are the `--help` text, each passed whole to its handler in
//! [`crate::commands`]. Usage errors are clap's (exit 2), including the few
//! rules clap cannot express by itself ([`parse`]). No behaviour here.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{Args, CommandFactory, Parser, Subcommand};

use crate::engine::{Engine, Site, Way};
use crate::names::{rooted, DEFAULT_CONFIG_PATH};
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
    Hook(HookArgs),
    /// Print what the hook would do for a bundle, changing nothing.
    Explain(ExplainArgs),
    /// Add this hook to a bundle's config.json (for plain runc/crun); idempotent.
    Inject(InjectArgs),
    /// Register the hook with podman, crio, docker or containerd.
    ///
    /// Podman / CRI-O: the hook JSON in the hooks dir. Docker: a runtime in
    /// daemon.json. containerd: a runtime in config.toml. Idempotent; never
    /// restarts a daemon (prints the command).
    Setup(SetupArgs),
    /// Check the kernel, privileges, host config and engine registrations.
    ///
    /// One line per check, `ok` or `problem` with the fix. Exit 0 when all is
    /// well, 1 otherwise.
    Doctor(DoctorArgs),
    /// List the engines installed on this host, one per line (what setup and
    /// install.sh register with).
    Engines(EnginesArgs),
    /// Act as an OCI runtime (for Docker and containerd): on `create`/`run`,
    /// write the plan's mounts into the bundle's config.json (host config
    /// `mode = "hook"`: add the hook instead), then exec the real runtime (the
    /// host config's `runtime_path`, else `runc` on PATH) with ARGS unchanged.
    /// Installed as `oci-tmpfs-runtime`, the binary does this without the
    /// `runtime --`; `OCI_TMPFS_HOOK_CONFIG` names another host config.
    #[command(disable_help_flag = true, disable_version_flag = true)]
    Runtime(RuntimeArgs),
    /// Install onto a Kubernetes node from a container that mounts the host's
    /// root (`node install --host-root /host`), or uninstall; restarts
    /// containerd only when its config changed.
    Node(crate::node::NodeArgs),
    /// Run as an NRI plugin (containerd 2.x, CRI-O): answer each container's
    /// creation with its tmpfs mounts, grow the pod's /dev/shm on the host.
    /// Long-running; redials the runtime's socket whenever it goes away.
    Nri(NriArgs),
}

/// The host config flag, shared by the commands that read the host config.
#[derive(Clone, Debug, Default, Args)]
pub struct ConfigArg {
    /// Host config file [default: /etc/oci-tmpfs-hook/config.toml].
    #[arg(long = "config", value_name = "PATH")]
    pub path: Option<PathBuf>,
}

impl ConfigArg {
    /// The host config path under `root` ("/" on a live system), and whether
    /// it was named explicitly (a missing default file means defaults).
    pub fn resolve(&self, root: &Path) -> (PathBuf, bool) {
        match &self.path {
            Some(p) => (p.clone(), true),
            None => (rooted(root, Path::new(DEFAULT_CONFIG_PATH)), false),
        }
    }
}

#[derive(Clone, Debug, Args)]
pub struct NriArgs {
    /// The runtime's NRI socket.
    #[arg(long, value_name = "PATH", default_value = crate::nri::DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// The plugin's name, as the runtime lists it.
    #[arg(long, default_value = "oci-tmpfs")]
    pub name: String,
    /// The plugin's index: two digits, its place among the runtime's plugins.
    #[arg(long, default_value = "10")]
    pub idx: String,
    /// The node's directory for the hook, as the runtime sees it: the
    /// plugin copies its own binary and host config there (when they
    /// differ) and each adjustment names DIR/oci-tmpfs-hook with --config
    /// DIR/config.toml. Without it (a plugin on the node itself), the
    /// adjustment names this binary and --config as given.
    #[arg(long, value_name = "DIR", value_parser = absolute_path)]
    pub hook_dir: Option<PathBuf>,
    /// Where the plugin sees --hook-dir (its hostPath mount in a pod, e.g.
    /// /host/opt/oci-tmpfs-hook) [default: --hook-dir].
    #[arg(long, value_name = "DIR", requires = "hook_dir")]
    pub hook_dir_mount: Option<PathBuf>,
    /// No longer used (the hook grows the pod's /dev/shm): accepted so that
    /// an older DaemonSet's args still start.
    #[arg(long, value_name = "DIR", hide = true)]
    pub host_root: Option<PathBuf>,
    #[command(flatten)]
    pub config: ConfigArg,
}

#[derive(Clone, Debug, Args)]
pub struct HookArgs {
    /// The stage the hook is registered at. Without it the stage is
    /// inferred, and refused when it cannot be told safely.
    #[arg(long, value_parser = clap::value_parser!(Stage))]
    pub stage: Option<Stage>,
    #[command(flatten)]
    pub config: ConfigArg,
}

#[derive(Clone, Debug, Args)]
pub struct ExplainArgs {
    /// The bundle directory (holds config.json).
    #[arg(long, short = 'b', value_name = "DIR")]
    pub bundle: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub config: ConfigArg,
    /// The runtime that will run the bundle, for which executor carries
    /// each target [default: runc on PATH].
    #[arg(long, value_name = "PATH", value_parser = absolute_path)]
    pub runtime: Option<PathBuf>,
}

#[derive(Clone, Debug, Args)]
pub struct InjectArgs {
    /// The bundle directory (holds config.json).
    #[arg(long, short = 'b', value_name = "DIR")]
    pub bundle: PathBuf,
    /// The stage to register at.
    #[arg(long, default_value = "prestart", value_parser = clap::value_parser!(Stage))]
    pub stage: Stage,
    /// Path of the hook binary written into config.json [default: this binary].
    #[arg(long, value_name = "PATH", value_parser = absolute_path)]
    pub hook_path: Option<PathBuf>,
    /// Host config file the hook should read (passed as --config); with
    /// `--mode spec`, the one the plan is made from.
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// `hook`: add the hook; `spec`: write the plan's mounts into
    /// config.json now (the rootfs must be in place), no hook at the start.
    #[arg(long, value_enum, default_value = "hook")]
    pub mode: crate::settings::Mode,
    /// With `--mode spec`: the runtime that will run the bundle [default:
    /// runc on PATH]. Temp targets go to the hook on runc before 1.1.8,
    /// which chmods a tmpfs mountpoint by path after mounting it.
    #[arg(long, value_name = "PATH", value_parser = absolute_path)]
    pub runtime: Option<PathBuf>,
}

#[derive(Clone, Debug, Args)]
pub struct SetupArgs {
    /// The engine: podman, crio, docker or containerd.
    #[arg(value_enum)]
    pub engine: Engine,
    /// Print the change (a diff), write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Remove the registration instead (only what setup added).
    #[arg(long)]
    pub undo: bool,
    /// Docker, containerd: also make oci-tmpfs the default runtime.
    #[arg(long)]
    pub default: bool,
    /// Path of the hook binary the engine runs [default: this binary].
    #[arg(long, value_name = "PATH", value_parser = absolute_path)]
    pub hook_path: Option<PathBuf>,
    /// Path of the runtime wrapper (Docker, containerd) [default: oci-tmpfs-runtime next to the hook].
    #[arg(long, value_name = "PATH", value_parser = absolute_path)]
    pub runtime_path: Option<PathBuf>,
    /// Prefix every default system path with DIR (packaging, tests).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Podman, CRI-O: the hooks dir [default: /usr/share/containers/oci/hooks.d; CRI-O: its hooks_dir].
    #[arg(long, value_name = "DIR")]
    pub hooks_dir: Option<PathBuf>,
    /// Docker: the daemon config [default: /etc/docker/daemon.json].
    #[arg(long, value_name = "PATH")]
    pub daemon_json: Option<PathBuf>,
    /// containerd: the config [default: /etc/containerd/config.toml].
    #[arg(long, value_name = "PATH")]
    pub containerd_config: Option<PathBuf>,
}

impl SetupArgs {
    /// Every engine config flag, and its value when given.
    fn config_flags(&self) -> [(&'static str, Option<&Path>); 3] {
        [
            ("--hooks-dir", self.hooks_dir.as_deref()),
            ("--daemon-json", self.daemon_json.as_deref()),
            ("--containerd-config", self.containerd_config.as_deref()),
        ]
    }

    /// Where the engine's files are: `--root` and the engine's config flag.
    pub fn site(&self) -> Site<'_> {
        let flag = self.engine.config_flag();
        let config = self.config_flags().into_iter().find(|(f, _)| *f == flag).and_then(|(_, p)| p);
        Site { root: self.root.as_deref().unwrap_or(Path::new("/")), config }
    }

    /// A flag that does not apply to the engine.
    fn misplaced(&self) -> Option<String> {
        let engine = self.engine;
        let flag = engine.config_flag();
        if let Some((other, _)) = self.config_flags().into_iter().find(|(f, p)| p.is_some() && *f != flag) {
            return Some(format!("{other} does not apply to {engine}"));
        }
        (self.default && engine.way() != Way::RuntimeWrapper)
            .then(|| format!("--default does not apply to {engine}"))
    }
}

#[derive(Clone, Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Look for engine configs (and the default host config) under DIR;
    /// engines are then detected by their config files only.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
}

#[derive(Clone, Debug, Args)]
pub struct EnginesArgs {
    /// Look under DIR: engines are then detected by their config files only,
    /// not by their binaries on PATH.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Every engine this binary knows, installed or not.
    #[arg(long)]
    pub all: bool,
}

#[derive(Clone, Debug, Args)]
pub struct RuntimeArgs {
    /// The runtime's arguments, e.g. `--root R create --bundle DIR ID`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "ARGS")]
    pub args: Vec<OsString>,
}

/// `--root` when it is not the live system: detect engines by files only.
pub fn search_path(root: Option<&Path>) -> bool {
    root.is_none_or(|r| r == Path::new("/"))
}

/// Parses the command line; usage errors print clap's message and exit 2.
pub fn parse() -> Cli {
    let cli = Cli::parse();
    if let Command::Setup(args) = &cli.command {
        if let Some(msg) = args.misplaced() {
            let mut cli = Cli::command();
            cli.build();
            let setup = cli.find_subcommand_mut("setup").expect("setup is a subcommand");
            setup.error(clap::error::ErrorKind::ArgumentConflict, msg).exit();
        }
    }
    cli
}

fn absolute_path(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    if p.is_absolute() {
        Ok(p)
    } else {
        Err("must be an absolute path".into())
    }
}

impl clap::builder::ValueParserFactory for Stage {
    type Parser = clap::builder::ValueParser;
    fn value_parser() -> Self::Parser {
        clap::builder::ValueParser::new(|s: &str| s.parse::<Stage>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_from(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("oci-tmpfs-hook").chain(args.iter().copied()))
    }

    fn setup(args: &[&str]) -> SetupArgs {
        match parse_from(&[&["setup"], args].concat()).unwrap().command {
            Command::Setup(a) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn setup_flags_that_do_not_apply() {
        assert_eq!(
            setup(&["podman", "--daemon-json", "/x"]).misplaced().as_deref(),
            Some("--daemon-json does not apply to podman")
        );
        assert_eq!(
            setup(&["crio", "--default"]).misplaced().as_deref(),
            Some("--default does not apply to crio")
        );
        assert_eq!(setup(&["docker", "--default", "--daemon-json", "/x"]).misplaced(), None);
        assert_eq!(setup(&["crio", "--hooks-dir", "/h"]).site().config, Some(Path::new("/h")));
        assert_eq!(setup(&["containerd"]).site().root, Path::new("/"));
    }

    #[test]
    fn relative_binary_paths_are_usage_errors() {
        let err = parse_from(&["setup", "docker", "--hook-path", "relative/bin"]).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(parse_from(&["inject", "-b", "/b", "--hook-path", "x"]).is_err());
        assert!(parse_from(&["inject", "-b", "/b", "--hook-path", "/x"]).is_ok());
    }

    #[test]
    fn config_default_moves_under_root() {
        let none = ConfigArg::default();
        assert_eq!(none.resolve(Path::new("/")), (PathBuf::from(DEFAULT_CONFIG_PATH), false));
        assert_eq!(none.resolve(Path::new("/r")).0, Path::new("/r/etc/oci-tmpfs-hook/config.toml"));
        let given = ConfigArg { path: Some("/c.toml".into()) };
        assert_eq!(given.resolve(Path::new("/r")), (PathBuf::from("/c.toml"), true));
    }
}
