//! What the runtime wrapper does before it execs the real runtime, given
//! what the runtime is asked ([`RuntimeCall`], plain values: the `runtime` command
//! parses the command line): on `create` and `run`, the plan carried out
//! for the bundle as the host config's `mode` says, in `config.json`
//! ([`crate::spec::carry_out`]) or by adding our hook ([`crate::spec::inject_hook`]);
//! anything else (an `exec` included) goes through untouched.
//!
//! It neither parses the command line nor finds or execs the real runtime
//! (the `runtime` command and [`crate::wrapper::real_runtime`] do), and the choice
//! of executor for the temp targets is [`crate::spec::route`]'s. A bundle it
//! cannot read or edit is passed through, so that the real runtime reports
//! its own error.

use std::path::Path;

use crate::error::chain;
use crate::host_config::{HostConfig, Mode, OnError};
use crate::input::HostConfigSource;
use crate::spec;
use crate::spec::bundle::HookEntry;
use crate::stage::Stage;

/// What the real runtime is asked to do, as far as the wrapper acts on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RuntimeCall<'a> {
    /// `create` or `run`: the bundle directory, and the container id when
    /// the command line names one.
    Create { bundle: &'a Path, id: Option<String> },
    /// Any other subcommand: straight through.
    Other,
}

/// Acts on `call` before the real runtime `real` is exec'd, with
/// `host_config` read from `source`.
///
/// # Errors
/// The plan failed under `on_error = "fail"`.
pub(crate) fn before_exec(
    call: &RuntimeCall<'_>,
    source: &HostConfigSource,
    host_config: &HostConfig,
    real: &Path,
) -> Result<(), crate::error::Error> {
    match call {
        RuntimeCall::Create { bundle, id } => prepare(bundle, source, host_config, real, id.as_deref()),
        RuntimeCall::Other => Ok(()),
    }
}

/// Carries out the plan for the bundle `dir` as `host_config.mode` says, for
/// the container `id` that the real runtime `real` will create.
fn prepare(
    dir: &Path,
    source: &HostConfigSource,
    host_config: &HostConfig,
    real: &Path,
    id: Option<&str>,
) -> Result<(), crate::error::Error> {
    crate::process::logger::configure(host_config.log_level.filter(), host_config.log_file.as_deref());
    match id {
        Some(id) => crate::process::logger::set_container(id),
        None => {
            if let Some(name) = dir.canonicalize().ok().as_deref().and_then(Path::file_name) {
                crate::process::logger::set_container(&name.to_string_lossy());
            }
        }
    }
    if host_config.mode == Mode::Hook {
        add_hook(dir, source);
        return Ok(());
    }
    let launch = spec::Launch { id, runtime: &|| crate::wrapper::real_runtime::verdict(real) };
    match spec::carry_out(dir, host_config, hook_entry(source).as_ref(), &launch) {
        Ok(outcome) => {
            crate::process::logger::emit(crate::plan::report::outcome(&outcome.notes, &outcome.done));
            Ok(())
        }
        // A bundle we cannot read is passed through: the runtime reports it.
        Err(spec::SpecError::Bundle(e)) => {
            log::warn!("{}; nothing is mounted, passing the call through", chain(&e));
            Ok(())
        }
        Err(e) if host_config.on_error == OnError::Warn => {
            log::warn!("{} (on_error = \"warn\": the container starts without these mounts)", chain(&e));
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// The prestart entry of this binary, or `None` when it cannot be found.
/// The hook reads the host config the wrapper read: `--config` when
/// `OCI_TMPFS_HOOK_CONFIG` named one (runtimes give hooks no environment).
fn hook_entry(source: &HostConfigSource) -> Option<HookEntry> {
    match crate::files::this_binary() {
        Ok(exe) => Some(HookEntry::for_stage(&exe, Stage::Prestart, source.named())),
        Err(e) => {
            log::warn!("finding this binary: {e}; the hook is not added");
            None
        }
    }
}

/// Adds the hook to `dir/config.json` (at the stage
/// [`crate::spec::route::executor`] gives hook mode). A bundle we cannot
/// edit is passed through untouched, so the real runtime reports its own
/// error.
fn add_hook(dir: &Path, source: &HostConfigSource) {
    let Some(entry) = hook_entry(source) else { return };
    if let Err(e) = crate::spec::inject_hook(dir, &entry) {
        log::warn!("{}; the hook is not added, passing the call through", chain(&e));
    }
}
