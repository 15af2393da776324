//! Files that come from someone else (a bundle's `config.json`, the host
//! config, the engines' configs) and the files we write back: one bounded
//! reader, one atomic writer, one JSON renderer that keeps a file's style.
//!
//! The reader opens without following a final symlink and without blocking
//! on a FIFO, refuses anything but a regular file, and reads at most a given
//! number of bytes (docs/design.md#hostile-rootfs rule 1). The writer writes a temporary file
//! beside the target with the target's mode and owner and renames it over the
//! target; whether it also fsyncs is the caller's choice (docs/design.md#executors: an
//! engine config must survive a crash, a bundle is scratch). Nothing here
//! knows what the files mean: parsing and editing belong to the callers.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use serde_json::Value;

/// A file that could not be read, or written.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("opening {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("opening {path}: it is a symbolic link, which is not followed")]
    Symlink { path: PathBuf },
    #[error("{path} is not a regular file")]
    NotRegular { path: PathBuf },
    #[error("{path} is larger than {limit} bytes")]
    TooLarge { path: PathBuf, limit: u64 },
    #[error("reading {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} is not UTF-8")]
    NotUtf8 { path: PathBuf },
    #[error("writing {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl FileError {
    /// True when the file does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, FileError::Open { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// The mode and owner a file is written with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Perms {
    /// Permission bits (`0o7777` at most).
    pub mode: u32,
    /// Owner and group; `None` leaves them to the writer (a new file).
    pub owner: Option<(u32, u32)>,
}

impl Perms {
    /// A new file: `mode`, owned by whoever writes it.
    pub(crate) const fn new(mode: u32) -> Perms {
        Perms { mode, owner: None }
    }

    fn of(st: &rustix::fs::Stat) -> Perms {
        Perms { mode: st.st_mode & 0o7777, owner: Some((st.st_uid, st.st_gid)) }
    }

    /// The mode and owner of the file at `path` itself (not of a symlink's
    /// target); `None` when there is none.
    pub(crate) fn of_path(path: &Path) -> Option<Perms> {
        let st = rustix::fs::lstat(path).ok()?;
        Some(Perms::of(&st))
    }
}

/// What a bounded read returns.
#[derive(Clone, Debug)]
pub(crate) struct Contents {
    pub bytes: Vec<u8>,
    /// The file's mode and owner, for writing it back.
    pub perms: Perms,
}

/// Reads the regular file `path` (or `path`'s file name inside `dir`), at
/// most `limit` bytes, without following a final symlink or blocking.
///
/// # Errors
/// The file cannot be opened, is a symlink, a FIFO, a directory..., is larger
/// than `limit`, or a read fails.
pub(crate) fn read(dir: Option<BorrowedFd<'_>>, path: &Path, limit: u64) -> Result<Contents, FileError> {
    let shown = || path.to_path_buf();
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    let opened = match dir {
        Some(dir) => rustix::fs::openat(dir, path.file_name().unwrap_or_default(), flags, Mode::empty()),
        None => rustix::fs::open(path, flags, Mode::empty()),
    };
    let fd = match opened {
        Ok(fd) => fd,
        Err(rustix::io::Errno::LOOP) if is_symlink(dir, path) => {
            return Err(FileError::Symlink { path: shown() })
        }
        Err(e) => return Err(FileError::Open { path: shown(), source: e.into() }),
    };
    let st = rustix::fs::fstat(&fd).map_err(|e| FileError::Read { path: shown(), source: e.into() })?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(FileError::NotRegular { path: shown() });
    }
    if st.st_size as u64 > limit {
        return Err(FileError::TooLarge { path: shown(), limit });
    }
    let mut bytes = Vec::with_capacity(st.st_size as usize);
    File::from(fd)
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| FileError::Read { path: shown(), source })?;
    if bytes.len() as u64 > limit {
        return Err(FileError::TooLarge { path: shown(), limit });
    }
    Ok(Contents { bytes, perms: Perms::of(&st) })
}

/// ELOOP from `O_NOFOLLOW` means a symlink only when the name is one.
fn is_symlink(dir: Option<BorrowedFd<'_>>, path: &Path) -> bool {
    let st = match dir {
        Some(dir) => rustix::fs::statat(dir, path.file_name().unwrap_or_default(), AtFlags::SYMLINK_NOFOLLOW),
        None => rustix::fs::lstat(path),
    };
    st.is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
}

/// [`read`] for a text file that may be missing: `None` when it is.
///
/// # Errors
/// As [`read`], and text that is not UTF-8.
pub(crate) fn read_text(path: &Path, limit: u64) -> Result<Option<String>, FileError> {
    match read(None, path, limit) {
        Ok(c) => {
            String::from_utf8(c.bytes).map(Some).map_err(|_| FileError::NotUtf8 { path: path.to_path_buf() })
        }
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether a write must be on disk before the rename makes it visible.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Durability {
    /// fsync the file before the rename and the dir after it: engine
    /// configs, rare writes that must survive a crash.
    Durable,
    /// No fsync: a bundle's `config.json`, the engine's scratch copy,
    /// written on every container start.
    Scratch,
}

/// Replaces `name` inside the directory `dir` with `bytes`, atomically: a
/// temporary file `.NAME.oci-tmpfs-hook-tmp` with `perms` is written and
/// renamed over `name`. `shown` is the path used in the error.
///
/// # Errors
/// A failed create, write, fsync or rename; the temporary file is removed
/// and `name` is unchanged.
pub(crate) fn replace_at(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    shown: &Path,
    bytes: &[u8],
    perms: Perms,
    durability: Durability,
) -> Result<(), FileError> {
    replace_through(dir, &temp_name(name, ""), name, shown, bytes, perms, durability)
}

/// The temporary file a replace of `name` writes: `.NAME.oci-tmpfs-hook-tmp`,
/// with `tag` (a writer's own, or none) before `.oci-tmpfs-hook-tmp`.
fn temp_name(name: &OsStr, tag: &str) -> std::ffi::OsString {
    let mut temp = std::ffi::OsString::from(".");
    temp.push(name);
    temp.push(tag);
    temp.push(".oci-tmpfs-hook-tmp");
    temp
}

/// [`replace_at`] through the temporary file `temp` in `dir`.
fn replace_through(
    dir: BorrowedFd<'_>,
    temp: &OsStr,
    name: &OsStr,
    shown: &Path,
    bytes: &[u8],
    perms: Perms,
    durability: Durability,
) -> Result<(), FileError> {
    let result = write_then_rename(dir, temp, name, bytes, perms, durability);
    if result.is_err() {
        let _ = rustix::fs::unlinkat(dir, temp, AtFlags::empty());
    }
    result.map_err(|source| FileError::Write { path: shown.to_path_buf(), source })
}

/// [`replace`] for a file that several processes may write at once, such
/// as the runtime-version cache that every start finding it missing fills
/// (no fsync). Each writer has its own temporary file,
/// `.NAME.PID-N.oci-tmpfs-hook-tmp`. With one name for all, a writer
/// removes another's temporary file as stale and makes its own, and the
/// other's rename then puts that new file in place while it is still empty.
///
/// # Errors
/// As [`replace`].
pub(crate) fn replace_shared(path: &Path, bytes: &[u8], perms: Perms) -> Result<(), FileError> {
    static WRITES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let (dir, name) = parent_dir(path)?;
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temp = temp_name(name, &format!(".{}-{n}", std::process::id()));
    replace_through(dir.as_fd(), &temp, name, path, bytes, perms, Durability::Scratch)
}

fn write_then_rename(
    dir: BorrowedFd<'_>,
    temp: &OsStr,
    name: &OsStr,
    bytes: &[u8],
    perms: Perms,
    durability: Durability,
) -> io::Result<()> {
    let create = || {
        rustix::fs::openat(
            dir,
            temp,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
    };
    // A temporary file left by a run that was killed is removed, once.
    let fd = match create() {
        Err(rustix::io::Errno::EXIST) => {
            rustix::fs::unlinkat(dir, temp, AtFlags::empty())?;
            create()?
        }
        other => other?,
    };
    if let Some((uid, gid)) = perms.owner {
        // Only root may give a file away; anyone else keeps their own.
        match rustix::fs::fchown(
            &fd,
            Some(rustix::fs::Uid::from_raw(uid)),
            Some(rustix::fs::Gid::from_raw(gid)),
        ) {
            Err(e) if e != rustix::io::Errno::PERM => return Err(e.into()),
            _ => {}
        }
    }
    rustix::fs::fchmod(&fd, Mode::from_raw_mode(perms.mode))?;
    let mut file = File::from(fd);
    file.write_all(bytes)?;
    if durability == Durability::Durable {
        file.sync_all()?;
    }
    rustix::fs::renameat(dir, temp, dir, name)?;
    if durability == Durability::Durable {
        let d = rustix::fs::openat(
            dir,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        rustix::fs::fsync(&d)?;
    }
    Ok(())
}

/// [`replace_at`] for a path: its parent dir is opened first.
///
/// # Errors
/// As [`replace_at`], and a path without a parent or file name.
pub(crate) fn replace(
    path: &Path,
    bytes: &[u8],
    perms: Perms,
    durability: Durability,
) -> Result<(), FileError> {
    let (dir, name) = parent_dir(path)?;
    replace_at(dir.as_fd(), name, path, bytes, perms, durability)
}

/// The directory `path` is in, opened ([`open_dir`]; `.` for a bare name),
/// and its file name.
///
/// # Errors
/// A path without a parent or file name, or a parent that cannot be opened.
fn parent_dir(path: &Path) -> Result<(OwnedFd, &OsStr), FileError> {
    let write_err = |source| FileError::Write { path: path.to_path_buf(), source };
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(write_err(io::Error::other("no file name")));
    };
    let parent = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
    Ok((open_dir(parent).map_err(write_err)?, name))
}

/// An `O_PATH` handle on a directory, for the `*at` calls above.
///
/// # Errors
/// The directory cannot be opened.
pub(crate) fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(path, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?)
}

/// This binary's canonical path (what the engines and bundles name): the
/// link `/proc/self/exe`, which the kernel writes absolute and free of
/// symlinks. (`canonicalize` on it only repeated that: a `readlink` per
/// component, 7 system calls of every wrapper run.)
///
/// # Errors
/// `/proc/self/exe` cannot be read, or the binary was removed since it
/// started (the link then ends in " (deleted)").
pub(crate) fn this_binary() -> io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    if exe.as_os_str().as_encoded_bytes().ends_with(b" (deleted)") && !exe.exists() {
        return Err(io::Error::new(io::ErrorKind::NotFound, format!("{} was removed", exe.display())));
    }
    Ok(exe)
}

/// Serialises `doc` in the style of `original`: its indentation unit (two
/// spaces for a new, empty file; a tab for `runc spec`'s files), or one line
/// when the original was one line; a trailing newline when the original had
/// one (or was empty).
pub(crate) fn render_json(doc: &Value, original: &str) -> String {
    let mut text = render_value(doc, indent_unit(original), 0);
    if original.is_empty() || original.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// The indentation unit of a JSON file: two spaces for a new, empty file,
/// the first indentation found (a tab for `runc spec`'s files), or `None`
/// when the file is one line.
pub(crate) fn indent_unit(original: &str) -> Option<&str> {
    if original.trim().is_empty() {
        Some("  ")
    } else if !original.trim().contains('\n') {
        None
    } else {
        let unit = original
            .lines()
            .skip(1)
            .map(|l| &l[..l.len() - l.trim_start().len()])
            .find(|ws| !ws.is_empty())
            .unwrap_or("  ");
        Some(unit)
    }
}

/// `value` as JSON, indented by `unit` (one line when `None`) as if it stood
/// `depth` levels deep in its document: byte for byte what serde_json's
/// compact or pretty writer gives (a test holds the two equal), written
/// directly. A string that needs no escape is copied whole instead of being
/// scanned byte by byte, which halves the instructions the spec executor
/// spends writing its `mounts` (docs/design.md#start-up).
pub(crate) fn render_value(value: &Value, unit: Option<&str>, depth: usize) -> String {
    let mut out = String::with_capacity(256);
    write_value(&mut out, value, unit, depth);
    out
}

fn write_value(out: &mut String, value: &Value, unit: Option<&str>, depth: usize) {
    // Before an item, and before the closing bracket of a non-empty one.
    let newline = |out: &mut String, depth: usize| {
        if let Some(unit) = unit {
            out.push('\n');
            (0..depth).for_each(|_| out.push_str(unit));
        }
    };
    match value {
        Value::String(s) => write_str(out, s),
        Value::Array(items) if !items.is_empty() => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                write_value(out, item, unit, depth + 1);
            }
            newline(out, depth);
            out.push(']');
        }
        Value::Object(map) if !map.is_empty() => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                write_str(out, key);
                out.push_str(if unit.is_some() { ": " } else { ":" });
                write_value(out, item, unit, depth + 1);
            }
            newline(out, depth);
            out.push('}');
        }
        // null, a boolean, a number, `[]`, `{}`: as serde_json writes them.
        other => out.push_str(&other.to_string()),
    }
}

/// A JSON string: copied between quotes when serde_json would escape none
/// of its characters (a quote, a backslash, a control character), else as
/// serde_json escapes it.
fn write_str(out: &mut String, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        out.push_str(&serde_json::to_string(s).expect("a string serialises"));
    }
}

/// A fresh, empty directory for a unit test, named by `name` and this
/// process.
#[cfg(test)]
pub(crate) fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("oth-unit-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Any JSON value, with strings that hold quotes, backslashes, brackets,
/// control characters and escapes, nested a few levels: for the tests of
/// what reads and writes JSON text.
#[cfg(test)]
pub(crate) fn any_json() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e9f64..1e9).prop_map(Value::from),
        "[a-z\"\\\\{}\\[\\]:, \n\t\u{1}\u{7f}é\u{1F600}]{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map("[a-z\"\\\\{\n]{0,4}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::os::unix::fs::PermissionsExt;

    /// Writers that replace one file at once (the runtime-version cache,
    /// filled by whichever starts find it missing) each leave it whole: a
    /// reader meanwhile sees one writer's complete bytes, never an empty or
    /// cut file, and no temporary file is left. With one temporary name for
    /// all, a writer could unlink another's temporary file and make its
    /// own, which the other's rename then moved into place still empty.
    #[test]
    fn concurrent_writers_leave_the_file_whole() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let dir = temp_dir("shared");
        let file = dir.join("cache");
        let lines: Vec<Vec<u8>> =
            (0..4).map(|w| format!("crun version 1.{w}.{}", "9".repeat(64)).into_bytes()).collect();
        let done = AtomicUsize::new(0);
        let (mut reads, mut torn) = (0u32, Vec::new());
        std::thread::scope(|s| {
            for line in &lines {
                let (file, done) = (&file, &done);
                s.spawn(move || {
                    for _ in 0..2000 {
                        let _ = replace_shared(file, line, Perms::new(0o600));
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                });
            }
            while done.load(Ordering::Relaxed) < lines.len() {
                if let Ok(got) = std::fs::read(&file) {
                    reads += 1;
                    if !lines.contains(&got) {
                        torn.push(got);
                    }
                }
            }
        });
        let shown = torn.first().map(|t| String::from_utf8_lossy(t).into_owned());
        assert!(
            torn.is_empty(),
            "{} of {reads} reads were no writer's whole bytes, e.g. {shown:?}",
            torn.len()
        );
        assert!(reads > 100, "the reads overlapped the writes: {reads}");
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["cache"], "no temporary file is left");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn reader_refuses_what_is_not_a_bounded_regular_file() {
        let dir = temp_dir("read");
        let file = dir.join("f");
        std::fs::write(&file, "hello").unwrap();
        assert_eq!(read(None, &file, 5).unwrap().bytes, b"hello");
        assert!(matches!(read(None, &file, 4), Err(FileError::TooLarge { limit: 4, .. })));
        std::os::unix::fs::symlink(&file, dir.join("link")).unwrap();
        assert!(matches!(read(None, &dir.join("link"), 5), Err(FileError::Symlink { .. })));
        rustix::fs::mknodat(rustix::fs::CWD, dir.join("fifo"), FileType::Fifo, Mode::from_raw_mode(0o600), 0)
            .unwrap();
        // Returns at once (O_NONBLOCK) instead of waiting for a writer.
        assert!(matches!(read(None, &dir.join("fifo"), 5), Err(FileError::NotRegular { .. })));
        assert!(matches!(read(None, &dir, 5), Err(FileError::NotRegular { .. })));
        let missing = read(None, &dir.join("missing"), 5).unwrap_err();
        assert!(missing.is_not_found(), "{missing}");
        assert_eq!(read_text(&dir.join("missing"), 5).unwrap(), None);
        std::fs::write(dir.join("bin"), [0xff, 0xfe]).unwrap();
        assert!(matches!(read_text(&dir.join("bin"), 5), Err(FileError::NotUtf8 { .. })));
        let d = open_dir(&dir).unwrap();
        assert_eq!(read(Some(d.as_fd()), &dir.join("f"), 5).unwrap().bytes, b"hello");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn writer_replaces_keeps_mode_and_leaves_no_temp() {
        let dir = temp_dir("write");
        let file = dir.join("f.json");
        std::fs::write(&file, "old").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        let perms = Perms::of_path(&file).unwrap();
        for durability in [Durability::Durable, Durability::Scratch] {
            replace(&file, b"new", perms, durability).unwrap();
            assert_eq!(std::fs::read(&file).unwrap(), b"new");
            assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o7777, 0o640);
        }
        replace(&dir.join("fresh"), b"x", Perms::new(0o644), Durability::Durable).unwrap();
        assert_eq!(std::fs::metadata(dir.join("fresh")).unwrap().permissions().mode() & 0o7777, 0o644);
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 2, "no temporary file left: {names:?}");
        // One left by a run that was killed is replaced, whatever it held.
        std::fs::write(dir.join(".f.json.oci-tmpfs-hook-tmp"), "stale").unwrap();
        replace(&file, b"newer", perms, Durability::Scratch).unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"newer");
        assert!(!dir.join(".f.json.oci-tmpfs-hook-tmp").exists());
        assert!(matches!(
            replace(&dir.join("no/such/dir/f"), b"x", Perms::new(0o644), Durability::Scratch),
            Err(FileError::Write { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn json_keeps_the_style() {
        let doc = json!({"a": [1]});
        let cases: &[(&str, &str, &str)] = &[
            ("new file", "", "{\n  \"a\": [\n    1\n  ]\n}\n"),
            ("one line", "{\"b\": 2}", "{\"a\":[1]}"),
            ("one line with newline", "{\"b\": 2}\n", "{\"a\":[1]}\n"),
            ("tabs", "{\n\t\"b\": 2\n}", "{\n\t\"a\": [\n\t\t1\n\t]\n}"),
            ("four spaces", "{\n    \"b\": 2\n}\n", "{\n    \"a\": [\n        1\n    ]\n}\n"),
        ];
        for (name, original, want) in cases {
            assert_eq!(render_json(&doc, original), *want, "case {name}");
        }
    }

    proptest::proptest! {
        /// The direct writer spells every value as serde_json's own
        /// writers do, at any depth and in any indentation style.
        #[test]
        fn render_value_writes_what_serde_json_writes(
            value in any_json(),
            unit in proptest::option::of(proptest::prop_oneof!["  ", "\t", "    "]),
            depth in 0..3usize,
        ) {
            let mut out = Vec::new();
            match unit.as_deref() {
                Some(unit) => {
                    let fmt = serde_json::ser::PrettyFormatter::with_indent(unit.as_bytes());
                    serde::Serialize::serialize(&value, &mut serde_json::Serializer::with_formatter(&mut out, fmt)).unwrap();
                }
                None => serde_json::to_writer(&mut out, &value).unwrap(),
            }
            let text = String::from_utf8(out).unwrap();
            let serde = match unit.as_deref() {
                Some(unit) => text.replace('\n', &format!("\n{}", unit.repeat(depth))),
                None => text,
            };
            proptest::prop_assert_eq!(render_value(&value, unit.as_deref(), depth), serde);
        }
    }
}
