//! `oci-tmpfs-hook inject`: add the hook to a bundle for plain runc/crun.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::bundle::{self, HookEntry};
use crate::stage::Stage;

/// Runs `inject`.
pub fn run(bundle_dir: &Path, stage: Stage, hook_path: Option<&Path>, config: Option<&Path>) -> ExitCode {
    let binary: PathBuf = match hook_path {
        Some(p) if p.is_absolute() => p.to_path_buf(),
        Some(p) => {
            eprintln!("oci-tmpfs-hook: --hook-path {} must be absolute", p.display());
            return ExitCode::from(2);
        }
        None => match std::env::current_exe().and_then(|p| p.canonicalize()) {
            Ok(p) => p,
            Err(e) => return super::fail(&e),
        },
    };
    let entry = HookEntry::for_stage(&binary, stage, config);
    match bundle::inject(bundle_dir, stage, &entry) {
        Ok(true) => {
            println!("added {} at {stage} to {}", binary.display(), bundle_dir.join("config.json").display());
            ExitCode::SUCCESS
        }
        Ok(false) => {
            println!(
                "{} already runs {}; unchanged",
                bundle_dir.join("config.json").display(),
                binary.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => super::fail(&e),
    }
}
