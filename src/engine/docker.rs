//! Docker: the wrapper as a runtime in `daemon.json`
//! (`runtimes.oci-tmpfs.path`, and with `--default` the `default-runtime`).
//! Edits keep every other key, their order and the file's indentation; a
//! file that undo leaves as `{}` is removed. Docker reads the file at
//! start-up only, hence the restart hint.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::check::{Check, Context};
use super::{
    read_engine_config, wrapper_check, Engine, EngineConfigError, Located, NewText, Profile, Registrar,
    Registration, Site, Way,
};
use crate::files::render_json;
use crate::names::{rooted, DAEMON_JSON, RUNTIME_NAME};

/// Docker's `daemon.json`.
pub(crate) struct Docker;

impl Registrar for Docker {
    fn profile(&self) -> Profile {
        Profile {
            way: Way::RuntimeWrapper,
            config_flag: "--daemon-json",
            binary: "dockerd",
            files: vec![PathBuf::from(DAEMON_JSON)],
            restart: Some("systemctl restart docker"),
            reloads: None,
        }
    }

    fn config_file(&self, site: &Site<'_>) -> Result<Located, EngineConfigError> {
        Ok(Located::file(site, DAEMON_JSON))
    }

    /// Adds `runtimes.oci-tmpfs.path = wrapper` (and `default-runtime` with
    /// `default`).
    fn add(&self, path: &Path, text: Option<&str>, reg: &Registration<'_>) -> NewText {
        let mut doc = parse(path, text)?;
        let obj = object(&mut doc, path)?;
        let wrapper = reg.wrapper.display().to_string();
        let runtimes = obj.entry("runtimes").or_insert_with(|| json!({}));
        let runtimes = runtimes
            .as_object_mut()
            .ok_or_else(|| EngineConfigError::shape(path, "runtimes is not an object"))?;
        match runtimes.get_mut(RUNTIME_NAME).and_then(Value::as_object_mut) {
            Some(entry) => {
                if entry.get("path").and_then(Value::as_str) != Some(wrapper.as_str()) {
                    entry.insert("path".into(), json!(wrapper));
                }
            }
            None => {
                runtimes.insert(RUNTIME_NAME.into(), json!({ "path": wrapper }));
            }
        }
        if reg.default {
            match obj.get("default-runtime").and_then(Value::as_str) {
                Some(RUNTIME_NAME) => {}
                None | Some("runc") => {
                    obj.insert("default-runtime".into(), json!(RUNTIME_NAME));
                }
                Some(other) => {
                    return Err(EngineConfigError::shape(
                        path,
                        format!(
                            "default-runtime is {other:?}, and the wrapper runs runc (or the host config's \
                             runtime_path), not {other:?}; drop --default or change default-runtime yourself"
                        ),
                    ))
                }
            }
        }
        Ok(Some(render_json(&doc, text.unwrap_or(""))))
    }

    /// Removes our runtime, and `default-runtime` when it names it.
    fn remove(&self, path: &Path, text: Option<&str>) -> NewText {
        if text.is_none() {
            return Ok(None);
        }
        let mut doc = parse(path, text)?;
        let obj = object(&mut doc, path)?;
        if let Some(runtimes) = obj.get_mut("runtimes") {
            let runtimes = runtimes
                .as_object_mut()
                .ok_or_else(|| EngineConfigError::shape(path, "runtimes is not an object"))?;
            runtimes.shift_remove(RUNTIME_NAME);
            if runtimes.is_empty() {
                obj.shift_remove("runtimes");
            }
        }
        if obj.get("default-runtime").and_then(Value::as_str) == Some(RUNTIME_NAME) {
            obj.shift_remove("default-runtime");
        }
        if obj.is_empty() {
            return Ok(None);
        }
        Ok(Some(render_json(&doc, text.unwrap_or(""))))
    }

    fn check(&self, ctx: &Context) -> Vec<Check> {
        vec![check(ctx)]
    }
}

/// The document; a missing or blank file is `{}`.
fn parse(path: &Path, text: Option<&str>) -> Result<Value, EngineConfigError> {
    match text {
        Some(t) if !t.trim().is_empty() => serde_json::from_str(t).map_err(|e| EngineConfigError::Syntax {
            path: path.to_path_buf(),
            line: e.line(),
            column: e.column(),
            msg: format!("invalid JSON: {}", strip_position(&e.to_string())),
        }),
        _ => Ok(json!({})),
    }
}

fn object<'a>(doc: &'a mut Value, path: &Path) -> Result<&'a mut Map<String, Value>, EngineConfigError> {
    doc.as_object_mut().ok_or_else(|| EngineConfigError::shape(path, "the document is not a JSON object"))
}

/// serde_json appends " at line L column C"; the error says it separately.
fn strip_position(msg: &str) -> &str {
    msg.rfind(" at line ").map_or(msg, |i| &msg[..i])
}

/// `runtimes.oci-tmpfs.path` names the wrapper, which is this binary.
fn check(ctx: &Context) -> Check {
    let engine = Engine::Docker;
    let what = "docker";
    let path = rooted(&ctx.root, Path::new(DAEMON_JSON));
    let text = match read_engine_config(&path) {
        Ok(Some(t)) => t,
        Ok(None) => {
            return Check::problem(what, format!("{} is missing", path.display()), engine.setup_fix())
        }
        Err(e) => return Check::problem(what, crate::error::chain(&e), engine.setup_fix()),
    };
    let doc: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            return Check::problem(
                what,
                format!("{}: invalid JSON at line {}, column {}", path.display(), e.line(), e.column()),
                format!("fix the file, then {}", engine.setup_fix()),
            )
        }
    };
    match doc.pointer(&format!("/runtimes/{RUNTIME_NAME}/path")).and_then(Value::as_str) {
        Some(wrapper) => wrapper_check(engine, ctx, &path, wrapper),
        None => Check::problem(
            what,
            format!("{} has no runtimes.{RUNTIME_NAME}.path", path.display()),
            engine.setup_fix(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRAPPER: &str = "/usr/local/bin/oci-tmpfs-runtime";

    fn docker(text: Option<&str>, default: bool, undo: bool) -> Result<Option<String>, EngineConfigError> {
        super::super::new_text(&Docker, "/etc/docker/daemon.json", text, WRAPPER, default, undo)
    }

    #[test]
    fn docker_new_file_exact() {
        let out = docker(None, false, false).unwrap().unwrap();
        assert_eq!(
            out,
            "{\n  \"runtimes\": {\n    \"oci-tmpfs\": {\n      \"path\": \"/usr/local/bin/oci-tmpfs-runtime\"\n    }\n  }\n}\n"
        );
        assert_eq!(docker(Some(&out), false, false).unwrap().unwrap(), out, "idempotent");
        assert_eq!(docker(Some(&out), false, true).unwrap(), None, "undo of a file setup created removes it");
    }

    #[test]
    fn docker_keeps_other_keys_order_and_indent() {
        let original = "{\n    \"log-driver\": \"journald\",\n    \"runtimes\": {\n        \"nvidia\": {\"path\": \"nvidia-container-runtime\"}\n    },\n    \"data-root\": \"/srv/docker\"\n}\n";
        let out = docker(Some(original), true, false).unwrap().unwrap();
        assert_eq!(
            out,
            "{\n    \"log-driver\": \"journald\",\n    \"runtimes\": {\n        \"nvidia\": {\n            \"path\": \"nvidia-container-runtime\"\n        },\n        \"oci-tmpfs\": {\n            \"path\": \"/usr/local/bin/oci-tmpfs-runtime\"\n        }\n    },\n    \"data-root\": \"/srv/docker\",\n    \"default-runtime\": \"oci-tmpfs\"\n}\n"
        );
        assert_eq!(docker(Some(&out), true, false).unwrap().unwrap(), out);
        let undone = docker(Some(&out), false, true).unwrap().unwrap();
        let v: Value = serde_json::from_str(&undone).unwrap();
        let orig: Value = serde_json::from_str(original).unwrap();
        assert_eq!(v, orig);
        let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["log-driver", "runtimes", "data-root"]);
    }

    #[test]
    fn docker_updates_a_stale_path_and_keeps_default_of_others() {
        let old = r#"{"runtimes": {"oci-tmpfs": {"path": "/opt/old/oci-tmpfs-runtime", "runtimeArgs": ["--debug"]}}}"#;
        let out = docker(Some(old), false, false).unwrap().unwrap();
        assert_eq!(
            out,
            r#"{"runtimes":{"oci-tmpfs":{"path":"/usr/local/bin/oci-tmpfs-runtime","runtimeArgs":["--debug"]}}}"#
        );
        let err = docker(Some(r#"{"default-runtime": "nvidia"}"#), true, false).unwrap_err();
        assert!(err.to_string().contains("default-runtime is \"nvidia\""), "{err}");
        let runc = docker(Some(r#"{"default-runtime": "runc"}"#), true, false).unwrap().unwrap();
        assert!(runc.contains(r#""default-runtime":"oci-tmpfs""#), "{runc}");
        // undo leaves someone else's default alone
        let undone = docker(Some(r#"{"default-runtime": "nvidia", "runtimes": {}}"#), false, true).unwrap();
        assert_eq!(undone.as_deref(), Some("{\"default-runtime\":\"nvidia\"}"));
    }

    #[test]
    fn docker_malformed_is_refused_with_line() {
        let cases: &[(&str, &str, usize)] = &[
            ("trailing comma", "{\n  \"a\": 1,\n}\n", 3),
            ("not json", "runtimes = 1\n", 1),
            ("unclosed", "{\n  \"a\": [1,\n", 3),
        ];
        for (name, text, line) in cases {
            match docker(Some(text), false, false) {
                Err(EngineConfigError::Syntax { line: l, ref msg, .. }) => {
                    assert_eq!(l, *line, "case {name}: {msg}")
                }
                other => panic!("case {name}: {other:?}"),
            }
        }
        let err = docker(Some("{\n  \"a\": 1,\n}\n"), false, false).unwrap_err().to_string();
        assert!(err.starts_with("/etc/docker/daemon.json: line 3, column 1: invalid JSON"), "{err}");
        for shape in ["[]", r#"{"runtimes": []}"#] {
            assert!(
                matches!(docker(Some(shape), false, false), Err(EngineConfigError::Shape { .. })),
                "{shape}"
            );
        }
    }
}
