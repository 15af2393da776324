//! Running commands: with a timeout, with stdin, their text; stopping
//! them; a `sleep` holding a fresh mount namespace (`Sleeper`).

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long one command of a test may take (a node image build is the longest).
pub const TIMEOUT: Duration = Duration::from_secs(300);

/// Prints past the test harness's capture: what a case saw is the suite's
/// report, wanted in the log of a passing run too.
pub fn say(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{line}");
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs `cmd` with `stdin`, killing it after `TIMEOUT`.
pub fn output_with(cmd: &mut Command, stdin: &[u8]) -> Output {
    run_with_stdin(cmd, stdin.to_vec(), TIMEOUT)
        .unwrap_or_else(|| panic!("{cmd:?} timed out after {TIMEOUT:?}"))
}

/// Runs `cmd` with an empty stdin, killing it after `TIMEOUT`.
pub fn output(cmd: &mut Command) -> Output {
    output_with(cmd, b"")
}

/// Runs `cmd`; its stdout, or a panic with both streams unless it exits 0.
#[track_caller]
pub fn ok(cmd: &mut Command) -> String {
    let out = output(cmd);
    succeeded(&format!("{cmd:?}"), &out)
}

/// `out`'s stdout, or a panic naming `what` with both streams unless it exited 0.
#[track_caller]
pub fn succeeded(what: &str, out: &Output) -> String {
    assert!(
        out.status.success(),
        "{what}: {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Waits for `child`, killing it after `timeout`.
pub fn wait_timeout(mut child: std::process::Child, timeout: Duration) -> Option<Output> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return child.wait_with_output().ok(),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// Runs `cmd` with `stdin` written by a thread (so a hook that does not read
/// cannot block the test), stdout and stderr captured; `None` after `timeout`.
pub fn run_with_stdin(cmd: &mut Command, stdin: Vec<u8>, timeout: Duration) -> Option<Output> {
    use std::io::Write;
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    let out = wait_timeout(child, timeout);
    let _ = writer.join();
    out
}

/// The absolute path of `bin` on `PATH`; panics when it is not installed.
pub fn which(bin: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_else(|| panic!("PATH is not set: no {bin} to find"));
    std::env::split_paths(&path)
        .map(|d| d.join(bin))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{bin} is not on PATH (tests/run.sh installs what the tests run)"))
}

/// Waits for `child` up to `timeout`; its status, or `None` (it runs on).
pub fn wait_status(child: &mut std::process::Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stops `child` by its pid: SIGTERM, then SIGKILL after `grace`.
pub fn stop(child: &mut std::process::Child, grace: Duration) {
    use rustix::process::{kill_process, Pid, Signal};
    if let Some(pid) = Pid::from_raw(child.id() as i32) {
        let _ = kill_process(pid, Signal::TERM);
    }
    if wait_status(child, grace).is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// A `sleep` in a fresh private mount namespace (`unshare`), killed on
/// drop: a container's init at prestart, or the namespace a container
/// joins. [`Sleeper::new`] returns once the namespace is there.
pub struct Sleeper {
    child: std::process::Child,
}

impl Sleeper {
    pub fn new() -> Sleeper {
        let own = std::fs::read_link("/proc/self/ns/mnt").unwrap();
        let child = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sleep", "600"])
            .stdin(Stdio::null())
            .spawn()
            .expect("unshare (util-linux) is installed");
        let s = Sleeper { child };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::read_link(s.ns()).ok().is_none_or(|ns| ns == own) {
            assert!(Instant::now() < deadline, "unshare made no mount namespace");
            std::thread::sleep(Duration::from_millis(2));
        }
        s
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its mount namespace, `/proc/PID/ns/mnt`.
    pub fn ns(&self) -> String {
        format!("/proc/{}/ns/mnt", self.pid())
    }

    /// Its mount table; a panic naming the file when it cannot be read
    /// (the `sleep` is gone).
    pub fn mounts(&self) -> Vec<super::MountInfo> {
        super::parse_mountinfo(&super::read_text(format!("/proc/{}/mountinfo", self.pid())))
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
