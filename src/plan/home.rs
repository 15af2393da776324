//! Step 4 of the plan: the container user's `HOME` (docs/design.md#home-plan).
//! `HOME` is what the runtime will set: the last `HOME=` of
//! `process.env` (runc and crun keep the last: docs/design.md#env-last), else the home field of the process uid's entry in the
//! image's `/etc/passwd` (which only an executor can read: the plan asks for
//! it with [`super::Plan::passwd_uid`] and is made again with the answer),
//! else `/`. A home of `/` is replaced by the host config's
//! `home_fallback` where the executor can set the environment; a system
//! path is left alone with a note. Pure: [`passwd_home`] parses bytes an
//! executor read.

use super::{HomeFrom, Inputs, Note, Owner, Passwd, PlanError};
use crate::names::ANNOTATION_HOME;
use crate::target::{self, Reject, TargetPath};

/// The home to mount.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Home {
    pub(super) path: TargetPath,
    pub(super) from: HomeFrom,
    /// The container-side ids of the process, who owns it.
    pub(super) user: Owner,
}

/// The step's outcome.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// No home to mount (notes say why where it matters).
    None,
    /// Read `/etc/passwd` for this uid, then decide again.
    Ask(u32),
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

/// The home to mount for this container, if any.
///
/// # Errors
/// An `oci-tmpfs-hook/home` annotation that is neither `true` nor `false`.
pub(super) fn home(inputs: &Inputs<'_>, notes: &mut Vec<Note>) -> Result<Step, PlanError> {
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
            notes.push(Note::info(
                "HOME",
                format!(
                    "comes from the image's /etc/passwd entry for uid {} (unknown here): assumed to be a directory of its own, which gets a tmpfs; with no entry the runtime gives HOME=/, replaced by {} where the executor can set the environment",
                    user.uid,
                    fallback_text(inputs, user.uid)
                ),
            ));
            return Ok(Step::None);
        }
        (None, Passwd::Unreadable(why)) => {
            notes.push(Note::warn(
                "HOME",
                format!("the image's /etc/passwd {why}; set HOME in the container's environment"),
            ));
            return Ok(Step::None);
        }
    };
    let subject = match from {
        HomeFrom::Env => format!("HOME={value}"),
        HomeFrom::Passwd => format!("HOME={value} (uid {}'s /etc/passwd entry)", user.uid),
        HomeFrom::Fallback => {
            format!("HOME (uid {} has no /etc/passwd entry: the runtime gives /)", user.uid)
        }
    };
    match target::validate(value) {
        Ok(path) => Ok(Step::Mount(Home { path, from, user })),
        Err(Reject::Root | Reject::Empty)
            if from != HomeFrom::Env || (!value.is_empty() && target::normalise(value) == "/") =>
        {
            fallback(inputs, user, subject, notes)
        }
        Err(reason) => {
            notes.push(Note::warn(
                subject,
                format!(
                    "HOME {reason}; give the user a home of its own (HOME in the environment or its /etc/passwd entry) or mount a volume there"
                ),
            ));
            Ok(Step::None)
        }
    }
}

fn fallback_text(inputs: &Inputs<'_>, uid: u32) -> String {
    inputs.settings.home_fallback.as_ref().map_or_else(
        || "nothing (home_fallback = false)".to_string(),
        |t| t.replace("{uid}", &uid.to_string()),
    )
}

/// A home of `/`: the fallback where the executor can set `HOME`, else a note.
fn fallback(
    inputs: &Inputs<'_>,
    user: Owner,
    subject: String,
    notes: &mut Vec<Note>,
) -> Result<Step, PlanError> {
    let Some(template) = &inputs.settings.home_fallback else {
        notes.push(Note::info(
            subject,
            "a tmpfs over / would hide the image (home_fallback = false); set HOME in the container's environment",
        ));
        return Ok(Step::None);
    };
    let path = template.replace("{uid}", &user.uid.to_string());
    if !inputs.user.sets_env {
        notes.push(Note::warn(
            subject,
            format!(
                "a tmpfs over / would hide the image, and the hook cannot set the environment; the runtime wrapper in spec mode (or `inject --mode spec`) sets HOME={path} and mounts it, or set HOME in the container's environment"
            ),
        ));
        return Ok(Step::None);
    }
    match target::validate(&path) {
        // Not a note: notes are what is left alone. The plan's `home_env`
        // says it, and the spec executor logs it when it sets it.
        Ok(path) => Ok(Step::Mount(Home { path, from: HomeFrom::Fallback, user })),
        // Settings checked the template with uid 1000; a uid cannot make it
        // relative or `..`, but keep the note for any other reason.
        Err(reason) => {
            notes.push(Note::warn(subject, format!("home_fallback gives {path:?}, which {reason}")));
            Ok(Step::None)
        }
    }
}

/// The host ids the container's `ids` map to: themselves outside a user
/// namespace; through the spec's mappings in one, its own or one it joins;
/// `None` when the mappings do not cover them (or the spec gives none).
pub(super) fn host_owner(spec: &crate::oci::Spec, ids: Owner) -> Option<Owner> {
    let Some(linux) = spec.linux().as_ref() else { return Some(ids) };
    if !super::enable::in_user_namespace(linux) {
        return Some(ids);
    }
    let map = |maps: &Option<Vec<crate::oci::LinuxIdMapping>>, id: u32| -> Option<u32> {
        maps.as_ref()?.iter().find_map(|m| {
            let off = id.checked_sub(m.container_id())?;
            (off < m.size()).then(|| m.host_id().checked_add(off)).flatten()
        })
    };
    Some(Owner { uid: map(linux.uid_mappings(), ids.uid)?, gid: map(linux.gid_mappings(), ids.gid)? })
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
