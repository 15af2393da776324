//! The rename race of the hostile suites, written once: a thread swaps an
//! image's `/tmp` directory with its `/tmp-link` symlink
//! (`renameat2(RENAME_EXCHANGE)`, in a tight loop) while the caller starts
//! containers. What the starts prove (the host untouched, where our tmpfs
//! landed) stays with each suite.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Sets the flag when dropped, panics included.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs `start(i, k)` for each `i` in `0..starts`, `k = i % rootfses.len()`
/// (the rootfs whose turn it is), while a thread swaps `tmp` and `tmp-link`
/// in every rootfs, round after round (yielding after each round where
/// `yield_each_round`), until the starts end or one panics. Returns how
/// many swaps were made.
pub fn under_swaps(
    rootfses: &[&Path],
    starts: usize,
    yield_each_round: bool,
    mut start: impl FnMut(usize, usize),
) -> usize {
    let roots: Vec<_> = rootfses
        .iter()
        .map(|r| {
            rustix::fs::open(
                *r,
                rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY,
                rustix::fs::Mode::empty(),
            )
            .unwrap()
        })
        .collect();
    let stop = AtomicBool::new(false);
    let swaps = AtomicUsize::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                for root in &roots {
                    rustix::fs::renameat_with(
                        root,
                        "tmp",
                        root,
                        "tmp-link",
                        rustix::fs::RenameFlags::EXCHANGE,
                    )
                    .unwrap();
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
                if yield_each_round {
                    std::thread::yield_now();
                }
            }
        });
        // Stops the swapper even when a start's checks panic.
        let _stop = StopOnDrop(&stop);
        for i in 0..starts {
            start(i, i % rootfses.len());
        }
    });
    swaps.load(Ordering::Relaxed)
}

/// Runs `body` while a thread swaps the entries `a` and `b` of the
/// directory `dir` (`renameat2(RENAME_EXCHANGE)`, in a tight loop). While
/// the file `hold` exists, the thread holds still with `a` a regular file
/// again, and says so by making `hold.held` (a hook after ours waits for it:
/// the runtime's own reads of the image come after, and see the image as it
/// was made). Returns what `body` returned and how many swaps were made.
pub fn exchanging<T>(
    dir: &Path,
    a: &str,
    b: &str,
    hold: Option<&Path>,
    body: impl FnOnce() -> T,
) -> (T, usize) {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};
    let fd = rustix::fs::open(dir, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
    let stop = AtomicBool::new(false);
    let swaps = AtomicUsize::new(0);
    let swap = || rustix::fs::renameat_with(&fd, a, &fd, b, RenameFlags::EXCHANGE).unwrap();
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                if let Some(hold) = hold.filter(|h| h.exists()) {
                    let st = rustix::fs::statat(&fd, a, AtFlags::SYMLINK_NOFOLLOW).unwrap();
                    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
                        swap();
                    }
                    std::fs::write(hold.with_extension("held"), "").unwrap();
                    while hold.exists() && !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                    continue;
                }
                for _ in 0..64 {
                    swap();
                }
                swaps.fetch_add(64, Ordering::Relaxed);
            }
        });
        // Stops the swapper even when the body's checks panic.
        let _stop = StopOnDrop(&stop);
        body()
    });
    (out, swaps.load(Ordering::Relaxed))
}
