//! `oci-tmpfs-runtime ARGS` (the wrapper's name) or `oci-tmpfs-hook runtime --
//! ARGS`: on `create`/`run`, carry out the plan for the bundle, then exec the
//! real runtime with ARGS unchanged.
//!
//! Two executors, chosen by the host config's `mode`: `spec` (the default)
//! writes the plan's mounts into `config.json` (after checking each target
//! against the prepared rootfs by fd, and growing an engine-made `/dev/shm`
//! on the host), so no hook process runs at the start; `hook` adds the hook
//! to `config.json` instead. A plan that needs a directory inside a fresh
//! tmpfs (`TMPDIR=/tmp/job`) takes the hook in either mode.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use crate::bundle::{self, HookEntry};
use crate::names::{CONFIG_ENV, DEFAULT_CONFIG_PATH};
use crate::runtime::{self, Call, FileId, RuntimeError};
use crate::settings::{Mode, OnError, Settings};
use crate::stage::Stage;
use crate::{input, spec_mode};

/// Runs the wrapper with the runtime's arguments (argv\[0\] excluded). Returns
/// only when the real runtime could not be exec'd.
///
/// # Errors
/// No real runtime, the plan failed under `on_error = "fail"`, or the exec
/// failed.
pub fn run(args: &[OsString]) -> Result<ExitCode, super::Error> {
    let settings = match std::env::var_os(CONFIG_ENV) {
        Some(path) => input::read_settings(Path::new(&path), true),
        None => input::read_settings(Path::new(DEFAULT_CONFIG_PATH), false),
    }
    .map_err(RuntimeError::Settings)?;
    let real = real_runtime(&settings)?;
    if let Call::Create { bundle, .. } = runtime::parse(args) {
        let dir = bundle.unwrap_or_else(|| PathBuf::from("."));
        prepare(&dir, &settings)?;
    }
    let name = real.file_name().map_or_else(|| real.as_os_str().to_owned(), |n| n.to_owned());
    let source = Command::new(&real).arg0(name).args(args).exec();
    Err(RuntimeError::Exec { path: real, source }.into())
}

fn real_runtime(settings: &Settings) -> Result<PathBuf, RuntimeError> {
    let own = FileId::of(Path::new("/proc/self/exe")).map_err(RuntimeError::OwnExe)?;
    runtime::find_runtime(settings.runtime_path.as_deref(), std::env::var_os("PATH").as_deref(), own)
}

/// Carries out the plan for the bundle `dir` as `settings.mode` says.
fn prepare(dir: &Path, settings: &Settings) -> Result<(), super::Error> {
    crate::logger::configure(settings.log_level.filter(), settings.log_file.as_deref());
    if let Some(id) = dir.canonicalize().ok().as_deref().and_then(Path::file_name) {
        crate::logger::set_container(&id.to_string_lossy());
    }
    if settings.mode == Mode::Hook {
        add_hook(dir);
        return Ok(());
    }
    match spec_mode::carry_out(dir, settings, hook_entry().as_ref()) {
        Ok(outcome) => {
            crate::logger::outcome(&outcome.notes, &outcome.done);
            Ok(())
        }
        // A bundle we cannot read is passed through: the runtime reports it.
        Err(spec_mode::SpecError::Bundle(e)) => {
            log::warn!("{}; nothing is mounted, passing the call through", super::chain(&e));
            Ok(())
        }
        Err(e) if settings.on_error == OnError::Warn => {
            log::warn!(
                "{} (on_error = \"warn\": the container starts without these mounts)",
                super::chain(&e)
            );
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// The prestart entry of this binary, or `None` when it cannot be found.
/// The hook reads the host config the wrapper read: `--config` when
/// `OCI_TMPFS_HOOK_CONFIG` named one (runtimes give hooks no environment).
fn hook_entry() -> Option<HookEntry> {
    let config = std::env::var_os(CONFIG_ENV).map(PathBuf::from);
    match super::this_binary() {
        Ok(exe) => Some(HookEntry::for_stage(&exe, Stage::Prestart, config.as_deref())),
        Err(e) => {
            log::warn!("finding this binary: {e}; the hook is not added");
            None
        }
    }
}

/// Adds the hook to `dir/config.json`. A bundle we cannot edit is passed
/// through untouched, so the real runtime reports its own error.
fn add_hook(dir: &Path) {
    let Some(entry) = hook_entry() else { return };
    if let Err(e) = bundle::inject(dir, Stage::Prestart, &entry) {
        log::warn!("{}; the hook is not added, passing the call through", super::chain(&e));
    }
}
