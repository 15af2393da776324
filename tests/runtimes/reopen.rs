//! No device node of the image is ever opened by us (docs/design.md#reopen):
//! the image's `/etc/passwd` and the files copy-up copies (into a temp
//! tmpfs) are checked on an
//! `O_PATH` fd and read through that fd, reopened by the host's procfs,
//! never by their path again. Each test swaps a regular file of the image
//! with a character device (`mknod c 1 3`, a `/dev/null` twin) by
//! `renameat2(RENAME_EXCHANGE)` in a tight loop while containers start
//! through our hook (runc and crun) and the spec executor (`inject --mode
//! spec`), and an inotify watch with `IN_OPEN` on the device's inode counts
//! every open of it. `O_PATH` opens make no fsnotify event (Linux 6.5 on),
//! so the walk's `O_PATH` fds are not counted; a self-check proves the watch
//! sees a real open and not an `O_PATH` one.

use std::path::Path;
use std::time::Duration;

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::fs::{FileType, Mode, OFlags};
use serde_json::json;

use crate::support::race::exchanging;
use crate::support::*;

/// How many containers each runtime starts during a race.
const STARTS: usize = 24;
/// How many runs of the spec executor during a race (no container).
const SPEC_RUNS: usize = 150;

/// An inotify watch with `IN_OPEN` on one inode.
struct Opens {
    fd: std::os::fd::OwnedFd,
}

impl Opens {
    fn watch(path: &Path) -> Opens {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).unwrap();
        inotify::add_watch(&fd, path, WatchFlags::OPEN).unwrap();
        Opens { fd }
    }

    /// Whether anything opened it since the last call, as a count: inotify
    /// merges an event with the same unread one before it, so a burst of
    /// opens may read as one (zero or not is what the tests ask).
    fn take(&self) -> usize {
        let mut buf = [std::mem::MaybeUninit::uninit(); 4096];
        let mut reader = inotify::Reader::new(&self.fd, &mut buf);
        let mut n = 0;
        loop {
            match reader.next() {
                Ok(e) if e.events().contains(ReadFlags::OPEN) => n += 1,
                Ok(_) => {}
                Err(rustix::io::Errno::AGAIN) => return n,
                Err(e) => panic!("reading inotify events: {e}"),
            }
        }
    }

    /// The watch sees a real open of `path` and no `O_PATH` one: zero
    /// events later means zero opens, not a blind watch.
    fn self_check(&self, path: &Path) {
        assert_eq!(self.take(), 0, "nothing opened {} yet", path.display());
        drop(rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).unwrap());
        assert_eq!(self.take(), 0, "an O_PATH open of {} makes no event (Linux 6.5 on)", path.display());
        drop(rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).unwrap());
        assert_eq!(self.take(), 1, "a real open of {} is seen", path.display());
    }
}

/// `dir/name`: a character device 1:3, a `/dev/null` twin.
fn mknod_null(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        FileType::CharacterDevice,
        Mode::from_raw_mode(0o644),
        rustix::fs::makedev(1, 3),
    )
    .unwrap();
}

/// A prestart hook after ours that holds the racer still (`hold`, see
/// [`exchanging`]) until the runtime is done: runc and crun read the
/// image's `/etc/passwd` themselves, by path, after the hooks; those opens
/// are theirs, not ours.
fn hold_after_ours(b: &mut Bundle, hold: &Path) {
    let held = hold.with_extension("held");
    let script =
        format!("touch '{}'; while [ ! -e '{}' ]; do sleep 0.01; done", hold.display(), held.display());
    b.config["hooks"]["prestart"].as_array_mut().unwrap().push(json!({
        "path": "/bin/sh", "args": ["sh", "-c", script], "env": ["PATH=/usr/bin:/bin"]
    }));
}

/// Starts a container with `rt` through our hook (its warnings in `log`),
/// releases the racer's hold afterwards, and returns the hook's warnings
/// and what the container printed.
fn start(b: &Bundle, rt: Runtime, hold: &Path, log: &Path) -> (String, String) {
    let run = b.run_timeout(rt, Duration::from_secs(60));
    let _ = std::fs::remove_file(hold.with_extension("held"));
    let _ = std::fs::remove_file(hold);
    let warned = read_text(log);
    let _ = std::fs::remove_file(log);
    assert!(
        run.output.status.success(),
        "{rt:?}: the container failed: {}\n{}\nhook log:\n{warned}",
        run.stdout(),
        run.stderr()
    );
    (warned, run.stdout())
}

/// The image's `/etc/passwd` swapped with a device node while root's
/// containers (no `HOME` in the environment: the hook reads the file)
/// start through the hook on runc and crun, and while the spec executor
/// reads it: the device is never opened, and the race was real (some reads
/// found the device and said so, some read the entry).
#[test]
fn the_passwd_read_never_opens_a_device() {
    require_root();
    let mut b = Bundle::new("reopen-passwd");
    b.script(SHOW_MOUNTS);
    let etc = b.rootfs().join("etc");
    std::fs::write(etc.join("passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    mknod_null(&etc.join("passwd-dev"));
    let opens = Opens::watch(&etc.join("passwd-dev"));
    opens.self_check(&etc.join("passwd-dev"));
    let (conf, log) = warnings_to_a_file(&b);
    let hold = b.dir.join("hold");
    b.inject_with_config("prestart", &conf);
    hold_after_ours(&mut b, &hold);
    let plain = {
        let mut p = b.config.clone();
        p.as_object_mut().unwrap().remove("hooks");
        p
    };
    let ((found, read, spec_found, spec_read, changed), swaps) =
        exchanging(&etc, "passwd", "passwd-dev", Some(&hold), || {
            let (mut found, mut read, mut changed) = ([0; 2], [0; 2], 0);
            for (i, rt) in Runtime::ALL.into_iter().enumerate() {
                for _ in 0..STARTS {
                    let (warned, shown) = start(&b, rt, &hold, &log);
                    // The path opened again after a swap: what the reopen rules out.
                    changed += usize::from(warned.contains("changed while it was read"));
                    if warned.contains("the image's /etc/passwd is not a regular file") {
                        found[i] += 1;
                    } else if parse_mountinfo(&shown).iter().any(|m| m.mount_point == "/root/.cache") {
                        // The entry's home (missing, made) holds its caches' tmpfs.
                        read[i] += 1;
                    }
                }
            }
            let (mut spec_found, mut spec_read) = (0, 0);
            for _ in 0..SPEC_RUNS {
                std::fs::write(b.dir.join("config.json"), serde_json::to_vec(&plain).unwrap()).unwrap();
                let out = output(
                    std::process::Command::new(hook_bin())
                        .args(["inject", "--mode", "spec", "--config"])
                        .arg(&conf)
                        .arg("--runtime")
                        .arg(which("crun"))
                        .arg("--bundle")
                        .arg(&b.dir),
                );
                let warned = succeeded("inject --mode spec", &out) + &String::from_utf8_lossy(&out.stderr);
                changed += usize::from(warned.contains("changed while it was read"));
                // Read: HOME=/root's caches (its line or their mounts).
                if warned.contains("the image's /etc/passwd is not a regular file") {
                    spec_found += 1;
                } else if warned.contains("/root") {
                    spec_read += 1;
                }
            }
            (found, read, spec_found, spec_read, changed)
        });
    let opened = opens.take();
    let tally = format!(
        "{swaps} swaps; the hook found the device {found:?} times and read the entry {read:?} times (runc, crun); the spec executor {spec_found} and {spec_read} times; {changed} reads found the file changed"
    );
    eprintln!("passwd race: {tally}; the device was opened {opened} times");
    assert_eq!(opened, 0, "the device was opened during the race: {tally}");
    assert_eq!(changed, 0, "a file reopened from its fd cannot change: {tally}");
    assert!(swaps > 1000, "{tally}");
    let seen = |found: usize, read: usize| found > 0 && read > 0;
    assert!(
        seen(found[0], read[0]) && seen(found[1], read[1]) && seen(spec_found, spec_read),
        "the race was seen by each: {tally}"
    );
}

/// The image's `/tmp` holds `.profile` and a device node that a racer
/// swaps with it while containers start through the hook on runc and crun
/// (`/tmp`'s tmpfs is filled by copy-up): the device is never opened, and
/// the race was real (some copies left the swapped `.profile` out, some
/// copied it).
#[test]
fn copy_up_never_opens_a_device() {
    require_root();
    let mut b = Bundle::new("reopen-copyup");
    let home = b.rootfs().join("tmp");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join(".profile"), "image profile").unwrap();
    mknod_null(&home.join(".profile-dev"));
    let opens = Opens::watch(&home.join(".profile-dev"));
    opens.self_check(&home.join(".profile-dev"));
    let (conf, log) = warnings_to_a_file(&b);
    let hold = b.dir.join("hold");
    b.inject_with_config("prestart", &conf);
    hold_after_ours(&mut b, &hold);
    let ((skipped, copied), swaps) = exchanging(&home, ".profile", ".profile-dev", Some(&hold), || {
        let (mut skipped, mut copied) = (0, 0);
        for rt in Runtime::ALL {
            for _ in 0..STARTS {
                let (warned, _) = start(&b, rt, &hold, &log);
                match warned.contains("/.profile,") || warned.contains("/.profile)") {
                    true => skipped += 1,
                    false => copied += 1,
                }
            }
        }
        (skipped, copied)
    });
    let opened = opens.take();
    let tally = format!("{swaps} swaps; {skipped} copies left .profile out, {copied} copied it");
    eprintln!("copy-up race: {tally}; the device was opened {opened} times");
    assert_eq!(opened, 0, "the device was opened during the race: {tally}");
    assert!(swaps > 1000, "{tally}");
    assert!(skipped > 0 && copied > 0, "the race was seen: {tally}");
}
