//! `oci-tmpfs-runtime ARGS` (the wrapper's name) or `oci-tmpfs-hook runtime --
//! ARGS`: add the hook on `create`/`run`, then exec the real runtime.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use crate::bundle::{self, HookEntry};
use crate::input;
use crate::names::DEFAULT_CONFIG_PATH;
use crate::runtime::{self, Call, FileId, RuntimeError};
use crate::stage::Stage;

/// Runs the wrapper with the runtime's arguments (argv\[0\] excluded). Returns
/// only when the real runtime could not be exec'd.
///
/// # Errors
/// No real runtime, or the exec failed.
pub fn run(args: &[OsString]) -> Result<ExitCode, super::Error> {
    let real = real_runtime()?;
    if let Call::Create { bundle, .. } = runtime::parse(args) {
        let dir = bundle.unwrap_or_else(|| PathBuf::from("."));
        add_hook(&dir);
    }
    let name = real.file_name().map_or_else(|| real.as_os_str().to_owned(), |n| n.to_owned());
    let source = Command::new(&real).arg0(name).args(args).exec();
    Err(RuntimeError::Exec { path: real, source }.into())
}

fn real_runtime() -> Result<PathBuf, RuntimeError> {
    let settings =
        input::read_settings(Path::new(DEFAULT_CONFIG_PATH), false).map_err(RuntimeError::Settings)?;
    let own = FileId::of(Path::new("/proc/self/exe")).map_err(RuntimeError::OwnExe)?;
    runtime::find_runtime(settings.runtime_path.as_deref(), std::env::var_os("PATH").as_deref(), own)
}

/// Adds the hook to `dir/config.json`. A bundle we cannot edit is passed
/// through untouched, so the real runtime reports its own error.
fn add_hook(dir: &Path) {
    let exe = match super::this_binary() {
        Ok(p) => p,
        Err(e) => {
            log::warn!("finding this binary: {e}; the hook is not added");
            return;
        }
    };
    let entry = HookEntry::for_stage(&exe, Stage::Prestart, None);
    if let Err(e) = bundle::inject(dir, Stage::Prestart, &entry) {
        log::warn!("{}; the hook is not added, passing the call through", super::chain(&e));
    }
}
