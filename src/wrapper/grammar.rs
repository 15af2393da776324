//! runc's command-line grammar, the one parser of the wrapper's argv: what
//! a runtime is asked (`create`/`run` with its bundle and container id, or
//! anything else). Pure: it reads only its arguments, and neither acts on
//! them nor rejects any (a command line it does not understand goes through
//! to the real runtime unchanged, which reports its own usage errors).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::wrapper::dispatch::RuntimeCall;

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
}

impl CommandLine {
    /// Parses the runtime's arguments (without argv\[0\]).
    pub(crate) fn parse(args: &[OsString]) -> CommandLine {
        let Some(at) = subcommand_at(args) else { return CommandLine::default() };
        let Some(creating) = args.get(at).and_then(|sub| CREATING.iter().find(|c| sub == **c)) else {
            return CommandLine::default();
        };
        let mut line = CommandLine { creating: Some(creating), ..CommandLine::default() };
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

    /// What the runtime is asked, in the library's plain values: a `create`
    /// or `run` with its bundle (the current directory when none is named)
    /// and container id, or anything else.
    pub(crate) fn call(&self) -> RuntimeCall<'_> {
        if self.creating.is_some() {
            let bundle = self.bundle.as_deref().unwrap_or(Path::new("."));
            return RuntimeCall::Create { bundle, id: self.container_id() };
        }
        RuntimeCall::Other
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

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

    /// The library sees what the grammar parsed: a `create`'s bundle (the
    /// current directory when none is named) and id, and nothing of any
    /// other line (an `exec` included).
    #[test]
    fn each_line_is_the_call_it_names() {
        let call_of = |args: &[&str], check: &dyn Fn(RuntimeCall<'_>)| {
            let args: Vec<OsString> = args.iter().map(OsString::from).collect();
            check(CommandLine::parse(&args).call());
        };
        call_of(&["--root", "/r", "create", "-b", "/b", "ID"], &|c| {
            assert_eq!(c, RuntimeCall::Create { bundle: Path::new("/b"), id: Some("ID".into()) });
        });
        call_of(&["run", "ID"], &|c| {
            assert_eq!(c, RuntimeCall::Create { bundle: Path::new("."), id: Some("ID".into()) });
        });
        call_of(&["create"], &|c| assert_eq!(c, RuntimeCall::Create { bundle: Path::new("."), id: None }));
        for other in [
            &["state", "ID"][..],
            &["--root", "/r", "delete", "ID"],
            &["features"],
            &[],
            &["exec", "-p", "/p", "ID"],
        ] {
            call_of(other, &|c| assert_eq!(c, RuntimeCall::Other, "{other:?}"));
        }
    }

    #[test]
    fn non_utf8_bundle() {
        let args = vec![OsString::from("create"), OsString::from("-b"), OsString::from_vec(vec![b'/', 0xff])];
        let line = CommandLine::parse(&args);
        assert_eq!(line.bundle, Some(PathBuf::from(&args[2])));
        assert_eq!(line.creating, Some("create"));
    }
}
