//! Carrying out a [`Plan`]: the order of effects, with the effects behind the
//! small [`Mounter`] trait. [`sys::System`] is the only implementation that
//! makes syscalls; unit tests here use a recorder to check the order.
//!
//! The order is all-or-nothing where the kernel allows it: enter the mount
//! namespace, open the rootfs, prepare every mount (resolve targets, build
//! detached tmpfs instances), and only then attach them one after another. A
//! failure before the first attach changes nothing; a failure while attaching
//! detaches what was attached.

pub mod sys;

use std::io;
use std::path::{Path, PathBuf};

use crate::plan::{Action, Owner, Plan};
use crate::size::Bytes;
use crate::stage::Stage;
use crate::target::TargetPath;

/// Options of a fresh tmpfs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TmpfsOptions {
    pub size: Bytes,
    pub nr_inodes: Option<u64>,
    pub noexec: bool,
    /// Directories (mode 1777) to create inside it before it is attached.
    pub subdirs: Vec<String>,
    /// Owner of its root and of those directories; `None`: root.
    pub owner: Option<Owner>,
}

/// The outcome of preparing one action.
#[derive(Debug)]
pub enum Prepared<P> {
    /// Ready to commit.
    Ready(P),
    /// Left alone, and why; `warn` when a user's setting is not honoured.
    Skip { reason: String, warn: bool },
}

/// The effects. Each method is one step of [`apply`].
pub trait Mounter {
    /// A prepared effect, committed by [`Mounter::commit`].
    type Pending;

    /// Gets into the container's mount namespace: `setns` at prestart and
    /// createRuntime, a check that we are already there at createContainer.
    ///
    /// # Errors
    /// When the target cannot be told apart from the host's namespace.
    fn enter(&mut self, stage: Stage, pid: Option<i64>) -> Result<(), ApplyError>;
    /// Opens the container's rootfs (after `enter`).
    ///
    /// # Errors
    /// A rootfs that cannot be opened or is the host's root.
    fn open_root(&mut self, rootfs: &Path) -> Result<(), ApplyError>;
    /// Resolves `target` inside the rootfs and builds a detached tmpfs.
    ///
    /// # Errors
    /// Failures that are not a property of the image (those are skips).
    fn prepare_tmpfs(
        &mut self,
        target: &TargetPath,
        opts: TmpfsOptions,
    ) -> Result<Prepared<Self::Pending>, ApplyError>;
    /// Prepares `/dev/shm` to be at least `size`.
    ///
    /// # Errors
    /// As for `prepare_tmpfs`.
    fn prepare_shm(
        &mut self,
        size: Bytes,
        owner: Option<Owner>,
    ) -> Result<Prepared<Self::Pending>, ApplyError>;
    /// Attaches a prepared mount or applies a prepared resize.
    ///
    /// # Errors
    /// The kernel refused.
    fn commit(&mut self, pending: Self::Pending) -> Result<(), ApplyError>;
    /// Detaches everything attached so far (best effort, after a failed commit).
    fn rollback(&mut self);
}

/// What a successful apply did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// One line per effect: "mounted tmpfs on /tmp (4Gi)".
    pub done: Vec<String>,
    /// What was left alone at mount time: (subject, reason, warn).
    pub skipped: Vec<(String, String, bool)>,
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("the hook cannot act at startContainer (the root is already pivoted and read-only); register it at prestart, createRuntime or createContainer")]
    TooLate,
    #[error("the state's pid {0:?} is not a container process the hook can join (stage {1}); check the hook's --stage")]
    BadPid(Option<i64>, Stage),
    #[error("container process {0} no longer exists")]
    NoProcess(i64),
    #[error("the target mount namespace is the hook's own or the host's; refusing to mount (stage {0}: is --stage right?)")]
    SameNamespace(Stage),
    #[error("the hook runs in a pid namespace, as at createContainer, but was told stage {0}; register it with --stage createContainer")]
    InsideContainer(Stage),
    #[error("at createContainer the hook must run inside the container's pid namespace, and it does not (run by hand, or a container sharing the host's pid namespace); refusing to mount. Register the hook at prestart or createRuntime instead")]
    NotInContainer,
    #[error("cannot tell the hook stage from the state (pid {0:?}); pass --stage")]
    UnknownStage(Option<i64>),
    #[error("cannot tell this mount namespace from the host's (neither /proc/1/ns/mnt nor /proc/1/mountinfo is readable); refusing to mount")]
    InitUnknown,
    #[error("{call}(2) is not available in this kernel (Linux {since} or later is needed); refusing to mount without it")]
    Unsupported { call: &'static str, since: &'static str },
    #[error("the rootfs {0} is the host's root directory; refusing")]
    RootIsHost(PathBuf),
    #[error("{op} {path}")]
    Sys {
        op: &'static str,
        path: String,
        #[source]
        source: io::Error,
    },
}

impl ApplyError {
    pub(crate) fn sys(op: &'static str, path: impl Into<String>, source: impl Into<io::Error>) -> Self {
        ApplyError::Sys { op, path: path.into(), source: source.into() }
    }
}

/// Executes `plan` for a container whose rootfs is `rootfs`.
///
/// # Errors
/// Any [`ApplyError`]; on error nothing stays mounted by this call.
pub fn apply<M: Mounter>(
    m: &mut M,
    plan: &Plan,
    stage: Stage,
    pid: Option<i64>,
    rootfs: &Path,
) -> Result<Report, ApplyError> {
    let mut report = Report::default();
    if !plan.enabled || plan.actions.is_empty() {
        return Ok(report);
    }
    if stage == Stage::StartContainer {
        return Err(ApplyError::TooLate);
    }
    m.enter(stage, pid)?;
    m.open_root(rootfs)?;
    let mut ready = Vec::new();
    for action in &plan.actions {
        let (subject, done, prepared) = match action {
            Action::MountTmpfs { target, size, nr_inodes, noexec, subdirs, .. } => {
                let opts = TmpfsOptions {
                    size: size.bytes,
                    nr_inodes: *nr_inodes,
                    noexec: *noexec,
                    subdirs: subdirs.clone(),
                    owner: plan.owner,
                };
                (
                    target.to_string(),
                    format!("mounted tmpfs on {target} (size {})", size.bytes),
                    m.prepare_tmpfs(target, opts)?,
                )
            }
            Action::Shm { size, .. } => (
                crate::plan::SHM_PATH.to_string(),
                format!("/dev/shm is at least {}", size.bytes),
                m.prepare_shm(size.bytes, plan.owner)?,
            ),
        };
        match prepared {
            Prepared::Ready(p) => ready.push((p, done)),
            Prepared::Skip { reason, warn } => report.skipped.push((subject, reason, warn)),
        }
    }
    for (pending, done) in ready {
        if let Err(e) = m.commit(pending) {
            m.rollback();
            return Err(e);
        }
        report.done.push(done);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Origin, ShmSource, Sizing};
    use crate::size::Basis;

    /// Records every call; fails where told to.
    #[derive(Default)]
    struct Recorder {
        calls: Vec<String>,
        skip: Vec<&'static str>,
        fail_prepare: Option<&'static str>,
        fail_commit: Option<&'static str>,
        owners: Vec<Option<Owner>>,
    }

    impl Mounter for Recorder {
        type Pending = String;
        fn enter(&mut self, stage: Stage, pid: Option<i64>) -> Result<(), ApplyError> {
            self.calls.push(format!("enter {stage} {pid:?}"));
            Ok(())
        }
        fn open_root(&mut self, rootfs: &Path) -> Result<(), ApplyError> {
            self.calls.push(format!("open_root {}", rootfs.display()));
            Ok(())
        }
        fn prepare_tmpfs(
            &mut self,
            target: &TargetPath,
            opts: TmpfsOptions,
        ) -> Result<Prepared<String>, ApplyError> {
            self.calls.push(format!("prepare {target} {}", opts.size));
            self.owners.push(opts.owner);
            self.prepared(target.as_str())
        }
        fn prepare_shm(&mut self, size: Bytes, owner: Option<Owner>) -> Result<Prepared<String>, ApplyError> {
            self.calls.push(format!("prepare shm {size}"));
            self.owners.push(owner);
            self.prepared("/dev/shm")
        }
        fn commit(&mut self, p: String) -> Result<(), ApplyError> {
            self.calls.push(format!("commit {p}"));
            if self.fail_commit == Some(p.as_str()) {
                return Err(ApplyError::sys("attaching", p, io::Error::other("boom")));
            }
            Ok(())
        }
        fn rollback(&mut self) {
            self.calls.push("rollback".into());
        }
    }

    impl Recorder {
        fn prepared(&self, what: &str) -> Result<Prepared<String>, ApplyError> {
            if self.fail_prepare == Some(what) {
                return Err(ApplyError::sys("resolving", what.to_string(), io::Error::other("boom")));
            }
            if self.skip.contains(&what) {
                return Ok(Prepared::Skip { reason: "already a mount point".into(), warn: false });
            }
            Ok(Prepared::Ready(what.to_string()))
        }
    }

    fn sizing(bytes: u64) -> Sizing {
        Sizing {
            bytes: Bytes(bytes),
            requested: "x".into(),
            from: "default",
            basis: Basis::Absolute,
            basis_bytes: None,
        }
    }

    fn plan() -> Plan {
        let tmpfs = |p: &str| Action::MountTmpfs {
            target: crate::target::validate(p).unwrap(),
            origins: vec![Origin::Default],
            size: sizing(1 << 30),
            nr_inodes: None,
            noexec: false,
            subdirs: vec![],
        };
        Plan {
            enabled: true,
            why: "test".into(),
            owner: None,
            actions: vec![
                tmpfs("/tmp"),
                tmpfs("/var/tmp"),
                Action::Shm { size: sizing(2 << 30), existing: ShmSource::None },
            ],
            notes: vec![],
        }
    }

    fn run(r: &mut Recorder, stage: Stage) -> Result<Report, ApplyError> {
        apply(r, &plan(), stage, Some(42), Path::new("/b/rootfs"))
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
                "prepare /tmp 1Gi",
                "prepare /var/tmp 1Gi",
                "prepare shm 2Gi",
                "commit /tmp",
                "commit /var/tmp",
                "commit /dev/shm",
            ]
        );
        assert_eq!(report.done.len(), 3);
    }

    #[test]
    fn the_plan_owner_reaches_every_mount() {
        let mut r = Recorder::default();
        let owner = Some(Owner { uid: 100000, gid: 100000 });
        apply(&mut r, &Plan { owner, ..plan() }, Stage::Prestart, Some(42), Path::new("/r")).unwrap();
        assert_eq!(r.owners, [owner; 3]);
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
        assert_eq!(report.skipped, [("/tmp".to_string(), "already a mount point".to_string(), false)]);
        assert!(!r.calls.contains(&"commit /tmp".to_string()));
    }

    #[test]
    fn nothing_to_do_touches_nothing() {
        let mut r = Recorder::default();
        let empty = Plan { enabled: true, ..Plan::default() };
        apply(&mut r, &empty, Stage::Prestart, Some(1), Path::new("/r")).unwrap();
        let disabled = Plan { enabled: false, ..plan() };
        apply(&mut r, &disabled, Stage::Prestart, Some(1), Path::new("/r")).unwrap();
        assert!(r.calls.is_empty());
    }

    #[test]
    fn start_container_is_too_late() {
        let mut r = Recorder::default();
        assert!(matches!(run(&mut r, Stage::StartContainer), Err(ApplyError::TooLate)));
        assert!(r.calls.is_empty());
    }
}
