//! `oci-tmpfs-hook engines`: the engines installed here, one per line, for
//! `install.sh` (so that the script keeps no list of its own). Reads only.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use crate::engine::Engine;
use crate::error::Error;

#[derive(Clone, Debug, Args)]
pub(crate) struct EnginesArgs {
    /// Look under DIR: engines are then detected by their config files only,
    /// not by their binaries on PATH.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Every engine this binary knows, installed or not.
    #[arg(long)]
    pub all: bool,
}

/// Runs `engines`.
///
/// # Errors
/// None today; the signature is the handlers' one.
pub(crate) fn run(args: &EnginesArgs) -> Result<ExitCode, Error> {
    let root = args.root.as_deref().unwrap_or(Path::new("/"));
    let search_path = super::search_path(args.root.as_deref());
    for engine in Engine::all() {
        if args.all || engine.detect(root, search_path).is_some() {
            println!("{engine}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
