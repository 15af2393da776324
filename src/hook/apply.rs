//! Carrying out a [`Plan`] inside the container's mount namespace: the order
//! of effects, with the effects behind the small [`Mounter`] trait.
//! [`super::System`] is the only implementation that makes syscalls (built
//! on [`crate::sys`]); unit tests here use a recorder to
//! check the order. This module only reads the plan: what to mount, how big
//! and with which attributes was decided there.
//!
//! The order is all-or-nothing where the kernel allows it: enter the mount
//! namespace, open the rootfs, prepare every mount (resolve targets, build
//! detached tmpfs instances, each filled with what its directory held:
//! [`Mounter::copy_up`]; a target whose contents cannot be copied whole is
//! left alone and its tmpfs dropped), and only then attach them one after
//! another. A
//! failure before the first attach changes nothing; a failure while attaching
//! detaches what was attached.

use std::path::Path;

use super::HookError;
use crate::plan::{
    Action, Decision, HomeDir, Note, Passwd, Plan, Question, ShmWay, SpecMount, Tmpfs, UserFacts,
};
pub(crate) use crate::sys::mount::Done;
use crate::sys::ns::NsEntry;
use crate::sys::SysError;
use crate::target::TargetPath;

/// The outcome of preparing one action.
#[derive(Debug)]
pub(crate) enum Prepared<P> {
    /// Ready to commit; what committing it will have done.
    Ready(P, Done),
    /// Left alone, and why.
    Skip(Note),
}

/// The effects. Each method is one step of [`apply`].
pub(crate) trait Mounter {
    /// The opened rootfs, which every preparation resolves from.
    type Root;
    /// A prepared effect, committed by [`Mounter::commit`].
    type Pending;

    /// Gets into the container's mount namespace: `setns` at prestart and
    /// createRuntime, a check that we are already there at createContainer.
    ///
    /// # Errors
    /// When the target cannot be told apart from the host's namespace.
    fn enter(&mut self, entry: NsEntry, pid: Option<i64>) -> Result<(), SysError>;
    /// Opens the container's rootfs (after `enter`); `spec_mounts` are the
    /// spec's mount destinations, for the landing rule.
    ///
    /// # Errors
    /// A rootfs that cannot be opened or is the host's root.
    fn open_root(&mut self, rootfs: &Path, spec_mounts: &[SpecMount]) -> Result<Self::Root, SysError>;
    /// What the rootfs' `/etc/passwd` (as the container will see it) says
    /// of `uid`, read by fd and bounded.
    ///
    /// # Errors
    /// Failures that are not a property of the image (a kernel without
    /// `openat2`).
    fn read_passwd(&mut self, root: &mut Self::Root, uid: u32) -> Result<Passwd, SysError>;
    /// What the rootfs holds at the home `path` and at `paths` below it
    /// (docs/design.md#home-rule), as the container will see it.
    fn read_home_dir(&mut self, root: &mut Self::Root, path: &str, paths: &[String]) -> HomeDir;
    /// Resolves `target` inside the rootfs and builds the detached tmpfs.
    ///
    /// # Errors
    /// Failures that are not a property of the image (those are skips).
    fn prepare_tmpfs(
        &mut self,
        root: &mut Self::Root,
        target: &TargetPath,
        tmpfs: &Tmpfs,
        subdirs: &[String],
    ) -> Result<Prepared<Self::Pending>, SysError>;
    /// Copies what the directory under a prepared tmpfs holds (the image's
    /// files, or a vendor hook's that ran before ours) into the still
    /// detached tmpfs, so attaching it hides nothing
    /// (docs/design.md#copy-up). `Ok`: copied whole (or nothing to copy),
    /// with a warning for what was left out.
    ///
    /// # Errors
    /// The note for a target whose contents cannot be copied whole (past a
    /// bound, or a failed call): it is left alone, since an empty tmpfs
    /// would hide the image's files.
    fn copy_up(
        &mut self,
        pending: &mut Self::Pending,
        target: &TargetPath,
        tmpfs: &Tmpfs,
    ) -> Result<Option<Note>, Note>;
    /// Prepares `/dev/shm` to be at least `tmpfs.size`.
    ///
    /// # Errors
    /// As for `prepare_tmpfs`.
    fn prepare_shm(
        &mut self,
        root: &mut Self::Root,
        way: ShmWay,
        writable: bool,
        tmpfs: &Tmpfs,
    ) -> Result<Prepared<Self::Pending>, SysError>;
    /// Attaches a prepared mount or applies a prepared resize.
    ///
    /// # Errors
    /// The kernel refused.
    fn commit(&mut self, pending: Self::Pending) -> Result<(), SysError>;
    /// Detaches everything attached so far (best effort, after a failed commit).
    fn rollback(&mut self);
}

/// What a successful apply did, and what it left alone.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Report {
    pub done: Vec<Done>,
    pub notes: Vec<Note>,
}

/// Gets into the container and finishes `decision` from what it will see:
/// enters the mount namespace, opens the rootfs, and answers what the plan
/// asks of the image (its `/etc/passwd`, what it holds at the home) with
/// the [`Mounter`]'s reads ([`crate::plan::finish`]), before anything is
/// prepared. `None`: nothing to do, and nothing entered.
///
/// # Errors
/// Any [`SysError`], or a home annotation the answer made invalid.
pub(crate) fn open<M: Mounter>(
    m: &mut M,
    decision: Decision<'_>,
    entry: NsEntry,
    pid: Option<i64>,
    rootfs: &Path,
) -> Result<Option<(M::Root, Plan)>, HookError> {
    // decide leaves a disabled plan without actions or questions.
    if !decision.has_work() {
        return Ok(None);
    }
    m.enter(entry, pid)?;
    let mut root = m.open_root(rootfs, decision.spec_mounts())?;
    let plan = crate::plan::finish(decision, UserFacts::HOOK, |q, user| {
        match q {
            Question::Passwd(uid) => user.passwd = m.read_passwd(&mut root, *uid)?,
            Question::HomeDir(path, paths) => {
                user.home_dir = Some((path.clone(), m.read_home_dir(&mut root, path, paths)));
            }
        }
        Ok::<(), HookError>(())
    })?;
    Ok(Some((root, plan)))
}

/// Carries out the finished `plan` in the container's rootfs `root`
/// (opened by [`open`]): every mount prepared, then every one attached.
///
/// # Errors
/// Any [`SysError`]; on error nothing stays mounted by this call.
pub(crate) fn apply<M: Mounter>(m: &mut M, root: &mut M::Root, plan: &Plan) -> Result<Report, HookError> {
    let mut report = Report::default();
    let mut ready = Vec::new();
    for action in &plan.actions {
        let prepared = match action {
            Action::MountTmpfs { target, tmpfs, subdirs, .. } => {
                match m.prepare_tmpfs(root, target, tmpfs, subdirs)? {
                    Prepared::Ready(mut p, done) => match m.copy_up(&mut p, target, tmpfs) {
                        Ok(note) => {
                            report.notes.extend(note);
                            Prepared::Ready(p, done)
                        }
                        // Never an empty tmpfs over the image's files: the
                        // detached tmpfs is dropped with `p`.
                        Err(note) => Prepared::Skip(note),
                    },
                    skip => skip,
                }
            }
            Action::Shm { way, writable, tmpfs, .. } => m.prepare_shm(root, *way, *writable, tmpfs)?,
        };
        match prepared {
            Prepared::Ready(p, done) => ready.push((p, done)),
            Prepared::Skip(note) => report.notes.push(note),
        }
    }
    for (pending, done) in ready {
        if let Err(e) = m.commit(pending) {
            m.rollback();
            return Err(e.into());
        }
        report.done.push(done);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::fixtures::{mount, tmpfs};
    use crate::plan::{Owner, ShmSource};
    use crate::size::Bytes;
    use crate::stage::Stage;
    use crate::sys::Syscall;

    /// Records every call; fails where told to.
    #[derive(Default)]
    struct Recorder {
        calls: Vec<String>,
        skip: Vec<&'static str>,
        fail_prepare: Option<&'static str>,
        fail_commit: Option<&'static str>,
        /// Targets whose directory holds what cannot be copied whole.
        fail_copy: Vec<&'static str>,
        owners: Vec<Option<Owner>>,
        /// `context=` of each tmpfs prepared.
        labels: Vec<Option<String>>,
        /// What `read_passwd` finds.
        passwd: Passwd,
        /// `read_passwd` fails.
        fail_passwd: bool,
    }

    impl Mounter for Recorder {
        type Root = String;
        type Pending = String;
        fn enter(&mut self, entry: NsEntry, pid: Option<i64>) -> Result<(), SysError> {
            self.calls.push(format!("enter {entry} {pid:?}"));
            Ok(())
        }
        fn open_root(&mut self, rootfs: &Path, _: &[SpecMount]) -> Result<String, SysError> {
            self.calls.push(format!("open_root {}", rootfs.display()));
            Ok(rootfs.display().to_string())
        }
        fn prepare_tmpfs(
            &mut self,
            root: &mut String,
            target: &TargetPath,
            tmpfs: &Tmpfs,
            _subdirs: &[String],
        ) -> Result<Prepared<String>, SysError> {
            self.calls.push(format!("prepare {target} {} in {root}", tmpfs.size.bytes));
            self.owners.push(tmpfs.owner);
            self.labels.push(tmpfs.label.clone());
            self.prepared(
                target.as_str(),
                Done::Mounted { target: target.to_string(), size: tmpfs.size.bytes },
            )
        }
        fn copy_up(
            &mut self,
            pending: &mut String,
            target: &TargetPath,
            _: &Tmpfs,
        ) -> Result<Option<Note>, Note> {
            self.calls.push(format!("copy_up {pending}"));
            match self.fail_copy.contains(&target.as_str()) {
                true => Err(Note::warn(target.as_str(), "left alone")),
                false => Ok(None),
            }
        }
        fn prepare_shm(
            &mut self,
            _: &mut String,
            way: ShmWay,
            _writable: bool,
            tmpfs: &Tmpfs,
        ) -> Result<Prepared<String>, SysError> {
            self.calls.push(format!("prepare shm {way:?} {}", tmpfs.size.bytes));
            self.owners.push(tmpfs.owner);
            self.labels.push(tmpfs.label.clone());
            self.prepared(
                "/dev/shm",
                Done::GrewShm { from: Bytes(1 << 26), to: tmpfs.size.bytes, writable: false },
            )
        }
        fn read_passwd(&mut self, _: &mut String, uid: u32) -> Result<Passwd, SysError> {
            self.calls.push(format!("read_passwd {uid}"));
            if self.fail_passwd {
                return Err(SysError::NotProcfs("/proc"));
            }
            Ok(self.passwd.clone())
        }
        fn read_home_dir(&mut self, _: &mut String, path: &str, _: &[String]) -> HomeDir {
            self.calls.push(format!("read_home_dir {path}"));
            HomeDir::Read(vec![(String::new(), crate::plan::Found::Missing)])
        }
        fn commit(&mut self, p: String) -> Result<(), SysError> {
            self.calls.push(format!("commit {p}"));
            if self.fail_commit == Some(p.as_str()) {
                return Err(SysError::sys(Syscall::MoveMount, "attaching", p, rustix::io::Errno::IO));
            }
            Ok(())
        }
        fn rollback(&mut self) {
            self.calls.push("rollback".into());
        }
    }

    impl Recorder {
        fn prepared(&self, what: &str, done: Done) -> Result<Prepared<String>, SysError> {
            if self.fail_prepare == Some(what) {
                return Err(SysError::sys(Syscall::Openat2, "resolving", what, rustix::io::Errno::IO));
            }
            if self.skip.contains(&what) {
                return Ok(Prepared::Skip(Note::info(what, "already a mount point")));
            }
            Ok(Prepared::Ready(what.to_string(), done))
        }
    }

    /// [`open`], then [`apply`], as the hook runs them, for a finished plan.
    fn go(r: &mut Recorder, plan: Plan, entry: NsEntry, pid: i64, rootfs: &str) -> Result<Report, HookError> {
        go_decision(r, Decision::Done(plan), entry, pid, rootfs)
    }

    fn go_decision(
        r: &mut Recorder,
        decision: Decision<'_>,
        entry: NsEntry,
        pid: i64,
        rootfs: &str,
    ) -> Result<Report, HookError> {
        match open(r, decision, entry, Some(pid), Path::new(rootfs))? {
            Some((mut root, plan)) => apply(r, &mut root, &plan),
            None => Ok(Report::default()),
        }
    }

    fn plan_owned(owner: Option<Owner>) -> Plan {
        let mount = |p: &str| mount(p, tmpfs(1 << 30, owner));
        Plan {
            enabled: true,
            why: "test".into(),
            owner,
            actions: vec![
                mount("/tmp"),
                mount("/var/tmp"),
                Action::Shm {
                    existing: ShmSource::None,
                    way: ShmWay::Fresh,
                    writable: false,
                    tmpfs: tmpfs(2 << 30, owner),
                },
            ],
            ..Plan::default()
        }
    }

    fn run(r: &mut Recorder, stage: Stage) -> Result<Report, HookError> {
        go(r, plan_owned(None), NsEntry::at(stage)?, 42, "/b/rootfs")
    }

    #[test]
    fn prepares_everything_before_committing_anything() {
        let mut r = Recorder::default();
        let report = run(&mut r, Stage::Prestart).unwrap();
        assert_eq!(
            r.calls,
            [
                "enter prestart Some(42)",
                "open_root /b/rootfs",
                "prepare /tmp 1Gi in /b/rootfs",
                "copy_up /tmp",
                "prepare /var/tmp 1Gi in /b/rootfs",
                "copy_up /var/tmp",
                "prepare shm Fresh 2Gi",
                "commit /tmp",
                "commit /var/tmp",
                "commit /dev/shm",
            ]
        );
        assert_eq!(report.done.len(), 3);
        assert_eq!(report.done[2].to_string(), "grew /dev/shm from 64Mi to 2Gi");
    }

    #[test]
    fn the_plan_owner_reaches_every_mount() {
        let mut r = Recorder::default();
        let owner = Some(Owner { uid: 100000, gid: 100000 });
        go(&mut r, plan_owned(owner), NsEntry::Join(Stage::Prestart), 42, "/r").unwrap();
        assert_eq!(r.owners, [owner; 3]);
    }

    #[test]
    fn the_plan_label_reaches_every_mount() {
        let label = Some("system_u:object_r:container_file_t:s0:c1,c2".to_string());
        let mut plan = plan_owned(None);
        for action in &mut plan.actions {
            let (Action::MountTmpfs { tmpfs, .. } | Action::Shm { tmpfs, .. }) = action;
            tmpfs.label = label.clone();
        }
        let mut r = Recorder::default();
        go(&mut r, plan, NsEntry::Join(Stage::Prestart), 42, "/r").unwrap();
        assert_eq!(r.labels, [label.clone(), label.clone(), label]);
        let mut r = Recorder::default();
        go(&mut r, plan_owned(None), NsEntry::Join(Stage::Prestart), 42, "/r").unwrap();
        assert_eq!(r.labels, [None, None, None]);
    }

    #[test]
    fn a_prepare_failure_commits_nothing() {
        let mut r = Recorder { fail_prepare: Some("/dev/shm"), ..Recorder::default() };
        run(&mut r, Stage::CreateRuntime).unwrap_err();
        assert!(!r.calls.iter().any(|c| c.starts_with("commit")), "{:?}", r.calls);
    }

    #[test]
    fn a_commit_failure_rolls_back() {
        let mut r = Recorder { fail_commit: Some("/var/tmp"), ..Recorder::default() };
        run(&mut r, Stage::Prestart).unwrap_err();
        assert_eq!(&r.calls[r.calls.len() - 3..], ["commit /tmp", "commit /var/tmp", "rollback"]);
    }

    #[test]
    fn skips_are_reported_not_committed() {
        let mut r = Recorder { skip: vec!["/tmp"], ..Recorder::default() };
        let report = run(&mut r, Stage::CreateContainer).unwrap();
        assert_eq!(report.notes, [Note::info("/tmp", "already a mount point")]);
        assert!(!r.calls.contains(&"commit /tmp".to_string()));
    }

    #[test]
    fn a_copy_that_cannot_be_whole_leaves_the_target_alone() {
        let mut r = Recorder { fail_copy: vec!["/var/tmp"], skip: vec!["/tmp"], ..Recorder::default() };
        let report = run(&mut r, Stage::CreateContainer).unwrap();
        // A skipped target is not copied up; one whose copy stopped is not
        // committed at all (no empty tmpfs over its files), and the rest goes ahead.
        assert_eq!(
            r.calls,
            [
                "enter createContainer Some(42)",
                "open_root /b/rootfs",
                "prepare /tmp 1Gi in /b/rootfs",
                "prepare /var/tmp 1Gi in /b/rootfs",
                "copy_up /var/tmp",
                "prepare shm Fresh 2Gi",
                "commit /dev/shm",
            ]
        );
        assert_eq!(
            report.notes,
            [Note::info("/tmp", "already a mount point"), Note::warn("/var/tmp", "left alone")]
        );
        assert_eq!(report.done.len(), 1);
    }

    #[test]
    fn nothing_to_do_touches_nothing() {
        let mut r = Recorder::default();
        let empty = Plan { enabled: true, ..Plan::default() };
        go(&mut r, empty, NsEntry::Join(Stage::Prestart), 1, "/r").unwrap();
        // A disabled plan has no actions: the plan's tests hold that.
        assert!(r.calls.is_empty());
    }

    #[test]
    fn a_plan_that_asks_is_finished_inside_before_anything_is_prepared() {
        // uid 1000 without HOME: the plan asks for the image's /etc/passwd,
        // then for what the image holds at that home; both are read from
        // the opened rootfs, as the container will see it, and the plan
        // finished from them is the one carried out.
        let spec: crate::oci::Spec = serde_json::from_value(serde_json::json!({
            "ociVersion": "1.0.2",
            "process": {"args": ["sh"], "cwd": "/", "user": {"uid": 1000, "gid": 1000}, "env": ["PATH=/bin"]},
            "root": {"path": "rootfs", "readonly": true},
            "mounts": [{"destination": "/tmp", "type": "bind", "source": "/vol", "options": ["rbind"]}],
            "linux": {"namespaces": [{"type": "mount"}]}
        }))
        .unwrap();
        let host_config = crate::host_config::HostConfig::default();
        let host = crate::plan::HostFacts { ram: Bytes(16 << 30) };
        let begin = || crate::plan::begin(&spec, None, &host_config, host, &UserFacts::HOOK).unwrap();
        assert!(matches!(begin(), Decision::Asks(_)));
        let mut r = Recorder { passwd: Passwd::Entry("/home/app".into()), ..Recorder::default() };
        let report = go_decision(&mut r, begin(), NsEntry::Join(Stage::Prestart), 7, "/r").unwrap();
        assert_eq!(
            r.calls[..4],
            ["enter prestart Some(7)", "open_root /r", "read_passwd 1000", "read_home_dir /home/app"]
        );
        // HOME is missing here: each cache's top directory gets a tmpfs,
        // the five sharing a quarter of RAM; HOME itself none.
        assert_eq!(r.calls[4], "prepare /home/app/.cache 819Mi in /r", "{:?}", r.calls);
        assert!(r.calls.contains(&"commit /home/app/.nv".to_string()), "{:?}", r.calls);
        assert!(
            !r.calls.iter().any(|c| c.starts_with("prepare /home/app ") || c == "commit /home/app"),
            "HOME itself: {:?}",
            r.calls
        );
        assert!(
            !r.calls.iter().any(|c| c.contains("/tmp")),
            "the volume's /tmp is left alone: {:?}",
            r.calls
        );
        assert_eq!(report.done.len(), 6, "five caches and /dev/shm");
        // A failed read fails before anything is prepared.
        let mut r = Recorder { fail_passwd: true, ..Recorder::default() };
        let err = go_decision(&mut r, begin(), NsEntry::Join(Stage::Prestart), 7, "/r");
        assert!(matches!(err, Err(HookError::Sys(_))), "{err:?}");
        assert_eq!(r.calls, ["enter prestart Some(7)", "open_root /r", "read_passwd 1000"]);
        // A plan that asks nothing enters nothing when it has nothing to do.
        let mut r = Recorder::default();
        let off = Plan { enabled: false, ..Plan::default() };
        assert!(go(&mut r, off, NsEntry::Join(Stage::Prestart), 7, "/r").unwrap().done.is_empty());
        assert!(r.calls.is_empty());
    }
}
