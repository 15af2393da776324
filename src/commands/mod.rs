//! Thin handlers: gather inputs, call the library, print, pick the exit
//! code. Each takes its argument struct from [`crate::cli`] and returns a
//! `Result`; no handler prints its own error: [`report`] prints the chain
//! once, for `main`.

pub mod doctor;
pub mod engines;
pub mod explain;
pub mod hook;
pub mod inject;
pub mod node;
pub mod nri;
pub mod runtime;
pub mod setup;

use std::path::PathBuf;
use std::process::ExitCode;

/// What a handler fails with: any error, printed by [`report`] as its chain.
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

/// This binary's canonical path (what the engines and bundles name).
///
/// # Errors
/// `/proc/self/exe` cannot be read or resolved.
pub fn this_binary() -> std::io::Result<PathBuf> {
    std::env::current_exe().and_then(|p| p.canonicalize())
}
