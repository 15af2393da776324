//! Step 4 of the plan: the container user's `HOME` (docs/design.md#home-plan)
//! and what it gets (docs/design.md#home-rule).
//!
//! `HOME` is what the runtime will set: the last `HOME=` of `process.env`
//! (runc and crun keep the last: docs/design.md#env-last), else the home
//! field of the process uid's entry in the image's `/etc/passwd` (which
//! only an executor can read: the plan asks for it with
//! [`super::Question::Passwd`], and `HOME`'s step is taken again with the
//! answer: [`super::Partial::answer`]), else `/`.
//!
//! What it gets never opens up the image: a home the image gives to
//! another uid is left alone; a home that holds more than dot-entries, or
//! holds the process's working directory, keeps its files as the image made
//! them and only its caches (`home_caches`) get a tmpfs each; otherwise
//! `HOME` gets a tmpfs with the image directory's owner and mode. What the
//! image holds there is read by an executor too ([`super::Plan::home_dir`]).
//! A `HOME` of `/` is replaced by `home_fallback` where the executor can
//! set the environment, else gets the caches under `/`. Pure:
//! [`passwd_home`] parses bytes an executor read.

use super::{DirFacts, HomeDir, HomeFrom, Inputs, Note, Owner, Passwd, PlanError};
use crate::names::ANNOTATION_HOME;
use crate::target::{self, Reject, TargetPath};

/// The home to mount, or its caches.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Home {
    /// `HOME`, as the process gets it (`/` for caches under the root).
    pub(super) path: String,
    pub(super) from: HomeFrom,
    /// The container-side ids of the process.
    pub(super) user: Owner,
    /// The host ids of the process.
    pub(super) host: Owner,
    pub(super) way: Way,
}

/// What the home gets.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Way {
    /// A tmpfs at `HOME`, like the image's directory when it has one
    /// (`None`: made for the process, mode [`super::HOME_MODE`]).
    Whole { path: TargetPath, dir: Option<DirFacts> },
    /// A tmpfs at each of these caches, and why not at `HOME`.
    Caches { paths: Vec<TargetPath>, why: String },
}

/// The step's outcome.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// No home to mount, nothing to say (off, or unknown here).
    None,
    /// Read `/etc/passwd` for this uid, then take this step again.
    Ask(u32),
    /// Read what the image holds at this directory, then take this step again.
    Look(TargetPath),
    /// Left alone: the note says why.
    Left(Note),
    Mount(Home),
}

/// The process's uid and gid (0 and 0 without a `process.user`).
pub(super) fn process_user(spec: &crate::oci::Spec) -> Owner {
    spec.process()
        .as_ref()
        .map_or(Owner { uid: 0, gid: 0 }, |p| Owner { uid: p.user().uid(), gid: p.user().gid() })
}

/// Whether `HOME` gets a tmpfs: the host config's `home`, overridden by the
/// annotation.
fn wanted(inputs: &Inputs<'_>) -> Result<bool, PlanError> {
    match inputs.annotation(ANNOTATION_HOME) {
        Some("true") => Ok(true),
        Some("false") => Ok(false),
        Some(other) => Err(PlanError::Flag { key: ANNOTATION_HOME, value: other.chars().take(64).collect() }),
        None => Ok(inputs.settings.home),
    }
}

/// The variables that move the caches out of `HOME`, for a warning about a
/// home left alone.
const CACHE_VARS: &str =
    "TRITON_CACHE_DIR, CUPY_CACHE_DIR, CUDA_CACHE_PATH, XDG_CACHE_HOME, HF_HOME, TORCH_HOME, MPLCONFIGDIR";

/// The home for this container, and what it gets.
///
/// # Errors
/// An `oci-tmpfs-hook/home` annotation that is neither `true` nor `false`.
pub(super) fn home(inputs: &Inputs<'_>, temp_dirs: &[TargetPath]) -> Result<Step, PlanError> {
    if !wanted(inputs)? {
        return Ok(Step::None);
    }
    let user = process_user(inputs.spec);
    let env_home = inputs
        .spec
        .process()
        .as_ref()
        .and_then(|p| p.env().as_ref())
        .and_then(|env| env.iter().rev().find_map(|e| e.strip_prefix("HOME=")));
    let (value, from) = match (env_home, &inputs.user.passwd) {
        (Some(v), _) => (v, HomeFrom::Env),
        (None, Passwd::NotRead) => return Ok(Step::Ask(user.uid)),
        (None, Passwd::Entry(h)) => (h.as_str(), HomeFrom::Passwd),
        (None, Passwd::NoEntry) => ("", HomeFrom::Fallback),
        (None, Passwd::Unknown) => {
            return Ok(Step::Left(Note::info(
                "HOME",
                format!(
                    "comes from the image's /etc/passwd entry for uid {} (unknown here): assumed to be a home of its own holding only dot-entries, which gets a tmpfs (one holding an app gets its caches only, another uid's nothing); with no entry the runtime gives HOME=/, replaced by {} where the executor can set the environment, else its caches under / get a tmpfs",
                    user.uid,
                    fallback_text(inputs, user.uid)
                ),
            )));
        }
        (None, Passwd::Unreadable(why)) => {
            return Ok(Step::Left(Note::warn(
                "HOME",
                format!("the image's /etc/passwd {why}; set HOME in the container's environment"),
            )));
        }
    };
    let subject = match from {
        HomeFrom::Env => format!("HOME={value}"),
        HomeFrom::Passwd => format!("HOME={value} (uid {}'s /etc/passwd entry)", user.uid),
        HomeFrom::Fallback => {
            format!("HOME (uid {} has no /etc/passwd entry: the runtime gives /)", user.uid)
        }
    };
    let Some(host) = host_owner(inputs.spec, user) else {
        return Ok(Step::Left(Note::warn(
            subject,
            format!(
                "the container's user namespace maps no host id to the process's uid {} / gid {}",
                user.uid, user.gid
            ),
        )));
    };
    match target::validate(value) {
        Ok(path) => {
            // HOME=/tmp (root's passwd home in some images): the temp dir's
            // tmpfs, mode 1777 for every user, with what the image holds
            // there copied up: nothing to judge.
            let temp = temp_dirs.contains(&path);
            let home = Home { path: path.to_string(), from, user, host, way: whole(path) };
            Ok(if temp { Step::Mount(home) } else { judge(inputs, home, subject) })
        }
        Err(Reject::Root | Reject::Empty)
            if from != HomeFrom::Env || (!value.is_empty() && target::normalise(value) == "/") =>
        {
            Ok(fallback(inputs, user, host, subject))
        }
        Err(reason) => Ok(Step::Left(Note::warn(
            subject,
            format!(
                "HOME {reason}; give the user a home of its own (HOME in the environment or its /etc/passwd entry) or mount a volume there"
            ),
        ))),
    }
}

fn whole(path: TargetPath) -> Way {
    Way::Whole { path, dir: None }
}

/// A home at a path of its own: what the image holds there decides
/// whether it gets a tmpfs whole, only its caches, or nothing
/// (docs/design.md#home-rule).
fn judge(inputs: &Inputs<'_>, mut home: Home, subject: String) -> Step {
    let Way::Whole { path, .. } = &home.way else { return Step::Mount(home) };
    let path = path.clone();
    let dir = match inputs.user.home_dir_at(&path) {
        HomeDir::NotRead => return Step::Look(path),
        // Unknown (`explain --manifest`): assumed to be a home of its own;
        // missing, or not a directory: made, or left to the landing rules.
        HomeDir::Unknown | HomeDir::Missing | HomeDir::Other => return Step::Mount(home),
        HomeDir::Dir(d) => d.clone(),
    };
    if dir.owner.uid != home.host.uid {
        return Step::Left(Note::warn(
            subject,
            format!(
                "the image gives {path} to uid {} (host), not to the process (uid {}): left alone, read-only, so no file of it is opened up; point the caches elsewhere ({CACHE_VARS}: each gets a tmpfs of its own)",
                dir.owner.uid, home.host.uid
            ),
        ));
    }
    let cwd = inputs.spec.process().as_ref().map(|p| target::normalise(p.cwd()));
    let why = match (&dir.plain, cwd) {
        (Some(name), _) => {
            Some(format!("it holds {name:?}, not only dot-entries: the image's files stay as they are"))
        }
        (None, Some(cwd)) if cwd == path.as_str() || cwd.starts_with(&format!("{path}/")) => Some(format!(
            "it holds the process's working directory {cwd}: nothing new may appear beside the app"
        )),
        _ => None,
    };
    home.way = match why {
        Some(why) => Way::Caches { paths: caches_under(inputs, path.as_str()), why },
        None => Way::Whole { path, dir: Some(dir) },
    };
    Step::Mount(home)
}

/// The caches of `home_caches` under `home` (`/` included).
fn caches_under(inputs: &Inputs<'_>, home: &str) -> Vec<TargetPath> {
    let base = home.trim_end_matches('/');
    inputs.settings.home_caches.iter().filter_map(|c| target::validate(&format!("{base}/{c}")).ok()).collect()
}

fn fallback_text(inputs: &Inputs<'_>, uid: u32) -> String {
    inputs.settings.home_fallback.as_ref().map_or_else(
        || "its caches under / (home_fallback = false)".to_string(),
        |t| t.replace("{uid}", &uid.to_string()),
    )
}

/// A home of `/`: the fallback where the executor can set `HOME`, else the
/// caches under `/` (nothing else of `/` becomes writable).
fn fallback(inputs: &Inputs<'_>, user: Owner, host: Owner, subject: String) -> Step {
    let caches = |why: String| {
        Step::Mount(Home {
            path: "/".into(),
            from: HomeFrom::Fallback,
            user,
            host,
            way: Way::Caches { paths: caches_under(inputs, "/"), why },
        })
    };
    let Some(template) = &inputs.settings.home_fallback else {
        return caches("a tmpfs over / would hide the image (home_fallback = false)".into());
    };
    let path = template.replace("{uid}", &user.uid.to_string());
    if !inputs.user.sets_env {
        return caches(format!(
            "a tmpfs over / would hide the image, and the hook cannot set the environment; the runtime wrapper in spec mode (or `inject --mode spec`) sets HOME={path} instead"
        ));
    }
    match target::validate(&path) {
        Ok(path) => judge(
            inputs,
            Home { path: path.to_string(), from: HomeFrom::Fallback, user, host, way: whole(path) },
            subject,
        ),
        // HostConfig checked the template with uid 1000; a uid cannot make it
        // relative or `..`, but keep the note for any other reason.
        Err(reason) => {
            Step::Left(Note::warn(subject, format!("home_fallback gives {path:?}, which {reason}")))
        }
    }
}

/// The host ids the container's `ids` map to: themselves outside a user
/// namespace; through the spec's mappings in one, its own or one it joins;
/// `None` when the mappings do not cover them (or the spec gives none).
pub(super) fn host_owner(spec: &crate::oci::Spec, ids: Owner) -> Option<Owner> {
    let to_host = |m: &crate::oci::LinuxIdMapping| (m.container_id(), m.host_id());
    Some(Owner {
        uid: map_id(spec, |l| l.uid_mappings(), ids.uid, to_host)?,
        gid: map_id(spec, |l| l.gid_mappings(), ids.gid, to_host)?,
    })
}

/// The container-side gid of the host gid `host` (the inverse of
/// [`host_owner`]'s mapping); `None` when the mappings do not cover it.
pub(super) fn container_gid(spec: &crate::oci::Spec, host: u32) -> Option<u32> {
    map_id(spec, |l| l.gid_mappings(), host, |m| (m.host_id(), m.container_id()))
}

/// `id` through the mappings `maps` picks from the spec, each read as
/// `(from, to)` by `dir`: itself outside a user namespace; `None` when no
/// mapping covers it.
fn map_id(
    spec: &crate::oci::Spec,
    maps: impl Fn(&crate::oci::Linux) -> &Option<Vec<crate::oci::LinuxIdMapping>>,
    id: u32,
    dir: impl Fn(&crate::oci::LinuxIdMapping) -> (u32, u32),
) -> Option<u32> {
    let Some(linux) = spec.linux().as_ref() else { return Some(id) };
    if !super::enable::in_user_namespace(linux) {
        return Some(id);
    }
    maps(linux).as_ref()?.iter().find_map(|m| {
        let (from, to) = dir(m);
        let off = id.checked_sub(from)?;
        (off < m.size()).then(|| to.checked_add(off)).flatten()
    })
}

/// The home field of `uid`'s first entry in the bytes of an
/// `/etc/passwd` (`name:password:uid:gid:gecos:home:shell`). Lines that are
/// not entries (too few fields, a uid that is not a number, `+`/`-` NIS
/// lines, comments) are skipped, as libc's and the runtimes' parsers do.
pub fn passwd_home(bytes: &[u8], uid: u32) -> Passwd {
    for line in bytes.split(|&b| b == b'\n') {
        let mut fields = line.split(|&b| b == b':');
        let (Some(name), Some(_), Some(id), Some(_), Some(_), Some(home)) =
            (fields.next(), fields.next(), fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if name.starts_with(b"+") || name.starts_with(b"-") || name.starts_with(b"#") {
            continue;
        }
        let Some(id) = std::str::from_utf8(id).ok().and_then(|s| s.trim().parse::<u32>().ok()) else {
            continue;
        };
        if id != uid {
            continue;
        }
        return match std::str::from_utf8(home) {
            Ok(h) => Passwd::Entry(h.trim_end_matches('\r').to_string()),
            Err(_) => Passwd::Unreadable(format!("has a home for uid {uid} that is not UTF-8")),
        };
    }
    Passwd::NoEntry
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwd_home_table() {
        let cases: &[(&[u8], u32, Passwd)] = &[
            (b"root:x:0:0:root:/root:/bin/sh\n", 0, Passwd::Entry("/root".into())),
            (b"root:x:0:0:root:/root:/bin/sh\n", 1000, Passwd::NoEntry),
            (b"", 0, Passwd::NoEntry),
            (
                b"a:x:1000:1000::/home/a:/bin/sh\nb:x:1000:1000::/home/b:/bin/sh\n",
                1000,
                Passwd::Entry("/home/a".into()),
            ),
            (b"+::::::\n#c:x:5:5::/c:\nu:x:5:5::/home/u\n", 5, Passwd::Entry("/home/u".into())),
            (b"short:x:7\nbad:x:seven:7::/h:\nok:x:7:7::/h7:\n", 7, Passwd::Entry("/h7".into())),
            (b"dots:x:9:9::/../..:/bin/sh\n", 9, Passwd::Entry("/../..".into())),
            (b"\xff\xfe\x00garbage\n\x00:\x01:\x02", 0, Passwd::NoEntry),
            (
                b"g:x:3:3::/h\xff:/bin/sh\n",
                3,
                Passwd::Unreadable("has a home for uid 3 that is not UTF-8".into()),
            ),
            (b"podman:*:1000:0:container user:/:/bin/sh", 1000, Passwd::Entry("/".into())),
            (b"crlf:x:4:4::/home/c\r\n", 4, Passwd::Entry("/home/c".into())),
            (b"empty:x:6:6::::\n", 6, Passwd::Entry(String::new())),
        ];
        for (bytes, uid, want) in cases {
            assert_eq!(&passwd_home(bytes, *uid), want, "{:?} uid {uid}", String::from_utf8_lossy(bytes));
        }
    }
}
