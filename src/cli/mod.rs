//! The command line: one file per subcommand, each holding its clap
//! argument struct (whose doc comments are the `--help` text) and a thin
//! `run` that turns the arguments into a library request, calls the library
//! and prints the result; no handler prints its own error
//! ([`print_error`] prints the chain once, for `main`). Usage
//! errors are clap's (exit 2), including the few rules clap cannot express
//! by itself ([`parse`]). Nothing below this module imports it.

pub(crate) mod doctor;
pub(crate) mod engines;
pub(crate) mod explain;
pub(crate) mod hook;
pub(crate) mod inject;
pub(crate) mod node;
pub(crate) mod nri;
pub(crate) mod runtime;
pub(crate) mod setup;
pub(crate) mod usage;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};

use crate::error::{chain, Error, EXIT_FAILED};
use crate::input::HostConfigSource;
use crate::stage::Stage;
use doctor::DoctorArgs;
use engines::EnginesArgs;
use explain::ExplainArgs;
use hook::HookArgs;
use inject::InjectArgs;
use node::NodeArgs;
use nri::NriArgs;
use runtime::RuntimeArgs;
use setup::SetupArgs;
use usage::UsageArgs;

/// Give read-only OCI containers a sized, writable /tmp, their TMPDIR and a
/// bigger /dev/shm, from an OCI runtime hook.
#[derive(Debug, Parser)]
#[command(name = "oci-tmpfs-hook", version, propagate_version = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run as an OCI hook: read the state on stdin, decide, mount.
    Hook(HookArgs),
    /// Print what the hook would do for a bundle, or for the pods of a
    /// Kubernetes manifest (--manifest), changing nothing.
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
    /// containerd when its config changed or its CRI lacks the handler (a
    /// failed restart stays pending); `--nri` pre-registers the NRI plugin.
    Node(NodeArgs),
    /// Run as an NRI plugin (containerd 2.x, CRI-O): answer each read-only
    /// container's creation with our hook, which mounts by fd in the container.
    /// Long-running; redials the runtime's socket whenever it goes away.
    Nri(NriArgs),
    /// Show how full each running container's tmpfs of ours and /dev/shm
    /// are, with its cgroup's shmem and memory limit (as root, on the host).
    ///
    /// A table, fullest first, `!` past 90%; a warning on stderr for each
    /// such target, naming the setting that sizes it.
    Usage(UsageArgs),
}

/// The host config flag, shared by the commands that read the host config.
#[derive(Clone, Debug, Default, Args)]
pub(crate) struct HostConfigArg {
    /// Host config file [default: /etc/oci-tmpfs-hook/config.toml].
    #[arg(long = "config", value_name = "PATH")]
    pub path: Option<PathBuf>,
}

impl HostConfigArg {
    /// Where the host config is, the default under `root` ("/" on a live
    /// system) when no `--config` was given.
    pub(crate) fn source(&self, root: &Path) -> HostConfigSource {
        HostConfigSource::new(self.path.as_deref(), root)
    }
}

/// `--root` when it is not the live system: detect engines by files only.
pub(crate) fn search_path(root: Option<&Path>) -> bool {
    root.is_none_or(|r| r == Path::new("/"))
}

/// Parses the command line; usage errors print clap's message and exit 2.
pub(crate) fn parse() -> Cli {
    let cli = Cli::parse();
    match &cli.command {
        // clap's `requires` lets this through beside the required group.
        Command::Explain(args) if args.node_memory.is_some() && args.manifest.is_none() => usage_error(
            "explain",
            clap::error::ErrorKind::MissingRequiredArgument,
            "--node-memory needs --manifest",
        ),
        Command::Setup(args) => {
            if let Some(msg) = args.misplaced() {
                usage_error("setup", clap::error::ErrorKind::ArgumentConflict, msg);
            }
        }
        _ => {}
    }
    cli
}

/// A usage error of `subcommand` that clap cannot express by itself, in
/// clap's words and with its exit code (2).
fn usage_error(subcommand: &str, kind: clap::error::ErrorKind, msg: impl std::fmt::Display) -> ! {
    let mut cli = Cli::command();
    cli.build();
    let sub = cli.find_subcommand_mut(subcommand).expect("a subcommand of ours");
    sub.error(kind, msg).exit()
}

/// Prints `oci-tmpfs-hook: [container ID: ]a: b: c` on stderr (and in the
/// log file) and returns exit 1.
pub fn print_error(err: &(dyn std::error::Error + '_)) -> ExitCode {
    let line = crate::process::logger::prefixed(crate::process::logger::container(), &chain(err));
    // One write(2), as the logger's lines: `eprintln!` writes the newline
    // apart, and a runtime reading the hook's stderr may split there.
    let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{line}\n").as_bytes());
    crate::process::logger::file_only(&line);
    ExitCode::from(EXIT_FAILED)
}

/// The process: as `oci-tmpfs-runtime` (argv\[0\]'s file name), the
/// runtime wrapper with every argument; else the parsed command.
///
/// # Errors
/// What the command fails with.
pub fn try_main() -> Result<ExitCode, Error> {
    let mut argv = std::env::args_os();
    let argv0 = argv.next();
    let args: Vec<_> = argv.collect();
    if argv0.as_ref().is_some_and(|a| runtime::invoked_as_wrapper(a)) {
        return runtime::run(&args);
    }
    // A pre-registered NRI plugin: the runtime runs its entry with no
    // argument and the connected socket's fd in the environment.
    if argv0.is_some() && args.is_empty() && std::env::var_os(crate::nri::PLUGIN_SOCKET_ENV).is_some() {
        return run(&Cli::parse_from(["oci-tmpfs-hook", "nri"]));
    }
    if let Some(args) = hook::registered_argv(&args) {
        return hook::run(&args);
    }
    run(&parse())
}

/// Runs the parsed command.
///
/// # Errors
/// What the command fails with.
pub(crate) fn run(cli: &Cli) -> Result<ExitCode, Error> {
    match &cli.command {
        Command::Hook(args) => hook::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Inject(args) => inject::run(args),
        Command::Setup(args) => setup::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Engines(args) => engines::run(args),
        Command::Runtime(args) => runtime::run(&args.args),
        Command::Node(args) => node::run(args),
        Command::Nri(args) => nri::run(args),
        Command::Usage(args) => usage::run(args),
    }
}

/// A value that must be an absolute path (clap's value parser).
pub(crate) fn absolute_path(s: &str) -> Result<PathBuf, String> {
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
pub(crate) mod tests {
    use super::*;

    pub(crate) fn parse_from(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("oci-tmpfs-hook").chain(args.iter().copied()))
    }

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
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
        use crate::names::DEFAULT_CONFIG_PATH;
        let resolve = |c: &HostConfigArg, root: &str| {
            let s = c.source(Path::new(root));
            (s.path, s.explicit)
        };
        let none = HostConfigArg::default();
        assert_eq!(resolve(&none, "/"), (PathBuf::from(DEFAULT_CONFIG_PATH), false));
        assert_eq!(resolve(&none, "/r").0, Path::new("/r/etc/oci-tmpfs-hook/config.toml"));
        let given = HostConfigArg { path: Some("/c.toml".into()) };
        assert_eq!(resolve(&given, "/r"), (PathBuf::from("/c.toml"), true));
    }
}
