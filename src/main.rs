//! CLI entry: parse, set up logging, run the command, print its error once
//! and map the outcome to an exit code (0 done or nothing to do, 1 failed,
//! 2 usage, which clap reports itself).

use std::process::ExitCode;

use oci_tmpfs_hook::cli::{self, Command};
use oci_tmpfs_hook::commands::{self, Error};

fn main() -> ExitCode {
    oci_tmpfs_hook::logger::init(log::LevelFilter::Warn);
    match try_main() {
        Ok(code) => code,
        Err(e) => commands::report(e.as_ref()),
    }
}

fn try_main() -> Result<ExitCode, Error> {
    if std::env::args_os().next().is_some_and(|a| oci_tmpfs_hook::runtime::invoked_as_wrapper(&a)) {
        let args: Vec<_> = std::env::args_os().skip(1).collect();
        return commands::runtime::run(&args);
    }
    match &cli::parse().command {
        Command::Hook(args) => commands::hook::run(args),
        Command::Explain(args) => commands::explain::run(args),
        Command::Inject(args) => commands::inject::run(args),
        Command::Setup(args) => commands::setup::run(args),
        Command::Doctor(args) => commands::doctor::run(args),
        Command::Engines(args) => commands::engines::run(args),
        Command::Runtime(args) => commands::runtime::run(&args.args),
        Command::Node(args) => commands::node::run(args),
        Command::Nri(args) => commands::nri::run(args),
    }
}
