//! The runtime wrapper for engines without a hooks dir (Docker, containerd).
//!
//! Installed as a second name of the binary (`oci-tmpfs-runtime`), it is the
//! "runtime" an engine calls: on `create` and `run` it carries out the plan
//! for the bundle, then `exec(2)`s the real runtime with the arguments
//! unchanged, so exit status, signals and stdio are the real runtime's.
//! On `exec`, a process file without `HOME` that runs as the container's
//! user gets the container's `HOME` ([`crate::exec_home`]), which the
//! engine's own copy of the spec lacks when the spec executor set it.
//! Every other subcommand goes straight through.
//!
//! Two executors, chosen by the host config's `mode`: `spec` (the default)
//! writes the plan's mounts into `config.json` ([`crate::spec`]: after
//! checking each target against the prepared rootfs by fd, and growing an
//! engine-made `/dev/shm` on the host), so no hook process runs at the
//! start; `hook` adds the hook to `config.json` instead (through
//! [`crate::spec::inject_hook`]: idempotent, lossless; at createContainer
//! after another party's runtime-namespace hooks). A plan that needs a
//! directory inside a fresh tmpfs (`TMPDIR=/tmp/job`), or a runtime that
//! cannot be trusted with our temp-target mounts (its version, asked once
//! and cached: docs/design.md#runtimes), takes the hook in either mode.
//!
//! Here: parsing the runtime's arguments ([`CommandLine`]), finding the real
//! runtime ([`find_runtime`]), the version policy ([`spec_unsafe`]) and the
//! dispatch ([`run`]).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::bundle::HookEntry;
use crate::error::chain;
use crate::input::ConfigSource;
use crate::names::{DEFAULT_CONFIG_PATH, DEFAULT_PATH, DEFAULT_RUNTIME, WRAPPER_NAME};
use crate::settings::{Mode, OnError, Settings};
use crate::spec;
use crate::stage::Stage;

/// Global options that take a value (`--root R` or `--root=R`): runc's
/// (`runc --help`), crun's (`--cgroup-manager`, `--log-level`) and youki's.
/// Any other global option is taken as a switch.
const GLOBAL_WITH_VALUE: &[&str] =
    &["root", "log", "log-format", "log-level", "criu", "rootless", "cgroup-manager"];

/// Options of `create` / `run` that take a value, besides the bundle
/// (runc 1.1/1.2, crun's `--config`/`-f`).
const CREATE_WITH_VALUE: &[&str] =
    &["console-socket", "pid-file", "preserve-fds", "pidfd-socket", "config", "f"];

/// The subcommands that create a container from a bundle.
const CREATING: &[&str] = &["create", "run"];

/// Options of `exec` that take a value: runc 1.1/1.3's and crun's
/// (`runc exec --help`, `crun exec --help`). Any other option is a switch.
const EXEC_WITH_VALUE: &[&str] = &[
    "process",
    "p",
    "console-socket",
    "pidfd-socket",
    "pid-file",
    "cwd",
    "env",
    "e",
    "user",
    "u",
    "additional-gids",
    "g",
    "process-label",
    "apparmor",
    "cap",
    "c",
    "preserve-fds",
    "cgroup",
];

/// A runtime command line (argv\[0\] excluded), parsed once: what the
/// wrapper dispatches on and the container id it logs and grows shm for.
///
/// The grammar is runc's and crun's: global options, then the subcommand,
/// then its options and words. Global options in [`GLOBAL_WITH_VALUE`]
/// take the next word unless written `--opt=value`; any other global option
/// is a switch; a `--` before the subcommand ends them. For `create` and
/// `run`, the options may come before or after the container id (crun's
/// argp permutes them); `--bundle DIR`, `--bundle=DIR`, `-b DIR` and
/// `-b=DIR` name the bundle (the last one wins, as with Go's flag package);
/// the options in [`CREATE_WITH_VALUE`] take the next word, even one that
/// looks like a flag; every other option is a switch; after a `--` every
/// word is a word, so an id may start with `-`. The container id is the
/// first word (both runtimes take exactly one).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CommandLine {
    /// `create` or `run`, when that is the subcommand.
    pub creating: Option<&'static str>,
    /// The bundle flag's value; `None` means the current directory.
    pub bundle: Option<PathBuf>,
    /// The subcommand's words, options and their values left out.
    pub words: Vec<OsString>,
    /// The global `--root`: where the runtime keeps its containers' state.
    pub root: Option<PathBuf>,
    /// What an `exec` names, when that is the subcommand.
    pub exec: Option<ExecLine>,
}

/// An `exec` command line: the process file and the container it runs in.
///
/// The grammar (runc's and crun's): options, then the container id, then
/// the command, whose words are not ours to read. `--process FILE`,
/// `--process=FILE`, `-p FILE` and `-p=FILE` name the process file (the
/// last one wins); the options in [`EXEC_WITH_VALUE`] take the next word;
/// every other option is a switch; after a `--` the next word is the id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ExecLine {
    /// `--process FILE`: the process, as JSON (what the engines pass).
    pub process: Option<PathBuf>,
    /// The container id: the first word.
    pub id: Option<OsString>,
    /// A `--user`/`-u`, or an `--env`/`-e` that sets `HOME`, on the command
    /// line: the caller chose the user or the `HOME` itself.
    pub chooses: bool,
}

impl CommandLine {
    /// Parses the runtime's arguments (without argv\[0\]).
    pub(crate) fn parse(args: &[OsString]) -> CommandLine {
        let Some(at) = subcommand_at(args) else { return CommandLine::default() };
        let root = global_root(&args[..at]);
        if args.get(at).is_some_and(|sub| sub == "exec") {
            return CommandLine {
                root,
                exec: Some(ExecLine::parse(&args[at + 1..])),
                ..CommandLine::default()
            };
        }
        let Some(creating) = args.get(at).and_then(|sub| CREATING.iter().find(|c| sub == **c)) else {
            return CommandLine::default();
        };
        let mut line = CommandLine { creating: Some(creating), root, ..CommandLine::default() };
        let mut rest = args[at + 1..].iter();
        while let Some(arg) = rest.next() {
            if arg == "--" {
                line.words.extend(rest.cloned());
                break;
            }
            match option(arg) {
                Some((name, value)) if name == b"bundle" || name == b"b" => {
                    match value.or_else(|| rest.next().map(OsString::as_os_str)) {
                        Some(v) => line.bundle = Some(PathBuf::from(v)),
                        None => break,
                    }
                }
                Some((name, None)) if named(name, CREATE_WITH_VALUE) => {
                    rest.next();
                }
                Some(_) => {}
                None => line.words.push(arg.clone()),
            }
        }
        line
    }

    /// The container id: the first word of a `create` or `run`.
    pub(crate) fn container_id(&self) -> Option<String> {
        self.creating?;
        self.words.first().map(|w| w.to_string_lossy().into_owned())
    }
}

impl ExecLine {
    /// Parses the words after `exec`.
    fn parse(args: &[OsString]) -> ExecLine {
        let mut line = ExecLine::default();
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            if arg == "--" {
                line.id = rest.next().cloned();
                break;
            }
            let Some((name, value)) = option(arg) else {
                line.id = Some(arg.clone());
                break;
            };
            if !named(name, EXEC_WITH_VALUE) {
                continue;
            }
            let Some(value) = value.or_else(|| rest.next().map(OsString::as_os_str)) else { break };
            match name {
                b"process" | b"p" => line.process = Some(PathBuf::from(value)),
                b"user" | b"u" => line.chooses = true,
                b"env" | b"e" if value.as_bytes().starts_with(b"HOME=") => line.chooses = true,
                _ => {}
            }
        }
        line
    }
}

/// The value of the global `--root` among the global options `globals`
/// (the last one wins).
fn global_root(globals: &[OsString]) -> Option<PathBuf> {
    let mut root = None;
    let mut words = globals.iter();
    while let Some(arg) = words.next() {
        match option(arg) {
            Some((b"root", Some(v))) => root = Some(PathBuf::from(v)),
            Some((b"root", None)) => root = words.next().map(PathBuf::from),
            Some((name, None)) if named(name, GLOBAL_WITH_VALUE) => {
                words.next();
            }
            _ => {}
        }
    }
    root
}

/// True when `argv0`'s file name is [`WRAPPER_NAME`].
pub(crate) fn invoked_as_wrapper(argv0: &OsStr) -> bool {
    Path::new(argv0).file_name() == Some(OsStr::new(WRAPPER_NAME))
}

/// A command-line word split as an option: `--name=value`, `-name value`...
/// Go's flag package (runc) takes one or two dashes for every option.
fn option(arg: &OsStr) -> Option<(&[u8], Option<&OsStr>)> {
    let bytes = arg.as_bytes();
    let body = bytes.strip_prefix(b"--").or_else(|| bytes.strip_prefix(b"-"))?;
    if body.is_empty() {
        return None;
    }
    match body.iter().position(|&b| b == b'=') {
        Some(i) => Some((&body[..i], Some(OsStr::from_bytes(&body[i + 1..])))),
        None => Some((body, None)),
    }
}

fn named(name: &[u8], list: &[&str]) -> bool {
    list.iter().any(|n| n.as_bytes() == name)
}

/// Where the subcommand is: after the global options (and their values) or
/// after `--`; `None` when the arguments end first.
fn subcommand_at(args: &[OsString]) -> Option<usize> {
    let mut i = 0;
    loop {
        let arg = args.get(i)?;
        if arg == "--" {
            return Some(i + 1);
        }
        match option(arg) {
            Some((name, None)) if named(name, GLOBAL_WITH_VALUE) => i += 2,
            Some(_) => i += 1,
            None => return Some(i),
        }
    }
}

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
    Settings(#[source] crate::input::InputError),
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

/// Runs the wrapper with the runtime's arguments (argv\[0\] excluded). Returns
/// only when the real runtime could not be exec'd.
///
/// # Errors
/// No real runtime, the plan failed under `on_error = "fail"`, or the exec
/// failed.
pub(crate) fn run(args: &[OsString]) -> Result<std::convert::Infallible, crate::error::Error> {
    let source = ConfigSource::from_env();
    let settings = source.read().map_err(RuntimeError::Settings)?;
    let real = real_runtime(&settings)?;
    let line = CommandLine::parse(args);
    if let Some(exec) = &line.exec {
        crate::logger::configure(settings.log_level.filter(), settings.log_file.as_deref());
        crate::exec_home::carry_over(exec, line.root.as_deref(), real.file_name().unwrap_or_default());
    }
    if line.creating.is_some() {
        let dir = line.bundle.clone().unwrap_or_else(|| PathBuf::from("."));
        let id = line.container_id();
        prepare(&dir, &source, &settings, &real, id.as_deref())?;
    }
    let name = real.file_name().map_or_else(|| real.as_os_str().to_owned(), |n| n.to_owned());
    let source = Command::new(&real).arg0(name).args(args).exec();
    Err(RuntimeError::Exec { path: real, source }.into())
}

fn real_runtime(settings: &Settings) -> Result<PathBuf, RuntimeError> {
    let own = FileId::of(Path::new("/proc/self/exe")).map_err(RuntimeError::OwnExe)?;
    find_runtime(settings.runtime_path.as_deref(), std::env::var_os("PATH").as_deref(), own)
}

/// Carries out the plan for the bundle `dir` as `settings.mode` says, for
/// the container `id` that the real runtime `real` will create.
fn prepare(
    dir: &Path,
    source: &ConfigSource,
    settings: &Settings,
    real: &Path,
    id: Option<&str>,
) -> Result<(), crate::error::Error> {
    crate::logger::configure(settings.log_level.filter(), settings.log_file.as_deref());
    match id {
        Some(id) => crate::logger::set_container(id),
        None => {
            if let Some(name) = dir.canonicalize().ok().as_deref().and_then(Path::file_name) {
                crate::logger::set_container(&name.to_string_lossy());
            }
        }
    }
    if settings.mode == Mode::Hook {
        add_hook(dir, source);
        return Ok(());
    }
    let unsafe_runtime = version_unsafe(real);
    let launch = spec::Launch { id, runtime_unsafe: unsafe_runtime.as_deref() };
    match spec::carry_out(dir, settings, hook_entry(source).as_ref(), &launch) {
        Ok(outcome) => {
            crate::logger::outcome(&outcome.notes, &outcome.done);
            Ok(())
        }
        // A bundle we cannot read is passed through: the runtime reports it.
        Err(spec::SpecError::Bundle(e)) => {
            log::warn!("{}; nothing is mounted, passing the call through", chain(&e));
            Ok(())
        }
        Err(e) if settings.on_error == OnError::Warn => {
            log::warn!("{} (on_error = \"warn\": the container starts without these mounts)", chain(&e));
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// Why the spec executor must not hand the temp targets to the runtime
/// `real`, if it must not (its version, asked once: [`runtime_version`]).
fn version_unsafe(real: &Path) -> Option<String> {
    let (name, v) = parse_version(&runtime_version(real)?)?;
    spec_unsafe(&name, v)
}

/// [`version_unsafe`] for the runtime that will run a bundle: `named`, else
/// runc on PATH (for `explain` and `inject --mode spec`).
pub(crate) fn bundle_runtime_unsafe(named: Option<&Path>) -> Option<String> {
    let runtime = match named {
        Some(p) => p.to_path_buf(),
        None => {
            let own = FileId::of(Path::new("/proc/self/exe")).ok()?;
            find_runtime(None, std::env::var_os("PATH").as_deref(), own).ok()?
        }
    };
    version_unsafe(&runtime)
}

/// The first line of `real --version`, run once per binary: the answer is
/// kept under [`RUNTIME_CACHE_DIR`], named by the binary's identity (device,
/// inode, size, modification time), so that no process runs per start and an
/// upgraded runtime is asked again. `None` when it cannot be run; an empty
/// line when it printed nothing.
fn runtime_version(real: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(real).ok()?;
    let key = format!("{}-{}-{}-{}.{}", m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec());
    let cache = Path::new(RUNTIME_CACHE_DIR);
    let trusted = trusted_dir(cache);
    if trusted {
        if let Ok(Some(line)) = crate::files::read_text(&cache.join(&key), 4096) {
            return Some(line);
        }
    }
    let out = Command::new(real)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .inspect_err(|e| log::debug!("{} --version: {e}", real.display()))
        .ok()?;
    // Whatever it answered, even nothing, is kept: a runtime that prints no
    // version is not asked again at every start.
    let line = String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or_default().trim().to_string();
    if trusted || make_cache_dir(cache) {
        let perms = crate::files::Perms { mode: 0o600, owner: None };
        let path = cache.join(&key);
        if let Err(e) =
            crate::files::replace(&path, line.as_bytes(), perms, crate::files::Durability::Scratch)
        {
            log::debug!("{e}");
        }
    }
    Some(line)
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

/// The prestart entry of this binary, or `None` when it cannot be found.
/// The hook reads the host config the wrapper read: `--config` when
/// `OCI_TMPFS_HOOK_CONFIG` named one (runtimes give hooks no environment).
fn hook_entry(source: &ConfigSource) -> Option<HookEntry> {
    match crate::files::this_binary() {
        Ok(exe) => Some(HookEntry::for_stage(&exe, Stage::Prestart, source.named())),
        Err(e) => {
            log::warn!("finding this binary: {e}; the hook is not added");
            None
        }
    }
}

/// Adds the hook to `dir/config.json` (at the stage
/// [`crate::spec::route::carrier`] gives hook mode). A bundle we cannot
/// edit is passed through untouched, so the real runtime reports its own
/// error.
fn add_hook(dir: &Path, source: &ConfigSource) {
    let Some(entry) = hook_entry(source) else { return };
    if let Err(e) = crate::spec::inject_hook(dir, &entry) {
        log::warn!("{}; the hook is not added, passing the call through", chain(&e));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a command line parses to: the subcommand when it creates, the
    /// bundle, and the container id.
    fn parsed(args: &[&str]) -> (Option<&'static str>, Option<String>, Option<String>) {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        let line = CommandLine::parse(&args);
        (line.creating, line.bundle.as_ref().map(|b| b.display().to_string()), line.container_id())
    }

    type Want<'a> = (Option<&'static str>, Option<&'a str>, Option<&'a str>);

    fn check(cases: &[(&str, &[&str], Want<'_>)]) {
        for (name, args, (creating, bundle, id)) in cases {
            let want = (*creating, bundle.map(String::from), id.map(String::from));
            assert_eq!(parsed(args), want, "case {name:?}: {args:?}");
        }
    }

    const C: Option<&str> = Some("create");
    const R: Option<&str> = Some("run");
    const PASS: Want<'static> = (None, None, None);

    /// The command lines the engines gave a runtime, recorded here with a
    /// runtime that logged its argv before exec'ing runc (`docker run
    /// --runtime`, `ctr run --runc-binary`: containerd's runc shim).
    #[test]
    fn the_engines_real_command_lines() {
        let docker_20_10 = "--root /d/exec/runtime-runc/moby --log /d/exec/containerd/daemon/io.containerd.runtime.v2.task/moby/34c5bab0fdfd/log.json --log-format json create --bundle /d/exec/containerd/daemon/io.containerd.runtime.v2.task/moby/34c5bab0fdfd --pid-file /d/exec/containerd/daemon/io.containerd.runtime.v2.task/moby/34c5bab0fdfd/init.pid 34c5bab0fdfd";
        let docker_20_10_tty = "--root /d/exec/runtime-runc/moby --log /d/t/9085/log.json --log-format json create --bundle /d/t/9085 --pid-file /d/t/9085/init.pid --console-socket /tmp/pty3326511502/pty.sock 9085";
        let docker_28 = "--root /rd/exec/runtime-runc/moby --log /rd/exec/containerd/daemon/io.containerd.runtime.v2.task/moby/c3d71851517b/log.json --log-format json create --bundle /rd/exec/containerd/daemon/io.containerd.runtime.v2.task/moby/c3d71851517b --pid-file /rd/exec/containerd/daemon/io.containerd.runtime.v2.task/moby/c3d71851517b/init.pid c3d71851517b";
        let containerd = "--root /run/containerd/runc/rec --log /rd/t/rec/recid/log.json --log-format json create --bundle /rd/t/rec/recid --pid-file /rd/t/rec/recid/init.pid recid";
        let split = |s: &'static str| s.split(' ').collect::<Vec<_>>();
        let lines = [
            (
                "Docker 20.10",
                split(docker_20_10),
                (
                    C,
                    Some("/d/exec/containerd/daemon/io.containerd.runtime.v2.task/moby/34c5bab0fdfd"),
                    Some("34c5bab0fdfd"),
                ),
            ),
            ("Docker 20.10, -t", split(docker_20_10_tty), (C, Some("/d/t/9085"), Some("9085"))),
            (
                "Docker 28.5",
                split(docker_28),
                (
                    C,
                    Some("/rd/exec/containerd/daemon/io.containerd.runtime.v2.task/moby/c3d71851517b"),
                    Some("c3d71851517b"),
                ),
            ),
            // containerd 1.6.20 and 2.1.9 gave the same words.
            ("containerd 1.6 and 2.1", split(containerd), (C, Some("/rd/t/rec/recid"), Some("recid"))),
            ("Docker 28 asks for features first", vec!["features"], PASS),
            ("start", split("--root /r --log /l --log-format json start recid"), PASS),
            ("delete --force", split("--root /r --log /l --log-format json delete --force recid"), PASS),
        ];
        let cases: Vec<(&str, &[&str], Want<'_>)> =
            lines.iter().map(|(n, a, w)| (*n, a.as_slice(), *w)).collect();
        check(&cases);
    }

    #[test]
    fn the_grammar_at_its_edges() {
        check(&[
            (
                "go-runc: --systemd-cgroup, --console-socket",
                &[
                    "--root",
                    "/r",
                    "--log",
                    "l",
                    "--log-format",
                    "json",
                    "--systemd-cgroup",
                    "create",
                    "--bundle",
                    "/b",
                    "--pid-file",
                    "p",
                    "--console-socket",
                    "/s.sock",
                    "ID",
                ],
                (C, Some("/b"), Some("ID")),
            ),
            (
                "global switches, --rootless=false",
                &["--debug", "--rootless=false", "--root", "R", "create", "--bundle", "B", "ID"],
                (C, Some("B"), Some("ID")),
            ),
            (
                "a global's value that looks like a subcommand",
                &["--root", "run", "--log", "create", "state", "ID"],
                PASS,
            ),
            ("--root=R", &["--root=create", "run", "-b", "B", "ID"], (R, Some("B"), Some("ID"))),
            (
                "Go single-dash names",
                &["-root", "R", "-log", "L", "create", "-bundle", "B", "ID"],
                (C, Some("B"), Some("ID")),
            ),
            ("-b DIR", &["run", "-b", "/b", "ID"], (R, Some("/b"), Some("ID"))),
            ("-b=DIR", &["create", "-b=/b", "ID"], (C, Some("/b"), Some("ID"))),
            ("--bundle=DIR", &["create", "--bundle=/b", "ID"], (C, Some("/b"), Some("ID"))),
            ("no bundle: the current directory", &["create", "ID"], (C, None, Some("ID"))),
            (
                "options after the id (crun permutes)",
                &["create", "ID", "--bundle", "/b", "--pid-file", "p"],
                (C, Some("/b"), Some("ID")),
            ),
            (
                "the last bundle wins",
                &["create", "-b", "/a", "--bundle=/b", "ID"],
                (C, Some("/b"), Some("ID")),
            ),
            (
                "a pid file named like a flag is a value",
                &["create", "--pid-file", "-b", "ID"],
                (C, None, Some("ID")),
            ),
            ("--pid-file=P", &["create", "--pid-file=/p", "-b", "/b", "ID"], (C, Some("/b"), Some("ID"))),
            (
                "a console socket named like a flag",
                &["create", "--console-socket", "--bundle", "ID"],
                (C, None, Some("ID")),
            ),
            ("run --detach", &["run", "--detach", "--bundle", "/b", "ID"], (R, Some("/b"), Some("ID"))),
            ("run -d", &["run", "-d", "-b", "/b", "ID"], (R, Some("/b"), Some("ID"))),
            (
                "unknown switches are switches",
                &["create", "--no-pivot", "--no-new-keyring", "-b", "/b", "ID"],
                (C, Some("/b"), Some("ID")),
            ),
            ("after -- every word is a word", &["create", "--", "-b", "/b"], (C, None, Some("-b"))),
            (
                "an id that starts with -",
                &["create", "--bundle", "/b", "--", "-id"],
                (C, Some("/b"), Some("-id")),
            ),
            (
                "-- before the subcommand",
                &["--root", "R", "--", "create", "-b", "/b", "ID"],
                (C, Some("/b"), Some("ID")),
            ),
            ("a bundle flag without value", &["create", "--bundle"], (C, None, None)),
            ("no id", &["create", "--bundle", "/b"], (C, Some("/b"), None)),
            ("a lone - is a word", &["create", "-b", "/b", "-"], (C, Some("/b"), Some("-"))),
            ("state ID", &["state", "ID"], PASS),
            ("exec is not create", &["exec", "--process", "P", "ID"], PASS),
            ("--version", &["--version"], PASS),
            ("nothing", &[], PASS),
            ("only globals", &["--root", "R", "--debug"], PASS),
            ("a subcommand named like create is not create", &["created", "-b", "/b"], PASS),
        ]);
    }

    /// The global root, the process file, the id, whether it chooses.
    type ExecParsed = (Option<String>, Option<String>, Option<String>, bool);

    /// What an `exec` line parses to: the global root, the process file,
    /// the container id, and whether it chooses the user or `HOME`.
    fn exec_parsed(args: &[&str]) -> Option<ExecParsed> {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        let line = CommandLine::parse(&args);
        assert_eq!(line.creating, None, "{args:?}");
        let shown = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        let root = shown(&line.root);
        line.exec
            .map(|e| (root, shown(&e.process), e.id.map(|i| i.to_string_lossy().into_owned()), e.chooses))
    }

    /// The `exec` command lines the engines gave a runtime, recorded here as
    /// the create lines above: Docker 20.10.24 and 28.5.2 (`docker exec`,
    /// `-u 0`, `-t`; the same words with runc and crun), containerd 1.6.20
    /// and 2.1.9's runc shim (`ctr task exec`, the shim CRI's `ExecSync`
    /// goes through).
    #[test]
    fn the_engines_real_exec_lines() {
        let moby = "/rd/exec/containerd/daemon/io.containerd.runtime.v2.task/moby/7ad0b36af38b";
        let docker = format!("--root /rd/exec/runtime-runc/moby --log {moby}/log.json --log-format json exec --process /tmp/runc-process1636240928 --detach --pid-file {moby}/97d7597511a4.pid 7ad0b36af38b");
        let docker_tty = format!("--root /rd/exec/runtime-runc/moby --log {moby}/log.json --log-format json exec --process /tmp/runc-process882902969 --console-socket /tmp/pty2481730007/pty.sock --detach --pid-file {moby}/5a0aa71885f9.pid 7ad0b36af38b");
        let containerd = "--root /run/containerd/runc/rec --log /rd/t/rec/recid/log.json --log-format json exec --process /tmp/runc-process456644755 --detach --pid-file /rd/t/rec/recid/e1.pid recid";
        let want = |root: &str, process: &str, id: &str| {
            Some((Some(root.to_string()), Some(process.to_string()), Some(id.to_string()), false))
        };
        let split = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        for (name, line, expected) in [
            (
                "Docker 20.10 and 28.5",
                split(&docker),
                want("/rd/exec/runtime-runc/moby", "/tmp/runc-process1636240928", "7ad0b36af38b"),
            ),
            (
                "Docker, exec -t",
                split(&docker_tty),
                want("/rd/exec/runtime-runc/moby", "/tmp/runc-process882902969", "7ad0b36af38b"),
            ),
            (
                "containerd 1.6 and 2.1",
                split(containerd),
                want("/run/containerd/runc/rec", "/tmp/runc-process456644755", "recid"),
            ),
        ] {
            let args: Vec<&str> = line.iter().map(String::as_str).collect();
            assert_eq!(exec_parsed(&args), expected, "{name}");
        }
    }

    #[test]
    fn the_exec_grammar_at_its_edges() {
        let got = |args: &[&str]| exec_parsed(args);
        let p = |s: &str| Some(s.to_string());
        assert_eq!(got(&["exec", "-p", "/p", "ID"]), Some((None, p("/p"), p("ID"), false)), "-p FILE");
        assert_eq!(
            got(&["exec", "--process=/p", "ID"]),
            Some((None, p("/p"), p("ID"), false)),
            "--process=FILE"
        );
        assert_eq!(got(&["exec", "-p=/p", "ID"]), Some((None, p("/p"), p("ID"), false)), "-p=FILE");
        assert_eq!(
            got(&["--root=/r", "exec", "-p", "/p", "ID"]),
            Some((p("/r"), p("/p"), p("ID"), false)),
            "--root=R"
        );
        assert_eq!(
            got(&["-root", "/r", "--debug", "exec", "ID"]),
            Some((p("/r"), None, p("ID"), false)),
            "Go's -root"
        );
        assert_eq!(
            got(&["--log", "--root", "exec", "-p", "/p", "ID"]),
            Some((None, p("/p"), p("ID"), false)),
            "a --log named --root is a value"
        );
        assert_eq!(
            got(&["--root", "/a", "--root", "/b", "exec", "ID"]),
            Some((p("/b"), None, p("ID"), false)),
            "the last root wins"
        );
        assert_eq!(
            got(&["exec", "--pid-file", "--process", "ID", "sh"]),
            Some((None, None, p("ID"), false)),
            "a pid file named like a flag is a value"
        );
        assert_eq!(
            got(&["exec", "-p", "/a", "-p", "/b", "ID"]),
            Some((None, p("/b"), p("ID"), false)),
            "last wins"
        );
        assert_eq!(
            got(&["exec", "--tty", "-d", "--no-new-privs", "-p", "/p", "ID"]),
            Some((None, p("/p"), p("ID"), false)),
            "switches"
        );
        assert_eq!(
            got(&["exec", "ID", "--process", "/p"]),
            Some((None, None, p("ID"), false)),
            "after the id: the command's words"
        );
        assert_eq!(
            got(&["exec", "-p", "/p", "--", "-id"]),
            Some((None, p("/p"), p("-id"), false)),
            "-- then the id"
        );
        assert_eq!(got(&["exec", "-u", "0", "-p", "/p", "ID"]), Some((None, p("/p"), p("ID"), true)), "-u");
        assert_eq!(got(&["exec", "--user=1000:0", "ID", "sh"]), Some((None, None, p("ID"), true)), "--user=");
        assert_eq!(
            got(&["exec", "-e", "HOME=/x", "-p", "/p", "ID"]),
            Some((None, p("/p"), p("ID"), true)),
            "-e HOME"
        );
        assert_eq!(
            got(&["exec", "--env=TERM=x", "-p", "/p", "ID"]),
            Some((None, p("/p"), p("ID"), false)),
            "-e TERM"
        );
        assert_eq!(got(&["exec", "--process"]), Some((None, None, None, false)), "no value");
        assert_eq!(got(&["exec"]), Some((None, None, None, false)), "nothing");
        assert_eq!(got(&["--root", "/r", "state", "ID"]), None, "state");
        assert_eq!(got(&["--root", "/r", "executed", "ID"]), None, "not exec");
        assert_eq!(got(&["--root", "exec", "state", "ID"]), None, "a root named exec");
    }

    #[test]
    fn non_utf8_bundle() {
        let args = vec![OsString::from("create"), OsString::from("-b"), OsString::from_vec(vec![b'/', 0xff])];
        let line = CommandLine::parse(&args);
        assert_eq!(line.bundle, Some(PathBuf::from(&args[2])));
        assert_eq!(line.creating, Some("create"));
    }

    use std::os::unix::ffi::OsStringExt;

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
            assert_eq!(got.is_some_and(|(n, v)| spec_unsafe(&n, v).is_some()), unsafe_, "{out}");
        }
    }

    #[test]
    fn wrapper_name() {
        assert!(invoked_as_wrapper(OsStr::new("oci-tmpfs-runtime")));
        assert!(invoked_as_wrapper(OsStr::new("/usr/local/bin/oci-tmpfs-runtime")));
        assert!(!invoked_as_wrapper(OsStr::new("/usr/local/bin/oci-tmpfs-hook")));
        assert!(!invoked_as_wrapper(OsStr::new("oci-tmpfs-runtime-x")));
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

    #[test]
    fn empty_path_uses_the_default() {
        let own = FileId { dev: u64::MAX, ino: u64::MAX };
        let found = find_runtime(None, Some(OsStr::new("")), own);
        let expected =
            DEFAULT_PATH.split(':').map(|d| Path::new(d).join("runc")).find(|p| executable(p).is_some());
        assert_eq!(found.ok(), expected);
    }
}
