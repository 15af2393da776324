//! A tiny `log` backend: one line per record on stderr and, when the host
//! config names one, appended to a log file (crun does not show a hook's
//! stderr, and runc none of a hook that succeeds, so the file is the only
//! diagnostic there). Every line carries the container id once it is known.
//! No threads, no buffering across records.
//!
//! The file is bounded: a record that finds it at [`MAX_LOG_BYTES`] or more
//! renames it to `<file>.1` (replacing the one before) and starts a new one,
//! so the two hold at most about twice that. Many processes append to it at
//! once (a hook per container, the NRI plugin): each checks the size of
//! what it has open, and renames the file only if the path still names that
//! one, so two that see it full rotate it once.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use crate::names::BINARY_NAME;
use rustix::fs::{Mode, OFlags};

pub use crate::names::LOG_ENV;

/// The size at which the log file is renamed to `<file>.1`.
pub const MAX_LOG_BYTES: u64 = 16 << 20;

struct Logger {
    id: OnceLock<String>,
    file: Mutex<Option<LogFile>>,
}

/// The log file open for appending, and its path.
struct LogFile {
    file: File,
    path: PathBuf,
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
        let line = prefixed(self.id.get().map(String::as_str), &format!("{level}: {message}\n"));
        let _ = std::io::stderr().write_all(line.as_bytes());
        append(&self.file, &line);
    }

    fn flush(&self) {}
}

/// Logs `records` (a plan's and an executor's lines,
/// [`crate::plan::report`]), each at its level.
pub(crate) fn emit(records: impl IntoIterator<Item = crate::plan::report::Record>) {
    for r in records {
        if r.warn {
            log::warn!("{}", r.line);
        } else {
            log::info!("{}", r.line);
        }
    }
}

/// `text` as every line we print starts: `oci-tmpfs-hook: [container ID: ]text`.
pub(crate) fn prefixed(container: Option<&str>, text: &str) -> String {
    match container {
        Some(id) => format!("{BINARY_NAME}: container {id}: {text}"),
        None => format!("{BINARY_NAME}: {text}"),
    }
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

/// `path` opened for appending (created 0640, never through a symlink).
fn open_log(path: &Path) -> std::io::Result<File> {
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
    Ok(File::from(fd))
}

/// Appends to `path` as well (created 0640, never through a symlink).
pub fn add_file(path: &Path) -> std::io::Result<()> {
    let file = open_log(path)?;
    if let Ok(mut guard) = LOGGER.file.lock() {
        *guard = Some(LogFile { file, path: path.to_path_buf() });
    }
    Ok(())
}

/// Appends `line` to the log file in `slot`, if any, first starting a new
/// one when it is full ([`rotate`]). A file that cannot be rotated keeps
/// the line: a log never fails a container.
fn append(slot: &Mutex<Option<LogFile>>, line: &str) {
    let Ok(mut guard) = slot.lock() else { return };
    let Some(log) = guard.as_mut() else { return };
    if let Ok(Some(file)) = rotate(&log.file, &log.path, MAX_LOG_BYTES) {
        log.file = file;
    }
    let _ = log.file.write_all(line.as_bytes());
}

/// When `file` (open at `path`) holds `max` bytes or more: renames `path`
/// to `<path>.1` if `path` still names `file` (another process may have
/// rotated it already), and returns `path` opened afresh. `None`: not full.
fn rotate(file: &File, path: &Path, max: u64) -> std::io::Result<Option<File>> {
    let open = file.metadata()?;
    if open.len() < max {
        return Ok(None);
    }
    let named = std::fs::symlink_metadata(path);
    if named.is_ok_and(|n| (n.dev(), n.ino()) == (open.dev(), open.ino())) {
        let mut old = path.as_os_str().to_os_string();
        old.push(".1");
        std::fs::rename(path, old)?;
    }
    open_log(path).map(Some)
}

/// Writes `line` to the log file only (errors already printed on stderr).
pub fn file_only(line: &str) {
    append(&LOGGER.file, &format!("{line}\n"));
}

/// The id set by [`set_container`], if any.
pub fn container() -> Option<&'static str> {
    LOGGER.id.get().map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full log file is renamed to `<file>.1` once, by the first writer
    /// that finds it full; a second writer with the old file open starts
    /// writing to the new one without renaming it again; the old `.1` is
    /// replaced at the next rotation, so two files at most.
    #[test]
    fn a_full_log_file_is_rotated_once() {
        let dir = crate::files::temp_dir("logger-rotate");
        let path = dir.join("hook.log");
        let old = dir.join("hook.log.1");
        let (a, b) = (open_log(&path).unwrap(), open_log(&path).unwrap());
        std::fs::write(&path, "x".repeat(100)).unwrap();
        assert!(rotate(&a, &path, 101).unwrap().is_none(), "below the bound: kept");
        let a = rotate(&a, &path, 100).unwrap().expect("full: a new file");
        assert_eq!(std::fs::read_to_string(&old).unwrap().len(), 100, "the full one is .1");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "a new, empty file");
        // b still has the full file (now .1) open: it reopens, renames nothing.
        let b = rotate(&b, &path, 100).unwrap().expect("b's file is full");
        assert_eq!(std::fs::read_to_string(&old).unwrap().len(), 100, ".1 is not replaced by the new file");
        for (mut f, text) in [(a, "a\n"), (b, "b\n")] {
            f.write_all(text.as_bytes()).unwrap();
        }
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a\nb\n", "both write to the new file");
        // Through the logger's append, with the real bound: below it the
        // line is appended; at it (a sparse file of MAX_LOG_BYTES) the file
        // becomes .1 and the line starts the new one.
        let logged = Mutex::new(Some(LogFile { file: open_log(&path).unwrap(), path: path.clone() }));
        append(&logged, "c\n");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a\nb\nc\n");
        open_log(&path).unwrap().set_len(MAX_LOG_BYTES).unwrap();
        append(&logged, "d\n");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "d\n");
        assert_eq!(std::fs::metadata(&old).unwrap().len(), MAX_LOG_BYTES);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
