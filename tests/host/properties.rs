//! Property tests (SECURITY.md#the-adversarial-suite): the parsers and the
//! pure decision never panic on arbitrary input, and whatever they accept is
//! safe to act on. No root needed. The unit tests next to the code hold more
//! properties (size parsing, target normalisation, `add_hook` on values).

use std::path::Path;

use oci_tmpfs_hook::bundle::{self, HookEntry};
use oci_tmpfs_hook::input::read_state;
use oci_tmpfs_hook::plan::{decide, Action, Inputs};
use oci_tmpfs_hook::settings::Settings;
use oci_tmpfs_hook::size::{Bytes, Size, MIN_BYTES};
use oci_tmpfs_hook::stage::Stage;
use oci_tmpfs_hook::target::{self, EnvTarget};
use proptest::prelude::*;
use serde_json::{json, Value};

const RAM: Bytes = Bytes(16 << 30);

/// `cases` per property; failures are printed, not persisted (integration
/// tests have no source file proptest could find to persist them next to).
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

/// Text that looks like the values users and images write, plus junk.
fn size_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{1,25}(k|m|g|t|K|M|G|T|Ki|Mi|Gi|Ti|MiB|%|%%|b|Pi|e30)?",
        "[0-9]{1,4}[GMk],(mode|nr_inodes|size)=[0-9]{1,4}",
        "\\PC{0,40}",
        Just(String::new()),
    ]
}

/// Environment entries, mostly for the temp variables.
fn env_entry() -> impl Strategy<Value = String> {
    prop_oneof![
        ("(TMPDIR|TEMP|TMP|TEMPDIR)", "[/a-z.]{0,24}").prop_map(|(k, v)| format!("{k}={v}")),
        ("(TMPDIR|TEMP|TMP|TEMPDIR)", "\\PC{0,40}").prop_map(|(k, v)| format!("{k}={v}")),
        "(TMPDIR|PATH|TERM)",
        "\\PC{0,30}",
    ]
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn read_state_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        if let Ok(s) = read_state(&bytes[..]) {
            prop_assert!(!s.id.is_empty() && !s.id.chars().any(char::is_control));
            prop_assert!(s.bundle.is_absolute());
        }
    }

    #[test]
    fn read_state_never_panics_on_near_states(
        id in "\\PC{0,20}",
        pid in prop_oneof![any::<i64>().prop_map(|p| json!(p)), any::<u64>().prop_map(|p| json!(p)),
                           any::<f64>().prop_map(|p| json!(p)), "\\PC{0,8}".prop_map(|p| json!(p)), Just(Value::Null)],
        bundle in prop_oneof!["/[a-z/.]{0,20}", "\\PC{0,20}"],
        annotation in "\\PC{0,20}",
    ) {
        let doc = json!({"ociVersion": "1.0.2", "id": id, "pid": pid, "bundle": bundle,
                         "annotations": {"oci-tmpfs-hook/tmp-size": annotation}});
        if let Ok(s) = read_state(serde_json::to_vec(&doc).unwrap().as_slice()) {
            prop_assert!(!s.id.is_empty() && !s.id.chars().any(char::is_control));
            prop_assert!(s.bundle.is_absolute());
        }
    }

    #[test]
    fn settings_parse_never_panics(text in "\\PC{0,200}") {
        let _ = Settings::parse(&text);
    }

    #[test]
    fn accepted_settings_are_safe(
        tmp in size_text(), shm in size_text(),
        targets in proptest::collection::vec("[/a-z.]{0,16}", 0..4),
        inodes in any::<i64>(),
        log in "[/a-z]{0,12}",
    ) {
        let quote = |s: &str| toml_quote(s);
        let text = format!(
            "tmp_size = {}\nshm_size = {}\nextra_targets = [{}]\nnr_inodes = {inodes}\nlog_file = {}\n",
            quote(&tmp), quote(&shm),
            targets.iter().map(|t| quote(t)).collect::<Vec<_>>().join(", "),
            quote(&log),
        );
        if let Ok(s) = Settings::parse(&text) {
            for t in &s.extra_targets {
                prop_assert!(!target::denied(t.as_str()));
                prop_assert_eq!(target::validate(t.as_str()), Ok(t.clone()));
            }
            prop_assert!(s.nr_inodes != Some(0));
            prop_assert!(s.log_file.as_ref().is_none_or(|p| p.is_absolute()));
            prop_assert!(is_safe_size(s.tmp_size) && is_safe_size(s.shm_size));
        }
    }

    #[test]
    fn env_targets_are_normal_and_allowed(env in proptest::collection::vec(env_entry(), 0..10)) {
        for found in target::from_env(env.iter().map(String::as_str)) {
            if let EnvTarget::Ok { path, .. } = found {
                prop_assert!(!target::denied(path.as_str()));
                prop_assert_eq!(target::validate(path.as_str()), Ok(path.clone()));
            }
        }
    }

    #[test]
    fn absolute_sizes_round_trip(n in 1u64..) {
        let size = Size::Absolute(Bytes(n));
        prop_assert_eq!(size.to_string().parse::<Size>(), Ok(size));
    }

    #[test]
    fn decide_never_panics_and_plans_only_safe_mounts(
        env in proptest::collection::vec(env_entry(), 0..8),
        tmp in proptest::option::of(size_text()),
        shm in proptest::option::of(size_text()),
        enabled in proptest::option::of(prop_oneof![Just("true".to_string()), Just("false".to_string()), "\\PC{0,6}"]),
        readonly in any::<bool>(),
        limit in proptest::option::of(any::<i64>()),
        shm_options in proptest::collection::vec("(size=[0-9]{1,12}[kmg%]?|mode=[0-7]{3,4}|nosuid|bind|rbind)", 0..4),
        extra in proptest::collection::vec("/[a-z]{1,6}(/[a-z]{1,6})?", 0..3),
    ) {
        let mut annotations = serde_json::Map::new();
        for (k, v) in [("oci-tmpfs-hook/tmp-size", tmp), ("oci-tmpfs-hook/shm-size", shm), ("oci-tmpfs-hook/enabled", enabled)] {
            if let Some(v) = v {
                annotations.insert(k.into(), json!(v));
            }
        }
        let mut config = json!({
            "ociVersion": "1.0.2",
            "process": {"args": ["sh"], "cwd": "/", "env": env, "user": {"uid": 0, "gid": 0}},
            "root": {"path": "rootfs", "readonly": readonly},
            "mounts": [{"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": shm_options}],
            "annotations": annotations,
            "linux": {"namespaces": [{"type": "mount"}]},
        });
        if let Some(l) = limit {
            config["linux"]["resources"] = json!({"memory": {"limit": l}});
        }
        let spec: oci_tmpfs_hook::oci::Spec = serde_json::from_value(config).unwrap();
        let settings = Settings { extra_targets: extra.iter().filter_map(|e| target::validate(e).ok()).collect(), ..Settings::default() };
        let Ok(plan) = decide(&Inputs { spec: &spec, state_annotations: None, settings: &settings, host_ram: RAM }) else {
            return Ok(());
        };
        if !plan.enabled {
            prop_assert!(plan.actions.is_empty());
        }
        let mut seen: Vec<String> = Vec::new();
        for action in &plan.actions {
            match action {
                Action::MountTmpfs { target, tmpfs, .. } => {
                    let (size, nr_inodes) = (&tmpfs.size, tmpfs.nr_inodes);
                    prop_assert!(!target::denied(target.as_str()));
                    prop_assert_eq!(target::validate(target.as_str()), Ok(target.clone()));
                    prop_assert!(size.bytes.0 >= MIN_BYTES && size.bytes <= RAM);
                    prop_assert!(nr_inodes.is_none_or(|n| n > 0));
                    for s in &seen {
                        prop_assert!(s != target.as_str() && !target.is_under(s), "{} and {}", s, target);
                        prop_assert!(!target::validate(s).unwrap().is_under(target.as_str()), "{} and {}", s, target);
                    }
                    seen.push(target.to_string());
                }
                Action::Shm { tmpfs, .. } => prop_assert!(tmpfs.size.bytes.0 >= MIN_BYTES && tmpfs.size.bytes <= RAM),
            }
        }
    }
}

proptest! {
    #![proptest_config(config(64))]

    /// `inject` on a real file: never loses a field, keeps key order, idempotent.
    #[test]
    fn inject_keeps_every_field_and_is_idempotent(
        fields in proptest::collection::vec(("[a-zA-Z_]{1,10}", arbitrary_json()), 0..8),
        pretty in any::<bool>(),
    ) {
        let mut original = serde_json::Map::new();
        original.insert("ociVersion".into(), json!("1.0.2"));
        for (k, v) in fields {
            if k != "hooks" {
                original.insert(k, v);
            }
        }
        let original = Value::Object(original);
        let dir = std::env::temp_dir().join(format!("oth-prop-inject-{}-{}", std::process::id(), rand_suffix()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = if pretty { serde_json::to_vec_pretty(&original) } else { serde_json::to_vec(&original) }.unwrap();
        std::fs::write(dir.join("config.json"), text).unwrap();
        let entry = HookEntry::for_stage(Path::new("/usr/bin/oci-tmpfs-hook"), Stage::Prestart, None);
        let first = bundle::inject(&dir, Stage::Prestart, &entry);
        let after_first = std::fs::read(dir.join("config.json")).unwrap();
        let second = bundle::inject(&dir, Stage::Prestart, &entry);
        let after_second = std::fs::read(dir.join("config.json")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        prop_assert!(first.unwrap());
        prop_assert!(!second.unwrap());
        prop_assert_eq!(&after_first, &after_second);
        let mut edited: Value = serde_json::from_slice(&after_first).unwrap();
        let hooks = edited.as_object_mut().unwrap().remove("hooks").unwrap();
        prop_assert_eq!(hooks["prestart"].as_array().unwrap().len(), 1);
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        prop_assert_eq!(keys(&edited), keys(&original));
        prop_assert_eq!(edited, original);
    }
}

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn is_safe_size(size: Size) -> bool {
    match size {
        Size::Absolute(b) => b.0 > 0,
        Size::Percent(p) => (1..=100).contains(&p),
    }
}

fn toml_quote(v: &str) -> String {
    serde_json::to_string(v).unwrap()
}
