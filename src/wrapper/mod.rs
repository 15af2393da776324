//! The runtime wrapper, for engines without a hooks dir (Docker,
//! containerd): `oci-tmpfs-runtime ARGS` (the wrapper's name) or
//! `oci-tmpfs-hook runtime -- ARGS` ([`crate::cli`]'s front end).
//!
//! Installed as a second name of the binary, it is the "runtime" an engine
//! calls. It reads the host config, finds the real runtime
//! ([`real_runtime`]), parses the runtime's command line once ([`grammar`],
//! runc's grammar), acts on what it asks ([`dispatch`]: the plan for the bundle on
//! `create` and `run`), then
//! `exec(2)`s the real runtime with the arguments unchanged, so exit status,
//! signals and stdio are the real runtime's. Every other subcommand goes
//! straight through.
//!
//! Two executors, chosen by the host config's `mode`: `spec` (the default)
//! writes the plan's mounts into `config.json` ([`crate::spec`]: after
//! checking each target against the prepared rootfs by fd, and growing an
//! engine-made `/dev/shm` on the host), so no hook process runs at the
//! start; `hook` adds the hook to `config.json` instead (through
//! [`crate::spec::inject_hook`]: idempotent, lossless; at createContainer
//! after another party's runtime-namespace hooks). A plan that needs a
//! directory inside a fresh tmpfs (`TMPDIR=/tmp/job`), or a runtime that
//! cannot be trusted with our temp-target mounts (its version, asked once
//! and cached: docs/design.md#runtimes), takes the hook in either mode.

pub(crate) mod dispatch;
pub(crate) mod grammar;
pub(crate) mod real_runtime;

use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitCode};

use crate::input::HostConfigSource;
use crate::names::WRAPPER_NAME;
use grammar::CommandLine;
use real_runtime::RuntimeError;

/// True when `argv0`'s file name is [`WRAPPER_NAME`].
pub(crate) fn invoked_as_wrapper(argv0: &OsStr) -> bool {
    Path::new(argv0).file_name() == Some(OsStr::new(WRAPPER_NAME))
}

/// Runs the wrapper with the runtime's arguments (argv\[0\] excluded).
/// Returns only when the real runtime could not be exec'd.
///
/// # Errors
/// No real runtime, the plan failed under `on_error = "fail"`, or the exec
/// failed.
pub(crate) fn run(args: &[OsString]) -> Result<ExitCode, crate::error::Error> {
    let source = HostConfigSource::from_env();
    let host_config = source.read().map_err(RuntimeError::HostConfig)?;
    let real = real_runtime::find(&host_config)?;
    let line = CommandLine::parse(args);
    dispatch::before_exec(&line.call(), &source, &host_config, &real)?;
    let name = real.file_name().map_or_else(|| real.as_os_str().to_owned(), |n| n.to_owned());
    let source = Command::new(&real).arg0(name).args(args).exec();
    Err(RuntimeError::Exec { path: real, source }.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapper_name() {
        assert!(invoked_as_wrapper(OsStr::new("oci-tmpfs-runtime")));
        assert!(invoked_as_wrapper(OsStr::new("/usr/local/bin/oci-tmpfs-runtime")));
        assert!(!invoked_as_wrapper(OsStr::new("/usr/local/bin/oci-tmpfs-hook")));
        assert!(!invoked_as_wrapper(OsStr::new("oci-tmpfs-runtime-x")));
    }
}
