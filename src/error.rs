//! The bottom of the error handling: what a command fails with, and the
//! one-line chain every layer prints an error as (`main` prints it once,
//! through `cli::print_error`). No error type of a layer is defined here; each
//! layer has its own. Imports nothing of the crate.

/// What a command fails with: any error, printed by [`crate::cli::print_error`] as its chain.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// Exit code: failed.
pub const EXIT_FAILED: u8 = 1;

/// Exit code: a usage error (what clap exits with for a bad flag).
pub const EXIT_USAGE: u8 = 2;

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
    escape_controls(&line)
}

/// `text` with control characters (newlines, escape sequences) written as
/// Rust escapes, so that text from a container cannot forge or split log lines.
pub fn escape_controls(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_string();
    }
    text.chars()
        .map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape_controls("plain /tmp é"), "plain /tmp é");
        assert_eq!(escape_controls("a\nb\r\u{1b}[31m"), "a\\nb\\r\\u{1b}[31m");
    }
}
