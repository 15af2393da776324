//! CLI entry: parse, set up logging, run the command, map to an exit code.

use std::process::ExitCode;

use clap::Parser;
use oci_tmpfs_hook::cli::{Cli, Command};
use oci_tmpfs_hook::commands;

fn main() -> ExitCode {
    if std::env::args_os().next().is_some_and(|a| oci_tmpfs_hook::runtime::invoked_as_wrapper(&a)) {
        return commands::runtime::run(std::env::args_os().skip(1).collect());
    }
    let cli = Cli::parse();
    oci_tmpfs_hook::logger::init(log::LevelFilter::Warn);
    match &cli.command {
        Command::Hook { stage, config } => commands::hook::run(*stage, config),
        Command::Explain { bundle, json, config } => commands::explain::run(bundle, *json, config),
        Command::Inject { bundle, stage, hook_path, config } => {
            commands::inject::run(bundle, *stage, hook_path.as_deref(), config.as_deref())
        }
        Command::Setup {
            engine,
            dry_run,
            undo,
            default,
            hook_path,
            runtime_path,
            root,
            hooks_dir,
            daemon_json,
            containerd_config,
        } => commands::setup::run(&commands::setup::Args {
            engine: *engine,
            dry_run: *dry_run,
            undo: *undo,
            default: *default,
            hook_path: hook_path.clone(),
            runtime_path: runtime_path.clone(),
            root: root.clone(),
            hooks_dir: hooks_dir.clone(),
            daemon_json: daemon_json.clone(),
            containerd_config: containerd_config.clone(),
        }),
        Command::Doctor { config, root } => commands::doctor::run(config.as_deref(), root.as_deref()),
        Command::Runtime { args } => commands::runtime::run(args.clone()),
    }
}
