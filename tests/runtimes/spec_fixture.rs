//! The fixture of what `runc spec` writes (tests/fixtures/runc-spec.json),
//! which the unit test of `inject` in src/spec/bundle.rs edits instead of
//! running runc, against what the installed runc writes.

use std::process::Command;

use crate::support::*;
use serde_json::Value;

/// The fixture, as the unit test includes it.
const FIXTURE: &str = include_str!("../fixtures/runc-spec.json");

/// The top-level member names of the JSON object `text`, in order.
fn members(what: &str, text: &str) -> Vec<String> {
    let doc: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{what}: not JSON: {e}"));
    let object = doc.as_object().unwrap_or_else(|| panic!("{what}: not a JSON object: {doc}"));
    object.keys().cloned().collect()
}

/// The installed runc's `runc spec` writes what the fixture holds in every
/// way the unit test relies on: the same top-level members in the same
/// order (the test proves `inject` keeps their order), no `hooks` member
/// (the test removes the one `inject` adds and compares the rest), and tab
/// indentation (the test proves `inject` keeps it). The values are not
/// compared: the masked paths, capabilities and version that runc writes
/// differ between runc versions (the host's and sid's).
#[test]
fn the_runc_spec_fixture_has_the_shape_runc_writes() {
    let dir = TempDir::new("runc-spec");
    ok(Command::new(which(Runtime::Runc.bin())).args(["spec", "--bundle"]).arg(&*dir));
    let path = dir.join("config.json");
    let written = read_text(&path);
    let want = members(&path.display().to_string(), &written);
    let have = members("tests/fixtures/runc-spec.json", FIXTURE);
    assert_eq!(have, want, "the fixture's top-level members against what {} writes", path.display());
    assert!(!have.iter().any(|m| m == "hooks"), "the fixture has no hooks member: {have:?}");
    for (what, text) in [("the fixture", FIXTURE), ("runc spec", written.as_str())] {
        assert!(text.starts_with("{\n\t\"ociVersion\""), "{what}: tab-indented, ociVersion first:\n{text}");
    }
}
