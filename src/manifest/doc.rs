//! Kubernetes YAML or JSON as documents, and the field walker that names
//! every problem by its document and field path
//! (`spec.template.spec.containers[0].name`). YAML is read with `saphyr`
//! (docs/explain.md#the-yaml-parser) into its node tree and turned into
//! `serde_json` values, so YAML and JSON input are walked alike. Pure: the
//! caller reads the file.

use std::fmt;

use saphyr::{LoadableYamlNode, Scalar, Yaml};
use serde_json::{Map, Number, Value};

/// Which document a problem is in: `deploy.yaml: document 2 (Deployment web)`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub(crate) struct DocRef {
    pub file: String,
    /// 1-based, in file order; `2.items[3]` inside a `List`.
    pub index: String,
    pub kind: Option<String>,
    pub name: Option<String>,
}

impl fmt::Display for DocRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: document {}", self.file, self.index)?;
        match (&self.kind, &self.name) {
            (Some(k), Some(n)) => write!(f, " ({k} {n})"),
            (Some(k), None) => write!(f, " ({k})"),
            _ => Ok(()),
        }
    }
}

/// What a manifest is refused for; each names the file, the document and
/// the field. `explain --manifest` exits 2 on any of them.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ManifestError {
    #[error("{file}: not YAML or JSON: {why}")]
    Syntax { file: String, why: String },
    #[error("{file}: no Kubernetes object in it")]
    Empty { file: String },
    #[error("{doc}: {}{problem}", if field.is_empty() { String::new() } else { format!("{field}: ") })]
    Field { doc: Box<DocRef>, field: String, problem: String },
}

/// The documents of `text`: JSON when it starts with `{` or `[`, else YAML
/// (multi-document; empty documents are dropped).
///
/// # Errors
/// Text that is neither, or YAML with aliases or non-scalar keys.
pub(crate) fn load(file: &str, text: &str) -> Result<Vec<Value>, ManifestError> {
    let syntax = |why: String| ManifestError::Syntax { file: file.to_string(), why };
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.starts_with(['{', '[']) {
        let v: Value = serde_json::from_str(trimmed).map_err(|e| syntax(format!("JSON: {e}")))?;
        return Ok(vec![v]);
    }
    let docs = Yaml::load_from_str(text).map_err(|e| syntax(e.to_string()))?;
    let mut out = Vec::new();
    for (i, d) in docs.iter().enumerate() {
        let v = to_json(d).map_err(|why| syntax(format!("document {}: {why}", i + 1)))?;
        if !v.is_null() {
            out.push(v);
        }
    }
    Ok(out)
}

/// One YAML node as a JSON value.
fn to_json(node: &Yaml<'_>) -> Result<Value, String> {
    Ok(match node {
        Yaml::Value(s) => scalar(s)?,
        Yaml::Sequence(items) => Value::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        Yaml::Mapping(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let key = match to_json(k)? {
                    Value::String(s) => s,
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    other => return Err(format!("a mapping key that is not a scalar: {other}")),
                };
                out.insert(key, to_json(v)?);
            }
            Value::Object(out)
        }
        Yaml::Tagged(_, inner) => to_json(inner)?,
        Yaml::Representation(text, _, _) => Value::String(text.to_string()),
        Yaml::Alias(_) => return Err("YAML aliases (*name) are not supported".into()),
        Yaml::BadValue => return Err("a value YAML cannot represent".into()),
    })
}

fn scalar(s: &Scalar<'_>) -> Result<Value, String> {
    Ok(match s {
        Scalar::Null => Value::Null,
        Scalar::Boolean(b) => Value::Bool(*b),
        Scalar::Integer(i) => Value::Number((*i).into()),
        Scalar::FloatingPoint(f) => {
            Value::Number(Number::from_f64(f.into_inner()).ok_or_else(|| format!("the number {f}"))?)
        }
        Scalar::String(s) => Value::String(s.to_string()),
    })
}

/// A value at a field path of a document, for typed reads whose errors name
/// the document and the path.
#[derive(Clone)]
pub(crate) struct At<'a> {
    pub doc: &'a DocRef,
    pub path: String,
    pub value: &'a Value,
}

/// The path of `key` under `parent`.
pub(crate) fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

impl<'a> At<'a> {
    pub(crate) fn error(&self, problem: impl Into<String>) -> ManifestError {
        ManifestError::Field {
            doc: Box::new(self.doc.clone()),
            field: self.path.clone(),
            problem: problem.into(),
        }
    }

    /// The error for a missing `key` under this value.
    pub(crate) fn missing(&self, key: &str) -> ManifestError {
        ManifestError::Field {
            doc: Box::new(self.doc.clone()),
            field: join(&self.path, key),
            problem: "missing".into(),
        }
    }

    /// This value as an object.
    pub(crate) fn object(&self) -> Result<&'a Map<String, Value>, ManifestError> {
        self.value
            .as_object()
            .ok_or_else(|| self.error(format!("must be a mapping, not {}", kind(self.value))))
    }

    /// The value of `key`, `None` when missing or null.
    pub(crate) fn get(&self, key: &str) -> Result<Option<&'a Value>, ManifestError> {
        Ok(self.object()?.get(key).filter(|v| !v.is_null()))
    }

    pub(crate) fn str(&self) -> Result<&'a str, ManifestError> {
        self.value.as_str().ok_or_else(|| self.error(format!("must be a string, not {}", kind(self.value))))
    }

    /// A Linux id (`runAsUser`, `runAsGroup`): a whole number below 2^32.
    pub(crate) fn id(&self) -> Result<u32, ManifestError> {
        self.value.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(|| {
            self.error(format!("must be a whole number from 0 to 4294967295, not {}", self.value))
        })
    }

    pub(crate) fn bool(&self) -> Result<bool, ManifestError> {
        self.value
            .as_bool()
            .ok_or_else(|| self.error(format!("must be true or false, not {}", kind(self.value))))
    }

    pub(crate) fn array(&self) -> Result<&'a [Value], ManifestError> {
        self.value
            .as_array()
            .map(Vec::as_slice)
            .ok_or_else(|| self.error(format!("must be a list, not {}", kind(self.value))))
    }
}

/// What a value is, for an error.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Reads `key` under `at` with `read`, `None` when missing or null; the
/// child's path is built here so that the error names it.
pub(crate) fn opt<'a, T>(
    at: &At<'a>,
    key: &str,
    read: impl FnOnce(&At<'a>) -> Result<T, ManifestError>,
) -> Result<Option<T>, ManifestError> {
    let Some(value) = at.get(key)? else { return Ok(None) };
    read(&At { doc: at.doc, path: join(&at.path, key), value }).map(Some)
}

/// As [`opt`], for a field that must be there.
pub(crate) fn req<'a, T>(
    at: &At<'a>,
    key: &str,
    read: impl FnOnce(&At<'a>) -> Result<T, ManifestError>,
) -> Result<T, ManifestError> {
    opt(at, key, read)?.ok_or_else(|| at.missing(key))
}

/// Each item of the list at `key` (missing: none), read with `read`.
pub(crate) fn each<'a, T>(
    at: &At<'a>,
    key: &str,
    mut read: impl FnMut(&At<'a>) -> Result<T, ManifestError>,
) -> Result<Vec<T>, ManifestError> {
    let Some(value) = at.get(key)? else { return Ok(Vec::new()) };
    let path = join(&at.path, key);
    let list = At { doc: at.doc, path: path.clone(), value }.array()?;
    list.iter()
        .enumerate()
        .map(|(i, item)| read(&At { doc: at.doc, path: format!("{path}[{i}]"), value: item }))
        .collect()
}

/// A `map[string]string` field (annotations): every value a string.
pub(crate) fn string_map(at: &At<'_>) -> Result<Vec<(String, String)>, ManifestError> {
    at.object()?
        .iter()
        .map(|(k, v)| {
            let s = At { doc: at.doc, path: join(&at.path, k), value: v }.str()?;
            Ok((k.clone(), s.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_and_json_load_alike() {
        let yaml = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\n---\nkind: List\nitems: []\n";
        let docs = load("f", yaml).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0]["metadata"]["name"], "a");
        let json = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}"#;
        assert_eq!(load("f", json).unwrap()[0], docs[0]);
        let typed = load("f", "a: 1\nb: true\nc: 1.5\nd: ~\ne: '1'\n1: x\n").unwrap();
        assert_eq!(typed[0], serde_json::json!({"a": 1, "b": true, "c": 1.5, "d": null, "e": "1", "1": "x"}));
    }

    #[test]
    fn bad_text_is_a_syntax_error() {
        // Aliases are expanded, within saphyr's budget of 100,000 nodes.
        assert_eq!(load("f", "a: &x 1\nb: *x\n").unwrap()[0]["b"], 1);
        let mut laughs = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n".to_string();
        for i in 1..10 {
            let p = i - 1;
            laughs.push_str(&format!(
                "l{i}: &l{i} [*l{p}, *l{p}, *l{p}, *l{p}, *l{p}, *l{p}, *l{p}, *l{p}, *l{p}, *l{p}]\n"
            ));
        }
        for text in ["a: [1, 2", "{\"a\": ", "key: value\n  bad indent: x\n", laughs.as_str()] {
            let err = load("f.yaml", text).unwrap_err();
            assert!(matches!(err, ManifestError::Syntax { .. }), "{text:?}: {err:?}");
            assert!(err.to_string().starts_with("f.yaml: not YAML or JSON"), "{err}");
        }
    }

    #[test]
    fn fields_are_named_in_errors() {
        let doc =
            DocRef { file: "f".into(), index: "2".into(), kind: Some("Pod".into()), name: Some("p".into()) };
        let v = serde_json::json!({"spec": {"containers": [{"name": 3}]}});
        let at = At { doc: &doc, path: String::new(), value: &v };
        let err =
            req(&at, "spec", |s| each(s, "containers", |c| req(c, "name", |n| n.str().map(str::to_string))))
                .unwrap_err();
        assert_eq!(
            err.to_string(),
            "f: document 2 (Pod p): spec.containers[0].name: must be a string, not a number"
        );
        let err = req(&at, "metadata", |m| m.str().map(|_| ())).unwrap_err();
        assert_eq!(err.to_string(), "f: document 2 (Pod p): metadata: missing");
    }
}
