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
        Command::Runtime { args } => commands::runtime::run(args.clone()),
    }
}
