//! `oci-tmpfs-hook doctor`: print one line per check, exit 0 when all is well.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::doctor::{self, Context};
use crate::settings::DEFAULT_CONFIG_PATH;
use crate::setup;

/// Runs `doctor`.
pub fn run(config: Option<&Path>, root: Option<&Path>) -> ExitCode {
    let binary = match super::setup::this_binary() {
        Ok(p) => p,
        Err(e) => return super::fail(&e),
    };
    let root_dir = root.map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
    let (config, config_explicit) = match config {
        Some(p) => (p.to_path_buf(), true),
        None => (setup::rooted(&root_dir, Path::new(DEFAULT_CONFIG_PATH)), false),
    };
    let search_path = root.is_none_or(|r| r == Path::new("/"));
    let ctx = Context { root: root_dir, binary, config, config_explicit, search_path };
    let checks = doctor::run_all(&ctx);
    for c in &checks {
        println!("{}", c.line());
    }
    let problems = checks.iter().filter(|c| !c.ok).count();
    if problems == 0 {
        println!("all well");
        ExitCode::SUCCESS
    } else {
        println!("{problems} problem(s)");
        ExitCode::from(super::EXIT_FAILED)
    }
}
