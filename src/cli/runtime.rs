//! `oci-tmpfs-hook runtime -- ARGS`, and the binary called by the
//! wrapper's name: the front end of [`crate::wrapper`].

use std::ffi::OsString;

use clap::Args;

pub(crate) use crate::wrapper::{invoked_as_wrapper, run};

/// `runtime -- ARGS`.
#[derive(Clone, Debug, Args)]
pub(crate) struct RuntimeArgs {
    /// The runtime's arguments, e.g. `--root R create --bundle DIR ID`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "ARGS")]
    pub args: Vec<OsString>,
}
