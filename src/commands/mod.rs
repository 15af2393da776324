//! Thin handlers: gather inputs, call the library, print, pick the exit code.

pub mod doctor;
pub mod explain;
pub mod hook;
pub mod inject;
pub mod runtime;
pub mod setup;

use std::error::Error;
use std::process::ExitCode;

/// Exit code: done, or nothing to do.
pub const EXIT_OK: u8 = 0;
/// Exit code: failed.
pub const EXIT_FAILED: u8 = 1;

/// An error and its sources on one line: "a: b: c".
pub fn chain(err: &dyn Error) -> String {
    let mut line = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = s.source();
    }
    crate::logger::escape_controls(&line)
}

/// Prints one error line on stderr (and in the log file) and returns exit 1.
pub fn fail(err: &dyn Error) -> ExitCode {
    let line = match crate::logger::container() {
        Some(id) => format!("oci-tmpfs-hook: container {id}: {}", chain(err)),
        None => format!("oci-tmpfs-hook: {}", chain(err)),
    };
    eprintln!("{line}");
    crate::logger::file_only(&line);
    ExitCode::from(EXIT_FAILED)
}
