//! The landing rule: where a path really lands in a container's final
//! layout (the image's rootfs plus the spec's mounts, in the order the
//! runtime mounts them), and whether a tmpfs there would cover, cross or sit
//! under a spec mount. One rule for every executor (docs/design.md#landing).
//!
//! Pure: the walk asks a [`Tree`] what each path is (the spec executor's
//! tree reads the prepared rootfs by fd, a unit test's tree is a map). It
//! follows symlinks inside the root as a runtime's in-root resolution does,
//! one component at a time, and records every directory it passes through,
//! so that a symlink that jumps into a volume (`/tmp -> /data`,
//! `/scratch -> /vol`) is seen even though the volume is not mounted yet.

use crate::plan::{Note, SpecMount};

/// What a [`Tree`] finds at an in-root path whose parents are real
/// directories (no symlink among them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    /// A directory.
    Dir,
    /// A symlink, with what it says.
    Link(String),
    /// Nothing there: the runtime (or we) would create a directory.
    Missing,
    /// A file, a FIFO, a device...
    NotDir,
    /// A mount point already (the walk would cross a mount).
    Mount,
    /// Could not be read: the errno, for the note.
    Unreadable(rustix::io::Errno),
}

/// Looks paths up inside a root.
pub(crate) trait Tree {
    /// What is at `path` (absolute inside the root, normalised, its parents
    /// real directories).
    fn entry(&mut self, path: &str) -> Entry;
}

/// Symlinks followed before a walk gives up, as the kernel's `MAXSYMLINKS`.
const MAX_LINKS: usize = 40;

/// Where a path lands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Walk {
    /// The in-root path it lands at, without symlinks; a missing tail is kept
    /// as written.
    pub real: String,
    /// Every directory the walk stood in, in order (the parents of `real`
    /// and the places a symlink led through), `real` last.
    pub visited: Vec<String>,
    /// The symlinks followed: where each is, and what it says.
    pub links: Vec<(String, String)>,
    /// How many trailing components of `real` do not exist yet.
    pub missing: usize,
    /// Why the walk stopped before the end, if it did.
    pub stopped: Option<Stop>,
}

/// Why a walk stopped early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    NotDir,
    Mount,
    Loop,
    Unreadable(rustix::io::Errno),
}

impl Walk {
    /// `through the symlink /tmp -> /data` (every link, in order), or "".
    pub(crate) fn through(&self) -> String {
        if self.links.is_empty() {
            return String::new();
        }
        let links: Vec<String> = self.links.iter().map(|(at, to)| format!("{at} -> {to}")).collect();
        format!(" through the symlink {}", links.join(", then "))
    }
}

fn join(parts: &[String]) -> String {
    format!("/{}", parts.join("/"))
}

fn components(path: &str) -> impl DoubleEndedIterator<Item = String> + '_ {
    path.split('/').filter(|c| !c.is_empty() && *c != ".").map(String::from)
}

/// Walks `path` inside `tree`, following symlinks inside the root (an
/// absolute link restarts at the root, `..` never climbs above it).
pub(crate) fn walk(tree: &mut impl Tree, path: &str) -> Walk {
    let mut todo: std::collections::VecDeque<String> = components(path).collect();
    let mut cur: Vec<String> = Vec::new();
    let mut w = Walk::default();
    while let Some(c) = todo.pop_front() {
        if c == ".." {
            if w.missing > 0 {
                w.missing -= 1;
            }
            cur.pop();
            w.visited.push(join(&cur));
            continue;
        }
        cur.push(c);
        let here = join(&cur);
        if w.missing > 0 {
            w.missing += 1;
            continue;
        }
        match tree.entry(&here) {
            Entry::Dir => w.visited.push(here),
            Entry::Missing => w.missing = 1,
            Entry::Link(to) => {
                cur.pop();
                if w.links.len() == MAX_LINKS {
                    w.stopped = Some(Stop::Loop);
                    break;
                }
                w.links.push((here, to.clone()));
                if to.starts_with('/') {
                    cur.clear();
                }
                for part in components(&to).rev() {
                    todo.push_front(part);
                }
            }
            Entry::NotDir => {
                w.stopped = Some(Stop::NotDir);
                break;
            }
            Entry::Mount => {
                w.visited.push(here);
                w.stopped = Some(Stop::Mount);
                break;
            }
            Entry::Unreadable(e) => {
                cur.pop();
                w.stopped = Some(Stop::Unreadable(e));
                break;
            }
        }
    }
    w.real = join(&cur);
    w
}

/// Where a spec mount lands, as far as the walk can tell before the mounts
/// exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Landing {
    /// The destination as the spec writes it.
    pub dest: String,
    /// The mount is one of ours, from an earlier run.
    pub ours: bool,
    /// The in-root path it lands at, or the deepest real directory the walk
    /// reached when it could not go on (the mount lands somewhere below).
    pub at: String,
}

/// Where each spec mount lands, in the spec's order. A destination whose
/// walk enters an earlier landing (`/dev/shm` under `/dev`) lands inside
/// that one, at a place the rootfs cannot tell: it is covered by the earlier
/// landing for every conflict [`judge`] looks for, and is left out.
/// Each path is read from `tree` once: the spec's mounts share their
/// parents (`/dev`, `/dev/pts`, `/dev/shm`, `/dev/mqueue`), and nothing is
/// made between the walks.
pub(crate) fn landings(tree: &mut impl Tree, mounts: &[SpecMount]) -> Vec<Landing> {
    let mut tree = Once { tree, seen: Vec::new() };
    let mut out: Vec<Landing> = Vec::new();
    for SpecMount { dest, ours } in mounts {
        let w = walk(&mut tree, dest);
        if covers(&out, &w) {
            continue;
        }
        out.push(Landing { dest: dest.clone(), ours: *ours, at: w.real });
    }
    out
}

/// A [`Tree`] that reads each path of `tree` once.
struct Once<'t, T> {
    tree: &'t mut T,
    seen: Vec<(String, Entry)>,
}

impl<T: Tree> Tree for Once<'_, T> {
    fn entry(&mut self, path: &str) -> Entry {
        if let Some((_, e)) = self.seen.iter().find(|(p, _)| p == path) {
            return e.clone();
        }
        let e = self.tree.entry(path);
        self.seen.push((path.to_string(), e.clone()));
        e
    }
}

/// The walk `w` enters one of `landings` on its way or at its end.
fn covers(landings: &[Landing], w: &Walk) -> bool {
    w.visited.iter().chain([&w.real]).any(|v| landings.iter().any(|l| at_or_under(v, &l.at)))
}

/// `path` is `base` or lies below it.
pub(crate) fn at_or_under(path: &str, base: &str) -> bool {
    let base = base.trim_end_matches('/');
    path == base || base.is_empty() || path.strip_prefix(base).is_some_and(|r| r.starts_with('/'))
}

/// A tmpfs at a walked target would conflict with a spec mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Conflict {
    /// The target lands on the mount's own directory, or below it.
    Reaches { landing: Landing },
    /// The walk passes through the mount on its way (a symlink leads
    /// through a volume).
    Crosses { landing: Landing, via: String },
    /// The mount lands below the target: a tmpfs over it would hide it.
    Beneath { landing: Landing },
}

/// The first conflict between the walk of a target and the spec's mounts.
pub(crate) fn judge(w: &Walk, landings: &[Landing]) -> Option<Conflict> {
    for l in landings {
        if at_or_under(&w.real, &l.at) {
            return Some(Conflict::Reaches { landing: l.clone() });
        }
        if let Some(v) = w.visited.iter().find(|v| at_or_under(v, &l.at)) {
            return Some(Conflict::Crosses { landing: l.clone(), via: v.clone() });
        }
    }
    landings.iter().find(|l| at_or_under(&l.at, &w.real)).map(|l| Conflict::Beneath { landing: l.clone() })
}

impl Conflict {
    /// The spec mount it conflicts with.
    pub(crate) fn landing(&self) -> &Landing {
        match self {
            Conflict::Reaches { landing }
            | Conflict::Crosses { landing, .. }
            | Conflict::Beneath { landing } => landing,
        }
    }

    /// The note's reason: names the symlinks and the mount.
    pub(crate) fn reason(&self, w: &Walk) -> String {
        let through = w.through();
        let real = &w.real;
        match self {
            Conflict::Reaches { landing } if landing.at == w.real => format!(
                "it resolves to {real}{through}: the spec's mount at {} (a volume or another mount) is there; a volume wins",
                landing.dest
            ),
            Conflict::Reaches { landing } => format!(
                "it resolves to {real}{through}, under the spec's mount at {} (a volume or another mount); a volume wins",
                landing.dest
            ),
            Conflict::Crosses { landing, via } => format!(
                "its path leads via {via}{through}, inside the spec's mount at {} (a volume or another mount); a volume wins",
                landing.dest
            ),
            Conflict::Beneath { landing } => format!(
                "it resolves to {real}{through}, and the spec mounts {} inside it (at {}), which a tmpfs over it would hide",
                landing.dest, landing.at
            ),
        }
    }
}

/// The note for a home, or a cache under it, whose directory the image
/// gives to another uid than the process's (`owner`: the directory's host
/// uid, when the image has one; `want`: the plan's
/// [`crate::plan::Tmpfs::image_owner`]): such a directory is left alone, so
/// that no file of it becomes writable, replaceable or readable for the
/// process (docs/design.md#home-rule). Every executor asks this of the
/// directory it resolved.
pub(crate) fn not_the_processs(what: &str, owner: Option<u32>, want: Option<u32>) -> Option<Note> {
    let (Some(owner), Some(want)) = (owner, want) else { return None };
    (owner != want).then(|| {
        Note::warn(
            what,
            format!(
                "the image gives it to uid {owner} (host), not to the process (uid {want}): left alone, read-only; point the cache elsewhere (TRITON_CACHE_DIR, XDG_CACHE_HOME, ...: each gets a tmpfs of its own)"
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// A rootfs as a map: path -> entry; anything not listed is missing.
    struct Map(HashMap<&'static str, Entry>);

    impl Tree for Map {
        fn entry(&mut self, path: &str) -> Entry {
            self.0.get(path).cloned().unwrap_or(Entry::Missing)
        }
    }

    fn tree(entries: &[(&'static str, &str)]) -> Map {
        Map(entries
            .iter()
            .map(|(p, e)| {
                let e = match *e {
                    "dir" => Entry::Dir,
                    "file" => Entry::NotDir,
                    "mount" => Entry::Mount,
                    to => Entry::Link(to.to_string()),
                };
                (*p, e)
            })
            .collect())
    }

    fn dests(d: &[&str]) -> Vec<SpecMount> {
        d.iter().map(|s| SpecMount { dest: s.to_string(), ours: false }).collect()
    }

    #[test]
    fn walk_table() {
        // (name, tree, path, real, missing, links, stopped)
        type Case =
            (&'static str, Vec<(&'static str, &'static str)>, &'static str, &'static str, usize, usize);
        let cases: Vec<Case> = vec![
            ("plain dir", vec![("/tmp", "dir")], "/tmp", "/tmp", 0, 0),
            ("missing", vec![], "/scratch/tmp", "/scratch/tmp", 2, 0),
            ("absolute link", vec![("/tmp", "/data"), ("/data", "dir")], "/tmp", "/data", 0, 1),
            ("relative link", vec![("/scratch", "vol"), ("/vol", "dir")], "/scratch/tmp", "/vol/tmp", 1, 1),
            ("dotdot clamps at the root", vec![("/tmp", "../../../x")], "/tmp", "/x", 1, 1),
            ("link to /", vec![("/tmp", "/")], "/tmp", "/", 0, 1),
            ("chain", vec![("/a", "/b"), ("/b", "c"), ("/c", "dir")], "/a/d", "/c/d", 1, 2),
        ];
        for (name, entries, path, real, missing, links) in cases {
            let w = walk(&mut tree(&entries), path);
            assert_eq!((w.real.as_str(), w.missing, w.links.len()), (real, missing, links), "{name}: {w:?}");
            assert_eq!(w.stopped, None, "{name}");
        }
        let w = walk(&mut tree(&[("/a", "/b"), ("/b", "/a")]), "/a");
        assert_eq!(w.stopped, Some(Stop::Loop));
        let w = walk(&mut tree(&[("/tmp", "file")]), "/tmp");
        assert_eq!(w.stopped, Some(Stop::NotDir));
    }

    #[test]
    fn judge_table() {
        // (name, tree, spec mount destinations, target, conflicting destination or "")
        type Case =
            (&'static str, Vec<(&'static str, &'static str)>, Vec<&'static str>, &'static str, &'static str);
        let cases: Vec<Case> = vec![
            (
                "/tmp -> /vol, volume at /vol",
                vec![("/tmp", "/vol"), ("/vol", "dir")],
                vec!["/vol"],
                "/tmp",
                "/vol",
            ),
            ("/tmp -> /data, volume at /data", vec![("/tmp", "/data")], vec!["/data"], "/tmp", "/data"),
            (
                "TMPDIR under /scratch -> /vol",
                vec![("/scratch", "/vol"), ("/vol", "dir")],
                vec!["/vol"],
                "/scratch/tmp",
                "/vol",
            ),
            ("/tmp -> /run, spec tmpfs at /run", vec![("/tmp", "/run")], vec!["/run"], "/tmp", "/run"),
            ("/tmp -> /proc", vec![("/tmp", "/proc")], vec!["/proc", "/dev", "/sys"], "/tmp", "/proc"),
            ("volume at /tmp/data", vec![("/tmp", "dir")], vec!["/tmp/data"], "/tmp", "/tmp/data"),
            (
                "volume landing beneath through a symlinked parent",
                vec![("/foo", "/tmp"), ("/tmp", "dir")],
                vec!["/foo/data"],
                "/tmp",
                "/foo/data",
            ),
            (
                "link through a volume and back out",
                vec![("/tmp", "/vol/../x"), ("/vol", "dir"), ("/x", "dir")],
                vec!["/vol"],
                "/tmp",
                "/vol",
            ),
            (
                "volume whose own path is a symlink",
                vec![("/data", "/tmp"), ("/tmp", "dir")],
                vec!["/data"],
                "/tmp",
                "/data",
            ),
            (
                "safe symlink",
                vec![("/tmp", "/run/tmp"), ("/run", "dir")],
                vec!["/proc", "/dev", "/vol"],
                "/tmp",
                "",
            ),
            ("sibling prefix is not nesting", vec![("/tmp", "dir")], vec!["/tmpx", "/tm"], "/tmp", ""),
            ("plain /tmp beside /dev/shm", vec![("/tmp", "dir")], vec!["/dev", "/dev/shm"], "/tmp", ""),
        ];
        for (name, entries, spec, target, want) in cases {
            let mut t = tree(&entries);
            let l = landings(&mut t, &dests(&spec));
            let w = walk(&mut t, target);
            let got = judge(&w, &l);
            let dest = got.as_ref().map(|c| c.landing().dest.clone());
            assert_eq!(dest.as_deref().unwrap_or(""), want, "{name}: {got:?}");
            if let Some(c) = got {
                let reason = c.reason(&w);
                assert!(reason.contains(want), "{name}: {reason}");
                if !w.links.is_empty() {
                    assert!(reason.contains(" -> "), "{name}: names the symlink: {reason}");
                }
            }
        }
    }

    #[test]
    fn landings_read_each_path_once() {
        struct Counted(Map, Vec<String>);
        impl Tree for Counted {
            fn entry(&mut self, path: &str) -> Entry {
                self.1.push(path.to_string());
                self.0.entry(path)
            }
        }
        let mut t = Counted(tree(&[("/dev", "dir"), ("/sys", "dir"), ("/proc", "dir")]), Vec::new());
        let l = landings(&mut t, &dests(&["/proc", "/dev/pts", "/dev/shm", "/dev/mqueue", "/sys/fs/cgroup"]));
        assert_eq!(l.len(), 5, "{l:?}");
        let mut read = t.1.clone();
        read.sort();
        read.dedup();
        assert_eq!(read.len(), t.1.len(), "a path read twice: {:?}", t.1);
        assert!(t.1.iter().any(|p| p == "/dev/mqueue"), "{:?}", t.1);
    }

    #[test]
    fn nested_spec_mounts_are_covered_by_the_outer_one() {
        let mut t = tree(&[("/dev", "dir")]);
        let l = landings(&mut t, &dests(&["/dev", "/dev/shm", "/dev/pts"]));
        assert_eq!(l, [Landing { dest: "/dev".into(), ours: false, at: "/dev".into() }]);
    }
}
