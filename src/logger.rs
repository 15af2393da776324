//! A tiny `log` backend: one line per record on stderr and, when the host
//! config names one, appended to a log file (crun does not show a hook's
//! stderr, so the file is the only diagnostic there). Every line carries the
//! container id once it is known. No threads, no buffering across records.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use rustix::fs::{Mode, OFlags};

pub use crate::names::LOG_ENV;

struct Logger {
    id: OnceLock<String>,
    file: Mutex<Option<File>>,
}

static LOGGER: Logger = Logger { id: OnceLock::new(), file: Mutex::new(None) };

impl log::Log for Logger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let level = match record.level() {
            log::Level::Error => "error",
            log::Level::Warn => "warning",
            log::Level::Info => "info",
            log::Level::Debug | log::Level::Trace => "debug",
        };
        // Messages quote the container's env and annotations: one record, one line.
        let message = crate::error::escape_controls(&record.args().to_string());
        let line = match self.id.get() {
            Some(id) => format!("oci-tmpfs-hook: container {id}: {level}: {message}\n"),
            None => format!("oci-tmpfs-hook: {level}: {message}\n"),
        };
        let _ = std::io::stderr().write_all(line.as_bytes());
        if let Ok(mut guard) = self.file.lock() {
            if let Some(f) = guard.as_mut() {
                let _ = f.write_all(line.as_bytes());
            }
        }
    }

    fn flush(&self) {}
}

fn parse_level(text: &str) -> Option<log::LevelFilter> {
    match text.to_ascii_lowercase().as_str() {
        "off" => Some(log::LevelFilter::Off),
        "error" => Some(log::LevelFilter::Error),
        "warn" | "warning" => Some(log::LevelFilter::Warn),
        "info" => Some(log::LevelFilter::Info),
        "debug" | "trace" => Some(log::LevelFilter::Debug),
        _ => None,
    }
}

/// Installs the logger at `level` (or the level named by [`LOG_ENV`]).
pub fn init(level: log::LevelFilter) {
    let _ = log::set_logger(&LOGGER);
    set_level(level);
}

/// Changes the level; [`LOG_ENV`] still wins.
pub fn set_level(level: log::LevelFilter) {
    let level = std::env::var(LOG_ENV).ok().and_then(|v| parse_level(&v)).unwrap_or(level);
    log::set_max_level(level);
}

/// Names the container in every following line.
pub fn set_container(id: &str) {
    let _ = LOGGER.id.set(id.to_string());
}

/// Sets the host config's log level and adds its log file, if any; a log
/// file that cannot be opened is a warning, never a failure.
pub fn configure(level: log::LevelFilter, file: Option<&Path>) {
    set_level(level);
    if let Some(file) = file {
        if let Err(e) = add_file(file) {
            log::warn!("cannot open log file {}: {e}", file.display());
        }
    }
}

/// Appends to `path` as well (created 0640, never through a symlink).
pub fn add_file(path: &Path) -> std::io::Result<()> {
    let fd = rustix::fs::open(
        path,
        OFlags::WRONLY
            | OFlags::APPEND
            | OFlags::CREATE
            | OFlags::NOFOLLOW
            | OFlags::CLOEXEC
            | OFlags::NOCTTY,
        Mode::from_raw_mode(0o640),
    )?;
    if let Ok(mut guard) = LOGGER.file.lock() {
        *guard = Some(File::from(fd));
    }
    Ok(())
}

/// Writes `line` to the log file only (errors already printed on stderr).
pub fn file_only(line: &str) {
    if let Ok(mut guard) = LOGGER.file.lock() {
        if let Some(f) = guard.as_mut() {
            let _ = f.write_all(format!("{line}\n").as_bytes());
        }
    }
}

/// The id set by [`set_container`], if any.
pub fn container() -> Option<&'static str> {
    LOGGER.id.get().map(String::as_str)
}
