//! Registration documents for the engines, rendered from code so that the
//! installed copies and the templates in `hooks/` cannot drift apart.
//!
//! Only rendering here: writing them into an engine's config is `setup`'s job.

use std::path::Path;

use serde_json::{json, Value};

use crate::stage::Stage;

use crate::names::HOOK_PATH_ENV;

/// The oci-hooks(5) file (schema 1.0.0) that Podman and CRI-O read from their
/// hooks dir: always run at `prestart` (the binary decides, as oci-hooks
/// cannot match on `root.readonly`), with a fixed `PATH` only.
pub fn oci_hooks_json(binary: &Path) -> Value {
    let stage = Stage::Prestart.as_str();
    json!({
        "version": "1.0.0",
        "hook": {
            "path": binary.display().to_string(),
            "args": crate::names::hook_argv(Stage::Prestart, None),
            "env": [HOOK_PATH_ENV],
        },
        "when": { "always": true },
        "stages": [stage],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_in_hooks_dir_is_the_rendering() {
        let file: Value = serde_json::from_str(include_str!("../hooks/oci-tmpfs-hook.json"))
            .expect("hooks/oci-tmpfs-hook.json");
        assert_eq!(file, oci_hooks_json(Path::new("/usr/local/bin/oci-tmpfs-hook")));
        // Same text too, key order included: the file is what `setup` writes.
        let mut text = serde_json::to_string_pretty(&file).unwrap();
        text.push('\n');
        assert_eq!(include_str!("../hooks/oci-tmpfs-hook.json"), text);
    }

    #[test]
    fn points_at_the_binary() {
        let v = oci_hooks_json(Path::new("/opt/bin/oci-tmpfs-hook"));
        assert_eq!(v["hook"]["path"], "/opt/bin/oci-tmpfs-hook");
        assert_eq!(v["stages"], json!(["prestart"]));
    }
}
