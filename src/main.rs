//! CLI entry: parse, set up logging, run the command, print its error once
//! and map the outcome to an exit code (0 done or nothing to do, 1 failed,
//! 2 usage, which clap reports itself).

use std::process::ExitCode;

use oci_tmpfs_hook::cli;
use oci_tmpfs_hook::error::Error;

fn main() -> ExitCode {
    oci_tmpfs_hook::logger::init(log::LevelFilter::Warn);
    match try_main() {
        Ok(code) => code,
        Err(e) => cli::report(e.as_ref()),
    }
}

fn try_main() -> Result<ExitCode, Error> {
    if std::env::args_os().next().is_some_and(|a| oci_tmpfs_hook::wrapper::invoked_as_wrapper(&a)) {
        let args: Vec<_> = std::env::args_os().skip(1).collect();
        return cli::runtime::run(&args);
    }
    cli::run(&cli::parse())
}
