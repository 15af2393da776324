//! The spec executor's checks on the host, run by the wrapper before it
//! execs the runtime: each temp target against the prepared rootfs (the
//! same landing rules as in the container's namespace, by fd, with the
//! resolver the hook uses too, [`crate::sys::resolve`]). The growth of an
//! engine-made `/dev/shm` is [`crate::sys::engine_shm`]'s. What to check
//! comes from the plan; nothing here decides sizes.

use std::path::Path;

use crate::landing;
use crate::plan::{Action, Note, Passwd, Plan, Question, ShmWay, UserFacts, SHM_PATH};
use crate::sys::procfs::Proc;
use crate::sys::resolve::{self, Root, Rootfs};
use crate::sys::{Call, SysError};
use crate::target::TargetPath;

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
    fn root(&mut self) -> Result<&mut Root, SysError> {
        if self.root.is_none() {
            self.root = Some(Root::open(self.path)?);
        }
        Ok(self.root.as_mut().expect("opened above"))
    }
}

/// Where the spec executor puts each temp target.
#[derive(Debug, Default)]
pub(crate) struct Placed {
    /// Targets placed: the target, and the real in-root path to mount at.
    pub placed: Vec<(String, String)>,
    /// Targets left alone, each with its note.
    pub refused: Vec<(String, Note)>,
    /// Mountpoint directories whose mode was set to the tmpfs' mode.
    pub chmodded: Vec<String>,
    /// Homes whose tmpfs takes the image directory's mode, with that mode.
    pub modes: Vec<(String, u32)>,
}

impl Placed {
    /// The destination for `target`, when it was placed.
    pub(crate) fn destination(&self, target: &str) -> Option<String> {
        self.placed.iter().find(|(t, _)| t == target).map(|(_, d)| d.clone())
    }
}

/// What the spec executor does with the temp targets.
#[derive(Debug)]
pub(crate) enum Placing {
    /// Written into the spec, each where [`Placed`] says.
    Spec(Placed),
    /// Handed to the hook, for this reason ([`two_in_image`]).
    Hook(String),
}

/// Applies the landing rule (docs/design.md#landing) to every temp target
/// of `plan` in the prepared `rootfs`, before the runtime mounts anything:
/// each target is walked in-root, judged against where the spec's mounts
/// will land, and resolved to its real path with the hook's rules (missing
/// directories made by fd in the image's own rootfs, one mount per
/// directory). Each mountpoint directory gets the mode of its tmpfs: runc
/// before 1.1.8 gives a tmpfs from the spec the mode of the directory it
/// covers, whatever `mode=` says (docs/design.md#runc-tmpfs-mode).
///
/// When the spec would then hold two or more tmpfs of ours in the image's
/// own tree, the targets go to the hook instead ([`two_in_image`],
/// docs/design.md#spec-race): judged before anything is made, and again
/// after, since a rename between the two can let one more through. So do
/// they when a target's directory holds files in the image
/// ([`image_files`]: read by fd as it is placed, before its mode is set),
/// which a spec tmpfs would hide.
///
/// # Errors
/// A rootfs that cannot be opened, or a failure that is not a property of
/// the image.
pub(crate) fn place_targets(rootfs: &mut LazyRoot<'_>, plan: &Plan) -> Result<Placing, SysError> {
    place_in(rootfs.root()?, plan)
}

/// [`place_targets`] in the opened rootfs `root`.
fn place_in<R: Rootfs>(root: &mut R, plan: &Plan) -> Result<Placing, SysError> {
    let landings = landing::landings(root, &plan.spec_mounts);
    let earlier = ours_in_image(root, plan, &landings);
    let targets = || {
        plan.actions.iter().filter_map(|a| match a {
            Action::MountTmpfs { target, tmpfs, .. } => Some((target, tmpfs)),
            Action::Shm { .. } => None,
        })
    };
    if earlier + targets().count() > 1 {
        let passing: Vec<&str> = targets()
            .filter(|(t, _)| root.judge_target(t, &landings).is_ok())
            .map(|(t, _)| t.as_str())
            .collect();
        if let Some(why) = two_in_image(earlier, &passing) {
            return Ok(Placing::Hook(why));
        }
    }
    let mut out = Placed::default();
    let mut holding = Vec::new();
    // A home (or a cache under it) keeps the mode of the image's
    // directory, and is left alone where the image gives that directory to
    // another uid: read before a missing one is made.
    let image_stats: Vec<(&str, Option<(u32, u32)>)> = targets()
        .filter(|(_, t)| t.image_mode || t.image_owner.is_some())
        .map(|(target, _)| (target.as_str(), root.dir_stat(target)))
        .collect();
    let image_modes: Vec<(&str, Option<u32>)> =
        image_stats.iter().map(|(t, st)| (*t, st.map(|(mode, _)| mode))).collect();
    for (target, tmpfs) in targets() {
        let what = target.as_str();
        let owner = image_stats.iter().find(|(t, _)| *t == what).and_then(|(_, st)| st.map(|(_, uid)| uid));
        if let Some(note) = crate::landing::not_the_processs(what, owner, tmpfs.image_owner) {
            out.refused.push((what.to_string(), note));
            continue;
        }
        match root.place_target(target, &landings)? {
            Err(note) => out.refused.push((what.to_string(), note)),
            Ok((real, fd)) => {
                if root.holds_entries(&fd).map_err(|e| read_error(real.as_str(), e))? {
                    holding.push(real.to_string());
                    continue;
                }
                let mode = match image_modes.iter().find(|(t, _)| *t == what) {
                    Some((_, Some(m))) => {
                        if *m != tmpfs.mode {
                            out.modes.push((what.to_string(), *m));
                        }
                        *m
                    }
                    _ => tmpfs.mode,
                };
                if root.set_mode(&fd, mode, real.as_str())? {
                    out.chmodded.push(real.to_string());
                }
                out.placed.push((what.to_string(), real.to_string()));
            }
        }
    }
    let placed: Vec<&str> = out.placed.iter().map(|(t, _)| t.as_str()).collect();
    match to_hook(earlier, &placed, &holding) {
        Some(why) => Ok(Placing::Hook(why)),
        None => Ok(Placing::Spec(out)),
    }
}

/// `plan` with each home in `modes` taking its image directory's mode.
pub(crate) fn with_image_modes(mut plan: Plan, modes: &[(String, u32)]) -> Plan {
    for action in &mut plan.actions {
        if let Action::MountTmpfs { target, tmpfs, .. } = action {
            if let Some((_, m)) = modes.iter().find(|(t, _)| t == target.as_str()) {
                tmpfs.mode = *m;
            }
        }
    }
    plan
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
        Question::HomeDir(path) => user.home_dir = Some((path.clone(), rootfs.root()?.home_dir(path))),
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
    // The host's procfs, through which the checked file is read (docs/design.md#reopen).
    let proc = Proc::open()?;
    let Some((dest, m)) = covering else { return rootfs.root()?.read_passwd(&proc, uid) };
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
        Ok(fd) => resolve::passwd_in(&proc, &fd, &rel, uid),
        Err(e) => unknown(&format!("whose source {} cannot be opened ({e})", dir.display())),
    }
}

/// Why what the rootfs holds sends the temp targets to the hook, if it
/// does: two tmpfs of ours in the image's own tree ([`two_in_image`]), or a
/// target's directory holding the image's files ([`image_files`]). The one
/// rule [`place_targets`] applies and [`routes`] reports.
fn to_hook(earlier: usize, passing: &[&str], holding: &[String]) -> Option<String> {
    two_in_image(earlier, passing).or_else(|| image_files(holding))
}

/// Why the temp targets `passing` (those the landing rule lets through) go
/// to the hook rather than into the spec, if they do: with the `earlier`
/// tmpfs of ours in the image's own tree ([`ours_in_image`]), the spec would
/// hold two or more there. A runtime mounts each entry at whatever its path
/// leads to when it gets to it, following the image's symlinks; a rename in
/// the image after the check can lead two entries' paths to one directory,
/// and no check made before the runtime mounts can rule that out. The hook
/// mounts by fd, one mount per directory (docs/design.md#spec-race).
fn two_in_image(earlier: usize, passing: &[&str]) -> Option<String> {
    let n = earlier + passing.len();
    if passing.is_empty() || n < 2 {
        return None;
    }
    let also = match earlier {
        0 => String::new(),
        1 => " and one the spec has already".to_string(),
        e => format!(" and {e} the spec has already"),
    };
    Some(format!(
        "the spec would hold {n} tmpfs of ours in the image's own tree ({}{also}), and a rename in the image before the runtime mounts them could lead two onto one directory",
        passing.join(", ")
    ))
}

/// Why the temp targets go to the hook rather than into the spec for what
/// the image holds, if they do: the real directories `holding` hold files
/// in the image, and a spec tmpfs over them would hide those (runtimes copy
/// nothing, and `tmpcopyup` would copy without bounds). The hook copies
/// them into its tmpfs, within its bounds, and past those leaves the target
/// alone (docs/design.md#copy-up).
fn image_files(holding: &[String]) -> Option<String> {
    let (first, rest) = holding.split_first()?;
    let (names, verb) = match rest {
        [] => (first.clone(), "holds"),
        _ => (holding.join(", "), "hold"),
    };
    Some(format!(
        "the image's {names} {verb} files, which a tmpfs from the spec would hide; the hook copies them up"
    ))
}

/// The error for a mountpoint directory that cannot be read.
fn read_error(what: &str, e: rustix::io::Errno) -> SysError {
    SysError::sys(Call::Getdents64, "reading the mountpoint", what, e)
}

/// How many tmpfs of ours the spec holds, or will, in the image's own tree
/// besides the temp targets: entries of an earlier run that no other spec
/// mount covers, and a fresh `/dev/shm` when no spec mount (`/dev`) does.
fn ours_in_image(root: &mut impl Rootfs, plan: &Plan, landings: &[landing::Landing]) -> usize {
    let fresh_shm = plan.actions.iter().any(|a| matches!(a, Action::Shm { way: ShmWay::Fresh, .. }));
    let shm_in_image = fresh_shm && !landing::inside_a_landing(root, SHM_PATH, landings);
    landings.iter().filter(|l| l.ours).count() + usize::from(shm_in_image)
}

/// Where one temp target goes, read-only (for `explain`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "executor")]
pub(crate) enum Route {
    /// The spec executor writes a tmpfs entry at `destination`.
    Spec { destination: String },
    /// Our hook mounts it by fd, added at `stage`, for this reason.
    Hook { stage: String, why: String },
    /// Every executor leaves it alone.
    None { why: String, warn: bool },
}

/// The carrier of `plan`'s temp targets in `rootfs`, and the [`Route`] of
/// each: the rootfs check's verdict (docs/design.md#landing: a target
/// refused there is refused by the hook too), then `carrier`'s executor
/// ([`super::route::carrier`]), which becomes the hook at `prestart` where
/// the spec would hold two tmpfs of ours in the image's own tree
/// or where a target's directory holds files in the image ([`to_hook`], as
/// [`place_targets`] judges it). Nothing is created or changed.
///
/// # Errors
/// A rootfs that cannot be opened.
pub(crate) fn routes(
    rootfs: &mut LazyRoot<'_>,
    plan: &Plan,
    carrier: &super::route::Carrier,
) -> Result<(super::route::Carrier, Vec<(String, Route)>), SysError> {
    routes_in(rootfs.root()?, plan, carrier)
}

/// [`routes`] in the opened rootfs `root`.
fn routes_in<R: Rootfs>(
    root: &mut R,
    plan: &Plan,
    carrier: &super::route::Carrier,
) -> Result<(super::route::Carrier, Vec<(String, Route)>), SysError> {
    use super::route::Carrier;
    let landings = landing::landings(root, &plan.spec_mounts);
    let judged: Vec<(&str, Result<TargetPath, Note>)> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::MountTmpfs { target, .. } => {
                Some((target.as_str(), root.judge_target(target, &landings)))
            }
            Action::Shm { .. } => None,
        })
        .collect();
    let mut carrier = carrier.clone();
    if carrier == Carrier::Spec {
        let passing: Vec<&str> = judged.iter().filter(|(_, j)| j.is_ok()).map(|(t, _)| *t).collect();
        let mut holding = Vec::new();
        for real in judged.iter().filter_map(|(_, j)| j.as_ref().ok()) {
            if root.holds_entries_at(real).map_err(|e| read_error(real.as_str(), e))? {
                holding.push(real.to_string());
            }
        }
        if let Some(why) = to_hook(ours_in_image(root, plan, &landings), &passing, &holding) {
            // The carrier is the spec: no other party's runtime-namespace hook.
            carrier = Carrier::Hook { stage: super::route::hook_stage(&[]), why };
        }
    }
    let routes = judged.into_iter().map(|(target, judged)| {
        let route = match (judged, &carrier) {
            (Err(note), _) => Route::None { why: note.reason, warn: note.warn },
            (Ok(_), Carrier::Hook { stage, why }) => {
                Route::Hook { stage: stage.to_string(), why: why.clone() }
            }
            (Ok(real), Carrier::Spec) => Route::Spec { destination: real.to_string() },
        };
        (target.to_string(), route)
    });
    let routes = routes.collect();
    Ok((carrier, routes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::landing::Entry;
    use crate::plan::fixtures::{mount, tmpfs};
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

    fn spec(placing: Placing) -> Placed {
        match placing {
            Placing::Spec(placed) => placed,
            Placing::Hook(why) => panic!("to the hook: {why}"),
        }
    }

    fn hook(placing: Placing) -> String {
        match placing {
            Placing::Hook(why) => why,
            Placing::Spec(placed) => panic!("into the spec: {placed:?}"),
        }
    }

    #[test]
    fn one_target_is_placed_with_its_tmpfs_mode() {
        let mut root = FakeRoot::new(&[("/tmp", Entry::Dir)]);
        let placed = spec(place_in(&mut root, &plan(&["/tmp"], &[])).unwrap());
        assert_eq!(placed.placed, [("/tmp".to_string(), "/tmp".to_string())]);
        assert_eq!(placed.chmodded, ["/tmp"]);
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
        let placed = spec(place_in(&mut root, &plan(&["/tmp", "/var/tmp"], &[("/data", false)])).unwrap());
        assert_eq!(placed.placed, [("/var/tmp".to_string(), "/var/tmp".to_string())]);
        let [(target, note)] = &placed.refused[..] else { panic!("{:?}", placed.refused) };
        assert_eq!(target, "/tmp");
        assert!(
            note.warn && note.reason.contains("/tmp -> /data") && note.reason.contains("a volume wins"),
            "{note:?}"
        );
        assert_eq!(root.calls, ["chmod /var/tmp 1777"]);
    }

    /// Two tmpfs of ours in the image's tree go to the hook, judged before
    /// anything is made or changed.
    #[test]
    fn two_targets_go_to_the_hook_before_anything_is_made() {
        let mut root = FakeRoot::new(&[("/tmp", Entry::Dir), ("/var", Entry::Dir)]);
        let why = hook(place_in(&mut root, &plan(&["/tmp", "/var/tmp"], &[])).unwrap());
        assert!(why.contains("2 tmpfs of ours") && why.contains("/tmp, /var/tmp"), "{why}");
        assert!(root.calls.is_empty(), "{:?}", root.calls);
        // An entry of ours from an earlier run counts as one of them.
        let mut root = FakeRoot::new(&[("/tmp", Entry::Dir), ("/var", Entry::Dir), ("/var/tmp", Entry::Dir)]);
        let why = hook(place_in(&mut root, &plan(&["/tmp"], &[("/var/tmp", true)])).unwrap());
        assert!(why.contains("and one the spec has already"), "{why}");
        // Not when the earlier entry sits inside a volume (the spec's /var).
        let mut root = FakeRoot::new(&[("/tmp", Entry::Dir), ("/var", Entry::Dir)]);
        let placing = place_in(&mut root, &plan(&["/tmp"], &[("/var", false), ("/var/tmp", true)])).unwrap();
        assert_eq!(spec(placing).placed.len(), 1);
    }

    /// A target whose directory holds the image's files goes to the hook
    /// (which copies them up); its mode is left as it was.
    #[test]
    fn a_directory_holding_files_goes_to_the_hook() {
        let mut root = FakeRoot::new(&[("/tmp", Entry::Dir)]);
        root.holding.push("/tmp".into());
        let why = hook(place_in(&mut root, &plan(&["/tmp"], &[])).unwrap());
        assert!(why.starts_with("the image's /tmp holds files"), "{why}");
        assert!(root.calls.is_empty(), "{:?}", root.calls);
    }

    /// A home's tmpfs takes the mode of the image's directory, read before
    /// anything is made.
    #[test]
    fn a_home_keeps_the_image_mode() {
        let mut root = FakeRoot::new(&[("/root", Entry::Dir)]);
        root.modes.insert("/root".into(), 0o700);
        let mut p = plan(&["/root"], &[]);
        let Action::MountTmpfs { tmpfs, .. } = &mut p.actions[0] else { unreachable!() };
        tmpfs.image_mode = true;
        let placed = spec(place_in(&mut root, &p).unwrap());
        assert_eq!(placed.modes, [("/root".to_string(), 0o700)]);
        assert!(placed.chmodded.is_empty() && root.calls.is_empty(), "{:?}", root.calls);
    }

    /// `explain`'s routes judge as the placing does, and change nothing.
    #[test]
    fn routes_say_where_each_target_goes() {
        let entries = [("/tmp", FakeRoot::link("/data")), ("/var", Entry::Dir), ("/var/tmp", Entry::Dir)];
        let mut root = FakeRoot::new(&entries);
        let p = plan(&["/tmp", "/var/tmp"], &[("/data", false)]);
        let (carrier, routes) = routes_in(&mut root, &p, &super::super::route::Carrier::Spec).unwrap();
        assert_eq!(carrier, super::super::route::Carrier::Spec);
        assert!(matches!(&routes[0], (t, Route::None { warn: true, .. }) if t == "/tmp"), "{routes:?}");
        assert_eq!(routes[1], ("/var/tmp".to_string(), Route::Spec { destination: "/var/tmp".into() }));
        root.holding.push("/var/tmp".into());
        let (carrier, routes) = routes_in(&mut root, &p, &super::super::route::Carrier::Spec).unwrap();
        assert!(matches!(carrier, super::super::route::Carrier::Hook { .. }), "{carrier:?}");
        assert!(matches!(&routes[1].1, Route::Hook { why, .. } if why.contains("holds files")), "{routes:?}");
        assert!(root.calls.is_empty(), "{:?}", root.calls);
    }

    #[test]
    fn image_files_names_the_directories() {
        assert_eq!(image_files(&[]), None);
        let one = image_files(&["/tmp".to_string()]).unwrap();
        assert!(one.starts_with("the image's /tmp holds files"), "{one}");
        let two = image_files(&["/tmp".to_string(), "/var/tmp".to_string()]).unwrap();
        assert!(two.starts_with("the image's /tmp, /var/tmp hold files"), "{two}");
    }

    #[test]
    fn two_in_image_table() {
        // (name, earlier tmpfs of ours in the image's tree, targets that pass, to the hook)
        let cases: [(&str, usize, &[&str], bool); 5] = [
            ("one target", 0, &["/tmp"], false),
            ("no target", 2, &[], false),
            ("two targets", 0, &["/tmp", "/data"], true),
            ("one target beside an earlier entry of ours or a fresh /dev/shm", 1, &["/tmp"], true),
            ("two targets and one of ours", 1, &["/tmp", "/var/tmp"], true),
        ];
        for (name, earlier, passing, hook) in cases {
            let got = two_in_image(earlier, passing);
            assert_eq!(got.is_some(), hook, "{name}: {got:?}");
            if let Some(why) = got {
                assert!(passing.iter().all(|t| why.contains(t)), "{name}: names the targets: {why}");
                assert!(why.contains("onto one directory"), "{name}: {why}");
            }
        }
    }
}
