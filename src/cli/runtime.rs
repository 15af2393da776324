//! `oci-tmpfs-runtime ARGS` (the wrapper's name) or `oci-tmpfs-hook runtime --
//! ARGS`: the runtime wrapper ([`crate::wrapper`]).

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Args;

/// `runtime -- ARGS`.
#[derive(Clone, Debug, Args)]
pub(crate) struct RuntimeArgs {
    /// The runtime's arguments, e.g. `--root R create --bundle DIR ID`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "ARGS")]
    pub args: Vec<OsString>,
}

/// Runs the wrapper with the runtime's arguments (argv\[0\] excluded).
/// Returns only when the real runtime could not be exec'd.
///
/// # Errors
/// What [`crate::wrapper::run`] fails with.
pub(crate) fn run(args: &[OsString]) -> Result<ExitCode, crate::error::Error> {
    match crate::wrapper::run(args)? {}
}
