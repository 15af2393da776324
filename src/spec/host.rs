//! The spec executor's checks on the host, run by the wrapper before it
//! execs the runtime: each temp target against the prepared rootfs (the
//! same landing rules as in the container's namespace, by fd, with the
//! resolver the hook uses too, [`crate::sys::resolve`]). The growth of an
//! engine-made `/dev/shm` is [`crate::sys::engine_shm`]'s. What to check
//! comes from the plan; nothing here decides sizes.

use std::path::Path;

use crate::plan::landing;
use crate::plan::{Action, Note, Passwd, Plan, Question, UserFacts};
use crate::stage::Stage;
use crate::sys::contents::Contents;
use crate::sys::copy::Limits;
use crate::sys::procfs::Proc;
use crate::sys::resolve::{self, Root};
use crate::sys::rootfs::{ReadOnly, Rootfs};
use crate::sys::user::passwd_in;
use crate::sys::{SysError, Syscall};
use crate::target::TargetPath;

use super::route::{self, Executor};

/// The prepared rootfs, opened on first use: the passwd read and the
/// placing (or `explain`'s routes) share one [`Root`], one `openat2` of it.
pub(crate) struct LazyRoot<'a> {
    path: &'a Path,
    root: Option<Root>,
}

impl<'a> LazyRoot<'a> {
    pub(crate) fn new(path: &'a Path) -> LazyRoot<'a> {
        LazyRoot { path, root: None }
    }

    /// The open root; a failed open is tried again on the next call.
    ///
    /// # Errors
    /// The rootfs cannot be opened.
    pub(crate) fn root(&mut self) -> Result<&mut Root, SysError> {
        if self.root.is_none() {
            self.root = Some(Root::open(self.path, Proc::open()?)?);
        }
        Ok(self.root.as_mut().expect("opened above"))
    }
}

/// Where the spec executor puts each temp target.
#[derive(Debug, Default)]
pub(crate) struct Placed {
    /// Targets placed: the target, and the real in-root path to mount at.
    pub placed: Vec<(String, String)>,
    /// Targets placed whose directory the runtime copies into the tmpfs
    /// (`tmpcopyup`).
    pub copy_up: Vec<String>,
    /// Targets left alone, each with its note.
    pub refused: Vec<(String, Note)>,
    /// Mountpoint directories whose mode was set, with that mode.
    pub chmodded: Vec<(String, u32)>,
}

impl Placed {
    /// Where `target`'s entry goes, when it was placed.
    pub(crate) fn destination(&self, target: &str) -> Option<super::edit::Dest> {
        let (_, path) = self.placed.iter().find(|(t, _)| t == target)?;
        Some(super::edit::Dest { path: path.clone(), copy_up: self.copy_up.iter().any(|t| t == target) })
    }
}

/// Who carries the temp targets, as the spec executor judges it: the one
/// verdict the wrapper acts on and `explain` reports ([`carrier`]).
#[derive(Debug)]
pub(crate) enum Carrier {
    /// Written into the spec, each where [`Placed`] says.
    Spec(Placed),
    /// Our hook, added at `stage`, for `why`. `placed`: what the placing
    /// found before it handed the targets over for what the image holds
    /// ([`image_files`]); none when the hook was the executor from the
    /// start (the hook judges each target in the container).
    Hook { stage: Stage, why: String, placed: Option<Placed> },
}

/// A target's directory that holds entries in the image which the spec
/// cannot carry: its real path, and why ([`image_files`]).
type Holding = (String, String);

/// The spec executor's verdict on `plan`'s temp targets: the executor
/// [`route::executor`] picks under `facts`, and where that is the spec, the
/// landing rule (docs/design.md#landing) applied to every temp target in
/// the prepared rootfs `root` (opened only then), before the runtime mounts
/// anything: each target is walked in-root, judged against where the
/// spec's mounts will land, and resolved to its real path with the hook's
/// rules (missing directories made by fd in the image's own rootfs, one
/// mount per directory). An empty mountpoint directory gets the mode of
/// its tmpfs: runc before 1.1.8 gives a tmpfs from the spec the mode of the
/// directory it covers, whatever `mode=` says (docs/design.md#runc-tmpfs-mode).
///
/// A target's directory that holds entries in the image is read by fd as
/// it is placed ([`crate::sys::contents::contents`], before anything of it
/// is changed): within the hook's copy bounds, with no device node, socket,
/// FIFO or other mount, and for a runtime that copies as the hook does
/// (`no_copy_up` is `None`), its entry gets `tmpcopyup`
/// (docs/design.md#tmpcopyup); otherwise the temp targets go to the hook
/// ([`image_files`]), which copies up within its bounds or leaves the
/// target alone. `explain` takes this same verdict on a read-only view of
/// the rootfs ([`routes`]).
///
/// # Errors
/// A rootfs that cannot be opened, or a failure that is not a property of
/// the image.
pub(crate) fn carrier<'r, R: Rootfs + 'r>(
    plan: &Plan,
    facts: &route::Facts<'_>,
    no_copy_up: Option<&str>,
    root: impl FnOnce() -> Result<&'r mut R, SysError>,
) -> Result<Carrier, SysError> {
    match route::executor(plan, facts) {
        Executor::Hook { stage, why } => Ok(Carrier::Hook { stage, why, placed: None }),
        Executor::Spec => match place_in(root()?, plan, no_copy_up)? {
            (placed, None) => Ok(Carrier::Spec(placed)),
            (placed, Some(why)) => {
                Ok(Carrier::Hook { stage: route::hook_stage(facts.foreign), why, placed: Some(placed) })
            }
        },
    }
}

/// The temp targets of `plan`, with their tmpfs.
fn targets(plan: &Plan) -> impl Iterator<Item = (&TargetPath, &crate::plan::Tmpfs)> {
    plan.actions.iter().filter_map(|a| match a {
        Action::MountTmpfs { target, tmpfs, .. } => Some((target, tmpfs)),
        Action::Shm { .. } => None,
    })
}

/// The bounds of a runtime's `tmpcopyup` into `tmpfs`: the hook's copy-up
/// bounds ([`Limits::for_size`]), and fewer entries than its `nr_inodes`.
/// A copy that does not fit fails the whole start in runc and crun
/// (docs/design.md#tmpcopyup), so [`crate::sys::contents::contents`] counts
/// each file by whole pages.
fn copy_limits(tmpfs: &crate::plan::Tmpfs) -> Limits {
    let mut limits = Limits::for_size(tmpfs.size.bytes);
    if let Some(n) = tmpfs.nr_inodes {
        limits.entries = limits.entries.min(u32::try_from(n.saturating_sub(1)).unwrap_or(u32::MAX));
    }
    limits
}

/// What the spec can do with a directory holding `contents`: `Ok(copy_up)`,
/// or `Err` why it goes to the hook.
fn carry(real: &str, contents: Contents, no_copy_up: Option<&str>) -> Result<bool, Holding> {
    match (contents, no_copy_up) {
        (Contents::Empty, _) => Ok(false),
        (Contents::Fits, None) => Ok(true),
        (Contents::Fits, Some(why)) => Err((real.to_string(), format!("holds files, and {why}"))),
        (Contents::Past(why), _) => {
            Err((real.to_string(), format!("holds {why}, past what a runtime's tmpcopyup is given")))
        }
    }
}

/// The targets of `plan` left alone because the image gives their directory
/// to another uid than the process's (a cache under `HOME`), each with its
/// note: read before a missing one is made. The placing and `explain`'s
/// routes both take this one check.
fn not_the_processs<'p, R: Rootfs>(root: &mut R, plan: &'p Plan) -> Vec<(&'p str, Note)> {
    targets(plan)
        .filter(|(_, t)| t.image_owner.is_some())
        .filter_map(|(target, tmpfs)| {
            let uid = root.dir_stat(target).map(|(_, uid)| uid);
            let note = crate::plan::landing::not_the_processs(target.as_str(), uid, tmpfs.image_owner)?;
            Some((target.as_str(), note))
        })
        .collect()
}

/// The placing of [`carrier`] in the opened rootfs `root`: every temp
/// target placed or refused, and why the targets go to the hook instead,
/// if they do.
fn place_in<R: Rootfs>(
    root: &mut R,
    plan: &Plan,
    no_copy_up: Option<&str>,
) -> Result<(Placed, Option<String>), SysError> {
    let landings = landing::landings(root, &plan.spec_mounts);
    let mut out = Placed::default();
    let mut holding = Vec::new();
    let not_theirs = not_the_processs(root, plan);
    for (target, tmpfs) in targets(plan) {
        let what = target.as_str();
        if let Some((_, note)) = not_theirs.iter().find(|(t, _)| *t == what) {
            out.refused.push((what.to_string(), note.clone()));
            continue;
        }
        // A cache's mountpoint made here is the process's.
        match root.place_target(target, &landings, tmpfs.made_for())? {
            Err(note) => out.refused.push((what.to_string(), note)),
            Ok((real, fd)) => {
                let contents =
                    root.contents(&fd, &copy_limits(tmpfs)).map_err(|e| read_error(real.as_str(), e))?;
                match carry(real.as_str(), contents, no_copy_up) {
                    // A directory the runtime copies up keeps its own mode:
                    // the runtime gives the tmpfs' root its `mode=` (runc
                    // 1.1.8 and later, crun: docs/design.md#tmpcopyup).
                    Ok(true) => out.copy_up.push(what.to_string()),
                    Ok(false) => {
                        if root.set_mode(&fd, tmpfs.mode, real.as_str())? {
                            out.chmodded.push((real.to_string(), tmpfs.mode));
                        }
                    }
                    Err(h) => holding.push(h),
                }
                out.placed.push((what.to_string(), real.to_string()));
            }
        }
    }
    Ok((out, image_files(&holding)))
}

/// Answers a plan's question from the prepared rootfs (`passwd` as
/// [`read_passwd`] reads it, the home directory as the hook sees it before
/// the runtime mounts anything), into `user`.
///
/// # Errors
/// As [`read_passwd`], and a rootfs that cannot be opened.
pub(crate) fn answer(
    rootfs: &mut LazyRoot<'_>,
    spec: &crate::oci::Spec,
    q: &Question,
    user: &mut UserFacts,
) -> Result<(), SysError> {
    match q {
        Question::Passwd(uid) => user.passwd = read_passwd(rootfs, spec, *uid)?,
        Question::HomeDir(path, paths) => {
            user.home_dir = Some((path.clone(), rootfs.root()?.home_dir(path, paths)));
        }
    }
    Ok(())
}

/// What `/etc/passwd` will say of `uid` in the container, read by fd as the
/// hook reads it (docs/design.md#home-plan): the prepared rootfs' own, or,
/// when the spec's last mount there is a bind of a host path at `/etc` or
/// `/etc/passwd` (Podman's, a user's volume), that source's. Another spec
/// mount there makes it unknown here.
///
/// # Errors
/// A rootfs or the host's procfs that cannot be opened, or a kernel
/// without `openat2`.
pub(crate) fn read_passwd(
    rootfs: &mut LazyRoot<'_>,
    spec: &crate::oci::Spec,
    uid: u32,
) -> Result<Passwd, SysError> {
    let mounts = spec.mounts().as_deref().unwrap_or_default();
    let covering = mounts.iter().rev().find_map(|m| {
        let dest = crate::target::normalise(&m.destination().to_string_lossy());
        (dest == "/etc" || dest == "/etc/passwd").then_some((dest, m))
    });
    let Some((dest, m)) = covering else {
        let root = rootfs.root()?;
        return root.read_passwd(root.proc(), uid);
    };
    let bind = m.typ().as_deref() == Some("bind")
        || m.options().iter().flatten().any(|o| o == "bind" || o == "rbind");
    let source = m.source().as_deref().filter(|s| s.is_absolute());
    let unknown = |why: &str| Ok(Passwd::Unreadable(format!("comes from the spec's mount at {dest}, {why}")));
    let (Some(source), true) = (source, bind) else {
        return unknown("which is not a bind of a host path");
    };
    let (dir, rel) = match dest.as_str() {
        "/etc" => (source, "passwd".to_string()),
        _ => match (source.parent(), source.file_name()) {
            (Some(p), Some(n)) => (p, n.to_string_lossy().into_owned()),
            _ => return unknown("whose source has no parent"),
        },
    };
    match resolve::open_host_dir(dir) {
        // The host's procfs, through which the checked file is read (docs/design.md#reopen).
        Ok(fd) => passwd_in(&Proc::open()?, &fd, &rel, uid),
        Err(e) => unknown(&format!("whose source {} cannot be opened ({e})", dir.display())),
    }
}

/// Why the temp targets go to the hook rather than into the spec for what
/// the image holds, if they do: the real directories `holding` hold
/// entries that a spec tmpfs over them would hide, and that the runtime
/// cannot be given to copy up (past the hook's bounds, a device node,
/// socket or FIFO, or a runtime not known to copy as the hook does). The
/// hook copies them into its tmpfs within its bounds, and past those
/// leaves the target alone (docs/design.md#copy-up). The one rule
/// [`carrier`] applies and [`routes`] reports.
fn image_files(holding: &[Holding]) -> Option<String> {
    if holding.is_empty() {
        return None;
    }
    let each: Vec<String> = holding.iter().map(|(real, why)| format!("the image's {real} {why}")).collect();
    Some(format!(
        "{}: the hook copies it up within its bounds, and past them leaves the target alone",
        each.join("; ")
    ))
}

/// The error for a mountpoint directory that cannot be read.
fn read_error(what: &str, e: rustix::io::Errno) -> SysError {
    SysError::sys(Syscall::Getdents64, "reading the mountpoint", what, e)
}

/// Where one temp target goes, read-only (for `explain`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "executor")]
pub(crate) enum Route {
    /// The spec executor writes a tmpfs entry at `destination`, with
    /// `tmpcopyup` when `copy_up`.
    Spec { destination: String, copy_up: bool },
    /// Our hook mounts it by fd at `destination` (where it resolves before
    /// the runtime mounts anything), added at `stage`, for this reason.
    Hook { destination: String, stage: String, why: String },
    /// Every executor leaves it alone.
    None { why: String, warn: bool },
}

/// The executor of `plan`'s temp targets in `rootfs` under `facts`, and
/// the [`Route`] of each: the spec executor's own verdict ([`carrier`]),
/// taken on a read-only view of the rootfs ([`ReadOnly`]), so nothing is
/// created or changed. Where the hook is the executor from the start, each
/// target is judged by the same placing, read-only, as the hook's landing
/// rule judges it in the container (docs/design.md#landing).
///
/// # Errors
/// A rootfs that cannot be opened or read.
pub(crate) fn routes(
    rootfs: &mut LazyRoot<'_>,
    plan: &Plan,
    facts: &route::Facts<'_>,
    no_copy_up: Option<&str>,
) -> Result<(Executor, Vec<(String, Route)>), SysError> {
    routes_in(rootfs.root()?, plan, facts, no_copy_up)
}

/// [`routes`] in the opened rootfs `root`.
fn routes_in<R: Rootfs>(
    root: &mut R,
    plan: &Plan,
    facts: &route::Facts<'_>,
    no_copy_up: Option<&str>,
) -> Result<(Executor, Vec<(String, Route)>), SysError> {
    let mut view = ReadOnly::new(root);
    let (executor, placed, spec) = match carrier(plan, facts, no_copy_up, || Ok(&mut view))? {
        Carrier::Spec(placed) => (Executor::Spec, placed, true),
        Carrier::Hook { stage, why, placed } => {
            let placed = match placed {
                Some(placed) => placed,
                None => place_in(&mut view, plan, None)?.0,
            };
            (Executor::Hook { stage, why }, placed, false)
        }
    };
    let routes = targets(plan).map(|(target, _)| {
        let what = target.as_str();
        let destination = placed.placed.iter().find(|(t, _)| t == what).map(|(_, real)| real.clone());
        let route = match (placed.refused.iter().find(|(t, _)| t == what), destination, &executor) {
            (Some((_, note)), _, _) => Route::None { why: note.reason.clone(), warn: note.warn },
            (None, destination, Executor::Hook { stage, why }) => Route::Hook {
                destination: destination.unwrap_or_else(|| what.to_string()),
                stage: stage.to_string(),
                why: why.clone(),
            },
            (None, destination, Executor::Spec) => {
                let destination = destination.expect("the placing places or refuses each target");
                Route::Spec { copy_up: spec && placed.copy_up.iter().any(|t| t == what), destination }
            }
        };
        (what.to_string(), route)
    });
    let routes = routes.collect();
    Ok((executor, routes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::fixtures::{mount, tmpfs};
    use crate::plan::landing::Entry;
    use crate::plan::SpecMount;
    use crate::sys::fake::FakeRoot;

    /// A plan with a 1 GiB tmpfs on each of `targets`, over a spec that
    /// mounts `mounts` (dest, one of ours).
    fn plan(targets: &[&str], mounts: &[(&str, bool)]) -> Plan {
        Plan {
            enabled: true,
            actions: targets.iter().map(|t| mount(t, tmpfs(1 << 30, None))).collect(),
            spec_mounts: mounts
                .iter()
                .map(|(d, ours)| SpecMount { dest: d.to_string(), ours: *ours })
                .collect(),
            ..Plan::default()
        }
    }

    fn spec(placing: (Placed, Option<String>)) -> Placed {
        match placing {
            (placed, None) => placed,
            (_, Some(why)) => panic!("to the hook: {why}"),
        }
    }

    fn hook(placing: (Placed, Option<String>)) -> String {
        match placing {
            (_, Some(why)) => why,
            (placed, None) => panic!("into the spec: {placed:?}"),
        }
    }

    /// Spec mode, a runtime trusted with our mounts, no other party's hook.
    const SPEC_MODE: route::Facts<'static> =
        route::Facts { mode: crate::host_config::Mode::Spec, spec_unsafe: None, foreign: &[] };

    #[test]
    fn one_target_is_placed_with_its_tmpfs_mode() {
        let mut root = FakeRoot::new(&[("/tmp", Entry::Dir)]);
        let placed = spec(place_in(&mut root, &plan(&["/tmp"], &[]), None).unwrap());
        assert_eq!(placed.placed, [("/tmp".to_string(), "/tmp".to_string())]);
        assert_eq!(placed.chmodded, [("/tmp".to_string(), 0o1777)]);
        assert_eq!(root.calls, ["chmod /tmp 1777"]);
    }

    /// A symlink into a volume (`/tmp -> /data`, the spec mounting `/data`)
    /// leaves that target alone with a warning naming both, and nothing is
    /// made for it; the other target is placed.
    #[test]
    fn a_target_through_a_symlink_into_a_volume_is_left_alone() {
        let mut root = FakeRoot::new(&[
            ("/tmp", FakeRoot::link("/data")),
            ("/var", Entry::Dir),
            ("/var/tmp", Entry::Dir),
        ]);
        let placed =
            spec(place_in(&mut root, &plan(&["/tmp", "/var/tmp"], &[("/data", false)]), None).unwrap());
        assert_eq!(placed.placed, [("/var/tmp".to_string(), "/var/tmp".to_string())]);
        let [(target, note)] = &placed.refused[..] else { panic!("{:?}", placed.refused) };
        assert_eq!(target, "/tmp");
        assert!(
            note.warn && note.reason.contains("/tmp -> /data") && note.reason.contains("a volume wins"),
            "{note:?}"
        );
        assert_eq!(root.calls, ["chmod /var/tmp 1777"]);
    }

    /// Two temp targets in the image's own tree both go into the spec:
    /// ours first in the mounts array is what keeps a volume and every spec
    /// mount on top under a rename (docs/design.md#spec-race).
    #[test]
    fn two_targets_go_into_the_spec() {
        let mut root = FakeRoot::new(&[("/tmp", Entry::Dir), ("/var", Entry::Dir)]);
        let placed = spec(place_in(&mut root, &plan(&["/tmp", "/var/tmp"], &[]), None).unwrap());
        assert_eq!(placed.placed.len(), 2, "{placed:?}");
        // Beside an entry of ours from an earlier run too.
        let mut root = FakeRoot::new(&[("/tmp", Entry::Dir), ("/var", Entry::Dir), ("/var/tmp", Entry::Dir)]);
        let placed = spec(place_in(&mut root, &plan(&["/tmp"], &[("/var/tmp", true)]), None).unwrap());
        assert_eq!(placed.placed.len(), 1, "{placed:?}");
    }

    /// A target whose directory holds the image's files within the bounds
    /// gets `tmpcopyup`, and its mode is left as it was; past the bounds,
    /// or for a runtime that does not copy as the hook does, the hook.
    #[test]
    fn a_directory_holding_files_is_copied_up_by_the_runtime_or_the_hook() {
        let mut root = FakeRoot::new(&[("/tmp", Entry::Dir)]);
        root.holding.push("/tmp".into());
        let placed = spec(place_in(&mut root, &plan(&["/tmp"], &[]), None).unwrap());
        assert_eq!(placed.copy_up, ["/tmp"]);
        let dest = placed.destination("/tmp").unwrap();
        assert!(dest.copy_up && dest.path == "/tmp", "{dest:?}");
        assert!(root.calls.is_empty(), "{:?}", root.calls);

        let youki = "youki 0.5.3 is not known to copy";
        let mut root = FakeRoot::new(&[("/tmp", Entry::Dir)]);
        root.holding.push("/tmp".into());
        let why = hook(place_in(&mut root, &plan(&["/tmp"], &[]), Some(youki)).unwrap());
        assert!(why.starts_with("the image's /tmp holds files, and youki"), "{why}");

        let mut root = FakeRoot::new(&[("/tmp", Entry::Dir), ("/var", Entry::Dir)]);
        root.past.push(("/tmp".into(), "a FIFO at ./fifo".into()));
        let why = hook(place_in(&mut root, &plan(&["/var/tmp", "/tmp"], &[]), None).unwrap());
        assert!(why.starts_with("the image's /tmp holds a FIFO at ./fifo, past"), "{why}");
        assert!(
            why.ends_with("the hook copies it up within its bounds, and past them leaves the target alone"),
            "{why}"
        );
        // An empty directory beside it is made and chmodded, as before.
        assert_eq!(root.calls, ["mkdir /var/tmp", "chmod /var/tmp 1777"]);
    }

    /// `explain`'s routes are the placing's verdict, taken on a read-only
    /// view: nothing made or chmodded.
    #[test]
    fn routes_say_where_each_target_goes() {
        let entries = [("/tmp", FakeRoot::link("/data")), ("/var", Entry::Dir), ("/var/tmp", Entry::Dir)];
        let mut root = FakeRoot::new(&entries);
        let p = plan(&["/tmp", "/var/tmp"], &[("/data", false)]);
        let (executor, routes) = routes_in(&mut root, &p, &SPEC_MODE, None).unwrap();
        assert_eq!(executor, Executor::Spec);
        assert!(matches!(&routes[0], (t, Route::None { warn: true, .. }) if t == "/tmp"), "{routes:?}");
        let var_tmp =
            |copy_up| ("/var/tmp".to_string(), Route::Spec { destination: "/var/tmp".into(), copy_up });
        assert_eq!(routes[1], var_tmp(false));
        root.holding.push("/var/tmp".into());
        let (executor, routes) = routes_in(&mut root, &p, &SPEC_MODE, None).unwrap();
        assert_eq!(executor, Executor::Spec);
        assert_eq!(routes[1], var_tmp(true));
        let (executor, routes) =
            routes_in(&mut root, &p, &SPEC_MODE, Some("youki 0.5.3 is not known")).unwrap();
        assert!(matches!(executor, Executor::Hook { .. }), "{executor:?}");
        assert!(
            matches!(&routes[1].1, Route::Hook { why, destination, .. }
                if why.contains("holds files, and youki") && destination == "/var/tmp"),
            "{routes:?}"
        );
        assert!(matches!(&routes[0].1, Route::None { warn: true, .. }), "{routes:?}");
        assert!(root.calls.is_empty(), "{:?}", root.calls);
    }

    /// Where the hook is the executor from the start, each target is still
    /// judged by the placing: a symlink into a volume left alone, a safe
    /// one at its real directory, two landing on one directory once.
    #[test]
    fn routes_to_the_hook_judge_each_target_as_the_placing_does() {
        let entries = [
            ("/tmp", FakeRoot::link("/data")),
            ("/var", Entry::Dir),
            ("/var/tmp", Entry::Dir),
            ("/scratch", FakeRoot::link("/var/tmp")),
        ];
        let mut root = FakeRoot::new(&entries);
        let p = plan(&["/tmp", "/var/tmp", "/scratch"], &[("/data", false)]);
        let hook_mode = route::Facts { mode: crate::host_config::Mode::Hook, ..SPEC_MODE };
        let (executor, routes) = routes_in(&mut root, &p, &hook_mode, None).unwrap();
        assert!(matches!(executor, Executor::Hook { .. }), "{executor:?}");
        assert!(matches!(&routes[0].1, Route::None { warn: true, .. }), "{routes:?}");
        assert!(
            matches!(&routes[1].1, Route::Hook { destination, stage, .. } if destination == "/var/tmp" && stage == "prestart"),
            "{routes:?}"
        );
        assert!(
            matches!(&routes[2].1, Route::None { why, .. } if why.contains("same directory as /var/tmp")),
            "{routes:?}"
        );
        assert!(root.calls.is_empty(), "{:?}", root.calls);
    }

    /// A cache whose directory the image gives to another uid is left
    /// alone by the placing and by `explain`'s routes alike, with the same
    /// note: one owner check for both.
    #[test]
    fn routes_and_placing_leave_another_uids_cache_alone_alike() {
        let entries = [("/home", Entry::Dir), ("/home/app", Entry::Dir), ("/home/app/.cache", Entry::Dir)];
        let mut p = plan(&["/home/app/.cache"], &[]);
        if let Action::MountTmpfs { tmpfs, .. } = &mut p.actions[0] {
            tmpfs.image_owner = Some(1000);
        }
        let mut root = FakeRoot::new(&entries);
        root.owners.insert("/home/app/.cache".into(), 0);
        let (_, routes) = routes_in(&mut root, &p, &SPEC_MODE, None).unwrap();
        let Route::None { why, warn } = &routes[0].1 else { panic!("routed: {routes:?}") };
        let placed = spec(place_in(&mut root, &p, None).unwrap());
        assert_eq!(placed.refused.len(), 1, "{placed:?}");
        assert_eq!((&placed.refused[0].1.reason, placed.refused[0].1.warn), (why, *warn));
        assert!(placed.placed.is_empty() && root.calls.is_empty(), "{placed:?} {:?}", root.calls);
        // The process's own directory: placed by both.
        root.owners.insert("/home/app/.cache".into(), 1000);
        let (_, routes) = routes_in(&mut root, &p, &SPEC_MODE, None).unwrap();
        assert!(matches!(&routes[0].1, Route::Spec { .. }), "{routes:?}");
    }

    #[test]
    fn image_files_names_the_directories() {
        assert_eq!(image_files(&[]), None);
        let h = |d: &str, why: &str| (d.to_string(), why.to_string());
        let two =
            image_files(&[h("/tmp", "holds a socket at ./s"), h("/root", "holds files, and youki")]).unwrap();
        assert_eq!(two, "the image's /tmp holds a socket at ./s; the image's /root holds files, and youki: the hook copies it up within its bounds, and past them leaves the target alone");
    }
}
