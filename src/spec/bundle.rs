//! Lossless edits of a bundle's `config.json`: adding this hook to
//! `hooks.<stage>`. The file is handled as a generic JSON value (a typed view
//! drops the fields it does not know), keeps its key order, indentation
//! style, mode and owner, and is replaced atomically but not fsynced (the
//! bundle is the engine's scratch copy, rewritten at every create:
//! docs/design.md#executors). Adding twice adds once. Reading and writing are [`crate::files`]'s.

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::files::{self, Durability, FileError};
use crate::input::MAX_SPEC_BYTES;
use crate::stage::Stage;

const CONFIG: &str = "config.json";

/// One entry of `hooks.<stage>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookEntry {
    pub path: PathBuf,
    pub args: Vec<String>,
}

impl HookEntry {
    /// The entry that runs `binary hook --stage STAGE [--config PATH]`.
    pub fn for_stage(binary: &Path, stage: Stage, config: Option<&Path>) -> HookEntry {
        HookEntry { path: binary.to_path_buf(), args: crate::names::hook_argv(stage, config) }
    }

    fn to_json(&self) -> Value {
        json!({ "path": self.path.display().to_string(), "args": self.args })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("opening the bundle {path}")]
    Dir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    File(#[from] FileError),
    #[error("{path} is not valid JSON")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path}: {what} is not a JSON object")]
    Shape { path: PathBuf, what: String },
}

/// Adds `entry` to `config["hooks"][stage]` unless an entry with the same
/// path is there. Returns whether the value changed.
///
/// # Errors
/// When `hooks` or `hooks.<stage>` exist with the wrong JSON type.
pub fn add_hook(config: &mut Value, stage: Stage, entry: &HookEntry) -> Result<bool, String> {
    let root = config.as_object_mut().ok_or("the document")?;
    let hooks = root.entry("hooks").or_insert_with(|| json!({}));
    let hooks = hooks.as_object_mut().ok_or("hooks")?;
    let list = hooks.entry(stage.as_str()).or_insert_with(|| json!([]));
    let list = list.as_array_mut().ok_or_else(|| format!("hooks.{stage}"))?;
    let ours = entry.path.display().to_string();
    if list.iter().any(|h| h.get("path").and_then(Value::as_str) == Some(ours.as_str())) {
        return Ok(false);
    }
    list.push(entry.to_json());
    Ok(true)
}

/// Adds the hook to `<bundle>/config.json`. Returns whether the file changed.
///
/// # Errors
/// A missing or invalid file, or a failed write; the file is then unchanged.
pub fn inject(bundle: &Path, stage: Stage, entry: &HookEntry) -> Result<bool, BundleError> {
    edit(bundle, |config| {
        let path = config.path.to_path_buf();
        add_hook(config.tree(&["hooks"])?, stage, entry).map_err(|what| BundleError::Shape { path, what })
    })
}

/// The members of `config.json` that any edit of ours changes: the mounts
/// (the spec executor) and the hooks (the hook entry).
const EDITED: [&str; 3] = ["mounts", "hooks", "process"];

/// A bundle's `config.json` as read: its bytes, and, once [`Config::tree`]
/// asks for them, the members an edit changes (`mounts`, `hooks`) as a JSON
/// object. Only the members asked for are parsed into a tree and written
/// back, spliced into the original text: every other byte of the file stays
/// as it was. A caller that only reads (the plan's view,
/// [`crate::oci::Spec`], comes from the bytes) and finds nothing to change
/// parses no tree at all (docs/design.md#start-up).
pub struct Config<'a> {
    pub bytes: &'a [u8],
    pub path: &'a Path,
    tree: Option<Members>,
    /// The bytes were parsed as JSON already ([`Config::parsed`]).
    json: bool,
}

/// Where each edited member's value stands in the file's bytes, if it is there.
type Spans = Vec<(&'static str, Option<std::ops::Range<usize>>)>;

/// The members asked for, as changed, and where each edited member stood.
struct Members {
    now: Value,
    spans: Spans,
}

/// A member's raw text, also when it is `null` (which `Option` would hide).
#[derive(Default)]
struct Raw<'a>(Option<&'a serde_json::value::RawValue>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Raw<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <&'a serde_json::value::RawValue>::deserialize(d).map(|r| Raw(Some(r)))
    }
}

/// The top level, with only the edited members kept (raw).
#[derive(serde::Deserialize)]
struct Top<'a> {
    #[serde(borrow, default)]
    mounts: Raw<'a>,
    #[serde(borrow, default)]
    hooks: Raw<'a>,
    #[serde(borrow, default)]
    process: Raw<'a>,
}

impl<'a> Config<'a> {
    /// The file's `bytes`, read from `path`.
    pub fn new(bytes: &'a [u8], path: &'a Path) -> Self {
        Config { bytes, path, tree: None, json: false }
    }

    /// Says that the bytes parsed as JSON (a caller's own view of them did),
    /// so that [`Config::tree`] may find the members by a plain scan
    /// ([`scan_spans`]) instead of a second parse.
    pub fn parsed(&mut self) {
        self.json = true;
    }

    /// The document's members `keys` (of `mounts` and `hooks`; those it
    /// has), with any asked for before, as one JSON object to edit. Each
    /// member asked for is written back when the change says it changed
    /// something; other members put in the object are refused then.
    ///
    /// # Errors
    /// [`BundleError::Json`] when the file is not JSON,
    /// [`BundleError::Shape`] when it is not one object with each key once.
    pub fn tree(&mut self, keys: &[&'static str]) -> Result<&mut Value, BundleError> {
        if self.tree.is_none() {
            self.tree = Some(Members { now: Value::Object(serde_json::Map::new()), spans: self.spans()? });
        }
        let m = self.tree.as_mut().expect("the members were just found");
        for key in keys {
            debug_assert!(EDITED.contains(key), "{key} is not an edited member");
            // A member already in the object was parsed (or made) before.
            if m.now.get(*key).is_some() {
                continue;
            }
            let span = m.spans.iter().find(|(k, _)| k == key).and_then(|(_, s)| s.clone());
            if let Some(span) = span {
                let value: Value = serde_json::from_slice(&self.bytes[span])
                    .map_err(|source| BundleError::Json { path: self.path.to_path_buf(), source })?;
                m.now.as_object_mut().expect("an object").insert((*key).to_string(), value);
            }
        }
        Ok(&mut m.now)
    }

    /// Where each edited member's value stands in the bytes.
    fn spans(&self) -> Result<Spans, BundleError> {
        match self.json.then(|| scan_spans(self.bytes)).flatten() {
            Some(spans) => Ok(spans),
            None => self.parsed_spans(),
        }
    }

    /// [`Config::spans`] by serde's pass over the whole document, which
    /// tells a file that is not JSON from one of the wrong shape.
    fn parsed_spans(&self) -> Result<Spans, BundleError> {
        let shape = |what: String| BundleError::Shape { path: self.path.to_path_buf(), what };
        // A derived struct also reads a JSON array (`[]` as no members).
        let top: Top<'_> = match self.bytes.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'{') => serde_json::from_slice(self.bytes),
            _ => serde_json::from_slice::<serde::de::IgnoredAny>(self.bytes)
                .and_then(|_| Err(serde::de::Error::custom("not a JSON object"))),
        }
        .map_err(|source| match serde_json::from_slice::<serde::de::IgnoredAny>(self.bytes) {
            Err(_) => BundleError::Json { path: self.path.to_path_buf(), source },
            Ok(_) => shape(format!("the document ({source})")),
        })?;
        let base = self.bytes.as_ptr() as usize;
        let span = |raw: Raw<'_>| {
            raw.0.map(|r| {
                let start = r.get().as_ptr() as usize - base;
                start..start + r.get().len()
            })
        };
        Ok(vec![("mounts", span(top.mounts)), ("hooks", span(top.hooks)), ("process", span(top.process))])
    }
}

/// Where each edited member's value stands, found by a scan of the top
/// level that steps over each value by its strings and brackets alone: for
/// bytes already parsed as JSON, where it finds what serde's pass over the
/// whole document ([`Config::spans`]) finds, with about a tenth of its
/// instructions (docs/design.md#start-up). `None` for what it leaves to that
/// pass: no object at the top, a key with an escape, an edited member twice.
fn scan_spans(b: &[u8]) -> Option<Spans> {
    let ws = |mut i: usize| {
        while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            i += 1;
        }
        i
    };
    // The index past the string that opens at `i`.
    let string = |mut i: usize| {
        i += 1;
        loop {
            match b.get(i)? {
                b'\\' => i += 2,
                b'"' => return Some(i + 1),
                _ => i += 1,
            }
        }
    };
    // The index past the value that starts at `i`.
    let value = |mut i: usize| match b.get(i)? {
        b'"' => string(i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            loop {
                match b.get(i)? {
                    b'"' => {
                        i = string(i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            while !matches!(b.get(i), None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')) {
                i += 1;
            }
            Some(i)
        }
    };
    let mut spans: Spans = EDITED.iter().map(|key| (*key, None)).collect();
    let mut i = ws(0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = ws(i + 1);
    if b.get(i) == Some(&b'}') {
        return (ws(i + 1) == b.len()).then_some(spans);
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let end = string(i)?;
        let key = &b[i + 1..end - 1];
        if key.contains(&b'\\') {
            return None;
        }
        i = ws(end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let start = ws(i + 1);
        let stop = value(start)?;
        if let Some((_, span)) = spans.iter_mut().find(|(k, _)| k.as_bytes() == key) {
            if span.replace(start..stop).is_some() {
                return None;
            }
        }
        i = ws(stop);
        match b.get(i) {
            Some(b',') => i = ws(i + 1),
            Some(b'}') => return (ws(i + 1) == b.len()).then_some(spans),
            _ => return None,
        }
    }
}

/// `original` with the members of `m` written over their old text, and the
/// new ones added at the end of the document, in its indentation style.
fn splice(original: &str, m: &Members, path: &Path) -> Result<String, BundleError> {
    let shape = |what: &str| BundleError::Shape { path: path.to_path_buf(), what: what.to_string() };
    let now = m.now.as_object().ok_or_else(|| shape("the edited members"))?;
    if let Some(other) = now.keys().find(|k| !EDITED.contains(&k.as_str())) {
        return Err(shape(&format!("the member {other:?} (not one the bundle edit writes)")));
    }
    let unit = files::indent_unit(original);
    let mut replaced: Vec<(std::ops::Range<usize>, String)> = Vec::new();
    let mut added = Vec::new();
    for (key, span) in &m.spans {
        let Some(value) = now.get(*key) else { continue };
        let text = files::render_value(value, unit, 1);
        match span {
            Some(range) => replaced.push((range.clone(), text)),
            None => {
                added.push(format!("{}:{}{text}", Value::from(*key), if unit.is_some() { " " } else { "" }))
            }
        }
    }
    if !added.is_empty() {
        let close = original.rfind('}').ok_or_else(|| shape("the document"))?;
        let end = original[..close].trim_end().len();
        let empty = original[..end].ends_with('{');
        let sep = match unit {
            Some(unit) => format!("\n{unit}"),
            None => String::new(),
        };
        let mut text = String::new();
        for (i, member) in added.iter().enumerate() {
            if i > 0 || !empty {
                text.push(',');
            }
            text.push_str(&sep);
            text.push_str(member);
        }
        if empty && unit.is_some() {
            text.push('\n');
        }
        // After any member's old text, which ends at `end` or before.
        replaced.push((end..end, text));
    }
    // The pieces in order, copied once (a `replace_range` per member moved
    // the bytes after it each time, one by one).
    replaced.sort_by_key(|(r, _)| (r.start, r.end));
    let mut out =
        String::with_capacity(original.len() + replaced.iter().map(|(_, t)| t.len()).sum::<usize>());
    let mut at = 0;
    for (range, text) in replaced {
        out.push_str(&original[at..range.start]);
        out.push_str(&text);
        at = range.end;
    }
    out.push_str(&original[at..]);
    Ok(out)
}

/// Reads `<bundle>/config.json`, lets `change` edit it (it returns whether
/// it changed anything, or an error of its own), and writes it back when it
/// did, in the file's own style: only the members it changed are rewritten.
///
/// # Errors
/// A missing or invalid file, `change`'s error, or a failed write; the file
/// is then unchanged.
pub fn edit<E: From<BundleError>>(
    bundle: &Path,
    change: impl FnOnce(&mut Config<'_>) -> Result<bool, E>,
) -> Result<bool, E> {
    let path = bundle.join(CONFIG);
    let dir =
        files::open_dir(bundle).map_err(|source| BundleError::Dir { path: bundle.to_path_buf(), source })?;
    let old = files::read(Some(dir.as_fd()), &path, MAX_SPEC_BYTES).map_err(BundleError::from)?;
    let mut config = Config::new(&old.bytes, &path);
    if !change(&mut config)? {
        return Ok(false);
    }
    // A change with no tree changed nothing.
    let Some(members) = config.tree else { return Ok(false) };
    // Valid JSON is UTF-8 (RFC 8259 §8.1); the spans are byte offsets into it.
    let original = std::str::from_utf8(&old.bytes)
        .map_err(|_| BundleError::Shape { path: path.clone(), what: "the document (not UTF-8)".into() })?;
    let out = splice(original, &members, &path)?;
    files::replace_at(dir.as_fd(), OsStr::new(CONFIG), &path, out.as_bytes(), old.perms, Durability::Scratch)
        .map_err(BundleError::from)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn entry() -> HookEntry {
        HookEntry::for_stage(Path::new("/usr/local/bin/oci-tmpfs-hook"), Stage::Prestart, None)
    }

    #[test]
    fn adds_once() {
        let mut v = json!({"ociVersion": "1.0.2", "x-unknown": {"keep": [1, 2]}});
        assert_eq!(add_hook(&mut v, Stage::Prestart, &entry()), Ok(true));
        assert_eq!(add_hook(&mut v, Stage::Prestart, &entry()), Ok(false));
        assert_eq!(v["hooks"]["prestart"].as_array().unwrap().len(), 1);
        assert_eq!(v["hooks"]["prestart"][0]["args"][3], "prestart");
        assert_eq!(v["x-unknown"], json!({"keep": [1, 2]}));
        assert_eq!(v["hooks"]["prestart"][0]["path"], "/usr/local/bin/oci-tmpfs-hook");
    }

    #[test]
    fn keeps_other_hooks() {
        let mut v =
            json!({"hooks": {"prestart": [{"path": "/bin/other"}], "poststop": [{"path": "/bin/x"}]}});
        add_hook(&mut v, Stage::Prestart, &entry()).unwrap();
        assert_eq!(v["hooks"]["prestart"][0]["path"], "/bin/other");
        assert_eq!(v["hooks"]["prestart"][1]["path"], "/usr/local/bin/oci-tmpfs-hook");
        assert_eq!(v["hooks"]["poststop"][0]["path"], "/bin/x");
    }

    #[test]
    fn refuses_wrong_shapes() {
        for mut v in [json!([]), json!({"hooks": []}), json!({"hooks": {"prestart": {}}})] {
            assert!(add_hook(&mut v, Stage::Prestart, &entry()).is_err(), "{v}");
        }
    }

    #[test]
    fn config_path_goes_into_args() {
        let e = HookEntry::for_stage(Path::new("/h"), Stage::CreateContainer, Some(Path::new("/etc/x.toml")));
        assert_eq!(
            e.args,
            ["oci-tmpfs-hook", "hook", "--stage", "createContainer", "--config", "/etc/x.toml"]
        );
    }

    /// What `runc spec` writes (tab-indented, no `hooks` member), kept as
    /// a fixture; tests/runtimes/spec_fixture.rs proves the installed runc
    /// still writes its shape.
    const RUNC_SPEC: &str = include_str!("../../tests/fixtures/runc-spec.json");

    /// Lossless and idempotent on what `runc spec` writes.
    #[test]
    fn inject_file_is_lossless_idempotent_and_keeps_mode() {
        let dir = std::env::temp_dir().join(format!("oth-bundle-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.json");
        std::fs::write(&path, RUNC_SPEC).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let before: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert!(inject(&dir, Stage::Prestart, &entry()).unwrap());
        let once = std::fs::read(&path).unwrap();
        assert!(!inject(&dir, Stage::Prestart, &entry()).unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), once);
        assert!(once.windows(2).any(|w| w == b"\n\t"), "tab indentation kept");
        let mut after: Value = serde_json::from_slice(&once).unwrap();
        after.as_object_mut().unwrap().remove("hooks");
        assert_eq!(after, before, "nothing but hooks changed");
        let keys_before: Vec<_> = before.as_object().unwrap().keys().cloned().collect();
        let keys_after: Vec<_> = after.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys_before, keys_after, "key order kept");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o640);
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["config.json"], "no temporary file left");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn inject_refuses_garbage_and_leaves_it() {
        let dir = std::env::temp_dir().join(format!("oth-bundle-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(CONFIG), b"{not json").unwrap();
        assert!(matches!(inject(&dir, Stage::Prestart, &entry()), Err(BundleError::Json { .. })));
        assert_eq!(std::fs::read(dir.join(CONFIG)).unwrap(), b"{not json");
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(inject(&dir, Stage::Prestart, &entry()), Err(BundleError::Dir { .. })));
    }

    /// The edit through [`Config`] (only the changed members rewritten) and
    /// through a whole tree: the same document; every other member byte for
    /// byte as it was.
    fn both_ways(text: &str) -> (Value, Value, String) {
        let change = |v: &mut Value| {
            add_hook(v, Stage::Prestart, &entry()).unwrap();
            let m = v.as_object_mut().unwrap().entry("mounts").or_insert_with(|| json!([]));
            if let Some(list) = m.as_array_mut() {
                list.push(json!({"destination": "/tmp", "type": "tmpfs", "source": "oci-tmpfs-hook"}));
            }
        };
        let mut whole: Value = serde_json::from_str(text).unwrap();
        change(&mut whole);
        let path = Path::new("/b/config.json");
        let mut config = Config::new(text.as_bytes(), path);
        change(config.tree(&EDITED).unwrap());
        let out = splice(text, config.tree.as_ref().unwrap(), path).unwrap();
        (whole, serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}")), out)
    }

    fn raw_members(text: &str) -> Vec<(String, String)> {
        let m: serde_json::Map<String, Value> = serde_json::from_str(text).unwrap();
        let raw: std::collections::HashMap<String, &serde_json::value::RawValue> =
            serde_json::from_str(text).unwrap();
        m.keys()
            .filter(|k| !EDITED.contains(&k.as_str()))
            .map(|k| (k.clone(), raw[k].get().to_string()))
            .collect()
    }

    #[test]
    fn splice_styles_and_edges() {
        for text in [
            "{}",
            "{}\n",
            "{\n}\n",
            "{\"a\":1}",
            "{\n\t\"a\": 1,\n\t\"mounts\": [],\n\t\"hooks\": {}\n}\n",
            "{\n\t\"mounts\": null,\n\t\"x\": null\n}",
            "{\n  \"mounts\": [\n    {\"destination\": \"/x\"}\n  ],\n  \"z\": {\"b\": [1, 2.50, \"\\u00e9\"]}\n}",
            "  {\"hooks\": {\"poststop\": [{\"path\": \"/x\"}]}, \"q\": \"}\"}  \n",
        ] {
            let (whole, spliced, out) = both_ways(text);
            assert_eq!(whole, spliced, "{text:?} -> {out:?}");
            assert_eq!(raw_members(text), raw_members(&out), "{text:?} -> {out:?}");
        }
        let path = Path::new("/b/config.json");
        for bad in ["[]", "{\"mounts\": [], \"mounts\": []}", "1"] {
            let mut c = Config::new(bad.as_bytes(), path);
            assert!(matches!(c.tree(&EDITED), Err(BundleError::Shape { .. })), "{bad}");
        }
        let mut c = Config::new(b"{not json", path);
        assert!(matches!(c.tree(&EDITED), Err(BundleError::Json { .. })));
    }

    /// The scan finds nothing where serde's pass would answer otherwise:
    /// it leaves these to that pass, which refuses each as before.
    #[test]
    fn the_scan_leaves_what_it_does_not_handle_to_serde() {
        let path = Path::new("/b/config.json");
        for text in
            ["[]", "{\"mounts\": [], \"mounts\": []}", "{\"mo\\u0075nts\": [1]}", "1", "{\"a\" 1}", "{} x"]
        {
            assert_eq!(scan_spans(text.as_bytes()), None, "{text}");
        }
        let mut c = Config::new(b"{\"hooks\": {}, \"hooks\": {}}", path);
        c.parsed();
        assert!(matches!(c.tree(&EDITED), Err(BundleError::Shape { .. })));
        // An escaped key is the member it spells, as serde reads it.
        let mut c = Config::new(b"{\"mo\\u0075nts\": [1]}", path);
        c.parsed();
        assert_eq!(c.tree(&["mounts"]).unwrap()["mounts"], json!([1]));
    }

    proptest::proptest! {
        #[test]
        fn splice_is_the_whole_edit_and_keeps_every_other_byte(
            keys in proptest::collection::vec("[a-z]{1,6}", 0..6),
            with_mounts in proptest::option::of(proptest::collection::vec("/[a-z]{1,4}", 0..3)),
            with_hooks in proptest::bool::ANY,
            style in 0..3usize,
        ) {
            let mut v = json!({});
            for (i, k) in keys.iter().enumerate() {
                if !EDITED.contains(&k.as_str()) {
                    v[k] = json!({"n": i, "list": [k, {"deep": [1.5, null, true]}], "s": "a}b\n"});
                }
            }
            if let Some(ms) = with_mounts {
                v["mounts"] = ms.iter().map(|d| json!({"destination": d, "options": ["ro"]})).collect();
            }
            if with_hooks {
                v["hooks"] = json!({"poststart": [{"path": "/bin/p"}]});
            }
            let text = match style {
                0 => serde_json::to_string(&v).unwrap(),
                1 => format!("{}\n", serde_json::to_string_pretty(&v).unwrap()),
                _ => files::render_json(&v, "{\n\t\"x\": 1\n}\n"),
            };
            let (whole, spliced, out) = both_ways(&text);
            proptest::prop_assert_eq!(whole, spliced);
            proptest::prop_assert_eq!(raw_members(&text), raw_members(&out));
        }

        /// On any JSON document the scan finds each edited member where
        /// serde's pass does, or leaves it to that pass.
        #[test]
        fn the_scan_finds_what_serde_finds(
            members in proptest::collection::vec((proptest::prop_oneof!["mounts", "hooks", "process", "[a-z]{1,6}"], files::any_json()), 0..6),
            style in 0..3usize,
        ) {
            use proptest::prelude::*;
            let mut v = serde_json::Map::new();
            for (k, x) in members {
                v.insert(k, x);
            }
            let v = Value::Object(v);
            let text = match style {
                0 => serde_json::to_string(&v).unwrap(),
                1 => format!("  {}\n", serde_json::to_string_pretty(&v).unwrap()),
                _ => files::render_json(&v, "{\n\t\"x\": 1\n}\n"),
            };
            let serde = Config::new(text.as_bytes(), Path::new("/c")).parsed_spans().unwrap();
            prop_assert_eq!(scan_spans(text.as_bytes()), Some(serde));
        }

        #[test]
        fn add_hook_never_loses_a_field(keys in proptest::collection::vec("[a-z]{1,8}", 0..8), vals in proptest::collection::vec(0i64..100, 0..8)) {
            let mut v = json!({});
            for (k, x) in keys.iter().zip(vals.iter()) {
                if k != "hooks" { v[k] = json!(x); }
            }
            let before = v.clone();
            add_hook(&mut v, Stage::CreateRuntime, &entry()).unwrap();
            let again = v.clone();
            proptest::prop_assert!(!add_hook(&mut v, Stage::CreateRuntime, &entry()).unwrap());
            proptest::prop_assert_eq!(&v, &again);
            v.as_object_mut().unwrap().remove("hooks");
            proptest::prop_assert_eq!(v, before);
        }
    }
}
