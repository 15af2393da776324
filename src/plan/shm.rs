//! Step 4 of the plan: `/dev/shm`. Grown to the planned size when the spec
//! mounts a tmpfs or binds an engine-made one there, mounted fresh (mode 1777,
//! nosuid, nodev, noexec) when the spec has none; never shrunk, never the
//! host's own (host IPC), never another filesystem. A `/dev/shm` the spec
//! mounts read-only (Podman 5's `--read-only --read-only-tmpfs=false`) is made
//! writable in the container (the hook stacks a writable clone over it:
//! docs/design.md#readonly-shm): a read-only `/dev/shm` breaks every DataLoader.
//! Pure.

use super::{Action, Note, Owner, ShmSource, ShmWay, Sizing, SpecMounts, Tmpfs, SHM_PATH, TMPFS_MODE};
use crate::size::Bytes;

/// The `/dev/shm` action, or the note saying why it is left alone.
pub(super) fn shm(
    spec: &SpecMounts<'_>,
    size: Sizing,
    owner: Option<Owner>,
    label: Option<String>,
) -> Result<Action, Note> {
    let existing = existing(spec)?;
    let writable = spec
        .last_at(SHM_PATH)
        .is_some_and(|m| m.options().as_ref().is_some_and(|o| o.iter().any(|x| x == "ro")));
    match &existing {
        ShmSource::Bind { source } if crate::target::normalise(source) == SHM_PATH => {
            return Err(Note::info(SHM_PATH, "it is the host's /dev/shm (host IPC); never resized"));
        }
        ShmSource::Tmpfs { size: Some(have) } if *have >= size.bytes && !writable => {
            return Err(Note::info(
                SHM_PATH,
                format!("the spec already gives it {have}, not less than {}; never shrunk", size.bytes),
            ));
        }
        _ => {}
    }
    let way = if existing == ShmSource::None { ShmWay::Fresh } else { ShmWay::Grow };
    let tmpfs = Tmpfs {
        size,
        nr_inodes: None,
        mode: TMPFS_MODE,
        user: None,
        image_owner: None,
        own_from: None,
        nosuid: true,
        nodev: true,
        noexec: true,
        owner,
        label,
    };
    Ok(Action::Shm { existing, way, writable, tmpfs })
}

/// What the spec mounts at `/dev/shm` (the last entry wins, as in a runtime).
fn existing(spec: &SpecMounts<'_>) -> Result<ShmSource, Note> {
    let Some(m) = spec.last_at(SHM_PATH) else { return Ok(ShmSource::None) };
    let is_bind = m.options().as_ref().is_some_and(|o| o.iter().any(|x| x == "bind" || x == "rbind"))
        || m.typ().as_deref() == Some("bind");
    if is_bind {
        let source = m.source().as_ref().map(|s| s.to_string_lossy().into_owned());
        return Ok(ShmSource::Bind { source: source.unwrap_or_default() });
    }
    if m.typ().as_deref() == Some("tmpfs") || m.typ().is_none() {
        let size = m
            .options()
            .as_ref()
            .and_then(|o| o.iter().rev().find_map(|x| x.strip_prefix("size=")))
            .and_then(Bytes::from_tmpfs_option);
        return Ok(ShmSource::Tmpfs { size });
    }
    Err(Note::warn(SHM_PATH, format!("the spec mounts a {:?} filesystem there", m.typ())))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::plan::fixtures::MI;
    use crate::plan::SizeFrom;

    fn plain(bytes: u64) -> Sizing {
        Sizing {
            bytes: Bytes(bytes),
            requested: String::new(),
            from: SizeFrom::Default,
            basis: crate::size::Basis::Absolute,
            basis_bytes: None,
            capped: None,
        }
    }

    #[test]
    fn shm_table() {
        let tmpfs = |opts: serde_json::Value| json!({"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": opts});
        let bind = |src: &str| json!({"destination": "/dev/shm", "type": "bind", "source": src, "options": ["rbind"]});
        // (name, mounts, Ok(way, existing) or Err(reason fragment))
        type Case = (&'static str, serde_json::Value, Result<(ShmWay, ShmSource), &'static str>);
        let cases: Vec<Case> = vec![
            ("none: fresh", json!([]), Ok((ShmWay::Fresh, ShmSource::None))),
            (
                "small tmpfs: grow",
                json!([tmpfs(json!(["size=65536k"]))]),
                Ok((ShmWay::Grow, ShmSource::Tmpfs { size: Some(Bytes(64 * MI)) })),
            ),
            (
                "unsized tmpfs: grow",
                json!([tmpfs(json!(["nosuid"]))]),
                Ok((ShmWay::Grow, ShmSource::Tmpfs { size: None })),
            ),
            ("big tmpfs: never shrunk", json!([tmpfs(json!(["size=32g"]))]), Err("never shrunk")),
            (
                "engine bind: grow",
                json!([bind("/var/lib/docker/x/shm")]),
                Ok((ShmWay::Grow, ShmSource::Bind { source: "/var/lib/docker/x/shm".into() })),
            ),
            ("host bind: never", json!([bind("/dev//shm/")]), Err("host IPC")),
            ("other fs", json!([{"destination": "/dev/shm", "type": "ramfs", "source": "x"}]), Err("ramfs")),
            (
                "last entry wins",
                json!([tmpfs(json!(["size=32g"])), bind("/run/pod/shm")]),
                Ok((ShmWay::Grow, ShmSource::Bind { source: "/run/pod/shm".into() })),
            ),
        ];
        for (name, mounts, want) in cases {
            let spec: crate::oci::Spec =
                serde_json::from_value(json!({"ociVersion": "1.0.2", "mounts": mounts})).unwrap();
            let got = shm(&SpecMounts::of(&spec), plain(512 * MI), None, None);
            match (got, want) {
                (Ok(Action::Shm { way, existing, tmpfs, .. }), Ok(w)) => {
                    assert_eq!((way, existing), w, "{name}");
                    assert!(
                        tmpfs.nosuid && tmpfs.nodev && tmpfs.noexec && tmpfs.mode == TMPFS_MODE,
                        "{name}"
                    );
                }
                (Err(note), Err(fragment)) => assert!(note.reason.contains(fragment), "{name}: {note:?}"),
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
    }

    /// `/dev/shm` as the whole plan makes it. `shm` here is the fixture that
    /// reads the plan's `/dev/shm` action; the step is `super::shm`.
    mod in_the_plan {
        use serde_json::json;

        use crate::plan::fixtures::{base, plan, shm, tmpfs_targets, with, GI, MI};
        use crate::plan::{Off, ShmSource, ANNOTATION_ENABLED, SHM_PATH};

        #[test]
        fn shm_never_shrinks_and_never_the_hosts() {
            let mut c = base();
            c["mounts"][2]["options"] = json!(["nosuid", "size=32g"]);
            assert_eq!(shm(&plan(&c)), None);
            assert!(plan(&c)
                .notes
                .iter()
                .any(|n| n.subject == SHM_PATH && n.reason.contains("never shrunk")));

            let mut c = base();
            c["mounts"][2] = json!({"destination": "/dev/shm", "type": "bind", "source": "/dev/shm", "options": ["rbind", "rprivate"]});
            assert_eq!(shm(&plan(&c)), None);

            let mut c = base();
            c["mounts"][2] = json!({"destination": "/dev/shm", "type": "bind", "source": "/var/lib/docker/containers/x/mounts/shm", "options": ["rbind"]});
            assert_eq!(
                shm(&plan(&c)).unwrap().1,
                ShmSource::Bind { source: "/var/lib/docker/containers/x/mounts/shm".into() }
            );

            let mut c = base();
            c["mounts"].as_array_mut().unwrap().remove(2);
            assert_eq!(shm(&plan(&c)).unwrap().1, ShmSource::None);

            let mut c = base();
            c["mounts"][2]["options"] = json!(["nosuid"]);
            assert_eq!(shm(&plan(&c)).unwrap().1, ShmSource::Tmpfs { size: None });
        }

        #[test]
        fn pod_sandbox_gets_nothing_and_app_containers_grow_the_pod_shm() {
            let mut sandbox = with(
                base(),
                "/annotations",
                json!({"io.kubernetes.cri.container-type": "sandbox", ANNOTATION_ENABLED: "true"}),
            );
            sandbox["mounts"].as_array_mut().unwrap().push(
                json!({"destination": "/dev/shm", "type": "bind", "source": "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/p/shm", "options": ["rbind", "ro"]}),
            );
            let p = plan(&sandbox);
            assert!(!p.enabled && p.actions.is_empty(), "{p:?}");
            assert!(p.why.contains("sandbox"), "{}", p.why);
            assert_eq!(p.off, Some(Off::Sandbox));

            let mut app =
                with(base(), "/annotations", json!({"io.kubernetes.cri.container-type": "container"}));
            app = with(app, "/linux/resources", json!({"memory": {"limit": GI}}));
            app["mounts"][2] = json!({"destination": "/dev/shm", "type": "bind", "source": "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/p/shm", "options": ["rbind", "rprivate", "rw"]});
            let p = plan(&app);
            assert_eq!(tmpfs_targets(&p), vec![("/tmp".into(), 256 * MI)]);
            let (bytes, existing) = shm(&p).unwrap();
            assert_eq!(bytes, 512 * MI);
            assert!(matches!(existing, ShmSource::Bind { .. }));
        }
    }
}
