//! A registration change, generic over the engine (for `setup` and `node`):
//! [`propose`] asks the engine ([`super::Registrar`]) which file it edits and
//! what the file becomes, and compares; [`write()`] backs up a file it changes (the
//! engine's own config files, not a file that is all ours) and writes the
//! result atomically and durably ([`crate::files::replace`]: temporary file,
//! fsync, rename, mode and owner kept); [`diff`] and the `*_lines` methods
//! show a change. Nothing here knows an engine's file format, and nothing
//! here restarts a daemon.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::{read_engine_config, Engine, EngineConfigError, Registration, Request, Way};
use crate::files::{self, Durability, Perms};

/// Suffix of the backup written before a config file is changed.
pub(crate) const BACKUP_SUFFIX: &str = ".bak-oci-tmpfs-hook";
/// The mode of a file setup creates.
const NEW_FILE_MODE: u32 = 0o644;

/// One file to create, replace or remove.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Change {
    pub path: PathBuf,
    /// Current contents, `None` when the file does not exist.
    pub before: Option<String>,
    /// New contents, `None` to remove the file.
    pub after: Option<String>,
    /// Where the current contents are saved first.
    pub backup: Option<PathBuf>,
}

impl Change {
    /// `ENGINE: created|updated|removed PATH (backup: B)`; with `would`, as
    /// what would be done.
    pub(crate) fn line(&self, engine: Engine, would: bool) -> String {
        let action = match (&self.before, &self.after, would) {
            (None, _, false) => "created",
            (None, _, true) => "would create",
            (Some(_), None, false) => "removed",
            (Some(_), None, true) => "would remove",
            (Some(_), Some(_), false) => "updated",
            (Some(_), Some(_), true) => "would update",
        };
        let backup = self.backup.as_ref().map(|b| format!(" (backup: {})", b.display())).unwrap_or_default();
        format!("{engine}: {action} {}{backup}", self.path.display())
    }
}

/// What a registration change does for one engine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ChangeSet {
    /// Files that change.
    pub changes: Vec<Change>,
    /// Files looked at that are already as they should be.
    pub unchanged: Vec<PathBuf>,
    /// Things the user should know (which dir was picked and why...).
    pub notes: Vec<String>,
}

impl ChangeSet {
    /// `ENGINE: NOTE`, one per note.
    pub(crate) fn note_lines(&self, engine: Engine) -> Vec<String> {
        self.notes.iter().map(|n| format!("{engine}: {n}")).collect()
    }

    /// `ENGINE: PATH is already set up; unchanged` (with `undo`: has no
    /// registration), one per file left as it was.
    pub(crate) fn unchanged_lines(&self, engine: Engine, undo: bool) -> Vec<String> {
        let state = if undo { "has no registration" } else { "is already set up" };
        self.unchanged.iter().map(|p| format!("{engine}: {} {state}; unchanged", p.display())).collect()
    }
}

/// Reads the engine's file and works out the change: `reg` added, or with
/// `req.undo` removed. Writes nothing.
///
/// # Errors
/// Unreadable or malformed files, or a config setup will not edit.
pub(crate) fn propose(req: &Request<'_>, reg: &Registration<'_>) -> Result<ChangeSet, EngineConfigError> {
    let engine = req.engine.registrar();
    let located = engine.config_file(&req.site)?;
    let mut plan = ChangeSet { notes: located.note.into_iter().collect(), ..ChangeSet::default() };
    let path = located.path;
    let before = read_engine_config(&path)?;
    let after = if req.undo {
        engine.remove(&path, before.as_deref())?
    } else {
        engine.add(&path, before.as_deref(), reg)?
    };
    plan.notes.extend(engine.notes(&path, before.as_deref()));
    if before == after {
        plan.unchanged.push(path);
        return Ok(plan);
    }
    // The engine's own file is saved before setup first changes it; undo
    // only takes out what setup put in, so it needs no backup of its own. A
    // hooks-dir file is all ours: nothing to save.
    let backup = match (&before, req.engine.way()) {
        (Some(text), Way::RuntimeWrapper) if !req.undo => Some(backup_path(&path, text)?),
        _ => None,
    };
    plan.changes.push(Change { path, before, after, backup });
    Ok(plan)
}

/// `FILE.bak-oci-tmpfs-hook`, or `.1`, `.2`... when that holds something
/// else; an existing backup with the same contents is reused.
fn backup_path(path: &Path, contents: &str) -> Result<PathBuf, EngineConfigError> {
    let base = format!("{}{BACKUP_SUFFIX}", path.display());
    for n in 0..1000 {
        let candidate = PathBuf::from(if n == 0 { base.clone() } else { format!("{base}.{n}") });
        match read_engine_config(&candidate) {
            Ok(None) => return Ok(candidate),
            Ok(Some(old)) if old == contents => return Ok(candidate),
            _ => continue,
        }
    }
    Err(EngineConfigError::shape(path, "a thousand backups exist already; clean them up"))
}

/// Writes a change set: backups first, then each file replaced atomically.
///
/// # Errors
/// A failed write; files already replaced stay replaced (each has its backup).
pub(crate) fn write(plan: &ChangeSet) -> Result<(), EngineConfigError> {
    for change in &plan.changes {
        let write_err = |source| files::FileError::Write { path: change.path.clone(), source };
        let perms = Perms::of_path(&change.path).unwrap_or(Perms::new(NEW_FILE_MODE));
        if let (Some(backup), Some(before)) = (&change.backup, &change.before) {
            if read_engine_config(backup)?.as_deref() != Some(before.as_str()) {
                files::replace(backup, before.as_bytes(), perms, Durability::Durable)?;
            }
        }
        match &change.after {
            Some(text) => {
                if let Some(parent) = change.path.parent() {
                    fs::create_dir_all(parent).map_err(write_err)?;
                }
                files::replace(&change.path, text.as_bytes(), perms, Durability::Durable)?;
            }
            None => match fs::remove_file(&change.path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(write_err(e).into()),
                _ => {}
            },
        }
    }
    Ok(())
}

/// A line diff of a change, `diff -u` style with three lines of context.
pub(crate) fn diff(change: &Change) -> String {
    let old: Vec<&str> = change.before.as_deref().map_or(Vec::new(), |t| t.lines().collect());
    let new: Vec<&str> = change.after.as_deref().map_or(Vec::new(), |t| t.lines().collect());
    let mut out = String::new();
    let name = change.path.display();
    let _ =
        writeln!(out, "--- {}", if change.before.is_some() { name.to_string() } else { "/dev/null".into() });
    let _ =
        writeln!(out, "+++ {}", if change.after.is_some() { name.to_string() } else { "/dev/null".into() });
    // Longest common subsequence table (config files are small).
    let (n, m) = (old.len(), new.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] =
                if old[i] == new[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let mut ops: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && old[i] == new[j] {
            ops.push((' ', old[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            ops.push(('-', old[i]));
            i += 1;
        } else {
            ops.push(('+', new[j]));
            j += 1;
        }
    }
    const CONTEXT: usize = 3;
    let near_change = |k: usize| {
        let lo = k.saturating_sub(CONTEXT);
        let hi = (k + CONTEXT + 1).min(ops.len());
        ops[lo..hi].iter().any(|(c, _)| *c != ' ')
    };
    let mut skipped = false;
    for (k, (c, line)) in ops.iter().enumerate() {
        if *c == ' ' && !near_change(k) {
            skipped = true;
            continue;
        }
        if skipped {
            out.push_str("@@\n");
            skipped = false;
        }
        let _ = writeln!(out, "{c}{line}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const WRAPPER: &str = "/usr/local/bin/oci-tmpfs-runtime";
    const HOOK: &str = "/usr/local/bin/oci-tmpfs-hook";

    fn temp_root(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("oth-setup-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn args(engine: Engine, root: &Path) -> Request<'_> {
        Request { engine, site: super::super::Site { root, config: None }, undo: false }
    }

    fn reg() -> Registration<'static> {
        Registration {
            hook: Path::new(HOOK),
            wrapper: Path::new(WRAPPER),
            default: false,
            stage: crate::stage::Stage::Prestart,
        }
    }

    #[test]
    fn plan_apply_docker_backup_mode_idempotent_undo() {
        let root = temp_root("docker");
        let path = root.join("etc/docker/daemon.json");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let original = "{\n  \"debug\": true\n}\n";
        fs::write(&path, original).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        let o = args(Engine::Docker, &root);
        let p = propose(&o, &reg()).unwrap();
        assert_eq!(p.changes.len(), 1);
        let backup = root.join("etc/docker/daemon.json.bak-oci-tmpfs-hook");
        assert_eq!(p.changes[0].backup.as_deref(), Some(backup.as_path()));
        write(&p).unwrap();
        assert_eq!(fs::read_to_string(&backup).unwrap(), original);
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o7777, 0o600);
        assert_eq!(fs::metadata(&backup).unwrap().permissions().mode() & 0o7777, 0o600);
        let written = fs::read_to_string(&path).unwrap();
        assert!(written.contains("\"oci-tmpfs\""));
        let again = propose(&o, &reg()).unwrap();
        assert!(again.changes.is_empty() && again.unchanged == [path.clone()], "{again:?}");
        let undo = propose(&Request { undo: true, ..o }, &reg()).unwrap();
        write(&undo).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), original);
        assert_eq!(fs::read_to_string(&backup).unwrap(), original);
        let names: Vec<_> =
            fs::read_dir(root.join("etc/docker")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 2, "no temp file, no second backup: {names:?}");
        // a later setup over a changed file keeps the first backup and adds another
        fs::write(&path, "{\"debug\": false}\n").unwrap();
        let p = propose(&o, &reg()).unwrap();
        assert_eq!(p.changes[0].backup, Some(PathBuf::from(format!("{}.1", backup.display()))));
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn plan_podman_and_crio_dirs() {
        let root = temp_root("hooks");
        let p = propose(&args(Engine::Podman, &root), &reg()).unwrap();
        let path = root.join("usr/share/containers/oci/hooks.d/oci-tmpfs-hook.json");
        assert_eq!(p.changes[0].path, path);
        write(&p).unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            crate::engine::hooks_dir::hooks_json(Path::new(HOOK), crate::stage::Stage::Prestart)
        );
        assert!(propose(&args(Engine::Podman, &root), &reg()).unwrap().changes.is_empty());
        fs::create_dir_all(root.join("etc/crio/crio.conf.d")).unwrap();
        fs::write(
            root.join("etc/crio/crio.conf.d/50-hooks.conf"),
            "[crio.runtime]\nhooks_dir = [\"/etc/hooks\"]\n",
        )
        .unwrap();
        let p = propose(&args(Engine::Crio, &root), &reg()).unwrap();
        assert_eq!(p.changes[0].path, root.join("etc/hooks/oci-tmpfs-hook.json"));
        let undo = propose(&Request { undo: true, ..args(Engine::Podman, &root) }, &reg()).unwrap();
        assert_eq!(undo.changes[0].after, None);
        write(&undo).unwrap();
        assert!(!path.exists());
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn diff_shows_changed_lines_with_context() {
        let change = Change {
            path: PathBuf::from("/f"),
            before: Some("a\nb\nc\nd\ne\nf\ng\nh\n".into()),
            after: Some("a\nb\nc\nd\nE\nf\ng\nh\n".into()),
            backup: None,
        };
        assert_eq!(diff(&change), "--- /f\n+++ /f\n@@\n b\n c\n d\n-e\n+E\n f\n g\n h\n");
    }
}
