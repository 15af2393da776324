//! `usage`, pure: how full each running container's tmpfs of ours and its
//! `/dev/shm` are. This module reads text and gives values: the runtimes'
//! state files (runc's `state.json`, crun's `status`), a container's
//! `mountinfo` and which of its mounts are targets, `/proc/<pid>/stat`'s
//! start time, the cgroup a process is in and its memory figures; and how
//! a container is shown ([`render`]) and when a target is too full
//! ([`render::FULL_PERCENT`]). No I/O here: the reads, by fd and in the
//! container's root, are [`crate::sys::usage`]'s (docs/design.md#usage).

pub(crate) mod render;

use serde::Serialize;

use crate::names::{MOUNT_SOURCE, SHM_PATH};

/// The state directories the runtimes keep, each holding one directory per
/// container: runc's and crun's defaults (Podman's too), Docker's (one per
/// runtime it knows, `runtime-runc` and ours among them) and containerd's
/// runc shim's, one per namespace. A component may hold one `*`
/// ([`component_matches`]).
pub(crate) const STATE_ROOTS: &[&str] =
    &["/run/runc", "/run/crun", "/run/docker/runtime-*/moby", "/run/containerd/runc/*"];

/// Whether the directory entry `name` matches `pattern`, a path component
/// with at most one `*` (any run of characters); `.` and `..` never match.
pub(crate) fn component_matches(pattern: &str, name: &str) -> bool {
    if name == "." || name == ".." {
        return false;
    }
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            name.len() >= head.len() + tail.len() && name.starts_with(head) && name.ends_with(tail)
        }
    }
}

/// The most of a state file, a `config.json` or a `/proc` file read.
pub(crate) const MAX_FILE_BYTES: u64 = 4 << 20;

/// Annotations that name a CRI container: namespace, pod, container
/// (containerd's CRI plugin, then CRI-O's).
const NAME_ANNOTATIONS: [[&str; 3]; 2] = [
    [
        "io.kubernetes.cri.sandbox-namespace",
        "io.kubernetes.cri.sandbox-name",
        "io.kubernetes.cri.container-name",
    ],
    ["io.kubernetes.pod.namespace", "io.kubernetes.pod.name", "io.kubernetes.container.name"],
];

/// What a runtime's state says of one container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StateEntry {
    pub id: String,
    pub pid: i32,
    /// The init process's start time in clock ticks (`/proc/<pid>/stat`
    /// field 22), when the runtime recorded it: a pid that starts at
    /// another time is another process.
    pub start: Option<u64>,
    pub name: Option<String>,
}

/// runc's `state.json`: `init_process_pid`, `init_process_start`, and the
/// annotations as `config.labels` (`key=value`, beside runc's own `bundle=`).
/// `None` when it is not one, or names no process.
pub(crate) fn parse_runc_state(id: &str, bytes: &[u8]) -> Option<StateEntry> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let pid = v.get("init_process_pid")?.as_i64().and_then(|p| i32::try_from(p).ok())?;
    let start = v.get("init_process_start").and_then(serde_json::Value::as_u64);
    let labels = v.pointer("/config/labels").and_then(serde_json::Value::as_array);
    let pairs = labels.into_iter().flatten().filter_map(|l| l.as_str()?.split_once('='));
    let name = name_from(pairs);
    (pid > 0).then(|| StateEntry { id: id.to_string(), pid, start, name })
}

/// crun's `status` (`pid`, `process-start-time`), with the annotations of
/// the `config.json` crun keeps beside it when there is one.
pub(crate) fn parse_crun_status(id: &str, status: &[u8], config: Option<&[u8]>) -> Option<StateEntry> {
    let v: serde_json::Value = serde_json::from_slice(status).ok()?;
    let pid = v.get("pid")?.as_i64().and_then(|p| i32::try_from(p).ok())?;
    let start = v.get("process-start-time").and_then(serde_json::Value::as_u64);
    let config: Option<serde_json::Value> = config.and_then(|c| serde_json::from_slice(c).ok());
    let annotations = config.as_ref().and_then(|c| c.get("annotations")).and_then(|a| a.as_object());
    let pairs = annotations.into_iter().flatten().filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)));
    let name = name_from(pairs);
    (pid > 0).then(|| StateEntry { id: id.to_string(), pid, start, name })
}

/// `namespace/pod/container` from a CRI container's annotations, or as
/// much of it as they hold; `None` when they hold no container name.
pub(crate) fn name_from<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)>) -> Option<String> {
    let pairs: Vec<(&str, &str)> = pairs.collect();
    let get = |key: &str| pairs.iter().rev().find(|(k, _)| *k == key).map(|(_, v)| *v);
    NAME_ANNOTATIONS.iter().find_map(|[ns, pod, container]| {
        let container = get(container).filter(|c| !c.is_empty())?;
        let parts: Vec<&str> =
            [get(ns), get(pod), Some(container)].into_iter().flatten().filter(|p| !p.is_empty()).collect();
        Some(parts.join("/"))
    })
}

/// The start time (field 22, clock ticks since boot) of `/proc/<pid>/stat`:
/// counted after the last `)`, since the command name may hold anything.
pub(crate) fn start_time(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // Field 3 is the first after the name: field 22 is the 20th.
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

/// `PF_EXITING` in `/proc/<pid>/stat`'s flags (field 9): the task has
/// begun to exit (its namespaces may already be gone).
const PF_EXITING: u64 = 0x4;

/// Whether `/proc/<pid>/stat` says the process is exiting or has exited:
/// `PF_EXITING` set, or the state (field 3) zombie (`Z`) or dead (`X`).
pub(crate) fn exited(stat: &str) -> bool {
    let Some(i) = stat.rfind(')') else { return true };
    let f: Vec<&str> = stat[i + 1..].split_ascii_whitespace().collect();
    let flags = f.get(6).and_then(|v| v.parse::<u64>().ok());
    match (f.first(), flags) {
        (Some(&("Z" | "X")), _) | (None, _) | (_, None) => true,
        (_, Some(flags)) => flags & PF_EXITING != 0,
    }
}

/// One line of a `mountinfo`, the fields `usage` reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Mount {
    pub id: u64,
    pub major: u32,
    pub minor: u32,
    /// The directory of its filesystem mounted there (a cgroup's path).
    pub root: String,
    /// Relative to the process's root, unescaped.
    pub mount_point: String,
    pub fstype: String,
    pub source: String,
    pub super_options: String,
}

/// The lines of a `mountinfo` (proc(5)); a line that does not parse is
/// left out.
pub(crate) fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines().filter_map(parse_mount_line).collect()
}

fn parse_mount_line(line: &str) -> Option<Mount> {
    let (before, after) = line.split_once(" - ")?;
    let f: Vec<&str> = before.split(' ').collect();
    let (major, minor) = f.get(2)?.split_once(':')?;
    let mut a = after.split(' ');
    Some(Mount {
        id: f.first()?.parse().ok()?,
        major: major.parse().ok()?,
        minor: minor.parse().ok()?,
        root: unescape(f.get(3)?),
        mount_point: unescape(f.get(4)?),
        fstype: a.next()?.to_string(),
        source: unescape(a.next()?),
        super_options: a.next().unwrap_or_default().to_string(),
    })
}

/// `\NNN` octal escapes (space, tab, newline, backslash) undone.
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal =
            b.get(i + 1..i + 4).filter(|d| b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push(d.iter().fold(0u8, |n, c| n.wrapping_mul(8).wrapping_add(c - b'0')));
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mounts `usage` reports, in mount order: every tmpfs of ours and
/// `/dev/shm` when it is a tmpfs, each the top mount at its mount point
/// (the last line naming it), so one target per path. Linear in the
/// mounts: a container may hold tens of thousands.
pub(crate) fn targets(mounts: &[Mount]) -> Vec<&Mount> {
    let top: std::collections::HashMap<&str, usize> =
        mounts.iter().enumerate().map(|(i, m)| (m.mount_point.as_str(), i)).collect();
    mounts
        .iter()
        .enumerate()
        .filter(|(i, m)| top.get(m.mount_point.as_str()) == Some(i))
        .map(|(_, m)| m)
        .filter(|m| m.fstype == "tmpfs" && (m.source == MOUNT_SOURCE || m.mount_point == SHM_PATH))
        .collect()
}

/// Where a process's memory cgroup is, from `/proc/<pid>/cgroup`: the v1
/// hierarchy holding `memory` wins (a hybrid host keeps memory there), else
/// the v2 one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CgroupPlace {
    V1(String),
    V2(String),
}

/// The memory cgroup of `/proc/<pid>/cgroup`'s text.
pub(crate) fn memory_cgroup(text: &str) -> Option<CgroupPlace> {
    let mut v2 = None;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        if controllers.split(',').any(|c| c == "memory") {
            return Some(CgroupPlace::V1(path.to_string()));
        }
        if controllers.is_empty() {
            v2 = Some(CgroupPlace::V2(path.to_string()));
        }
    }
    v2
}

/// Whether `m` is the mount of a cgroup hierarchy holding memory: v1's
/// `memory` controller, else (`v1` false) the v2 hierarchy.
pub(crate) fn is_memory_hierarchy(m: &Mount, v1: bool) -> bool {
    if v1 {
        m.fstype == "cgroup" && m.super_options.split(',').any(|o| o == "memory")
    } else {
        m.fstype == "cgroup2"
    }
}

/// Which setting sizes a target: `/dev/shm`, a temp target (mode 1777,
/// sticky), or a cache under `HOME` (the process's, mode 0700).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Shm,
    Temp,
    Home,
}

impl Kind {
    /// The kind of the target at `path` whose root has mode `mode`.
    pub(crate) fn of(path: &str, mode: u32) -> Kind {
        if path == SHM_PATH {
            Kind::Shm
        } else if mode & 0o1000 != 0 {
            Kind::Temp
        } else {
            Kind::Home
        }
    }
}

/// One target as read: where, how big, how much used.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Target {
    pub path: String,
    pub size_bytes: u64,
    pub used_bytes: u64,
    #[serde(skip)]
    pub kind: Kind,
}

impl Target {
    /// Used per size, 0 for an empty tmpfs of size 0.
    pub(crate) fn fullness(&self) -> f64 {
        if self.size_bytes == 0 {
            0.0
        } else {
            self.used_bytes as f64 / self.size_bytes as f64
        }
    }
}

/// One container as read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Container {
    pub id: String,
    pub name: Option<String>,
    pub pid: i32,
    pub memory_limit_bytes: Option<u64>,
    pub shmem_bytes: Option<u64>,
    pub targets: Vec<Target>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_root_patterns() {
        for (pattern, name, matches) in [
            ("runtime-*", "runtime-runc", true),
            ("runtime-*", "runtime-", true),
            ("runtime-*", "runtime", false),
            ("*", "k8s.io", true),
            ("*", "..", false),
            ("moby", "moby", true),
            ("moby", "mobyx", false),
        ] {
            assert_eq!(component_matches(pattern, name), matches, "{pattern} {name}");
        }
    }

    #[test]
    fn runc_state_gives_pid_start_and_cri_name() {
        let state = br#"{"id":"c1","init_process_pid":8663,"init_process_start":2676068,
            "config":{"labels":["io.kubernetes.cri.container-name=web",
            "io.kubernetes.cri.sandbox-name=shop","io.kubernetes.cri.sandbox-namespace=prod",
            "bundle=/b"]}}"#;
        let e = parse_runc_state("c1", state).unwrap();
        assert_eq!((e.pid, e.start), (8663, Some(2676068)));
        assert_eq!(e.name.as_deref(), Some("prod/shop/web"));
        let docker = br#"{"init_process_pid":5,"config":{"labels":["bundle=/b"]}}"#;
        assert_eq!(parse_runc_state("d", docker).unwrap().name, None, "Docker's name is not in the state");
        for bad in [&b"{}"[..], b"not json", br#"{"init_process_pid":0}"#, br#"{"init_process_pid":-1}"#] {
            assert_eq!(parse_runc_state("x", bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn crun_status_gives_pid_and_the_name_from_its_config() {
        let status = br#"{"pid":8674,"process-start-time":2676070,"bundle":"/b"}"#;
        let config = br#"{"annotations":{"io.kubernetes.container.name":"db","io.kubernetes.pod.name":"p"}}"#;
        let e = parse_crun_status("c", status, Some(config)).unwrap();
        assert_eq!((e.pid, e.start, e.name.as_deref()), (8674, Some(2676070), Some("p/db")));
        assert_eq!(parse_crun_status("c", status, None).unwrap().name, None);
        assert_eq!(parse_crun_status("c", b"{\"pid\":\"1\"}", None), None);
    }

    #[test]
    fn start_time_survives_any_command_name() {
        let tail = "S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 2676068 20 21";
        assert_eq!(start_time(&format!("8663 (sleep) {tail}")), Some(2676068));
        assert_eq!(start_time(&format!("8663 (a) (b) x) {tail}")), Some(2676068));
        assert_eq!(start_time("8663 (sleep) S 1"), None);
        assert!(!exited("8663 (a) Z) S 1 2 3 4 5 4194560 8"), "the name's own `) Z` is not the state");
        assert!(exited("8663 (sleep) Z 1 2 3 4 5 6 7") && exited("8663 (x) X 1") && exited("garbage"));
        assert!(exited("8663 (sleep) R 1 2 3 4 5 4194308 7"), "PF_EXITING");
        assert!(!exited("8663 (sleep) R 1 2 3 4 5 4194560 7"));
    }

    #[test]
    fn mountinfo_targets_are_ours_and_shm_at_the_top() {
        let text = "\
70 47 254:0 /r / ro,relatime - ext4 /dev/vda rw
72 70 0:43 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k
74 72 0:45 / /dev/shm rw,nosuid - tmpfs shm rw,size=65536k
80 70 0:50 / /tmp rw - tmpfs oci-tmpfs-hook rw,size=1024k
81 72 0:51 / /dev/shm rw - tmpfs oci-tmpfs-hook rw,size=2048k
82 70 0:52 / /my\\040dir rw - tmpfs oci-tmpfs-hook rw
83 70 0:53 / /var/cache rw - tmpfs tmpfs rw
84 70 0:54 / /run rw - ext4 oci-tmpfs-hook rw
";
        let mounts = parse_mountinfo(text);
        let got: Vec<(u64, &str)> = targets(&mounts).iter().map(|m| (m.id, m.mount_point.as_str())).collect();
        assert_eq!(got, [(80, "/tmp"), (81, "/dev/shm"), (82, "/my dir")]);
        assert_eq!((mounts[3].major, mounts[3].minor), (0, 50));
        assert_eq!((mounts[0].root.as_str(), mounts[0].super_options.as_str()), ("/r", "rw"));
    }

    /// A container can hold as many mounts as the kernel's `mount-max`
    /// (100,000): finding the top ones takes well under a second (comparing
    /// each with every other, 10^10 comparisons, took minutes).
    #[test]
    fn targets_of_many_mounts_are_quick() {
        let text: String = (0..100_000u64)
            .map(|i| format!("{} 1 0:{} / /m/{} rw - tmpfs oci-tmpfs-hook rw\n", i + 2, i % 1000, i % 50_000))
            .collect();
        let mounts = parse_mountinfo(&text);
        let t0 = std::time::Instant::now();
        let top = targets(&mounts);
        assert!(t0.elapsed() < std::time::Duration::from_secs(2), "{:?}", t0.elapsed());
        assert_eq!(top.len(), 50_000);
        assert!(top.iter().all(|m| m.id >= 50_002), "the last of each path");
    }

    #[test]
    fn memory_cgroup_prefers_v1_memory() {
        let hybrid = "10:hugetlb:/\n4:memory:/a/c1\n1:cpu:/\n0::/c1\n";
        assert_eq!(memory_cgroup(hybrid), Some(CgroupPlace::V1("/a/c1".into())));
        assert_eq!(
            memory_cgroup("0::/system.slice/x.scope\n"),
            Some(CgroupPlace::V2("/system.slice/x.scope".into()))
        );
        assert_eq!(memory_cgroup("4:cpu,memory:/m\n"), Some(CgroupPlace::V1("/m".into())));
        assert_eq!(memory_cgroup(""), None);
    }

    #[test]
    fn memory_hierarchies() {
        let mounts = parse_mountinfo(
            "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
             32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n\
             41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
        );
        let v1: Vec<bool> = mounts.iter().map(|m| is_memory_hierarchy(m, true)).collect();
        let v2: Vec<bool> = mounts.iter().map(|m| is_memory_hierarchy(m, false)).collect();
        assert_eq!((v1, v2), (vec![true, false, false], vec![false, false, true]));
    }

    #[test]
    fn kind_by_path_and_mode() {
        assert_eq!(Kind::of("/dev/shm", 0o1777), Kind::Shm);
        assert_eq!(Kind::of("/tmp", 0o1777), Kind::Temp);
        assert_eq!(Kind::of("/root/.cache", 0o700), Kind::Home);
    }
}
