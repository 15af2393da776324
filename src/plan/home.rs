//! Step 4 of the plan: the container user's `HOME` (docs/design.md#home-plan)
//! and the tool caches under it (docs/design.md#home-rule).
//!
//! `HOME` is what the runtime will set: the last `HOME=` of `process.env`
//! (runc and crun keep the last: docs/design.md#env-last), else the home
//! field of the process uid's entry in the image's `/etc/passwd` (which
//! only an executor can read: the plan asks for it with
//! [`super::Question::Passwd`], and `HOME`'s step is taken again with the
//! answer: [`super::Partial::answer`]), else `/`.
//!
//! `HOME` itself never gets a tmpfs: dot-entries hold code. Each cache of
//! `home_caches` gets one on the shallowest directory below `HOME` along
//! its path that the image has missing or empty ([`place`]), from what an
//! executor read there ([`super::Plan::home_dir`]); the caches share
//! `home_size`. Pure: [`passwd_home`] parses bytes an executor read.

use super::facts::{DirFacts, Found, SpecMounts};
use super::{CacheLeft, HomeDir, HomeFrom, Inputs, Note, Owner, Passwd, PlanError};
use crate::names::ANNOTATION_HOME;
use crate::target::{self, Reject, TargetPath};

/// The caches of a home, as the image allows them.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Home {
    /// `HOME`, normalised (`/` for the runtime's `/`).
    pub(super) path: String,
    pub(super) from: HomeFrom,
    /// The container-side ids of the process.
    pub(super) user: Owner,
    /// The host ids of the process.
    pub(super) host: Owner,
    /// Where the cache tmpfs go, each once.
    pub(super) mounts: Vec<TargetPath>,
    /// The caches left alone, and why.
    pub(super) left: Vec<CacheLeft>,
}

/// The step's outcome.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// No caches, nothing to say (off, or unknown here).
    None,
    /// Read `/etc/passwd` for this uid, then take this step again.
    Ask(u32),
    /// Read what the image holds at this `HOME` and at these paths below
    /// it, then take this step again.
    Look(String, Vec<String>),
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

/// Whether the caches get a tmpfs: the host config's `home`, overridden by
/// the annotation.
fn wanted(inputs: &Inputs<'_>) -> Result<bool, PlanError> {
    match inputs.annotation(ANNOTATION_HOME) {
        Some("true") => Ok(true),
        Some("false") => Ok(false),
        Some(other) => Err(PlanError::Flag { key: ANNOTATION_HOME, value: other.chars().take(64).collect() }),
        None => Ok(inputs.host_config.home),
    }
}

/// The variables that move the caches out of `HOME`, for a warning about a
/// cache left alone.
const CACHE_VARS: &str =
    "TRITON_CACHE_DIR, CUPY_CACHE_DIR, CUDA_CACHE_PATH, XDG_CACHE_HOME, HF_HOME, TORCH_HOME, MPLCONFIGDIR";

/// The home for this container, and what its caches get.
///
/// # Errors
/// An `oci-tmpfs-hook/home` annotation that is neither `true` nor `false`.
pub(super) fn home(inputs: &Inputs<'_>, temp_dirs: &[TargetPath]) -> Result<Step, PlanError> {
    if !wanted(inputs)? || inputs.host_config.home_caches.is_empty() {
        return Ok(Step::None);
    }
    let user = process_user(inputs.spec);
    let (path, from, subject, host) = match which_home(inputs, user) {
        Ok(found) => found,
        Err(step) => return Ok(step),
    };
    // HOME=/tmp, or inside it: the temp dir's tmpfs holds its caches.
    if let Some(t) = temp_dirs.iter().find(|t| path == t.as_str() || path.starts_with(&format!("{t}/"))) {
        return Ok(Step::Left(Note::info(
            subject,
            format!("it lies in {t}, which gets a temp tmpfs: the caches are written there"),
        )));
    }
    let spec = SpecMounts::of(inputs.spec);
    if path != "/" {
        let p = target::validate(&path).expect("validated above");
        if let Some(d) = spec.last_at(&path).map(|_| path.as_str()).or_else(|| spec.containing(&p)) {
            return Ok(Step::Left(Note::info(
                subject,
                format!("the spec mounts {d} (a volume): the caches in it are the volume's"),
            )));
        }
    }
    let caches = &inputs.host_config.home_caches;
    let assumed: Vec<(String, Found)>;
    let read: &[(String, Found)] = match inputs.user.home_dir_at(&path) {
        HomeDir::NotRead => return Ok(Step::Look(path, super::read_paths(caches))),
        // `explain --manifest`: assumed a directory of the process's,
        // holding none of the caches.
        HomeDir::Unknown => {
            assumed = std::iter::once((
                String::new(),
                Found::Dir(DirFacts { owner: host, mode: 0o700, empty: false }),
            ))
            .chain(super::read_paths(caches).into_iter().map(|p| (p, Found::Missing)))
            .collect();
            &assumed
        }
        HomeDir::Read(read) => read,
    };
    let why = match read.iter().find(|(p, _)| p.is_empty()).map(|(_, e)| e) {
        Some(Found::Dir(_) | Found::Missing) => None,
        Some(Found::Mount) => Some(Note::info(
            subject.clone(),
            "it is a mount point, or its path crosses one (a volume): the caches in it are the volume's",
        )),
        Some(Found::Symlink | Found::Other) | None => Some(Note::warn(
            subject.clone(),
            "the image has something other than a directory there: left alone",
        )),
    };
    if let Some(note) = why {
        return Ok(Step::Left(note));
    }
    // The directories a runtime makes for the spec's mounts belong to the
    // container's root.
    let runtime = host_owner(inputs.spec, Owner { uid: 0, gid: 0 }).unwrap_or(Owner { uid: 0, gid: 0 });
    let (mounts, left) = place(&path, read, caches, host.uid, runtime, &spec);
    Ok(Step::Mount(Home { path, from, user, host, mounts, left }))
}

/// Which `HOME` the process gets, normalised (`/` for the runtime's), where
/// it came from, how notes name it, and the process's host ids; or the
/// step that ends here (a question, or `HOME` left alone with a note).
fn which_home(inputs: &Inputs<'_>, user: Owner) -> Result<(String, HomeFrom, String, Owner), Step> {
    let env_home = inputs
        .spec
        .process()
        .as_ref()
        .and_then(|p| p.env().as_ref())
        .and_then(|env| env.iter().rev().find_map(|e| e.strip_prefix("HOME=")));
    let (value, from) = match (env_home, &inputs.user.passwd) {
        (Some(v), _) => (v, HomeFrom::Env),
        (None, Passwd::NotRead) => return Err(Step::Ask(user.uid)),
        (None, Passwd::Entry(h)) => (h.as_str(), HomeFrom::Passwd),
        (None, Passwd::NoEntry) => ("/", HomeFrom::NoEntry),
        (None, Passwd::Unknown) => {
            return Err(Step::Left(Note::info(
                "HOME",
                format!(
                    "comes from the image's /etc/passwd entry for uid {} (unknown here): HOME stays read-only, and each cache ({}) gets a tmpfs on the first directory along its path that the image has missing or empty (/ without an entry)",
                    user.uid,
                    inputs.host_config.home_caches.join(", ")
                ),
            )));
        }
        (None, Passwd::Unreadable(why)) => {
            return Err(Step::Left(Note::warn(
                "HOME",
                format!("the image's /etc/passwd {why}; set HOME in the container's environment"),
            )));
        }
    };
    let subject = match from {
        HomeFrom::Env => format!("HOME={value}"),
        HomeFrom::Passwd => format!("HOME={value} (uid {}'s /etc/passwd entry)", user.uid),
        HomeFrom::NoEntry => format!("HOME (uid {} has no /etc/passwd entry: the runtime gives /)", user.uid),
    };
    let Some(host) = host_owner(inputs.spec, user) else {
        return Err(Step::Left(Note::warn(
            subject,
            format!(
                "the container's user namespace maps no host id to the process's uid {} / gid {}",
                user.uid, user.gid
            ),
        )));
    };
    let path = match target::validate(value) {
        Ok(path) => path.to_string(),
        // The runtime's `/`, or an empty passwd home (the runtime gives `/`).
        Err(Reject::Root | Reject::Empty)
            if from != HomeFrom::Env || (!value.is_empty() && target::normalise(value) == "/") =>
        {
            "/".to_string()
        }
        Err(reason) => {
            return Err(Step::Left(Note::warn(
                subject,
                format!(
                    "HOME {reason}; give the user a home of its own (HOME in the environment or its /etc/passwd entry) or mount a volume there"
                ),
            )));
        }
    };
    Ok((path, from, subject, host))
}

/// Where each cache's tmpfs goes under the home `home`, from what the
/// image holds there (`read`: `HOME` as `""`, the paths below it relative
/// to it) and the spec's mounts: the mountpoints, each once, and the
/// caches left alone with why (docs/design.md#home-rule).
///
/// Along each cache's path below `HOME`, shallowest first: a directory
/// missing from the image gets the tmpfs when its parent is the process's
/// (`uid`, a host uid), or a `HOME` missing from the image (made for the
/// process), or `/` for `HOME=/`; an empty directory of the process's gets
/// it; a directory holding files is walked into; anything else (a
/// symlink, a file, a mount, another uid's directory) leaves the cache
/// alone, as does a spec mount (a volume) at or above the path. A
/// directory that holds a spec mount is never covered: a missing one
/// counts as the runtime's (`runtime`, which makes it), holding the mount.
pub(super) fn place(
    home: &str,
    read: &[(String, Found)],
    caches: &[String],
    uid: u32,
    runtime: Owner,
    spec: &SpecMounts<'_>,
) -> (Vec<TargetPath>, Vec<CacheLeft>) {
    let base = home.trim_end_matches('/');
    let home_entry = read.iter().find(|(p, _)| p.is_empty()).map(|(_, e)| e);
    let home_missing = matches!(home_entry, Some(Found::Missing));
    // Below a directory missing or empty in the image, nothing is there
    // (and nothing was read).
    let home_empty = home_missing || matches!(home_entry, Some(Found::Dir(DirFacts { empty: true, .. })));
    // A missing HOME is made for the process.
    let home_owner = if home_missing { uid } else { dir_owner(home_entry) };
    let mut mounts: Vec<TargetPath> = Vec::new();
    let mut left = Vec::new();
    for cache in caches {
        let mut leave = |why: String, warn: bool| left.push(CacheLeft { cache: cache.clone(), why, warn });
        let parts: Vec<&str> = cache.split('/').filter(|p| !p.is_empty()).collect();
        let mut missing = home_empty;
        // The owner of the directory the next path lies in, and its name.
        let mut parent = (home_owner, home.to_string());
        for i in 1..=parts.len() {
            let rel = parts[..i].join("/");
            let full = format!("{base}/{rel}");
            let Ok(path) = target::validate(&full) else {
                leave(format!("{full} is not a usable path"), true);
                break;
            };
            if let Some(d) = spec.last_at(&full).map(|_| full.as_str()).or_else(|| spec.containing(&path)) {
                leave(format!("the spec mounts {d} (a volume): left to it"), false);
                break;
            }
            let mut entry = if missing {
                Found::Missing
            } else {
                read.iter().find(|(p, _)| *p == rel).map_or(Found::Other, |(_, e)| e.clone())
            };
            let empty = matches!(entry, Found::Dir(DirFacts { empty: true, .. }));
            if spec.inside(&path).is_some() {
                entry = match entry {
                    Found::Missing => {
                        missing = true;
                        Found::Dir(DirFacts { owner: runtime, mode: 0o755, empty: false })
                    }
                    Found::Dir(d) => Found::Dir(DirFacts { empty: false, ..d }),
                    other => other,
                };
            }
            match entry {
                Found::Missing => {
                    // `/` for HOME=/ is the one directory not the process's
                    // where a mountpoint is made.
                    if parent.0 == uid || (home == "/" && i == 1) {
                        push_once(&mut mounts, path);
                    } else {
                        leave(
                            format!(
                                "{full} is missing, and {} belongs to uid {} (host), not to the process (uid {uid}): no mountpoint is made in it; point the cache elsewhere ({CACHE_VARS})",
                                parent.1, parent.0
                            ),
                            true,
                        );
                    }
                    break;
                }
                Found::Dir(d) if d.empty => {
                    if d.owner.uid == uid {
                        push_once(&mut mounts, path);
                    } else {
                        leave(
                            format!(
                                "the image gives {full} to uid {} (host), not to the process (uid {uid}); point the cache elsewhere ({CACHE_VARS})",
                                d.owner.uid
                            ),
                            true,
                        );
                    }
                    break;
                }
                Found::Dir(d) => {
                    if i == parts.len() {
                        leave(
                            format!("{full} holds the image's files, which stay as they are, read-only"),
                            false,
                        );
                    }
                    parent = (d.owner.uid, full);
                    // An empty directory holding a spec mount: the rest of
                    // the path is missing in the image.
                    missing |= empty;
                }
                Found::Symlink => {
                    leave(format!("{full} is a symlink in the image: never followed"), true);
                    break;
                }
                Found::Mount => {
                    leave(
                        format!("{full} is a mount point, or its path crosses one (a volume): left to it"),
                        false,
                    );
                    break;
                }
                Found::Other => {
                    leave(format!("the image has something other than a directory at {full}"), true);
                    break;
                }
            }
        }
    }
    (mounts, left)
}

/// The host uid owning a directory entry (`u32::MAX`: none).
fn dir_owner(entry: Option<&Found>) -> u32 {
    match entry {
        Some(Found::Dir(d)) => d.owner.uid,
        _ => u32::MAX,
    }
}

fn push_once(mounts: &mut Vec<TargetPath>, path: TargetPath) {
    if !mounts.contains(&path) {
        mounts.push(path);
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
    use serde_json::json;

    use crate::host_config::HostConfig;
    use crate::plan::fixtures::{
        decide_with, dir, home_plan, home_plan_in, tmpfs_targets, user_env, with, GI,
    };
    use crate::plan::{read_paths, Action, HomeWay, Origin, Plan, Question, Tmpfs, HOME_MODE};

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

    /// The targets that are caches under `HOME`.
    fn caches_of(p: &Plan) -> Vec<String> {
        p.actions
            .iter()
            .filter_map(|a| match a {
                Action::MountTmpfs { target, origins, .. }
                    if origins.iter().any(|o| matches!(o, Origin::HomeCache(_))) =>
                {
                    Some(target.to_string())
                }
                _ => None,
            })
            .collect()
    }

    /// The caches left alone, each with its reason.
    fn left_of(p: &Plan) -> Vec<(String, String)> {
        match &p.home {
            Some(HomeWay::Caches { left, .. }) => {
                left.iter().map(|l| (l.cache.clone(), l.why.clone())).collect()
            }
            _ => Vec::new(),
        }
    }

    /// How many caches are neither mounted nor under a mount: each is left
    /// alone with a reason.
    fn left_count(s: &HostConfig, p: &Plan) -> usize {
        let Some(HomeWay::Caches { home, mounts, .. }) = &p.home else { return 0 };
        let base = home.trim_end_matches('/');
        s.home_caches
            .iter()
            .filter(|c| {
                let full = format!("{base}/{c}");
                !mounts.iter().any(|m| full == *m || full.starts_with(&format!("{m}/")))
            })
            .count()
    }

    /// The top-level cache directories of the default `home_caches` under
    /// `home`, in the list's order: what a home holding none of them gets.
    fn tops(home: &str) -> Vec<String> {
        let base = home.trim_end_matches('/');
        [".cache", ".config", ".triton", ".cupy", ".nv"].iter().map(|c| format!("{base}/{c}")).collect()
    }

    #[test]
    fn the_default_caches_are_the_tools_own_directories() {
        let s = HostConfig::default();
        assert_eq!(
            read_paths(&s.home_caches).join(" "),
            ".cache .config .triton .cupy .nv .cache/torch .cache/torch_extensions .cache/huggingface \
             .cache/pip .cache/numba .cache/vllm .cache/matplotlib .config/matplotlib .config/vllm"
        );
        // Keras uses /tmp/.keras when HOME itself is not writable: a tmpfs at
        // ~/.keras would never be used (docs/design.md#home-caches).
        assert!(!s.home_caches.iter().any(|c| c.contains("keras")));
    }

    #[test]
    fn home_comes_from_env_then_passwd_then_the_runtimes_root() {
        let s = HostConfig::default();
        // HOME in the env: no passwd read, whatever the executor.
        let p = home_plan(&user_env(0, 0, &["HOME=/root"]), &s, Passwd::NotRead, 0);
        assert_eq!((caches_of(&p), p.passwd_uid), (tops("/root"), None));
        // HOME from the image's passwd entry.
        let p = home_plan(&user_env(1000, 1000, &[]), &s, Passwd::Entry("/home/app".into()), 1000);
        assert_eq!(caches_of(&p), tops("/home/app"));
        // No entry: the runtime's `/`, whose caches are made in `/` (root's).
        let p = home_plan(&user_env(1000, 1000, &[]), &s, Passwd::NoEntry, 0);
        assert_eq!(caches_of(&p), tops("/"));
        assert!(matches!(&p.home, Some(HomeWay::Caches { home, .. }) if home == "/"), "{:?}", p.home);
        // Not read yet: the plan asks, first for the passwd entry, then for the home.
        let p = decide_with(&user_env(1000, 1000, &[]), &s).unwrap();
        assert_eq!(p.question(), Some(Question::Passwd(1000)));
        let p = decide_with(&user_env(0, 0, &["HOME=/root"]), &s).unwrap();
        assert_eq!(p.question(), Some(Question::HomeDir("/root".into(), read_paths(&s.home_caches))));
        assert!(caches_of(&p).is_empty(), "nothing planned before the answer");
    }

    #[test]
    fn home_itself_never_gets_a_tmpfs() {
        let s = HostConfig::default();
        for read in [
            vec![("", Found::Missing)],
            vec![("", dir(0, true))],
            vec![("", dir(0, false))],
            vec![("", dir(0, false)), (".cache", dir(0, true))],
        ] {
            let p = home_plan_in(&user_env(0, 0, &["HOME=/root"]), &s, Passwd::NotRead, &read);
            assert!(!tmpfs_targets(&p).iter().any(|(t, _)| t == "/root"), "{read:?}: {p:?}");
            assert!(caches_of(&p).iter().all(|c| c.starts_with("/root/.")), "{read:?}: {p:?}");
        }
    }

    /// Where each cache's tmpfs goes, from what the image holds: the
    /// shallowest directory below HOME along its path that is missing or
    /// empty and may be the process's; a symlink, a file, a mount, another
    /// uid's directory leave the cache alone, and the image's files stay.
    #[test]
    fn home_rule_table() {
        let s = HostConfig::default();
        // Under .cache, the default caches but torch's.
        let other_cache_tools: Vec<&str> = crate::host_config::DEFAULT_HOME_CACHES
            .into_iter()
            .filter(|c| c.starts_with(".cache/") && *c != ".cache/torch")
            .collect();
        let other_cache = |home: &str, mount: &[&str]| {
            let mut v: Vec<String> = mount.iter().map(|m| format!("{home}/{m}")).collect();
            v.extend([".config", ".triton", ".cupy", ".nv"].iter().map(|c| format!("{home}/{c}")));
            v
        };
        type Case<'a> = (&'a str, u32, Vec<(&'a str, Found)>, Vec<String>, &'a [(&'a str, &'a str)]);
        let filled_cache = [
            ("", dir(0, false)),
            (".cache", dir(0, false)),
            (".cache/pip", dir(0, false)),
            (".cache/huggingface", dir(0, false)),
            (".cache/torch", dir(0, true)),
        ];
        let cases: Vec<Case<'_>> = vec![
            ("a home of the process's, none of the caches", 0, vec![("", dir(0, false))], tops("/h"), &[]),
            ("a home missing from the image", 1000, vec![("", Found::Missing)], tops("/h"), &[]),
            ("an empty home of the process's", 1000, vec![("", dir(1000, true))], tops("/h"), &[]),
            (
                "another uid's empty home",
                1000,
                vec![("", dir(0, true))],
                vec![],
                &[(".nv", "belongs to uid 0")],
            ),
            (
                "an empty .cache of the process's takes every .cache/*",
                1000,
                vec![("", dir(1000, false)), (".cache", dir(1000, true))],
                tops("/h"),
                &[],
            ),
            (
                "a .cache holding the image's files: each tool's own directory",
                0,
                filled_cache.to_vec(),
                other_cache(
                    "/h",
                    &[
                        ".cache/torch",
                        ".cache/torch_extensions",
                        ".cache/numba",
                        ".cache/vllm",
                        ".cache/matplotlib",
                    ],
                ),
                &[
                    (".cache/huggingface", "holds the image's files"),
                    (".cache/pip", "holds the image's files"),
                ],
            ),
            (
                "another uid's home: no mountpoint is made in it",
                1000,
                vec![("", dir(0, false))],
                vec![],
                &[(".cache/torch", "belongs to uid 0"), (".triton", "belongs to uid 0")],
            ),
            (
                "another uid's empty .cache",
                1000,
                vec![("", dir(1000, false)), (".cache", dir(0, true))],
                other_cache("/h", &[]),
                &[(".cache/torch", "gives /h/.cache to uid 0")],
            ),
            (
                "another uid's .cache holding files",
                1000,
                vec![("", dir(1000, false)), (".cache", dir(0, false))],
                other_cache("/h", &[]),
                &[(".cache/huggingface", "/h/.cache belongs to uid 0")],
            ),
            (
                "a .cache that is a symlink out of HOME",
                0,
                vec![("", dir(0, false)), (".cache", Found::Symlink)],
                other_cache("/h", &[]),
                &[(".cache/torch", "symlink"), (".cache/pip", "symlink")],
            ),
            (
                "a .cache that is a file",
                0,
                vec![("", dir(0, false)), (".cache", Found::Other)],
                other_cache("/h", &[]),
                &[(".cache/numba", "something other than a directory")],
            ),
            (
                "a .cache that is a mount",
                0,
                vec![("", dir(0, false)), (".cache", Found::Mount)],
                other_cache("/h", &[]),
                &[(".cache/torch", "mount point")],
            ),
            (
                "a tool's directory that is a symlink",
                0,
                vec![("", dir(0, false)), (".cache", dir(0, false)), (".cache/torch", Found::Symlink)],
                other_cache("/h", &other_cache_tools),
                &[(".cache/torch", "symlink")],
            ),
        ];
        for (name, uid, read, want, left) in cases {
            let p = home_plan_in(&user_env(uid, uid, &["HOME=/h"]), &s, Passwd::NotRead, &read);
            let mut got = caches_of(&p);
            got.sort();
            let mut want = want.clone();
            want.sort();
            assert_eq!(got, want, "{name}");
            let l = left_of(&p);
            for (cache, why) in left {
                assert!(
                    l.iter().any(|(c, w)| c == cache && w.contains(why)),
                    "{name}: {cache}: {why}: {l:#?}"
                );
            }
            assert_eq!(l.len(), left_count(&s, &p), "{name}");
        }
    }

    #[test]
    fn a_home_that_is_not_a_directory_or_a_volume_is_left_alone() {
        let s = HostConfig::default();
        for (read, why, warn) in
            [(Found::Mount, "a volume", false), (Found::Other, "something other than a directory", true)]
        {
            let p = home_plan_in(&user_env(0, 0, &["HOME=/h"]), &s, Passwd::NotRead, &[("", read)]);
            assert!(caches_of(&p).is_empty(), "{p:?}");
            assert!(p.notes.iter().any(|n| n.warn == warn && n.reason.contains(why)), "{:?}", p.notes);
            assert!(matches!(p.home, Some(HomeWay::LeftAlone { .. })));
        }
        // A volume at HOME, or above it, in the spec.
        for dest in ["/h", "/"] {
            let mut c = user_env(0, 0, &["HOME=/h/u"]);
            let dest = if dest == "/" { "/h" } else { dest };
            c["mounts"]
                .as_array_mut()
                .unwrap()
                .push(json!({"destination": dest, "type": "bind", "source": "/srv"}));
            let p = home_plan(&c, &s, Passwd::NotRead, 0);
            assert!(caches_of(&p).is_empty() && p.home_dir.is_none(), "{p:?}");
        }
        // HOME in a temp dir: its tmpfs holds the caches.
        let p = home_plan(&user_env(0, 0, &["HOME=/tmp/u"]), &s, Passwd::NotRead, 0);
        assert!(caches_of(&p).is_empty() && p.notes.iter().any(|n| n.reason.contains("temp tmpfs")), "{p:?}");
    }

    /// A volume on a cache's path: never covered; the walk goes past a
    /// directory holding one, which the runtime makes (root's) when missing.
    #[test]
    fn a_volume_under_home_is_never_covered() {
        let s = HostConfig::default();
        let mut c = user_env(0, 0, &["HOME=/root"]);
        c["mounts"]
            .as_array_mut()
            .unwrap()
            .push(json!({"destination": "/root/.cache/huggingface", "type": "bind", "source": "/srv/hf"}));
        let p = home_plan_in(&c, &s, Passwd::NotRead, &[("", dir(0, false))]);
        let got = caches_of(&p);
        assert!(
            got.contains(&"/root/.cache/torch".to_string()) && got.contains(&"/root/.triton".to_string()),
            "{got:?}"
        );
        assert!(
            !got.iter().any(|g| g == "/root/.cache" || g.starts_with("/root/.cache/huggingface")),
            "{got:?}"
        );
        assert!(left_of(&p).iter().any(|(c, w)| c == ".cache/huggingface" && w.contains("volume")));
        // uid 1000: the runtime's .cache is root's, so no mountpoint in it.
        let mut c1000 = c.clone();
        c1000["process"]["user"] = json!({"uid": 1000, "gid": 1000});
        c1000["process"]["env"] = json!(["HOME=/root"]);
        let p = home_plan_in(&c1000, &s, Passwd::NotRead, &[("", dir(1000, false))]);
        assert!(!caches_of(&p).iter().any(|g| g.starts_with("/root/.cache")), "{p:?}");
        assert!(caches_of(&p).contains(&"/root/.triton".to_string()));
        // An empty .cache in the image holding a volume: the other
        // .cache/* caches get their own directories, never .cache itself.
        let p = home_plan_in(&c, &s, Passwd::NotRead, &[("", dir(0, false)), (".cache", dir(0, true))]);
        let got = caches_of(&p);
        assert!(
            got.contains(&"/root/.cache/torch".to_string()) && !got.contains(&"/root/.cache".to_string()),
            "{got:?}"
        );
        // A volume at .cache: every .cache/* cache is the volume's.
        let mut c = user_env(0, 0, &["HOME=/root"]);
        c["mounts"]
            .as_array_mut()
            .unwrap()
            .push(json!({"destination": "/root/.cache", "type": "bind", "source": "/srv"}));
        let p = home_plan_in(&c, &s, Passwd::NotRead, &[("", dir(0, false))]);
        assert!(!caches_of(&p).iter().any(|g| g.starts_with("/root/.cache")), "{p:?}");
        assert_eq!(caches_of(&p).len(), 4, "{p:?}");
    }

    /// Each cache tmpfs is the process's, mode 0700, exec allowed, and the
    /// caches share `home_size`.
    #[test]
    fn cache_tmpfs_share_home_size_and_belong_to_the_process() {
        let s = HostConfig::parse("noexec = true").unwrap();
        let p = home_plan_in(
            &user_env(1000, 100, &["HOME=/home/u"]),
            &s,
            Passwd::NotRead,
            &[("", Found::Missing)],
        );
        let caches: Vec<&Tmpfs> = p
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::MountTmpfs { origins, tmpfs, .. }
                    if origins.iter().any(|o| matches!(o, Origin::HomeCache(_))) =>
                {
                    Some(tmpfs)
                }
                _ => None,
            })
            .collect();
        assert_eq!(caches.len(), 5);
        let budget = 4 * GI; // 25% of the 16 GiB host
        for t in &caches {
            assert_eq!(t.size.bytes.0, ((budget / 5) >> 20) << 20, "whole MiB: {t:?}");
            assert_eq!((t.mode, t.noexec, t.nosuid, t.nodev), (HOME_MODE, false, true, true));
            assert_eq!(t.owner, Some(Owner { uid: 1000, gid: 100 }));
            assert_eq!(t.user, Some(Owner { uid: 1000, gid: 100 }));
            assert_eq!((t.image_owner, t.own_from.as_deref()), (Some(1000), Some("/home/u")));
        }
        let line = p.home.as_ref().unwrap().line();
        assert!(line.contains("home_size 4Gi shared") && line.contains("read-only"), "{line}");
        // The temp tmpfs keep `noexec`.
        assert!(p.actions.iter().any(|a| a.target() == "/tmp" && a.tmpfs().noexec));
        // Off by the setting or the annotation; a bad annotation is an error.
        let off = HostConfig::parse("home = false").unwrap();
        assert!(caches_of(&home_plan(&user_env(0, 0, &["HOME=/root"]), &off, Passwd::NotRead, 0)).is_empty());
        let c = with(user_env(0, 0, &["HOME=/root"]), "/annotations", json!({ANNOTATION_HOME: "false"}));
        assert!(caches_of(&home_plan(&c, &s, Passwd::NotRead, 0)).is_empty());
        let c = with(user_env(0, 0, &["HOME=/root"]), "/annotations", json!({ANNOTATION_HOME: "yes"}));
        assert!(decide_with(&c, &s).is_err());
    }

    #[test]
    fn bad_homes_are_left_alone_with_a_note() {
        let s = HostConfig::default();
        let cases: &[(&[&str], &str)] = &[
            (&["HOME=/etc"], "system directory"),
            (&["HOME=/proc/self"], "system directory"),
            (&["HOME=/usr/local"], "system directory"),
            (&["HOME=home/u"], "not an absolute path"),
            (&["HOME=/home/../etc"], "'..'"),
            (&["HOME="], "is empty"),
        ];
        for (env, why) in cases {
            let p = home_plan(&user_env(1000, 1000, env), &s, Passwd::NotRead, 1000);
            assert_eq!((caches_of(&p), p.passwd_uid), (vec![], None), "{env:?}");
            assert!(p.notes.iter().any(|n| n.warn && n.reason.contains(why)), "{env:?}: {:?}", p.notes);
            assert_eq!(tmpfs_targets(&p), vec![("/tmp".into(), 4 * GI)], "{env:?}");
        }
        // A passwd home of /../.. (normalises to /) is refused.
        let p = home_plan(&user_env(9, 9, &[]), &s, Passwd::Entry("/../..".into()), 9);
        assert!(
            caches_of(&p).is_empty() && p.notes.iter().any(|n| n.reason.contains("'..'")),
            "{:?}",
            p.notes
        );
        // Two HOME= entries: the last is the one the process gets.
        let p = home_plan(&user_env(0, 0, &["HOME=/first", "HOME=/second"]), &s, Passwd::NotRead, 0);
        assert_eq!(caches_of(&p), tops("/second"));
        // Notes say it once, without "left alone" twice.
        for (case, p) in [
            (
                "unreadable",
                home_plan(&user_env(1000, 0, &[]), &s, Passwd::Unreadable("is not a regular file".into()), 0),
            ),
            ("unknown", home_plan(&user_env(1000, 0, &[]), &s, Passwd::Unknown, 0)),
        ] {
            let home: Vec<&Note> = p.notes.iter().filter(|n| n.subject.contains("HOME")).collect();
            assert_eq!(home.len(), 1, "{case}: {:?}", p.notes);
            assert!(!home[0].reason.to_lowercase().contains("left alone"), "{case}: {:?}", home[0]);
        }
    }

    /// Under a user namespace the caches belong to the process's host ids,
    /// and the image's directories are compared in host ids.
    #[test]
    fn home_owner_in_a_user_namespace() {
        let mut c = user_env(1000, 1000, &["HOME=/home/u"]);
        c["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "user", "path": "/proc/3/ns/user"}));
        c["linux"]["uidMappings"] = json!([{"containerID": 0, "hostID": 100000, "size": 65536}]);
        c["linux"]["gidMappings"] = json!([{"containerID": 0, "hostID": 200000, "size": 65536}]);
        let p = home_plan(&c, &HostConfig::default(), Passwd::NotRead, 101000);
        assert_eq!(caches_of(&p), tops("/home/u"));
        let t = p.actions.iter().find(|a| a.target() == "/home/u/.triton").unwrap().tmpfs();
        assert_eq!(
            (t.owner, t.user),
            (Some(Owner { uid: 101000, gid: 201000 }), Some(Owner { uid: 1000, gid: 1000 }))
        );
        // The container's uid 1000 is host 101000: a home of host uid 1000 is not its own.
        let p = home_plan(&c, &HostConfig::default(), Passwd::NotRead, 1000);
        assert!(caches_of(&p).is_empty(), "{p:?}");
        // Unmapped: left alone with a note.
        c["linux"]["uidMappings"] = json!([{"containerID": 0, "hostID": 100000, "size": 1}]);
        let p = home_plan(&c, &HostConfig::default(), Passwd::NotRead, 101000);
        assert!(caches_of(&p).is_empty() && p.notes.iter().any(|n| n.reason.contains("maps no host id")));
    }
}
