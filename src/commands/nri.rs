//! `oci-tmpfs-hook nri`: the NRI plugin. Reads the host config once to fail
//! fast on a bad one, puts its binary and host config into `--hook-dir`
//! (when given) before it registers, so that no adjustment names a hook the
//! node lacks, then serves the runtime's NRI socket forever, or the
//! connection a runtime handed it (pre-registered: `NRI_PLUGIN_SOCKET`, with
//! `NRI_PLUGIN_NAME` and `NRI_PLUGIN_IDX`) until that one ends.

use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use crate::cli::NriArgs;
use crate::nri::install::HookDir;
use crate::nri::{self, Handler, Options};

/// Why the plugin cannot start.
#[derive(Debug, thiserror::Error)]
pub enum NriStartError {
    #[error("--idx {0:?}: NRI wants exactly two digits, e.g. 10")]
    Idx(String),
    #[error("{env}={value:?}: not a file descriptor number the runtime passed")]
    Fd { env: &'static str, value: String },
}

/// Runs the plugin.
///
/// # Errors
/// A bad index or host config; a pre-registered connection that ended.
pub fn run(args: &NriArgs) -> Result<ExitCode, super::Error> {
    let (path, explicit) = args.config.resolve(Path::new("/"));
    let dir = args.hook_dir.as_ref().map(|node| HookDir {
        node: node.clone(),
        mount: args.hook_dir_mount.clone().unwrap_or_else(|| node.clone()),
    });
    let handler = Arc::new(Handler::new(&path, explicit, dir)?);
    nri::service::apply_logging(&handler.settings(), &crate::settings::Settings::default());
    if args.host_root.is_some() {
        log::warn!("nri: --host-root is no longer used (the hook grows the pod's /dev/shm); ignored");
    }
    for wrote in handler.install()? {
        log::info!("nri: wrote {wrote}");
    }
    log::info!(
        "nri: the adjustments name the hook {}{}",
        handler.site().path.display(),
        handler.site().config.as_ref().map(|c| format!(" --config {}", c.display())).unwrap_or_default()
    );
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let mut opts = Options {
        socket: nri::session::socket_path(&args.socket.to_string_lossy()).to_path_buf(),
        name: env(nri::PLUGIN_NAME_ENV).unwrap_or_else(|| args.name.clone()),
        idx: env(nri::PLUGIN_IDX_ENV).unwrap_or_else(|| args.idx.clone()),
    };
    if !nri::session::valid_idx(&opts.idx) {
        return Err(NriStartError::Idx(std::mem::take(&mut opts.idx)).into());
    }
    if let Some(value) = env(nri::PLUGIN_SOCKET_ENV) {
        let stream = inherited(&value)?;
        // The runtime closing its connection is the normal end here.
        return match nri::session(stream, &opts, &handler) {
            Ok(()) | Err(nri::SessionError::Mux(nri::mux::MuxError::Eof)) => Ok(ExitCode::SUCCESS),
            Err(e) => Err(e.into()),
        };
    }
    nri::serve_forever(&opts, &handler)
}

/// The connected socket a runtime passed as fd `value` (3).
fn inherited(value: &str) -> Result<UnixStream, NriStartError> {
    let bad = || NriStartError::Fd { env: nri::PLUGIN_SOCKET_ENV, value: value.to_string() };
    let fd: i32 = value.parse().map_err(|_| bad())?;
    if fd < 3 {
        return Err(bad());
    }
    // It must be an open socket: fstat it through /proc before owning it.
    let meta = std::fs::metadata(format!("/proc/self/fd/{fd}")).map_err(|_| bad())?;
    if !std::os::unix::fs::FileTypeExt::is_socket(&meta.file_type()) {
        return Err(bad());
    }
    Ok(own_fd(fd))
}

#[allow(unsafe_code)]
fn own_fd(fd: i32) -> UnixStream {
    use std::os::fd::FromRawFd;
    // SAFETY: `fd` is an open socket (checked above) that the runtime passed
    // to this process for the plugin alone; nothing else in this process
    // owns or closes it, and this is called once.
    unsafe { UnixStream::from_raw_fd(fd) }
}
