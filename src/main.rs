//! CLI entry: set up logging, run the process ([`oci_tmpfs_hook::cli::try_main`]:
//! the wrapper or the parsed command), print its error once and map the
//! outcome to an exit code (0 done or nothing to do, 1 failed, 2 usage,
//! which clap reports itself).

use std::process::ExitCode;

use oci_tmpfs_hook::cli;

fn main() -> ExitCode {
    oci_tmpfs_hook::logger::init(log::LevelFilter::Warn);
    match cli::try_main() {
        Ok(code) => code,
        Err(e) => cli::report(e.as_ref()),
    }
}
