//! A rootfs as a map, for unit tests: the [`Rootfs`] that the resolver's
//! judgement and the spec executor's placing run against without root or
//! a real directory tree. Paths not listed are missing; what the placing
//! would do by fd (make a directory, set a mode) is recorded, not done.
//! Not a model of the kernel: a listed path's parents are taken as real
//! directories, as [`Tree::entry`] says.

use std::collections::HashMap;

use rustix::io::Errno;

use super::contents::Contents;
use super::copy::Limits;
use super::resolve::skip_reason;
use super::resolve::{claim_path, Claim};
use super::rootfs::Rootfs;
use super::SysError;
use crate::plan::landing::{Entry, Tree};
use crate::plan::Note;
use crate::target::TargetPath;

/// A rootfs as a map: path -> entry.
#[derive(Debug, Default)]
pub(crate) struct FakeRoot {
    entries: HashMap<String, Entry>,
    /// Directory modes (default 0755).
    pub modes: HashMap<String, u32>,
    /// Directory owners, host uids (default 0).
    pub owners: HashMap<String, u32>,
    /// Directories that hold entries in the image, within the copy bounds.
    pub holding: Vec<String>,
    /// Directories that hold entries past them, and why.
    pub past: Vec<(String, String)>,
    /// What the placing did, in order: `mkdir /x`, `chmod /x 1777`.
    pub calls: Vec<String>,
    /// Directories placed so far, and for which target.
    claimed: Vec<Claim>,
}

impl FakeRoot {
    /// A rootfs holding `entries`.
    pub(crate) fn new(entries: &[(&str, Entry)]) -> FakeRoot {
        let entries = entries.iter().map(|(p, e)| (p.to_string(), e.clone())).collect();
        FakeRoot { entries, ..FakeRoot::default() }
    }

    /// What `dir` holds: past the bounds when in `past`, within them when
    /// in `holding`, else nothing.
    fn contents_of(&self, dir: &str) -> Contents {
        match self.past.iter().find(|(d, _)| d == dir) {
            Some((_, why)) => Contents::Past(why.clone()),
            None if self.holding.iter().any(|h| h == dir) => Contents::Fits,
            None => Contents::Empty,
        }
    }

    /// A symlink's entry.
    pub(crate) fn link(to: &str) -> Entry {
        Entry::Link(to.to_string())
    }
}

impl Tree for FakeRoot {
    fn entry(&mut self, path: &str) -> Entry {
        self.entries.get(path).cloned().unwrap_or(Entry::Missing)
    }
}

impl Rootfs for FakeRoot {
    type Dir = String;

    fn resolve_real(
        &mut self,
        real: &TargetPath,
        what: &str,
        _made: crate::sys::resolve::MadeFor<'_>,
    ) -> Result<Result<String, Note>, SysError> {
        let mut at = String::new();
        for part in real.relative().split('/').filter(|p| !p.is_empty()) {
            at = format!("{at}/{part}");
            let errno = match self.entry(&at) {
                Entry::Dir => continue,
                Entry::Missing => {
                    self.calls.push(format!("mkdir {at}"));
                    self.entries.insert(at.clone(), Entry::Dir);
                    continue;
                }
                // A symlink left, or one that appeared: refused, as `RESOLVE_NO_SYMLINKS` is.
                Entry::Link(_) => Errno::LOOP,
                Entry::NotDir => Errno::NOTDIR,
                Entry::Mount => Errno::XDEV,
                Entry::Unreadable(e) => e,
            };
            let reason = skip_reason(errno).unwrap_or("unresolvable");
            return Ok(Err(Note { subject: what.into(), reason: reason.into(), warn: errno != Errno::XDEV }));
        }
        if let Some(reason) = claim_path(&mut self.claimed, &at, what) {
            return Ok(Err(Note::warn(what, reason)));
        }
        Ok(Ok(at))
    }

    fn dir_stat(&self, target: &TargetPath) -> Option<(u32, u32)> {
        match self.entries.get(target.as_str()) {
            Some(Entry::Dir) => Some((
                self.modes.get(target.as_str()).copied().unwrap_or(0o755),
                self.owners.get(target.as_str()).copied().unwrap_or(0),
            )),
            _ => None,
        }
    }

    fn contents(&self, dir: &String, _: &Limits) -> Result<Contents, Errno> {
        Ok(self.contents_of(dir))
    }

    fn contents_at(&self, real: &TargetPath, _: &Limits) -> Result<Contents, Errno> {
        Ok(self.contents_of(real.as_str()))
    }

    fn set_mode(&mut self, dir: &String, mode: u32, _: &str) -> Result<bool, SysError> {
        if self.modes.get(dir).copied().unwrap_or(0o755) == mode {
            return Ok(false);
        }
        self.calls.push(format!("chmod {dir} {mode:o}"));
        self.modes.insert(dir.clone(), mode);
        Ok(true)
    }
}
