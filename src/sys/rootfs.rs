//! The rootfs as the spec executor (and `explain`) judges and places its
//! temp targets before the runtime mounts anything (docs/design.md#landing):
//! the landing rule ([`crate::plan::landing`]) walked on the real rootfs by
//! fd, one mount per directory ([`super::resolve::clash`]), and the few steps by fd the
//! placing takes ([`Rootfs`]).

use std::os::fd::OwnedFd;

use rustix::io::Errno;

use super::contents::{contents, contents_at, Contents};
use super::copy::Limits;
use super::error::SysError;
use super::resolve::{claim_path, skip_reason, Claim, MadeFor, Root, REAL};
use crate::plan::landing::{self, Entry, Landing, Stop, Tree, Walk};
use crate::plan::Note;
use crate::target::{self, TargetPath};

/// The rootfs as the spec executor (and `explain`) judges and places its
/// temp targets before the runtime mounts anything (docs/design.md#landing):
/// a [`Tree`] to walk, and the few steps by fd the placing takes. [`Root`]
/// is the real one; a unit test's is a map (`super::fake::FakeRoot`), so
/// that the decisions (what is left alone and why, what goes to the hook)
/// are tested without root. Generic, not `dyn`: the real one costs nothing
/// more.
pub(crate) trait Rootfs: Tree + Sized {
    /// A resolved directory.
    type Dir;

    /// The read-only half of [`Rootfs::place_target`] (for `explain` too):
    /// [`judge`] on this root; `Ok` is the real in-root path, `Err` the
    /// note for a target left alone.
    fn judge_target(&mut self, target: &TargetPath, landings: &[Landing]) -> Result<TargetPath, Note> {
        judge(self, target, landings)
    }

    /// The spec executor's landing rule for the temp target `target` in the
    /// prepared (bare) rootfs, before the runtime mounts anything: walk it
    /// ([`landing::walk`]), judge the walk against where the spec's mounts
    /// will land (`landings`), then resolve the real path it found
    /// ([`Rootfs::resolve_real`], the directories it makes owned as `made`
    /// says). `Ok` is the real in-root path to write as the mount's
    /// destination, with its directory.
    ///
    /// # Errors
    /// A failure that is not a property of the image.
    fn place_target(
        &mut self,
        target: &TargetPath,
        landings: &[Landing],
        made: MadeFor<'_>,
    ) -> Result<Result<(TargetPath, Self::Dir), Note>, SysError> {
        let real = match self.judge_target(target, landings) {
            Ok(real) => real,
            Err(note) => return Ok(Err(note)),
        };
        Ok(self.resolve_real(&real, target.as_str(), made)?.map(|dir| (real, dir)))
    }

    /// Resolves the real in-root path `real` (no symlink left, no mount
    /// crossed), making missing directories owned as `made` says, with the
    /// hook's rules (one mount per directory); notes name `what`.
    ///
    /// # Errors
    /// A failure that is not a property of the image.
    fn resolve_real(
        &mut self,
        real: &TargetPath,
        what: &str,
        made: MadeFor<'_>,
    ) -> Result<Result<Self::Dir, Note>, SysError>;

    /// The mode and owner (host uid) of the directory at `target` when the
    /// image has one.
    fn dir_stat(&self, target: &TargetPath) -> Option<(u32, u32)>;

    /// What the directory `dir` holds, against the copy bounds `limits`
    /// ([`contents`]).
    ///
    /// # Errors
    /// The directory cannot be read.
    fn contents(&self, dir: &Self::Dir, limits: &Limits) -> Result<Contents, Errno>;

    /// What the real in-root path `real` holds in the image, read-only:
    /// one not there yet holds nothing.
    ///
    /// # Errors
    /// The directory cannot be read.
    fn contents_at(&self, real: &TargetPath, limits: &Limits) -> Result<Contents, Errno>;

    /// Gives `dir` `mode` when it has another; whether it did.
    ///
    /// # Errors
    /// The mode cannot be read or set for another reason than a rootfs
    /// that may not be changed.
    fn set_mode(&mut self, dir: &Self::Dir, mode: u32, what: &str) -> Result<bool, SysError>;
}

impl Tree for Root {
    fn entry(&mut self, path: &str) -> Entry {
        self.tree().entry(path)
    }
}

impl Rootfs for Root {
    type Dir = OwnedFd;

    fn resolve_real(
        &mut self,
        real: &TargetPath,
        what: &str,
        made: MadeFor<'_>,
    ) -> Result<Result<OwnedFd, Note>, SysError> {
        self.resolve_target_with(real, REAL, what, made)
    }

    fn dir_stat(&self, target: &TargetPath) -> Option<(u32, u32)> {
        Root::dir_stat(self, target)
    }

    fn contents(&self, dir: &OwnedFd, limits: &Limits) -> Result<Contents, Errno> {
        contents(dir, limits)
    }

    fn contents_at(&self, real: &TargetPath, limits: &Limits) -> Result<Contents, Errno> {
        contents_at(self, real, limits)
    }

    fn set_mode(&mut self, dir: &OwnedFd, mode: u32, what: &str) -> Result<bool, SysError> {
        Root::set_mode(self, dir, mode, what)
    }
}

/// A rootfs judged without a change: `explain`'s view of what the placing
/// would do. It walks and reads as the rootfs under it does; the steps
/// that would change it answer instead: a directory to make is where the
/// placing would make it (its real path, claimed as the placing claims
/// one: [`claim_path`]), and a mode to set is set when the directory has
/// another or is not there yet. So `explain` runs the placing itself
/// ([`crate::spec::host`]), not a copy of its rules.
pub(crate) struct ReadOnly<'r, R> {
    root: &'r mut R,
    claimed: Vec<Claim>,
}

impl<'r, R: Rootfs> ReadOnly<'r, R> {
    pub(crate) fn new(root: &'r mut R) -> ReadOnly<'r, R> {
        ReadOnly { root, claimed: Vec::new() }
    }
}

impl<R: Rootfs> Tree for ReadOnly<'_, R> {
    fn entry(&mut self, path: &str) -> Entry {
        self.root.entry(path)
    }
}

impl<R: Rootfs> Rootfs for ReadOnly<'_, R> {
    /// The directory's real in-root path: nothing is opened to be changed.
    type Dir = TargetPath;

    fn resolve_real(
        &mut self,
        real: &TargetPath,
        what: &str,
        _made: MadeFor<'_>,
    ) -> Result<Result<TargetPath, Note>, SysError> {
        Ok(match claim_path(&mut self.claimed, real.as_str(), what) {
            Some(reason) => Err(Note::warn(what, reason)),
            None => Ok(real.clone()),
        })
    }

    fn dir_stat(&self, target: &TargetPath) -> Option<(u32, u32)> {
        self.root.dir_stat(target)
    }

    fn contents(&self, dir: &TargetPath, limits: &Limits) -> Result<Contents, Errno> {
        self.root.contents_at(dir, limits)
    }

    fn contents_at(&self, real: &TargetPath, limits: &Limits) -> Result<Contents, Errno> {
        self.root.contents_at(real, limits)
    }

    fn set_mode(&mut self, dir: &TargetPath, mode: u32, _: &str) -> Result<bool, SysError> {
        Ok(self.root.dir_stat(dir).is_none_or(|(had, _)| had != mode))
    }
}

/// The landing rule's judgement of the temp target `target` in `tree` (a
/// bare rootfs): walk it ([`landing::walk`]); a spec mount it reaches,
/// crosses or sits over (`landings`) leaves it alone (ours already covering
/// it: information; a volume: a warning naming the symlinks), as does a
/// real path in a system directory, a walk that stopped (not a directory,
/// a mount, a loop) or a dangling symlink. `Ok` is the real in-root path.
pub(crate) fn judge(
    tree: &mut impl Tree,
    target: &TargetPath,
    landings: &[Landing],
) -> Result<TargetPath, Note> {
    let what = target.as_str();
    let w = landing::walk(tree, what);
    // A spec mount first: it explains a symlink dangling in the bare
    // rootfs (`/tmp -> /vol`, where the runtime makes /vol for the volume).
    if let Some(conflict) = landing::judge(&w, landings) {
        if conflict.landing().ours {
            let reason = format!("our tmpfs at {} covers it already", conflict.landing().dest);
            return Err(Note::info(what, reason));
        }
        return Err(Note::warn(what, conflict.reason(&w)));
    }
    // A loop stops the walk where it began: `real` is then not where the
    // path leads (`/tmp -> /tmp` stops at `/`), so it is named first.
    if matches!(w.stopped, Some(Stop::Loop)) {
        return Err(Note::warn(what, walk_refusal(&w).expect("a stopped walk is refused")));
    }
    if target::denied(&w.real) {
        let reason =
            format!("it resolves to {} inside the container, a system directory{}", w.real, w.through());
        return Err(Note::warn(what, reason));
    }
    if let Some(reason) = walk_refusal(&w) {
        return Err(Note::warn(what, reason));
    }
    target::validate(&w.real)
        .map_err(|e| Note::warn(what, format!("it resolves to {}, which {e}{}", w.real, w.through())))
}

/// Why a walk rules its target out before any conflict is looked at, if it
/// does: the same reasons the hook gives for the same layouts.
fn walk_refusal(w: &Walk) -> Option<String> {
    let errno = match w.stopped {
        None if w.missing > 0 && !w.links.is_empty() => Errno::NOENT,
        None => return None,
        Some(Stop::NotDir) => Errno::NOTDIR,
        Some(Stop::Mount) => Errno::XDEV,
        Some(Stop::Loop) => Errno::LOOP,
        Some(Stop::Unreadable(e)) => e,
    };
    let reason = skip_reason(errno).map_or_else(|| format!("it cannot be resolved: {errno}"), String::from);
    Some(format!("{reason}{}", w.through()))
}
