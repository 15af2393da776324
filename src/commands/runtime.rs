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
use std::process::{Command, ExitCode, Stdio};

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
        let id = runtime::container_id(args);
        prepare(&dir, &settings, &real, id.as_deref())?;
    }
    let name = real.file_name().map_or_else(|| real.as_os_str().to_owned(), |n| n.to_owned());
    let source = Command::new(&real).arg0(name).args(args).exec();
    Err(RuntimeError::Exec { path: real, source }.into())
}

fn real_runtime(settings: &Settings) -> Result<PathBuf, RuntimeError> {
    let own = FileId::of(Path::new("/proc/self/exe")).map_err(RuntimeError::OwnExe)?;
    runtime::find_runtime(settings.runtime_path.as_deref(), std::env::var_os("PATH").as_deref(), own)
}

/// Carries out the plan for the bundle `dir` as `settings.mode` says, for
/// the container `id` that the real runtime `real` will create.
fn prepare(dir: &Path, settings: &Settings, real: &Path, id: Option<&str>) -> Result<(), super::Error> {
    crate::logger::configure(settings.log_level.filter(), settings.log_file.as_deref());
    match id {
        Some(id) => crate::logger::set_container(id),
        None => {
            if let Some(name) = dir.canonicalize().ok().as_deref().and_then(Path::file_name) {
                crate::logger::set_container(&name.to_string_lossy());
            }
        }
    }
    if settings.mode == Mode::Hook {
        add_hook(dir);
        return Ok(());
    }
    let unsafe_runtime = spec_unsafe(real);
    let cx = spec_mode::Context { id, temp_to_hook: unsafe_runtime.as_deref() };
    match spec_mode::carry_out(dir, settings, hook_entry().as_ref(), &cx) {
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

/// Why the spec executor must not hand the temp targets to the runtime
/// `real`, if it must not (its version, asked once: [`runtime_version`]).
pub(super) fn spec_unsafe(real: &Path) -> Option<String> {
    let (name, v) = runtime::parse_version(&runtime_version(real)?)?;
    runtime::spec_unsafe(&name, v)
}

/// The first line of `real --version`, run once per binary: the answer is
/// kept under [`RUNTIME_CACHE_DIR`], named by the binary's identity (device,
/// inode, size, modification time), so that no process runs per start and an
/// upgraded runtime is asked again. `None` when it cannot be run; an empty
/// line when it printed nothing.
fn runtime_version(real: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(real).ok()?;
    let key = format!("{}-{}-{}-{}.{}", m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec());
    let cache = Path::new(RUNTIME_CACHE_DIR);
    let trusted = trusted_dir(cache);
    if trusted {
        if let Ok(Some(line)) = crate::files::read_text(&cache.join(&key), 4096) {
            return Some(line);
        }
    }
    let out = Command::new(real)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .inspect_err(|e| log::debug!("{} --version: {e}", real.display()))
        .ok()?;
    // Whatever it answered, even nothing, is kept: a runtime that prints no
    // version is not asked again at every start.
    let line = String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or_default().trim().to_string();
    if trusted || make_cache_dir(cache) {
        let perms = crate::files::Perms { mode: 0o600, owner: None };
        let path = cache.join(&key);
        if let Err(e) =
            crate::files::replace(&path, line.as_bytes(), perms, crate::files::Durability::Scratch)
        {
            log::debug!("{e}");
        }
    }
    Some(line)
}

/// Where [`runtime_version`] keeps its answers (a tmpfs: gone at boot).
const RUNTIME_CACHE_DIR: &str = "/run/oci-tmpfs-hook/runtimes";

/// `dir` is a directory (not a symlink) owned by root, closed to others.
fn trusted_dir(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir() && m.uid() == 0 && m.mode() & 0o077 == 0)
}

/// Creates [`RUNTIME_CACHE_DIR`] (mode 0700); whether it is trusted then.
fn make_cache_dir(dir: &Path) -> bool {
    use std::os::unix::fs::DirBuilderExt;
    let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir);
    trusted_dir(dir)
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
