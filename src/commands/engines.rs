//! `oci-tmpfs-hook engines`: the engines installed here, one per line, for
//! `install.sh` (so that the script keeps no list of its own). Reads only.

use std::path::Path;
use std::process::ExitCode;

use crate::cli::{self, EnginesArgs};
use crate::engine::Engine;

/// Runs `engines`.
///
/// # Errors
/// None today; the signature is the handlers' one.
pub fn run(args: &EnginesArgs) -> Result<ExitCode, super::Error> {
    let root = args.root.as_deref().unwrap_or(Path::new("/"));
    let search_path = cli::search_path(args.root.as_deref());
    for engine in Engine::all() {
        if args.all || engine.detect(root, search_path).is_some() {
            println!("{engine}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
