//! The manifest path against the NRI path for the same pods: each
//! container's [`pod::spec_for`] and the `CreateContainer` request
//! containerd's CRI would send the NRI plugin for it (mounts as measured on
//! containerd 2.1, as in `nri::adjust`'s tests), through
//! `nri::adjust::spec_of`, must give the same plan.

use super::*;
use crate::nri::adjust::fixtures::{linux, mnt};
use crate::nri::adjust::spec_of;
use crate::nri::proto::api;

const MI: u64 = 1 << 20;
const GI: u64 = 1 << 30;
const RAM: Bytes = Bytes(16 * GI);
/// What `explain --manifest` knows of the image's /etc/passwd.
const UNKNOWN: plan::UserFacts = plan::UserFacts { passwd: plan::Passwd::Unknown, home_dir: None };

fn manifest(yaml: &str) -> Vec<Workload> {
    let docs = doc::load("t.yaml", yaml).expect("yaml");
    workloads("t.yaml", &docs).expect("workloads").0
}

/// The NRI request containerd makes for `c` of `p`, written from the CRI
/// side: kubelet's mounts and volumes, containerd's hostname, resolv.conf
/// (`ro` with a read-only root) and pod shm, the env, the memory limit.
fn nri_request(p: &Pod, c: &Container) -> (api::PodSandbox, api::Container) {
    let mut pod = api::PodSandbox::new();
    pod.name = p.name.clone();
    pod.namespace = p.namespace.clone();
    pod.annotations = p.annotations.iter().cloned().collect();
    let ro = if c.read_only == Some(true) { "ro" } else { "rw" };
    let mut ctr = api::Container::new();
    ctr.name = c.name.clone();
    ctr.env = c.env.iter().filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={v}"))).collect();
    ctr.annotations.insert("io.kubernetes.cri.container-type".into(), "container".into());
    ctr.mounts = vec![
        mnt("/proc", "proc", "proc", &["nosuid", "noexec", "nodev"]),
        mnt("/dev", "tmpfs", "tmpfs", &["nosuid", "strictatime", "mode=755", "size=65536k"]),
        mnt("/etc/hosts", "bind", "/var/lib/kubelet/pods/u/etc-hosts", &["rbind", "rprivate", "rw"]),
    ];
    for (path, volume, read_only) in &c.mounts {
        let opt = if *read_only { "ro" } else { "rw" };
        let src = format!("/var/lib/kubelet/pods/u/volumes/x/{volume}");
        ctr.mounts.push(mnt(path, "bind", &src, &["rbind", "rprivate", opt]));
    }
    ctr.mounts.push(mnt(
        "/etc/hostname",
        "bind",
        "/var/lib/containerd/s/hostname",
        &["rbind", "rprivate", ro],
    ));
    ctr.mounts.push(mnt(
        "/etc/resolv.conf",
        "bind",
        "/var/lib/containerd/s/resolv.conf",
        &["rbind", "rprivate", ro],
    ));
    if !c.mounts.iter().any(|(p, _, _)| p == "/dev/shm") {
        let shm =
            if p.host_ipc { "/dev/shm" } else { "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/s/shm" };
        ctr.mounts.push(mnt("/dev/shm", "bind", shm, &["rbind", "rprivate", "rw"]));
    }
    ctr.linux = Some(linux(c.memory_limit.map(|l| l as i64))).into();
    (pod, ctr)
}

/// What two plans must agree on: the verdict, every action (size, source,
/// options), every note. (`spec_mounts` lists all the spec's mounts, which
/// differ in the mounts the plan does not read.)
fn decision(p: &Plan) -> (bool, Vec<Action>, Vec<(String, String)>) {
    let notes = p.notes.iter().map(|n| (n.subject.clone(), n.reason.clone())).collect();
    let mut actions = p.actions.clone();
    for a in &mut actions {
        if let Action::Shm { existing: ShmSource::Bind { source }, .. } = a {
            *source = source.rsplit('/').next().unwrap_or_default().to_string();
        }
    }
    (p.enabled, actions, notes)
}

fn agree(yaml: &str, host_config: &HostConfig) -> Vec<PodReport> {
    let ws = manifest(yaml);
    let mut reports = Vec::new();
    for w in &ws {
        for c in &w.pod.containers {
            let ours = plan::plan_for(
                &pod::spec_for(&w.pod, c),
                None,
                host_config,
                plan::HostFacts { ram: RAM },
                &UNKNOWN,
            );
            let (nri_pod, nri_ctr) = nri_request(&w.pod, c);
            let spec = spec_of(Some(&nri_pod), &nri_ctr).expect("nri spec");
            let theirs = plan::plan_for(&spec, None, host_config, plan::HostFacts { ram: RAM }, &UNKNOWN);
            match (ours, theirs) {
                (Ok(a), Ok(b)) => assert_eq!(decision(&a), decision(&b), "{}/{}", w.pod.name, c.name),
                (Err(a), Err(b)) => assert_eq!(a, b, "{}/{}", w.pod.name, c.name),
                (a, b) => panic!("{}/{}: manifest {a:?}, NRI {b:?}", w.pod.name, c.name),
            }
        }
        reports.push(explain(w, host_config, RAM));
    }
    reports
}

const PODS: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  template:
    metadata:
      annotations: {oci-tmpfs-hook/shm-size: 300Mi}
    spec:
      volumes:
      - {name: tmp, emptyDir: {}}
      - {name: dshm, emptyDir: {medium: Memory}}
      initContainers:
      - name: init
        image: busybox
        securityContext: {readOnlyRootFilesystem: true}
        resources: {limits: {memory: 512Mi}}
      containers:
      - name: small
        image: busybox
        securityContext: {readOnlyRootFilesystem: true}
        resources: {limits: {memory: 1Gi}}
      - name: big
        image: busybox
        securityContext: {readOnlyRootFilesystem: true}
        resources: {limits: {memory: 4G}}
        env:
        - {name: BASE, value: /scratch}
        - {name: TMPDIR, value: $(BASE)/t}
        - {name: TEMP, value: /etc/x}
        - {name: TMP, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
      - name: rw
        image: busybox
      - name: vol
        image: busybox
        securityContext: {readOnlyRootFilesystem: true}
        volumeMounts:
        - {name: tmp, mountPath: /tmp}
        - {name: dshm, mountPath: /dev/shm}
---
apiVersion: v1
kind: Service
metadata: {name: web}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  jobTemplate:
    spec:
      template:
        metadata:
          annotations: {oci-tmpfs-hook/enabled: "true", oci-tmpfs-hook/tmp-size: 8Gi}
        spec:
          hostIPC: true
          containers:
          - name: job
            image: busybox
            resources: {limits: {memory: 2Gi}}
"#;

#[test]
fn manifest_and_nri_paths_make_the_same_plans() {
    let reports = agree(PODS, &HostConfig::default());
    assert_eq!(reports.len(), 2);
    let capped =
        HostConfig::parse("max_tmp_size = \"1Gi\"\nannotations = \"allow\"\ntmp_size = \"10%\"").unwrap();
    agree(PODS, &capped);
    agree(PODS, &HostConfig::parse("annotations = \"ignore\"").unwrap());
}

fn sizes(r: &ContainerReport) -> Vec<(String, u64)> {
    r.plan
        .as_ref()
        .unwrap()
        .actions
        .iter()
        .map(|a| (a.target().to_string(), a.tmpfs().size.bytes.0))
        .collect()
}

#[test]
fn deployment_sizes_and_the_pod_shm() {
    let reports = agree(PODS, &HostConfig::default());
    let web = &reports[0];
    assert_eq!((web.namespace.as_str(), web.name.as_str(), web.template), ("shop", "web", "spec.template"));
    let by: Vec<&str> = web.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(by, ["init", "small", "big", "rw", "vol"]);
    assert_eq!(web.containers[0].role, Role::Init);
    assert_eq!(sizes(&web.containers[0]), [("/tmp".into(), 128 * MI), ("/dev/shm".into(), 300 * MI)]);
    assert_eq!(sizes(&web.containers[1]), [("/tmp".into(), 256 * MI), ("/dev/shm".into(), 300 * MI)]);
    // 4G is decimal: 4 * 10^9 bytes, a quarter of it rounded up to a page;
    // TMPDIR expanded, TEMP refused, TMP unknown.
    let quarter = (4_000_000_000u64 / 4).div_ceil(4096) * 4096;
    assert_eq!(
        sizes(&web.containers[2]),
        [("/tmp".into(), quarter), ("/scratch/t".into(), quarter), ("/dev/shm".into(), 300 * MI)]
    );
    let big = web.containers[2].plan.as_ref().unwrap();
    assert!(big.notes.iter().any(|n| n.subject == "TEMP=/etc/x"), "{:?}", big.notes);
    assert!(web.containers[2].unknown[0].starts_with("TMP comes from valueFrom"));
    assert!(!web.containers[3].plan.as_ref().unwrap().enabled);
    // The emptyDir at /tmp wins; the one at /dev/shm is the container's own.
    let vol = web.containers[4].plan.as_ref().unwrap();
    assert!(vol.notes.iter().any(|n| n.subject == "/tmp" && n.reason.contains("already mounts")));
    assert_eq!(web.containers[4].volumes[0], ("/tmp".into(), "volume tmp (emptyDir)".into()));
    let why = web.containers[4].shm_left_alone.as_deref().unwrap_or_default();
    assert!(why.starts_with("volume dshm is mounted there"), "{why}");
    assert!(web.containers[1].shm_left_alone.is_none());
    assert_eq!(
        web.shm,
        PodShm::Sandbox { start: SANDBOX_SHM, size: Bytes(300 * MI), by: Some("init".into()) }
    );

    let job = &reports[1];
    assert_eq!(job.template, "spec.jobTemplate.spec.template");
    let c = &job.containers[0];
    assert_eq!(sizes(c), [("/tmp".into(), 2 * GI)]);
    let tmp = c.plan.as_ref().unwrap().actions[0].tmpfs().size.clone();
    assert!(tmp.capped.is_some(), "8Gi asked, 2Gi limit: {tmp:?}");
    assert_eq!(job.shm, PodShm::Host);
}

/// A cache dir named by an `env_targets` variable in a container's env
/// is a target in the manifest path as in the NRI path; one from
/// `valueFrom` is named as unknown; `env_targets = []` turns it off.
#[test]
fn cache_dirs_in_the_env_are_targets() {
    let yaml = r#"
apiVersion: v1
kind: Pod
metadata: {name: train}
spec:
  containers:
  - name: triton
    image: busybox
    securityContext: {readOnlyRootFilesystem: true}
    resources: {limits: {memory: 4Gi}}
    env:
    - {name: TRITON_CACHE_DIR, value: /cache/triton}
    - {name: XDG_CACHE_HOME, value: /tmp/xdg}
    - {name: HF_HOME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
"#;
    let r = agree(yaml, &HostConfig::default());
    let c = &r[0].containers[0];
    assert_eq!(sizes(c), [("/tmp".into(), GI), ("/cache/triton".into(), GI), ("/dev/shm".into(), 2 * GI)]);
    let plan = c.plan.as_ref().unwrap();
    let plan::Action::MountTmpfs { subdirs, origins, .. } = &plan.actions[0] else { panic!("{plan:?}") };
    assert_eq!(subdirs, &["xdg".to_string()]);
    assert_eq!(origins.len(), 2, "{origins:?}");
    assert_eq!(c.unknown, ["HF_HOME comes from valueFrom: its directory would be a target too"]);
    let off = HostConfig::parse("env_targets = []").unwrap();
    let r = agree(yaml, &off);
    let c = &r[0].containers[0];
    assert_eq!(sizes(c), [("/tmp".into(), GI), ("/dev/shm".into(), 2 * GI)]);
    assert!(c.unknown.is_empty(), "{:?}", c.unknown);
}

#[test]
fn pod_level_read_only_root_is_not_a_kubernetes_field() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  securityContext: {readOnlyRootFilesystem: true}\n  containers: [{name: a, image: b}]\n";
    let r = agree(yaml, &HostConfig::default());
    assert!(r[0].notes[0].contains("not a field of a pod's securityContext"), "{:?}", r[0].notes);
    assert!(!r[0].containers[0].plan.as_ref().unwrap().enabled);
}

#[test]
fn bad_manifests_name_the_document_and_the_field() {
    let cases = [
        ("kind: Pod\nmetadata: {name: p}\n", "t.yaml: document 1 (Pod p): apiVersion: missing"),
        ("apiVersion: v1\nmetadata: {name: p}\n", "t.yaml: document 1: kind: missing"),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{image: x}]}\n",
            "t.yaml: document 1 (Pod p): spec.containers[0].name: missing",
        ),
        (
            "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\napiVersion: x/v1\nkind: Rollout\nmetadata: {name: r}\n",
            "t.yaml: document 2 (Rollout r): kind: unknown kind \"Rollout\"",
        ),
        (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {}\n",
            "t.yaml: document 1 (Deployment d): spec.template: missing",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, image: b, resources: {limits: {memory: 1GB}}}]}\n",
            "spec.containers[0].resources.limits.memory: \"1GB\" is not a Kubernetes quantity",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, image: b, volumeMounts: [{name: v, mountPath: /tmp}]}]}\n",
            "spec.containers[0].volumeMounts[0]: name: no volume \"v\"",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p, annotations: {oci-tmpfs-hook/enabled: true}}\nspec: {containers: [{name: a, image: b}]}\n",
            "metadata.annotations.oci-tmpfs-hook/enabled: must be a string, not a boolean",
        ),
        ("- 1\n- 2\n", "t.yaml: document 1: not a Kubernetes object"),
        ("apiVersion: v1\nkind: Pod\nspec: {}\n", "t.yaml: document 1 (Pod): metadata.name: missing"),
        ("# nothing\n", "t.yaml: no Kubernetes object in it"),
    ];
    for (yaml, want) in cases {
        let err = doc::load("t.yaml", yaml).and_then(|d| workloads("t.yaml", &d)).expect_err(yaml);
        assert!(err.to_string().contains(want), "{yaml}\n got: {err}\nwant: {want}");
    }
}

#[test]
fn lists_and_every_workload_kind() {
    let tpl = "{metadata: {name: t}, spec: {containers: [{name: a, image: b}]}}";
    let kinds = [
        ("Deployment", format!("spec: {{template: {tpl}}}")),
        ("StatefulSet", format!("spec: {{template: {tpl}}}")),
        ("DaemonSet", format!("spec: {{template: {tpl}}}")),
        ("ReplicaSet", format!("spec: {{template: {tpl}}}")),
        ("Job", format!("spec: {{template: {tpl}}}")),
        ("CronJob", format!("spec: {{jobTemplate: {{spec: {{template: {tpl}}}}}}}")),
        ("PodTemplate", format!("template: {tpl}")),
    ];
    let items: Vec<String> = kinds
        .iter()
        .map(|(k, body)| format!("- apiVersion: v1\n  kind: {k}\n  metadata: {{name: x}}\n  {body}\n"))
        .collect();
    let yaml = format!("apiVersion: v1\nkind: List\nitems:\n{}", items.concat());
    let ws = manifest(&yaml);
    assert_eq!(ws.len(), kinds.len());
    assert_eq!(ws[5].doc.index, "1.items[5]");
    assert!(ws.iter().all(|w| w.pod.containers[0].name == "a" && w.pod.name == "t"));
}

/// HOME in a manifest: a container's `HOME` is a target (owned by its
/// `runAsUser`/`runAsGroup`, the container's over the pod's); without one,
/// HOME comes from the image's /etc/passwd, unknown here, and the plan says
/// what it assumes. Every container's tmpfs sizes are summed against its
/// memory limit.
#[test]
fn home_in_a_manifest() {
    let yaml = r#"
apiVersion: v1
kind: Pod
metadata: {name: train}
spec:
  securityContext: {runAsUser: 1000, runAsGroup: 2000}
  containers:
  - name: with-home
    image: busybox
    securityContext: {readOnlyRootFilesystem: true, runAsGroup: 3000}
    resources: {limits: {memory: 1Gi}}
    env:
    - {name: HOME, value: /home/app}
    - {name: TMPDIR, value: /scratch}
  - name: image-home
    image: busybox
    securityContext: {readOnlyRootFilesystem: true}
"#;
    let ws = manifest(yaml);
    let r = explain(&ws[0], &HostConfig::default(), RAM);
    let c = &r.containers[0];
    let plan = c.plan.as_ref().unwrap();
    // HOME itself is never a target; its caches are, assumed missing from
    // the image, and share home_size.
    assert!(plan.actions.iter().all(|a| a.target() != "/home/app"), "HOME is not a target");
    let cache = plan.actions.iter().find(|a| a.target() == "/home/app/.triton").expect("a cache is a target");
    let t = cache.tmpfs();
    assert_eq!(
        (t.mode, t.owner, t.size.bytes),
        (0o700, Some(plan::Owner { uid: 1000, gid: 3000 }), Bytes(((GI / 4 / 5) >> 20) << 20))
    );
    // /tmp, /scratch and the caches at 25% of 1Gi, /dev/shm at 50%: 1.25Gi.
    let m = c.memory.expect("a plan with mounts has its memory use");
    assert_eq!(
        (m.tmpfs_total, m.limit, m.over()),
        (Bytes(GI + (((GI / 4 / 5) >> 20) << 20) * 5), Some(Bytes(GI)), true)
    );
    assert!(m.line().contains("OOM kill"), "{}", m.line());
    let c = &r.containers[1];
    let plan = c.plan.as_ref().unwrap();
    assert!(plan.actions.iter().all(|a| a.tmpfs().own_from.is_none()), "no cache target without HOME");
    let note = plan.notes.iter().find(|n| n.subject == "HOME").expect("the assumption is said");
    assert!(note.reason.contains("uid 1000") && note.reason.contains("unknown here"), "{note:?}");
    assert!(!c.memory.unwrap().over(), "no limit: never over");
    // The assumed home is counted: 25% of the node's RAM, its user's.
    let t = c.assumed_home.as_ref().expect("the assumed HOME's tmpfs");
    assert_eq!(
        (t.size.bytes, t.user),
        (Bytes((((RAM.0 / 4 / 5) >> 20) << 20) * 5), Some(plan::Owner { uid: 1000, gid: 2000 }))
    );
    assert_eq!(r.containers[0].assumed_home, None, "its env's HOME is in the plan");
}

/// A container whose HOME comes from the image's /etc/passwd (unknown
/// here) is summed with the home the plan assumes, sized like the node's
/// (home_size, the home-size annotation within max_home_size, the memory
/// limit): `TMPDIR=/scratch` and a 1Gi limit are /tmp, /scratch and HOME
/// at 256Mi and /dev/shm at 512Mi, 1280Mi, over the limit; with
/// `home = false`, or `HOME` in its env, nothing is assumed.
#[test]
fn the_assumed_home_counts_in_the_memory_sum() {
    let pod = |annotations: &str, env: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p, annotations: {{{annotations}}}}}\nspec:\n  containers:\n  - name: a\n    image: b\n    securityContext: {{readOnlyRootFilesystem: true, runAsUser: 1000}}\n    resources: {{limits: {{memory: 1Gi}}}}\n    env: [{{name: TMPDIR, value: /scratch}}{env}]\n"
        )
    };
    let report = |yaml: &str, host_config: &HostConfig| {
        let ws = manifest(yaml);
        let mut r = explain(&ws[0], host_config, RAM);
        r.containers.remove(0)
    };
    let c = report(&pod("", ""), &HostConfig::default());
    let home = c.assumed_home.as_ref().expect("an assumed HOME");
    // Five cache tmpfs sharing a quarter of the limit (each rounded down).
    assert_eq!((home.size.bytes, home.mode), (Bytes((((GI / 4 / 5) >> 20) << 20) * 5), 0o700));
    let m = c.memory.unwrap();
    assert_eq!(
        (m.tmpfs_total, m.over()),
        (Bytes(GI + (((GI / 4 / 5) >> 20) << 20) * 5), true),
        "{}",
        m.line()
    );
    let plan_only = c.plan.as_ref().unwrap().memory_use(m.limit).tmpfs_total;
    assert_eq!(plan_only, Bytes(GI), "the plan's own actions leave the assumed HOME out");

    // The annotation within max_home_size, and the memory limit, as on a node.
    let capped = HostConfig { max_home_size: Some("128Mi".parse().unwrap()), ..HostConfig::default() };
    let c = report(&pod("oci-tmpfs-hook/home-size: 512Mi", ""), &capped);
    assert_eq!(c.assumed_home.unwrap().size.bytes, Bytes(((((128 << 20) / 5) >> 20) << 20) * 5));
    let c = report(&pod("oci-tmpfs-hook/home-size: 4Gi", ""), &HostConfig::default());
    assert_eq!(
        c.assumed_home.unwrap().size.bytes,
        Bytes((((GI / 5) >> 20) << 20) * 5),
        "capped by the memory limit"
    );

    let off = HostConfig { home: false, ..HostConfig::default() };
    let c = report(&pod("", ""), &off);
    assert_eq!((c.assumed_home, c.memory.unwrap().tmpfs_total), (None, Bytes(GI)), "home = false");
    let c = report(&pod("", ", {name: HOME, value: /tmp}"), &HostConfig::default());
    assert_eq!(c.assumed_home, None, "HOME=/tmp is /tmp's tmpfs");
    assert_eq!(c.memory.unwrap().tmpfs_total, Bytes(GI));
}
