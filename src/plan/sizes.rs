//! Step 2 of the plan: the bytes for the temp targets and for `/dev/shm`,
//! and where each setting came from (annotation, host config, default).
//! Percentages are of the container's memory limit when it has one, else of
//! the host's RAM. Pure.

use super::{Inputs, PlanError, SizeFrom, Sizing, ANNOTATION_SHM_SIZE, ANNOTATION_TMP_SIZE};
use crate::size::{Basis, Bytes, Size};

/// The two sizes a plan uses.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Sizes {
    pub(super) tmp: Sizing,
    pub(super) shm: Sizing,
}

pub(super) fn sizes(inputs: &Inputs<'_>) -> Result<Sizes, PlanError> {
    let s = inputs.settings;
    let limit = memory_limit(inputs.spec);
    Ok(Sizes {
        tmp: sizing(inputs, limit, ANNOTATION_TMP_SIZE, (s.tmp_size, s.tmp_size_set))?,
        shm: sizing(inputs, limit, ANNOTATION_SHM_SIZE, (s.shm_size, s.shm_size_set))?,
    })
}

/// `linux.resources.memory.limit`, when positive.
pub(super) fn memory_limit(spec: &oci_spec::runtime::Spec) -> Option<Bytes> {
    spec.linux()
        .as_ref()
        .and_then(|l| l.resources().as_ref())
        .and_then(|r| r.memory().as_ref())
        .and_then(|m| m.limit())
        .and_then(|l| u64::try_from(l).ok())
        .filter(|&l| l > 0)
        .map(Bytes)
}

/// One size: the annotation `key` wins over the host config's `(size, set)`.
fn sizing(
    inputs: &Inputs<'_>,
    memory_limit: Option<Bytes>,
    key: &'static str,
    (configured, set): (Size, bool),
) -> Result<Sizing, PlanError> {
    let (size, from) = match inputs.annotation(key) {
        Some(text) => {
            let size = text.parse::<Size>().map_err(|source| PlanError::Size {
                key,
                value: text.chars().take(64).collect(),
                source,
            })?;
            (size, SizeFrom::Annotation(key))
        }
        None if set => (configured, SizeFrom::HostConfig),
        None => (configured, SizeFrom::Default),
    };
    let (bytes, basis) = size.resolve(memory_limit, inputs.host_ram);
    let basis_bytes = match basis {
        Basis::Absolute => None,
        Basis::MemoryLimit => memory_limit,
        Basis::HostRam => Some(inputs.host_ram),
    };
    Ok(Sizing { bytes, requested: size.to_string(), from, basis, basis_bytes })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::settings::Settings;

    const GI: u64 = 1 << 30;

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
            let settings = Settings::parse(config).unwrap();
            let mut v = json!({"ociVersion": "1.0.2", "annotations": annotations});
            if let Some(l) = limit {
                v["linux"] = json!({"resources": {"memory": {"limit": l}}});
            }
            let spec = serde_json::from_value(v).unwrap();
            let inputs = Inputs {
                spec: &spec,
                state_annotations: None,
                settings: &settings,
                host_ram: Bytes(16 * GI),
            };
            let got = sizes(&inputs).unwrap();
            assert_eq!((got.tmp.bytes.0, got.tmp.from), tmp, "{name}");
            assert_eq!((got.shm.bytes.0, got.shm.from), shm, "{name}");
        }
    }
}
