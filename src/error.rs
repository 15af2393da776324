//! The bottom of the error handling: what a command fails with, the one-line
//! chain every layer prints an error as, and the report `main` prints once.
//! No error type of a layer is defined here; each layer has its own.

use std::process::ExitCode;

/// What a command fails with: any error, printed by [`report`] as its chain.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// Exit code: failed.
pub const EXIT_FAILED: u8 = 1;

/// An error and its sources on one line: "a: b: c", control characters
/// escaped.
pub fn chain(err: &(dyn std::error::Error + '_)) -> String {
    let mut line = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        line.push_str(": ");
        line.push_str(&s.to_string());
        source = s.source();
    }
    crate::logger::escape_controls(&line)
}

/// Prints `oci-tmpfs-hook: [container ID: ]a: b: c` on stderr (and in the
/// log file) and returns exit 1.
pub fn report(err: &(dyn std::error::Error + '_)) -> ExitCode {
    let line = match crate::logger::container() {
        Some(id) => format!("oci-tmpfs-hook: container {id}: {}", chain(err)),
        None => format!("oci-tmpfs-hook: {}", chain(err)),
    };
    eprintln!("{line}");
    crate::logger::file_only(&line);
    ExitCode::from(EXIT_FAILED)
}
