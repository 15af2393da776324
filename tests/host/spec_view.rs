//! src/oci.rs, the plan's view of `config.json`, against the `oci-spec`
//! crate's full typed parse: on what runc writes, on the configs the engines
//! wrote in these tests' fixtures, and on generated configs, both read the
//! same root, mounts, environment, namespaces, id mappings, mount label,
//! memory limit and annotations. Where oci-spec refuses a config the view
//! may accept it: the runtime judges every field the plan does not read.

use oci_spec::runtime as full;
use oci_tmpfs_hook::oci;
use proptest::prelude::*;
use serde_json::{json, Value};

use crate::support::process::text;

/// Every field the plan reads, as the view reads it.
fn of_view(s: &oci::Spec) -> Value {
    json!({
        "root": s.root().as_ref().map(|r| json!([r.path(), r.readonly()])),
        "mounts": s.mounts().as_ref().map(|ms| ms.iter().map(|m| json!([m.destination(), m.typ(), m.source(), m.options()])).collect::<Vec<_>>()),
        "env": s.process().as_ref().map(|p| p.env().clone()),
        "namespaces": s.linux().as_ref().and_then(|l| l.namespaces().as_ref()).map(|ns| ns.iter().map(|n| json!([format!("{:?}", n.typ()), n.path()])).collect::<Vec<_>>()),
        "uids": s.linux().as_ref().and_then(|l| l.uid_mappings().as_ref()).map(|m| m.iter().map(|m| [m.container_id(), m.host_id(), m.size()]).collect::<Vec<_>>()),
        "gids": s.linux().as_ref().and_then(|l| l.gid_mappings().as_ref()).map(|m| m.iter().map(|m| [m.container_id(), m.host_id(), m.size()]).collect::<Vec<_>>()),
        "label": s.linux().as_ref().and_then(|l| l.mount_label().clone()),
        "limit": s.linux().as_ref().and_then(|l| l.resources().as_ref()).and_then(|r| r.memory().as_ref()).and_then(|m| m.limit()),
        "annotations": s.annotations(),
    })
}

/// The same fields, as oci-spec reads them.
fn of_full(s: &full::Spec) -> Value {
    let kind = |t: full::LinuxNamespaceType| match t {
        full::LinuxNamespaceType::Mount => "Mount",
        full::LinuxNamespaceType::User => "User",
        _ => "Other",
    };
    json!({
        "root": s.root().as_ref().map(|r| json!([r.path(), r.readonly()])),
        "mounts": s.mounts().as_ref().map(|ms| ms.iter().map(|m| json!([m.destination(), m.typ(), m.source(), m.options()])).collect::<Vec<_>>()),
        "env": s.process().as_ref().map(|p| p.env().clone()),
        "namespaces": s.linux().as_ref().and_then(|l| l.namespaces().as_ref()).map(|ns| ns.iter().map(|n| json!([kind(n.typ()), n.path()])).collect::<Vec<_>>()),
        "uids": s.linux().as_ref().and_then(|l| l.uid_mappings().as_ref()).map(|m| m.iter().map(|m| [m.container_id(), m.host_id(), m.size()]).collect::<Vec<_>>()),
        "gids": s.linux().as_ref().and_then(|l| l.gid_mappings().as_ref()).map(|m| m.iter().map(|m| [m.container_id(), m.host_id(), m.size()]).collect::<Vec<_>>()),
        "label": s.linux().as_ref().and_then(|l| l.mount_label().clone()),
        "limit": s.linux().as_ref().and_then(|l| l.resources().as_ref()).and_then(|r| r.memory().as_ref()).and_then(|m| m.limit()),
        "annotations": s.annotations(),
    })
}

/// Both parses of `text`: equal where oci-spec accepts it; the view must
/// accept whatever oci-spec accepts.
fn agree(what: &str, text: &str) {
    let view: Result<oci::Spec, _> = serde_json::from_str(text);
    match serde_json::from_str::<full::Spec>(text) {
        Ok(f) => {
            let v = view.unwrap_or_else(|e| panic!("{what}: oci-spec reads it, the view refuses: {e}"));
            assert_eq!(of_view(&v), of_full(&f), "{what}");
        }
        Err(e) => eprintln!(
            "{what}: oci-spec refuses it ({e}); the view {}",
            if view.is_ok() { "reads it" } else { "too" }
        ),
    }
}

#[test]
fn runc_spec_and_rootless_spec_read_the_same() {
    for rootless in [false, true] {
        let dir = crate::support::fs::TempDir::new("spec-view");
        let mut cmd = std::process::Command::new("runc");
        cmd.args(["spec", "--bundle"]).arg(&dir.0);
        if rootless {
            cmd.arg("--rootless");
        }
        let out = cmd.output().expect("runc (tests/run.sh installs it)");
        assert!(out.status.success(), "runc spec: {}", text(&out.stderr));
        let config = std::fs::read_to_string(dir.0.join("config.json")).unwrap();
        let mut v: Value = serde_json::from_str(&config).unwrap();
        // The fields runc leaves out, so that they are compared too.
        v["linux"]["mountLabel"] = json!("system_u:object_r:container_file_t:s0:c1,c2");
        v["linux"]["resources"]["memory"] = json!({"limit": 536_870_912});
        v["annotations"] = json!({"io.kubernetes.cri.sandbox-id": "abc", "oci-tmpfs-hook/tmp-size": "1Gi"});
        v["process"]["env"] = json!(["PATH=/bin", "TMPDIR=/scratch"]);
        agree(&format!("runc spec (rootless {rootless})"), &config);
        agree(
            &format!("runc spec with a label, a limit and annotations (rootless {rootless})"),
            &v.to_string(),
        );
    }
}

#[test]
fn nulls_missing_and_unknown_fields() {
    agree("empty", "{}");
    agree(
        "nulls",
        r#"{"ociVersion":"1.0.2","root":null,"mounts":null,"process":null,"linux":null,"annotations":null}"#,
    );
    agree(
        "unknown fields",
        r#"{"ociVersion":"1.0.2","x-vendor":{"a":[1,2]},"root":{"path":"r","readonly":true,"x":1}}"#,
    );
    // What the view refuses: the fields it reads, with the wrong type.
    for bad in [
        r#"{"root":{"path":1}}"#,
        r#"{"mounts":{}}"#,
        r#"{"linux":{"resources":{"memory":{"limit":"1G"}}}}"#,
        r#"{"annotations":{"a":1}}"#,
    ] {
        assert!(serde_json::from_str::<oci::Spec>(bad).is_err(), "the view reads {bad}");
        assert!(serde_json::from_str::<full::Spec>(bad).is_err(), "oci-spec reads {bad}");
    }
}

fn path() -> impl Strategy<Value = String> {
    prop::collection::vec("[a-z.]{0,4}", 0..4).prop_map(|p| format!("/{}", p.join("/")))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn generated_configs_read_the_same(
        readonly in prop::option::of(any::<bool>()),
        mounts in prop::collection::vec((path(), prop::option::of(prop::sample::select(vec!["tmpfs", "bind", "proc", ""])), prop::option::of(path()), prop::option::of(prop::collection::vec(prop::sample::select(vec!["ro", "rbind", "size=1k", "nosuid"]), 0..4))), 0..6),
        env in prop::option::of(prop::collection::vec("[A-Z]{1,6}=[a-z/]{0,6}", 0..5)),
        namespaces in prop::collection::vec((prop::sample::select(vec!["mount", "user", "pid", "network", "ipc", "uts", "cgroup"]), prop::option::of(path())), 0..5),
        maps in prop::collection::vec((0u32..3, 0u32..200_000, 0u32..70_000), 0..3),
        label in prop::option::of("[a-z_:0-9,]{0,20}"),
        limit in prop::option::of(-1i64..1 << 40),
        annotations in prop::option::of(prop::collection::hash_map("[a-z./-]{1,12}", "[a-z0-9]{0,6}", 0..4)),
    ) {
        let mounts: Vec<Value> = mounts.iter().map(|(d, t, s, o)| {
            let mut m = json!({"destination": d});
            if let Some(t) = t { m["type"] = json!(t); }
            if let Some(s) = s { m["source"] = json!(s); }
            if let Some(o) = o { m["options"] = json!(o); }
            m
        }).collect();
        let maps: Vec<Value> = maps.iter().map(|(c, h, s)| json!({"containerID": c, "hostID": h, "size": s})).collect();
        let namespaces: Vec<Value> = namespaces.iter().map(|(t, p)| match p { Some(p) => json!({"type": t, "path": p}), None => json!({"type": t}) }).collect();
        let mut config = json!({
            "ociVersion": "1.0.2",
            "root": {"path": "rootfs"},
            "mounts": mounts,
            "process": {"cwd": "/", "user": {"uid": 0, "gid": 0}},
            "linux": {"namespaces": namespaces, "uidMappings": maps, "gidMappings": maps},
            "annotations": annotations,
        });
        if let Some(r) = readonly { config["root"]["readonly"] = json!(r); }
        if let Some(e) = env { config["process"]["env"] = json!(e); }
        if let Some(l) = label { config["linux"]["mountLabel"] = json!(l); }
        if let Some(l) = limit { config["linux"]["resources"] = json!({"memory": {"limit": l}}); }
        let text = config.to_string();
        let f: full::Spec = serde_json::from_str(&text).map_err(|e| TestCaseError::fail(format!("oci-spec: {e}: {text}")))?;
        let v: oci::Spec = serde_json::from_str(&text).map_err(|e| TestCaseError::fail(format!("view: {e}: {text}")))?;
        prop_assert_eq!(of_view(&v), of_full(&f));
    }
}
