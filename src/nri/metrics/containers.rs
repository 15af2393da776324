//! The per-container series of `/metrics` (docs/nri.md#container-metrics):
//! for each container the plugin handed to our hook and the runtime has
//! not removed, the size of each tmpfs the plan gave it, and, read from its
//! memory cgroup at scrape time ([`crate::cgroup`]), the `shmem` it is
//! charged for and its memory limit. Labelled `namespace`, `pod` and
//! `container`; a container's series go when the runtime removes it
//! (`RemoveContainer`). What a container's tmpfs hold, target by target,
//! needs its mount namespace, which the plugin does not enter:
//! `oci-tmpfs-hook usage` on the node says it.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::plan::{Action, Plan};
use crate::usage::render::label;

/// The series' names.
pub(crate) const SHMEM: &str = "oci_tmpfs_hook_container_shmem_bytes";
pub(crate) const LIMIT: &str = "oci_tmpfs_hook_container_memory_limit_bytes";
pub(crate) const SIZE: &str = "oci_tmpfs_hook_container_tmpfs_size_bytes";

/// One container the plugin handed to our hook, kept small so that 10,000
/// of them stay within the plugin's memory bound (BENCHMARKS.md#scrape):
/// its names and cgroups path in one allocation, its targets' paths shared
/// with every other container's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tracked {
    /// The namespace, the pod, the container and the spec's cgroups path,
    /// each ended by a NUL (which none of them can hold).
    text: Box<str>,
    /// Each tmpfs target of the plan and its size in bytes.
    targets: Box<[(Arc<str>, u64)]>,
}

impl Tracked {
    /// The container `container` of pod `pod` in `namespace`, in the cgroup
    /// `cgroups_path`, with `plan`'s targets (their paths taken from
    /// `names`, where each is kept once).
    fn new(names: &mut HashSet<Arc<str>>, who: [&str; 3], cgroups_path: &str, plan: &Plan) -> Tracked {
        let mut intern = |path: &str| match names.get(path) {
            Some(name) => Arc::clone(name),
            None => {
                let name: Arc<str> = Arc::from(path);
                names.insert(Arc::clone(&name));
                name
            }
        };
        let targets = plan
            .actions
            .iter()
            .map(|a| {
                let target = match a {
                    Action::MountTmpfs { target, .. } => target.as_str(),
                    Action::Shm { .. } => "/dev/shm",
                };
                (intern(target), a.tmpfs().size.bytes.0)
            })
            .collect();
        let clean = |s: &str| s.replace('\0', "");
        let text =
            format!("{}\0{}\0{}\0{}\0", clean(who[0]), clean(who[1]), clean(who[2]), clean(cgroups_path));
        Tracked { text: text.into(), targets }
    }

    /// The namespace, the pod, the container and the cgroups path.
    fn parts(&self) -> [&str; 4] {
        let mut it = self.text.split('\0');
        [(); 4].map(|()| it.next().unwrap_or(""))
    }

    /// The label set, without its braces.
    fn labels(&self) -> String {
        let [namespace, pod, container, _] = self.parts();
        format!(
            "namespace=\"{}\",pod=\"{}\",container=\"{}\"",
            label(namespace),
            label(pod),
            label(container)
        )
    }
}

/// A container id as the table's key: its 64-bit FNV-1a hash (ids are
/// 64 hex digits; two of 10,000 share a hash about once in 10^11).
fn key(id: &str) -> u64 {
    super::fnv1a(id.as_bytes())
}

/// The containers the plugin tracks, and the target paths they share.
#[derive(Debug, Default)]
struct Table {
    by_id: HashMap<u64, Tracked>,
    names: HashSet<Arc<str>>,
}

/// The containers the plugin tracks, by id.
#[derive(Debug, Default)]
pub(crate) struct Containers {
    table: Mutex<Table>,
}

impl Containers {
    /// Tracks the container `id` (`who`: its namespace, pod and name), in
    /// the cgroup `cgroups_path`, planned as `plan`; again: the newer
    /// replaces the older.
    pub(crate) fn track(&self, id: &str, who: [&str; 3], cgroups_path: &str, plan: &Plan) {
        let mut table = self.lock();
        let tracked = Tracked::new(&mut table.names, who, cgroups_path, plan);
        table.by_id.insert(key(id), tracked);
    }

    /// The runtime removed the container `id`: its series go.
    pub(crate) fn remove(&self, id: &str) {
        self.lock().by_id.remove(&key(id));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The series in the text format, each container's cgroup read from the
    /// cgroupfs at `cgroup_root`, appended to `out`. The table is copied
    /// first, so no read holds the lock a `CreateContainer` takes.
    pub(crate) fn encode(&self, cgroup_root: &Path, out: &mut String) {
        let tracked: Vec<Tracked> = self.lock().by_id.values().cloned().collect();
        let read = |t: &Tracked| {
            let dir = crate::cgroup::relative_dir(t.parts()[3])?;
            crate::cgroup::read(cgroup_root, &dir)
        };
        let rows: Vec<(&Tracked, Option<crate::cgroup::Memory>)> =
            tracked.iter().map(|t| (t, read(t))).collect();
        render(&rows, out);
    }
}

/// The text of the series for `rows` (each container and what its cgroup
/// said, if it could be read): a container whose cgroup is not there has
/// its sizes only.
fn render(rows: &[(&Tracked, Option<crate::cgroup::Memory>)], out: &mut String) {
    let mut rows = rows.to_vec();
    rows.sort_by(|a, b| a.0.text.cmp(&b.0.text));
    let head = |out: &mut String, name: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
    };
    head(
        out,
        SHMEM,
        "shmem of the container's memory cgroup: its tmpfs and shared memory pages, /dev/shm included",
    );
    for (t, m) in &rows {
        if let Some(shmem) = m.and_then(|m| m.shmem) {
            let _ = writeln!(out, "{SHMEM}{{{}}} {}", t.labels(), shmem.0);
        }
    }
    head(out, LIMIT, "the memory limit of the container's cgroup (no sample: no limit)");
    for (t, m) in &rows {
        if let Some(limit) = m.and_then(|m| m.limit) {
            let _ = writeln!(out, "{LIMIT}{{{}}} {}", t.labels(), limit.0);
        }
    }
    head(out, SIZE, "the size of each tmpfs the plugin planned for the container, by target");
    for (t, _) in &rows {
        for (target, size) in &*t.targets {
            let _ = writeln!(out, "{SIZE}{{{},target=\"{}\"}} {size}", t.labels(), label(target));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::Memory;
    use crate::plan::fixtures::{mount, tmpfs};
    use crate::size::Bytes;

    fn plan() -> Plan {
        Plan { actions: vec![mount("/tmp", tmpfs(1 << 30, None))], ..Plan::default() }
    }

    fn tracked(pod: &str) -> Tracked {
        Tracked::new(&mut HashSet::new(), ["ns", pod, "app"], "/kubepods/pod1/abc", &plan())
    }

    /// Each series per container, sorted; a cgroup not there gives sizes
    /// only; an unlimited cgroup no limit sample; label values escaped.
    #[test]
    fn series_per_container() {
        let (a, b, odd) = (tracked("a"), tracked("b"), tracked("we\"ird\\"));
        let full = Memory { shmem: Some(Bytes(5)), limit: Some(Bytes(9)) };
        let unlimited = Memory { shmem: Some(Bytes(6)), limit: None };
        let mut out = String::new();
        render(&[(&b, Some(unlimited)), (&a, Some(full)), (&odd, None)], &mut out);
        let samples: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            samples,
            [
                "oci_tmpfs_hook_container_shmem_bytes{namespace=\"ns\",pod=\"a\",container=\"app\"} 5",
                "oci_tmpfs_hook_container_shmem_bytes{namespace=\"ns\",pod=\"b\",container=\"app\"} 6",
                "oci_tmpfs_hook_container_memory_limit_bytes{namespace=\"ns\",pod=\"a\",container=\"app\"} 9",
                "oci_tmpfs_hook_container_tmpfs_size_bytes{namespace=\"ns\",pod=\"a\",container=\"app\",target=\"/tmp\"} 1073741824",
                "oci_tmpfs_hook_container_tmpfs_size_bytes{namespace=\"ns\",pod=\"b\",container=\"app\",target=\"/tmp\"} 1073741824",
                "oci_tmpfs_hook_container_tmpfs_size_bytes{namespace=\"ns\",pod=\"we\\\"ird\\\\\",container=\"app\",target=\"/tmp\"} 1073741824",
            ]
        );
        assert_eq!(out.lines().filter(|l| l.starts_with("# TYPE")).count(), 3);
    }

    /// A removed container's series go; tracking one again replaces it;
    /// the containers share one copy of each target's path.
    #[test]
    fn removal_drops_the_series() {
        let c = Containers::default();
        c.track("1", ["ns", "a", "app"], "", &plan());
        c.track("1", ["ns", "a2", "app"], "", &plan());
        c.track("2", ["ns", "b", "app"], "", &plan());
        let counts = {
            let table = c.lock();
            (table.by_id.len(), table.names.len())
        };
        assert_eq!(counts, (2, 1));
        c.remove("1");
        let mut out = String::new();
        c.encode(Path::new("/nonexistent"), &mut out);
        assert!(!out.contains("pod=\"a") && out.contains("pod=\"b\""), "{out}");
    }
}
