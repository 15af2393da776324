//! A container's memory cgroup as the host sees it: where it is from the
//! spec's `linux.cgroupsPath` ([`relative_dir`]), and what its
//! `memory.stat` and limit say ([`read`]): the `shmem` it is charged for
//! (tmpfs pages, `/dev/shm` included, are charged to the cgroup of the
//! process that wrote them: docs/design.md#how-full) and its limit. The
//! parsing is pure; [`read`] reads two small files of cgroupfs, which the
//! kernel writes and no container can turn into a link.

use std::path::{Path, PathBuf};

use crate::size::Bytes;

/// The most a cgroup file is read for (`memory.stat` is about 1.5 KiB).
const MAX_FILE_BYTES: u64 = 64 * 1024;

/// cgroup v1's "no limit": the kernel prints the largest page-aligned
/// value below 2^63 (`PAGE_COUNTER_MAX` pages); anything from 2^62 up is
/// taken as none.
const V1_UNLIMITED: u64 = 1 << 62;

/// The cgroup directory of a container, relative to a hierarchy's root,
/// from the spec's `linux.cgroupsPath` as runc and crun read it: a path
/// (`/kubepods/besteffort/pod…/ID`, cgroupfs driver), or systemd's
/// `SLICE:PREFIX:NAME` (`kubepods-besteffort-pod….slice:cri-containerd:ID`:
/// the slice expanded into its parents, then `PREFIX-NAME.scope`). `None`
/// for an empty path or one that climbs (`..`).
pub(crate) fn relative_dir(cgroups_path: &str) -> Option<String> {
    let dir = match cgroups_path.split(':').collect::<Vec<_>>()[..] {
        [slice, prefix, name] if !cgroups_path.starts_with('/') => {
            let unit =
                if name.ends_with(".slice") { name.to_string() } else { format!("{prefix}-{name}.scope") };
            let slice = if slice.is_empty() { "system.slice" } else { slice };
            match expand_slice(slice)? {
                parents if parents.is_empty() => unit,
                parents => format!("{parents}/{unit}"),
            }
        }
        _ => cgroups_path.trim_matches('/').to_string(),
    };
    let climbs = dir.split('/').any(|p| p == ".." || p == ".");
    (!dir.is_empty() && !climbs && !dir.contains("//")).then_some(dir)
}

/// systemd's slice `a-b-c.slice` as its path `a.slice/a-b.slice/a-b-c.slice`
/// (`-.slice`: the root, empty).
fn expand_slice(slice: &str) -> Option<String> {
    let name = slice.strip_suffix(".slice")?;
    if name == "-" {
        return Some(String::new());
    }
    if name.is_empty()
        || name.contains('/')
        || name.starts_with('-')
        || name.ends_with('-')
        || name.contains("--")
    {
        return None;
    }
    let mut parts = Vec::new();
    for (i, _) in name.match_indices('-') {
        parts.push(format!("{}.slice", &name[..i]));
    }
    parts.push(slice.to_string());
    Some(parts.join("/"))
}

/// A memory cgroup's figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Memory {
    /// `shmem` of `memory.stat` (v1: `total_shmem`, which counts the
    /// cgroup's children too, else `shmem`).
    pub shmem: Option<Bytes>,
    /// The limit; `None`: none.
    pub limit: Option<Bytes>,
}

/// The `shmem` of a `memory.stat`'s text.
pub(crate) fn shmem_of(stat: &str) -> Option<Bytes> {
    let field = |key: &str| {
        stat.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse::<u64>().ok())
    };
    field("total_shmem").or_else(|| field("shmem")).map(Bytes)
}

/// A limit file's text: v2 `memory.max` (`max`: none) or v1
/// `memory.limit_in_bytes` (from 2^62 up: none).
pub(crate) fn limit_of(text: &str) -> Option<Bytes> {
    let n: u64 = text.trim().parse().ok()?;
    (n < V1_UNLIMITED).then_some(Bytes(n))
}

/// Where the memory cgroup `dir` ([`relative_dir`]) is under the cgroupfs
/// mounted at `root`: `root/dir` on cgroup v2 (`root` holds
/// `cgroup.controllers`), `root/memory/dir` on v1 and hybrid hosts; with
/// its limit file's name.
fn memory_dir(root: &Path, dir: &str) -> (PathBuf, &'static str) {
    if root.join("cgroup.controllers").exists() {
        (root.join(dir), "memory.max")
    } else {
        (root.join("memory").join(dir), "memory.limit_in_bytes")
    }
}

/// The memory cgroup `dir` under the cgroupfs at `root`: `None` when it is
/// not there (a container not started yet, or gone).
pub(crate) fn read(root: &Path, dir: &str) -> Option<Memory> {
    let (at, limit_file) = memory_dir(root, dir);
    let text = |name: &str| crate::files::read_text(&at.join(name), MAX_FILE_BYTES).ok().flatten();
    let stat = text("memory.stat")?;
    Some(Memory { shmem: shmem_of(&stat), limit: text(limit_file).as_deref().and_then(limit_of) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroups_paths_as_runc_reads_them() {
        let cases = [
            ("/kubepods/besteffort/pod1/abc", Some("kubepods/besteffort/pod1/abc")),
            ("k8s.io/abc", Some("k8s.io/abc")),
            (
                "kubepods-besteffort-pod1.slice:cri-containerd:abc",
                Some("kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/cri-containerd-abc.scope"),
            ),
            ("system.slice:crio:abc", Some("system.slice/crio-abc.scope")),
            (":docker:abc", Some("system.slice/docker-abc.scope")),
            ("-.slice:p:abc", Some("p-abc.scope")),
            ("", None),
            ("/", None),
            ("/kubepods/../../etc", None),
            ("a-.slice:p:x", None),
            ("a/b.slice:p:x", None),
        ];
        for (path, want) in cases {
            assert_eq!(relative_dir(path).as_deref(), want, "{path:?}");
        }
    }

    #[test]
    fn shmem_and_limits_from_the_files() {
        let v2 = "anon 4096\nfile 8192\nshmem 104857600\nfile_mapped 0\n";
        assert_eq!(shmem_of(v2), Some(Bytes(100 << 20)));
        let v1 = "cache 1\nshmem 5\nmapped_file 0\ntotal_cache 9\ntotal_shmem 7\n";
        assert_eq!(shmem_of(v1), Some(Bytes(7)));
        assert_eq!(shmem_of("anon 1\nshmem_thp 3\n"), None);
        assert_eq!(limit_of("max\n"), None);
        assert_eq!(limit_of("1073741824\n"), Some(Bytes(1 << 30)));
        assert_eq!(limit_of("9223372036854771712\n"), None);
    }

    /// A v1 and a v2 layout on disk: the memory controller's directory and
    /// limit file of each; a cgroup not there reads as none.
    #[test]
    fn reads_v1_and_v2_layouts() {
        let root = crate::files::temp_dir("cgroup-read");
        let v2 = root.join("v2");
        std::fs::create_dir_all(v2.join("k8s.io/c1")).unwrap();
        std::fs::write(v2.join("cgroup.controllers"), "memory\n").unwrap();
        std::fs::write(v2.join("k8s.io/c1/memory.stat"), "shmem 42\n").unwrap();
        std::fs::write(v2.join("k8s.io/c1/memory.max"), "max\n").unwrap();
        assert_eq!(read(&v2, "k8s.io/c1"), Some(Memory { shmem: Some(Bytes(42)), limit: None }));
        let v1 = root.join("v1");
        std::fs::create_dir_all(v1.join("memory/k8s.io/c1")).unwrap();
        std::fs::write(v1.join("memory/k8s.io/c1/memory.stat"), "shmem 1\ntotal_shmem 42\n").unwrap();
        std::fs::write(v1.join("memory/k8s.io/c1/memory.limit_in_bytes"), "1048576\n").unwrap();
        assert_eq!(
            read(&v1, "k8s.io/c1"),
            Some(Memory { shmem: Some(Bytes(42)), limit: Some(Bytes(1 << 20)) })
        );
        assert_eq!(read(&v1, "k8s.io/gone"), None);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
