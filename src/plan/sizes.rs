//! Step 2 of the plan: the bytes for the temp targets and for `/dev/shm`,
//! and where each setting came from (annotation, host config, default).
//! Percentages are of the container's memory limit when it has one, else of
//! the host's RAM. An annotation may ask for at most the host config's
//! `max_tmp_size` / `max_shm_size`, and no size exceeds the memory limit.
//! Pure.

use super::{Cap, Inputs, PlanError, SizeFrom, Sizing, ANNOTATION_SHM_SIZE, ANNOTATION_TMP_SIZE};
use crate::names::ANNOTATION_HOME_SIZE;
use crate::size::{Basis, Bytes, Size};

/// The two sizes a plan uses.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Sizes {
    pub(super) tmp: Sizing,
    pub(super) shm: Sizing,
    pub(super) home: Sizing,
}

pub(super) fn sizes(inputs: &Inputs<'_>) -> Result<Sizes, PlanError> {
    let s = inputs.host_config;
    let limit = memory_limit(inputs.spec);
    let tmp = Setting {
        key: ANNOTATION_TMP_SIZE,
        size: s.tmp_size,
        set: s.tmp_size_set,
        max: s.max_tmp_size,
        max_key: "max_tmp_size",
    };
    let shm = Setting {
        key: ANNOTATION_SHM_SIZE,
        size: s.shm_size,
        set: s.shm_size_set,
        max: s.max_shm_size,
        max_key: "max_shm_size",
    };
    let home = Setting {
        key: ANNOTATION_HOME_SIZE,
        size: s.home_size,
        set: s.home_size_set,
        max: s.max_home_size,
        max_key: "max_home_size",
    };
    Ok(Sizes {
        tmp: sizing(inputs, limit, &tmp)?,
        shm: sizing(inputs, limit, &shm)?,
        home: sizing(inputs, limit, &home)?,
    })
}

/// `linux.resources.memory.limit`, when positive.
pub(super) fn memory_limit(spec: &crate::oci::Spec) -> Option<Bytes> {
    spec.linux()
        .as_ref()
        .and_then(|l| l.resources().as_ref())
        .and_then(|r| r.memory().as_ref())
        .and_then(|m| m.limit())
        .and_then(|l| u64::try_from(l).ok())
        .filter(|&l| l > 0)
        .map(Bytes)
}

/// One size's settings: its annotation, the host config's value and cap.
struct Setting {
    key: &'static str,
    size: Size,
    /// Set in the host config (else the default).
    set: bool,
    /// The most the annotation may ask for.
    max: Option<Size>,
    max_key: &'static str,
}

/// One size: the annotation wins over the host config, within the host
/// config's cap; every size stays within the container's memory limit.
fn sizing(inputs: &Inputs<'_>, memory_limit: Option<Bytes>, setting: &Setting) -> Result<Sizing, PlanError> {
    let (size, from) = match inputs.annotation(setting.key) {
        Some(text) => {
            let size = text.parse::<Size>().map_err(|source| PlanError::Size {
                key: setting.key,
                value: text.chars().take(64).collect(),
                source,
            })?;
            (size, SizeFrom::Annotation(setting.key))
        }
        None if setting.set => (setting.size, SizeFrom::HostConfig),
        None => (setting.size, SizeFrom::Default),
    };
    let (mut bytes, basis) = size.resolve(memory_limit, inputs.host_ram);
    let basis_bytes = match basis {
        Basis::Absolute => None,
        Basis::MemoryLimit => memory_limit,
        Basis::HostRam => Some(inputs.host_ram),
    };
    let mut capped = None;
    if let (SizeFrom::Annotation(_), Some(max)) = (from, setting.max) {
        let (max, _) = max.resolve(memory_limit, inputs.host_ram);
        if bytes > max {
            (bytes, capped) = (max, Some(Cap::HostConfig { key: setting.max_key, max, asked: bytes }));
        }
    }
    if let Some(limit) = memory_limit.filter(|&l| bytes > l) {
        // the plan has no tmpfs at all under a limit below MIN_BYTES, so
        // the cap never goes under the smallest tmpfs.
        let cap = Cap::MemoryLimit { limit, asked: bytes };
        (bytes, capped) = (limit, Some(cap));
    }
    Ok(Sizing { bytes, requested: size.to_string(), from, basis, basis_bytes, capped })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::host_config::HostConfig;
    use crate::plan::fixtures::{
        base, decide_with, home_plan, plan, shm, tmpfs_targets, user_env, with, GI, MI,
    };
    use crate::plan::{memory_limit, Action, Passwd, ANNOTATION_ENABLED, TMPFS_MODE};

    /// The sizes for a host config, the spec's annotations and memory limit, on 16 GiB of RAM.
    fn sizes_for(config: &str, annotations: serde_json::Value, limit: Option<u64>) -> Sizes {
        let host_config = HostConfig::parse(config).unwrap();
        let mut v = json!({"ociVersion": "1.0.2", "annotations": annotations});
        if let Some(l) = limit {
            v["linux"] = json!({"resources": {"memory": {"limit": l}}});
        }
        let spec = serde_json::from_value(v).unwrap();
        sizes(&Inputs {
            spec: &spec,
            state_annotations: None,
            host_config: &host_config,
            host_ram: Bytes(16 * GI),
            user: &crate::plan::UserFacts::HOOK,
        })
        .unwrap()
    }

    #[test]
    fn sizes_table() {
        // (name, host config, annotations, memory limit, tmp bytes + origin, shm bytes + origin)
        type Case =
            (&'static str, &'static str, serde_json::Value, Option<u64>, (u64, SizeFrom), (u64, SizeFrom));
        let cases: [Case; 5] = [
            (
                "defaults of RAM",
                "",
                json!({}),
                None,
                (4 * GI, SizeFrom::Default),
                (8 * GI, SizeFrom::Default),
            ),
            (
                "defaults of the limit",
                "",
                json!({}),
                Some(4 * GI),
                (GI, SizeFrom::Default),
                (2 * GI, SizeFrom::Default),
            ),
            (
                "host config equal to the default is still the host config",
                "tmp_size = \"25%\"",
                json!({}),
                None,
                (4 * GI, SizeFrom::HostConfig),
                (8 * GI, SizeFrom::Default),
            ),
            (
                "annotation wins",
                "tmp_size = \"1g\"",
                json!({ANNOTATION_TMP_SIZE: "512Mi", ANNOTATION_SHM_SIZE: "2g"}),
                None,
                (GI / 2, SizeFrom::Annotation(ANNOTATION_TMP_SIZE)),
                (2 * GI, SizeFrom::Annotation(ANNOTATION_SHM_SIZE)),
            ),
            (
                "percent annotation of the limit",
                "",
                json!({ANNOTATION_SHM_SIZE: "100%"}),
                Some(GI),
                (GI / 4, SizeFrom::Default),
                (GI, SizeFrom::Annotation(ANNOTATION_SHM_SIZE)),
            ),
        ];
        for (name, config, annotations, limit, tmp, shm) in cases {
            let got = sizes_for(config, annotations, limit);
            assert_eq!((got.tmp.bytes.0, got.tmp.from), tmp, "{name}");
            assert_eq!((got.shm.bytes.0, got.shm.from), shm, "{name}");
        }
    }

    #[test]
    fn caps_table() {
        const MI: u64 = 1 << 20;
        // (name, host config, annotations, memory limit, tmp, shm, a warning expected)
        type Case = (&'static str, &'static str, serde_json::Value, Option<u64>, u64, u64, bool);
        let cases: [Case; 6] = [
            (
                "absolute above the limit",
                "tmp_size = \"2g\"\nshm_size = \"8g\"",
                json!({}),
                Some(GI),
                GI,
                GI,
                false,
            ),
            ("percent stays within", "", json!({}), Some(GI), 256 * MI, 512 * MI, false),
            (
                "annotation above max_shm_size",
                "max_shm_size = \"1g\"",
                json!({ANNOTATION_SHM_SIZE: "4g", ANNOTATION_TMP_SIZE: "100Mi"}),
                None,
                100 * MI,
                GI,
                true,
            ),
            (
                "annotation within max",
                "max_shm_size = \"1g\"",
                json!({ANNOTATION_SHM_SIZE: "300Mi"}),
                None,
                4 * GI,
                300 * MI,
                false,
            ),
            (
                "max does not cap the host config",
                "shm_size = \"2g\"\nmax_shm_size = \"1g\"",
                json!({}),
                None,
                4 * GI,
                2 * GI,
                false,
            ),
            (
                "annotations ignored",
                "annotations = \"ignore\"",
                json!({ANNOTATION_SHM_SIZE: "300Mi"}),
                None,
                4 * GI,
                8 * GI,
                false,
            ),
        ];
        for (name, config, annotations, limit, tmp, shm, warned) in cases {
            let got = sizes_for(config, annotations, limit);
            assert_eq!((got.tmp.bytes.0, got.shm.bytes.0), (tmp, shm), "{name}");
            let by_host = matches!(got.shm.capped, Some(Cap::HostConfig { key: "max_shm_size", .. }));
            assert_eq!(by_host, warned, "{name}: {:?}", got.shm.capped);
        }
    }

    #[test]
    fn bad_annotations_are_errors() {
        for (key, value) in [
            (ANNOTATION_TMP_SIZE, "1G,mode=4777"),
            (ANNOTATION_SHM_SIZE, "0"),
            (ANNOTATION_TMP_SIZE, ""),
            (ANNOTATION_ENABLED, "yes"),
        ] {
            let c = with(base(), "/annotations", json!({ key: value }));
            let err = decide_with(&c, &HostConfig::default()).expect_err(value);
            assert!(err.to_string().contains(key), "{err}");
        }
    }

    #[test]
    fn memory_limit_is_the_basis_when_positive() {
        let c = with(base(), "/linux/resources", json!({"memory": {"limit": 4 * GI}}));
        let p = plan(&c);
        assert_eq!(tmpfs_targets(&p)[0].1, GI);
        assert_eq!(shm(&p).unwrap().0, 2 * GI);
        for limit in [json!(0), json!(-1)] {
            let c = with(base(), "/linux/resources", json!({"memory": {"limit": limit}}));
            assert_eq!(tmpfs_targets(&plan(&c))[0].1, 4 * GI);
        }
    }

    #[test]
    fn host_config_applies() {
        let s = HostConfig::parse("tmp_size = \"1g\"\nshm_size = \"2g\"\nextra_targets = [\"/run\"]\nnoexec = true\nnr_inodes = 5000").unwrap();
        let p = decide_with(&base(), &s).unwrap();
        assert_eq!(tmpfs_targets(&p), vec![("/tmp".into(), GI), ("/run".into(), GI)]);
        let Action::MountTmpfs { tmpfs, .. } = &p.actions[0] else { panic!() };
        assert!(tmpfs.noexec && tmpfs.nosuid && tmpfs.nodev && tmpfs.mode == TMPFS_MODE);
        assert_eq!(tmpfs.nr_inodes, Some(5000));
        assert_eq!(tmpfs.size.from, SizeFrom::HostConfig);
    }

    #[test]
    fn no_tmpfs_larger_than_the_memory_limit() {
        let c = with(base(), "/linux/resources", json!({"memory": {"limit": GI}}));
        let c = with(c, "/annotations", json!({ANNOTATION_SHM_SIZE: "4g"}));
        let p = plan(&c);
        let Some(Action::Shm { tmpfs, .. }) = p.actions.last() else { panic!() };
        assert_eq!(tmpfs.size.bytes.0, GI);
        assert_eq!(tmpfs.size.capped, Some(Cap::MemoryLimit { limit: Bytes(GI), asked: Bytes(4 * GI) }));
    }

    #[test]
    fn memory_limit_table() {
        // (limit, /tmp bytes, /dev/shm bytes): below 1 MiB nothing at all;
        // at 1 MiB the spec's 64 MiB /dev/shm is above the plan's: never shrunk.
        type Case = (u64, Option<u64>, Option<u64>);
        let cases: [Case; 4] = [
            (512 << 10, None, None),
            ((1 << 20) - 4096, None, None),
            (MI, Some(MI), None),
            (GI, Some(GI / 4), Some(GI / 2)),
        ];
        for (limit, want_tmp, want_shm) in cases {
            let c = with(base(), "/linux/resources", json!({"memory": {"limit": limit}}));
            let p = plan(&c);
            assert_eq!(tmpfs_targets(&p).first().map(|(_, b)| *b), want_tmp, "limit {limit}");
            assert_eq!(shm(&p).map(|(b, _)| b), want_shm, "limit {limit}");
            if want_tmp.is_none() {
                assert!(p.enabled && p.actions.is_empty(), "limit {limit}");
                assert!(p.notes.iter().any(|n| n.warn && n.reason.contains("below 1Mi")), "{:?}", p.notes);
            }
        }
    }

    #[test]
    fn memory_use_sums_every_tmpfs_against_the_limit() {
        let mut c = user_env(0, 0, &["HOME=/root", "TMPDIR=/scratch"]);
        c["linux"]["resources"] = json!({"memory": {"limit": 4 * GI}});
        let p = home_plan(&c, &HostConfig::default(), Passwd::NotRead, 0);
        // /tmp, /scratch at 1Gi each, the caches 1Gi together, /dev/shm at 2Gi.
        let m = p.memory_use(memory_limit(&serde_json::from_value(c.clone()).unwrap()));
        assert_eq!(
            (m.tmpfs_total, m.limit),
            (Bytes(4 * GI + (((GI / 5) >> 20) << 20) * 5), Some(Bytes(4 * GI)))
        );
        assert!(m.over() && m.line().contains("over the memory limit 4Gi"), "{}", m.line());
        let small = HostConfig::parse("home_size = \"10%\"\ntmp_size = \"10%\"").unwrap();
        let m = home_plan(&c, &small, Passwd::NotRead, 0).memory_use(Some(Bytes(4 * GI)));
        assert!(!m.over() && m.line().contains("within the memory limit"), "{}", m.line());
        assert!(!plan(&base()).memory_use(None).over());
    }
}
