//! CLI entry: set up logging, run the process ([`oci_tmpfs_hook::cli::try_main`]:
//! the wrapper or the parsed command), print its error once and map the
//! outcome to an exit code (0 done or nothing to do, 1 failed, 2 usage,
//! which clap reports itself).

use std::process::ExitCode;

use oci_tmpfs_hook::cli;
use oci_tmpfs_hook::process::arena::{Arena, ARENA_BYTES};

/// A bump arena before the C library's allocator (docs/design.md#arena).
#[global_allocator]
static ALLOCATOR: Arena<ARENA_BYTES> = Arena::new();

fn main() -> ExitCode {
    oci_tmpfs_hook::process::logger::init(log::LevelFilter::Warn);
    match cli::try_main() {
        Ok(code) => code,
        Err(e) => cli::print_error(e.as_ref()),
    }
}
