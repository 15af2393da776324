//! The real runtime behind the wrapper: which binary it execs (the host
//! config's `runtime_path`, else runc on `PATH`, never this binary itself:
//! [`find_runtime`]), and whether the spec executor may hand it our
//! temp-target mounts (its version, [`spec_unsafe`]: docs/design.md#runtimes),
//! asked once per binary and cached under [`RUNTIME_CACHE_DIR`].
//!
//! It does not run the runtime for a container, read its arguments (the
//! grammar of the wrapper's command line is the `runtime` command's), or
//! decide the executor: it answers the version question for
//! `crate::spec::route`'s decision, which the wrapper, `inject --mode spec`
//! and `explain` all take.

use std::ffi::OsStr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::host_config::HostConfig;
use crate::names::{DEFAULT_CONFIG_PATH, DEFAULT_PATH, DEFAULT_RUNTIME};

/// A runtime's name and version, from the first line of its `--version`
/// output (`runc version 1.1.5+ds1`, `crun version 1.8.1`).
pub(crate) fn parse_version(output: &str) -> Option<(String, [u32; 3])> {
    let line = output.lines().next()?;
    let mut words = line.split_whitespace();
    let name = words.next()?.to_string();
    if words.next()? != "version" {
        return None;
    }
    let mut v = [0u32; 3];
    let digits = words.next()?;
    for (slot, part) in v.iter_mut().zip(digits.split(['.', '+', '-', '~'])) {
        *slot = part.parse().ok()?;
    }
    Some((name, v))
}

/// Why the spec executor must not hand temp targets to this runtime, if it
/// must not (docs/design.md#runtimes):
/// - runc before 1.1.8 chmods a tmpfs mountpoint by path after mounting it,
///   so a rename race during the start can turn a host directory to the
///   tmpfs' mode;
/// - crun 1.29.0 gives a tmpfs's root the mode of the directory it covers
///   even when the mount says `mode=1777`, so a temp dir over a 0755
///   directory comes out unwritable for a non-root user (fixed in 1.29.1).
pub(crate) fn spec_unsafe(name: &str, v: [u32; 3]) -> Option<String> {
    let [a, b, c] = v;
    match name {
        "runc" if v < [1, 1, 8] => Some(format!(
            "runc {a}.{b}.{c} chmods a tmpfs mountpoint by path after mounting it (until runc 1.1.8), which a rename race can turn onto a host directory"
        )),
        "crun" if v == [1, 29, 0] => Some(format!(
            "crun {a}.{b}.{c} gives a tmpfs the mode of the directory it covers, whatever its mode= says (fixed in crun 1.29.1), which leaves a temp dir unwritable for other users"
        )),
        _ => None,
    }
}

/// Why the real runtime cannot be run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RuntimeError {
    #[error("reading the host config")]
    HostConfig(#[source] crate::input::InputError),
    #[error(
        "no {name} on PATH ({path}): install it, or set runtime_path in {DEFAULT_CONFIG_PATH} to the real runtime"
    )]
    NotFound { name: String, path: String },
    #[error("runtime_path {path} is not an executable file: fix runtime_path in {DEFAULT_CONFIG_PATH}")]
    NotExecutable { path: PathBuf },
    #[error("{path} is this wrapper itself: set runtime_path in {DEFAULT_CONFIG_PATH} to the real runtime")]
    Loop { path: PathBuf },
    #[error("finding this binary (/proc/self/exe)")]
    OwnExe(#[source] std::io::Error),
    #[error("executing {path}")]
    Exec {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The identity of a file: device and inode, so symlinks and hard links to
/// the same binary compare equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    /// The identity of the file `path` resolves to.
    pub(crate) fn of(path: &Path) -> std::io::Result<FileId> {
        let m = std::fs::metadata(path)?;
        Ok(FileId { dev: m.dev(), ino: m.ino() })
    }
}

fn executable(path: &Path) -> Option<FileId> {
    let m = std::fs::metadata(path).ok()?;
    (m.is_file() && m.permissions().mode() & 0o111 != 0).then(|| FileId { dev: m.dev(), ino: m.ino() })
}

/// The real runtime: `configured` (the host config's `runtime_path`) when
/// set, else [`DEFAULT_RUNTIME`] searched in `path_var` (or [`DEFAULT_PATH`]
/// when unset or empty). Relative `PATH` entries are ignored, and so is any
/// candidate that is this binary (`own`): the wrapper never execs itself.
///
/// # Errors
/// No such runtime, a `runtime_path` that is not executable, or one that is
/// this binary.
pub(crate) fn find_runtime(
    configured: Option<&Path>,
    path_var: Option<&OsStr>,
    own: FileId,
) -> Result<PathBuf, RuntimeError> {
    if let Some(path) = configured {
        return match executable(path) {
            None => Err(RuntimeError::NotExecutable { path: path.to_path_buf() }),
            Some(id) if id == own => Err(RuntimeError::Loop { path: path.to_path_buf() }),
            Some(_) => Ok(path.to_path_buf()),
        };
    }
    let search = match path_var {
        Some(p) if !p.is_empty() => p,
        _ => OsStr::new(DEFAULT_PATH),
    };
    let mut looped = None;
    for dir in std::env::split_paths(search).filter(|d| d.is_absolute()) {
        let candidate = dir.join(DEFAULT_RUNTIME);
        match executable(&candidate) {
            Some(id) if id == own => looped = looped.or(Some(candidate)),
            Some(_) => return Ok(candidate),
            None => {}
        }
    }
    match looped {
        Some(path) => Err(RuntimeError::Loop { path }),
        None => Err(RuntimeError::NotFound {
            name: DEFAULT_RUNTIME.into(),
            path: search.to_string_lossy().into_owned(),
        }),
    }
}

/// The real runtime for `host_config`: [`find_runtime`] with
/// its `runtime_path`, this process's `PATH` and this binary.
///
/// # Errors
/// This binary cannot be found, or as [`find_runtime`].
pub(crate) fn find(host_config: &HostConfig) -> Result<PathBuf, RuntimeError> {
    let own = FileId::of(Path::new("/proc/self/exe")).map_err(RuntimeError::OwnExe)?;
    find_runtime(host_config.runtime_path.as_deref(), std::env::var_os("PATH").as_deref(), own)
}

/// Why the runtime cannot be given a target's directory to copy into its
/// tmpfs (a spec tmpfs with `tmpcopyup`), if it cannot: runc from 1.1.8 and
/// crun copy each entry with its owner and mode, a symlink as a link, and
/// give the tmpfs' root the `mode=` of the entry (docs/design.md#tmpcopyup),
/// as the hook's copy-up does; runc before 1.1.8 gives the root the
/// directory's mode (it takes the hook anyway, [`spec_unsafe`]). youki and
/// any other runtime are not known to: the hook copies up for them.
pub(crate) fn no_copy_up(name: &str, v: [u32; 3]) -> Option<String> {
    let [a, b, c] = v;
    match name {
        "runc" if v >= [1, 1, 8] => None,
        "crun" => None,
        _ => Some(format!(
            "{name} {a}.{b}.{c} is not known to copy a directory into its tmpfs as the hook does (tmpcopyup)"
        )),
    }
}

pub(crate) use crate::spec::Verdict;

/// The [`Verdict`] on the runtime `real` (its version, asked once:
/// [`runtime_version`]). A runtime whose version cannot be read (it cannot
/// be run, fails, prints nothing or no `NAME version X.Y.Z`, or gives no
/// answer within [`VERSION_WAIT`]) gets the hook: what it would do with our
/// mounts is unknown (docs/design.md#runtimes).
pub(crate) fn verdict(real: &Path) -> Verdict {
    match runtime_version(real) {
        Some((name, v)) => Verdict { spec_unsafe: spec_unsafe(&name, v), no_copy_up: no_copy_up(&name, v) },
        None => unknown(&format!("the version of {} cannot be read", real.display())),
    }
}

/// The [`Verdict`] on a runtime we know nothing of: the hook for everything.
fn unknown(why: &str) -> Verdict {
    Verdict { spec_unsafe: Some(why.to_string()), no_copy_up: Some(why.to_string()) }
}

/// The runtime that will run a bundle (for `explain` and `inject --mode
/// spec`): `named`, else the host config's `runtime_path`, else runc on
/// `PATH`, as the wrapper finds it ([`find`]); `None` when there is none.
pub(crate) fn bundle_runtime(named: Option<&Path>, host_config: &HostConfig) -> Option<PathBuf> {
    match named {
        Some(p) => Some(p.to_path_buf()),
        None => {
            let own = FileId::of(Path::new("/proc/self/exe")).ok()?;
            find_runtime(host_config.runtime_path.as_deref(), std::env::var_os("PATH").as_deref(), own).ok()
        }
    }
}

/// The [`Verdict`] on the runtime that will run a bundle ([`bundle_runtime`]);
/// with no runtime found, as for one whose version cannot be read.
pub(crate) fn bundle_verdict(named: Option<&Path>, host_config: &HostConfig) -> Verdict {
    match bundle_runtime(named, host_config) {
        Some(real) => verdict(&real),
        None => unknown("no runtime was found"),
    }
}

/// The name and version of `real`, from its `--version` run once per
/// binary: a parsed answer is kept under [`RUNTIME_CACHE_DIR`], named by the
/// binary's identity (device, inode, size, modification time), so that no
/// process runs per start and an upgraded runtime is asked again. `None`
/// when it cannot be run, fails, gives no parsable first line, or does not
/// answer within [`VERSION_WAIT`]; nothing is kept then, so the next start
/// asks again.
fn runtime_version(real: &Path) -> Option<(String, [u32; 3])> {
    runtime_version_in(real, Path::new(RUNTIME_CACHE_DIR), VERSION_WAIT)
}

/// [`runtime_version`] with its cache directory and wait as parameters.
fn runtime_version_in(real: &Path, cache: &Path, wait: std::time::Duration) -> Option<(String, [u32; 3])> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(real).ok()?;
    let key = format!("{}-{}-{}-{}.{}", m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec());
    let trusted = trusted_dir(cache);
    if trusted {
        if let Some(found) =
            crate::files::read_text(&cache.join(&key), 4096).ok().flatten().as_deref().and_then(parse_version)
        {
            return Some(found);
        }
    }
    let out = ask_version(real, wait)
        .inspect_err(|e| log::warn!("{} --version: {e}; the hook carries out the plan", real.display()))
        .ok()?;
    let line = out.lines().next().unwrap_or_default().trim().to_string();
    let Some(found) = parse_version(&line) else {
        log::warn!(
            "{} --version printed {line:?}, not NAME version X.Y.Z; the hook carries out the plan",
            real.display()
        );
        return None;
    };
    if trusted || make_cache_dir(cache) {
        let perms = crate::files::Perms { mode: 0o600, owner: None };
        let path = cache.join(&key);
        // Every start that found no answer writes one: each its own
        // temporary file, so none is renamed in still empty.
        if let Err(e) = crate::files::replace_shared(&path, line.as_bytes(), perms) {
            log::debug!("{e}");
        }
    }
    Some(found)
}

/// How long [`runtime_version`] waits for `--version` (runc and crun answer
/// in milliseconds).
const VERSION_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// What `real --version` printed on stdout, if it exited with status 0
/// within `wait`; a runtime still running then is killed. Its stdout is read
/// without blocking once it has exited, so a child it left holding the pipe
/// open cannot hang the start.
fn ask_version(real: &Path, wait: std::time::Duration) -> std::io::Result<String> {
    use std::io::Read;
    let mut child = Command::new(real)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let deadline = std::time::Instant::now() + wait;
    let mut pause = std::time::Duration::from_millis(1);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer within {} s", wait.as_secs()),
            ));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(20));
    };
    if !status.success() {
        return Err(std::io::Error::other(format!("exited with {status}")));
    }
    let mut stdout = child.stdout.take().ok_or_else(|| std::io::Error::other("no stdout pipe"))?;
    let flags = rustix::fs::fcntl_getfl(&stdout)?;
    rustix::fs::fcntl_setfl(&stdout, flags | rustix::fs::OFlags::NONBLOCK)?;
    let mut out = Vec::new();
    match stdout.read_to_end(&mut out) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Err(e) => return Err(e),
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Where [`runtime_version`] keeps its answers (a tmpfs: gone at boot).
const RUNTIME_CACHE_DIR: &str = "/run/oci-tmpfs-hook/runtimes";

/// `dir` is a directory (not a symlink) owned by root, closed to others.
fn trusted_dir(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir() && m.uid() == 0 && m.mode() & 0o077 == 0)
}

/// Creates [`RUNTIME_CACHE_DIR`] (mode 0700); whether it is trusted then.
fn make_cache_dir(dir: &Path) -> bool {
    use std::os::unix::fs::DirBuilderExt;
    let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir);
    trusted_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_the_runtimes_spec_mode_avoids() {
        let cases = [
            (
                "runc version 1.1.5+ds1\ncommit: 1.1.5+ds1-1+deb12u1\nspec: 1.0.2-dev",
                Some(("runc", [1, 1, 5])),
                true,
            ),
            ("runc version 1.1.8", Some(("runc", [1, 1, 8])), false),
            ("runc version 1.3.6\ncommit: v1.3.6", Some(("runc", [1, 3, 6])), false),
            (
                "crun version 1.8.1\ncommit: f8a096be060b22ccd3d5f3ebe44108517fbf6c30",
                Some(("crun", [1, 8, 1])),
                false,
            ),
            ("crun version 1.28\ncommit: 1.28", Some(("crun", [1, 28, 0])), false),
            ("crun version 1.29\ncommit: 1.29", Some(("crun", [1, 29, 0])), true),
            ("crun version 1.29.0", Some(("crun", [1, 29, 0])), true),
            ("crun version 1.29.1", Some(("crun", [1, 29, 1])), false),
            ("runc version 1.2.8", Some(("runc", [1, 2, 8])), false),
            ("youki version 0.5.3", Some(("youki", [0, 5, 3])), false),
            ("garbage", None, false),
        ];
        for (out, want, unsafe_) in cases {
            let got = parse_version(out);
            assert_eq!(got.as_ref().map(|(n, v)| (n.as_str(), *v)), want, "{out}");
            assert_eq!(got.as_ref().is_some_and(|(n, v)| spec_unsafe(n, *v).is_some()), unsafe_, "{out}");
            // tmpcopyup as the hook copies up: runc from 1.1.8, crun.
            let copies = got.is_some_and(|(n, v)| no_copy_up(&n, v).is_none());
            let want_copies = out.starts_with("crun") || (out.starts_with("runc") && !out.contains("1.1.5"));
            assert_eq!(copies, want_copies, "{out}");
        }
    }

    struct Dir(PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn tempdir(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("oth-runtime-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    fn exe(path: &Path) {
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn finds_runc_and_skips_itself() {
        let t = tempdir("find");
        let (me, other, plain) = (t.0.join("me"), t.0.join("other"), t.0.join("plain"));
        for d in [&me, &other, &plain] {
            std::fs::create_dir_all(d).unwrap();
        }
        exe(&me.join("wrapper"));
        let own = FileId::of(&me.join("wrapper")).unwrap();
        // `me/runc` is our own binary under the name runc: skipped.
        std::os::unix::fs::symlink(me.join("wrapper"), me.join("runc")).unwrap();
        // A non-executable runc is not a runtime.
        std::fs::write(plain.join("runc"), "").unwrap();
        exe(&other.join("runc"));
        let path = std::env::join_paths([Path::new("relative"), &me, &plain, &other]).unwrap();
        assert_eq!(find_runtime(None, Some(&path), own).unwrap(), other.join("runc"));

        let only_me = std::env::join_paths([&me, &plain]).unwrap();
        assert!(matches!(find_runtime(None, Some(&only_me), own), Err(RuntimeError::Loop { .. })));
        let nothing = std::env::join_paths([&plain]).unwrap();
        let err = find_runtime(None, Some(&nothing), own).unwrap_err();
        assert!(err.to_string().starts_with("no runc on PATH ("), "{err}");

        // runtime_path wins over PATH, and may not be ourselves.
        exe(&t.0.join("crun"));
        assert_eq!(find_runtime(Some(&t.0.join("crun")), Some(&path), own).unwrap(), t.0.join("crun"));
        assert!(matches!(
            find_runtime(Some(&me.join("runc")), Some(&path), own),
            Err(RuntimeError::Loop { .. })
        ));
        assert!(matches!(
            find_runtime(Some(&t.0.join("missing")), Some(&path), own),
            Err(RuntimeError::NotExecutable { .. })
        ));
    }

    /// Writes `script` as an executable file at `path`.
    fn script(path: &Path, body: &str) {
        std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// `f`, again while a test thread's fork still holds a just written
    /// script open for writing (ETXTBSY, for a moment).
    fn settled<T>(f: impl Fn() -> std::io::Result<T>) -> std::io::Result<T> {
        for _ in 0..100 {
            match f() {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                other => return other,
            }
        }
        f()
    }

    /// A runtime that prints nothing, prints no `NAME version X.Y.Z`, fails,
    /// or hangs is not known: it gets the hook for everything, and a hang
    /// is cut off at the wait, the runtime killed.
    #[test]
    fn an_unreadable_version_means_the_hook() {
        let t = tempdir("unreadable");
        let cases = [
            ("nothing", "exit 0"),
            ("garbage", "echo 'garbage 0.0.0'"),
            ("no-digits", "echo 'runc version x.y'"),
            ("fails", "echo 'runc version 1.3.6'; exit 1"),
        ];
        for (name, body) in cases {
            let path = t.0.join(name);
            script(&path, body);
            let err = settled(|| {
                ask_version(&path, VERSION_WAIT).and_then(|out| match parse_version(&out) {
                    Some(_) => Ok(()),
                    None => Err(std::io::Error::other("unparsed")),
                })
            });
            assert!(err.is_err(), "{name}: {err:?}");
            let v = verdict(&path);
            assert!(v.spec_unsafe.as_deref().is_some_and(|w| w.contains("cannot be read")), "{name}: {v:?}");
            assert!(v.no_copy_up.is_some(), "{name}: {v:?}");
        }
        let hangs = t.0.join("hangs");
        let pid_file = t.0.join("hangs.pid");
        script(&hangs, &format!("echo $$ > {}; exec sleep 30", pid_file.display()));
        let started = std::time::Instant::now();
        let err = settled(|| ask_version(&hangs, std::time::Duration::from_millis(300))).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut, "{err}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
        // Killed and reaped: no process is left with that pid.
        let pid = std::fs::read_to_string(&pid_file)
            .unwrap_or_else(|e| panic!("reading {}: {e}", pid_file.display()));
        let proc = Path::new("/proc").join(pid.trim());
        assert!(!proc.exists(), "the hung runtime {} still runs", pid.trim());
        // A missing binary: the hook too.
        assert!(verdict(&t.0.join("missing")).spec_unsafe.is_some());
        assert!(bundle_verdict(Some(&t.0.join("missing")), &HostConfig::default()).spec_unsafe.is_some());
    }

    /// A parsed version is kept and the runtime not asked again; an
    /// unreadable one is not kept, so the next start asks again.
    #[test]
    fn only_a_parsed_version_is_kept() {
        let t = tempdir("kept");
        let cache = t.0.join("cache");
        let count = t.0.join("count");
        let (good, empty) = (t.0.join("good"), t.0.join("empty"));
        script(&good, &format!("echo x >> {}.good; echo 'runc version 1.3.6'", count.display()));
        script(&empty, &format!("echo x >> {}.empty", count.display()));
        let asked = |what: &str| {
            let p = PathBuf::from(format!("{}.{what}", count.display()));
            std::fs::read_to_string(&p)
                .unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
                .lines()
                .count()
        };
        let wait = VERSION_WAIT;
        for _ in 0..2 {
            let got = settled(|| Ok(runtime_version_in(&good, &cache, wait))).unwrap();
            assert_eq!(got, Some(("runc".to_string(), [1, 3, 6])));
            assert_eq!(settled(|| Ok(runtime_version_in(&empty, &cache, wait))).unwrap(), None);
        }
        // The cache is kept only in a root-owned directory closed to others
        // (as root, as the wrapper runs: the test suite runs as root).
        assert!(trusted_dir(&cache), "{} was not made trusted: run the tests as root", cache.display());
        assert_eq!(asked("good"), 1, "a parsed version is asked once");
        assert_eq!(asked("empty"), 2, "an empty answer is asked again");
        let kept: Vec<_> = std::fs::read_dir(&cache).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(kept.len(), 1, "only the parsed answer is kept: {kept:?}");
    }

    #[test]
    fn empty_path_uses_the_default() {
        let own = FileId { dev: u64::MAX, ino: u64::MAX };
        let found = find_runtime(None, Some(OsStr::new("")), own);
        let expected =
            DEFAULT_PATH.split(':').map(|d| Path::new(d).join("runc")).find(|p| executable(p).is_some());
        assert_eq!(found.ok(), expected);
    }
}
