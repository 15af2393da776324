//! `oci-tmpfs-hook hook`: the hook itself ([`crate::hook`]), with the host
//! config's `on_error` policy.

use std::io;
use std::path::Path;
use std::process::ExitCode;

use clap::Args;

use super::HostConfigArg;
use crate::error::{chain, Error};
use crate::host_config::OnError;
use crate::stage::Stage;

#[derive(Clone, Debug, Args)]
pub(crate) struct HookArgs {
    /// The stage the hook is registered at. Without it the stage is
    /// inferred, and refused when it cannot be told safely.
    #[arg(long, value_parser = clap::value_parser!(Stage))]
    pub stage: Option<Stage>,
    #[command(flatten)]
    pub config: HostConfigArg,
}

/// The hook's command line as the hooks JSON, `inject` and the NRI
/// adjustment write it (`hook [--stage S] [--config PATH]`, each at most
/// once), read without clap: building clap's command set was half of the
/// instructions of a hook run with nothing to do (docs/design.md#start-up).
/// `None` for anything else, which clap then parses and, if it must,
/// refuses with its usage error.
pub(crate) fn registered_argv(args: &[std::ffi::OsString]) -> Option<HookArgs> {
    let (first, rest) = args.split_first()?;
    if first != "hook" || rest.len() % 2 != 0 {
        return None;
    }
    let mut out = HookArgs { stage: None, config: HostConfigArg::default() };
    for pair in rest.chunks_exact(2) {
        let value = pair[1].to_str().filter(|v| !v.is_empty() && !v.starts_with('-'))?;
        match pair[0].to_str()? {
            "--stage" if out.stage.is_none() => out.stage = Some(value.parse().ok()?),
            "--config" if out.config.path.is_none() => out.config.path = Some(value.into()),
            _ => return None,
        }
    }
    Some(out)
}

/// Runs the hook. With `on_error = "warn"` a failure after the host config
/// is read is logged and the hook exits 0.
///
/// # Errors
/// The host config cannot be used, or (`on_error = "fail"`) anything after.
pub(crate) fn run(args: &HookArgs) -> Result<ExitCode, Error> {
    let host_config = args.config.source(Path::new("/")).read()?;
    crate::process::logger::configure(host_config.log_level.filter(), host_config.log_file.as_deref());
    match crate::hook::run(args.stage, &host_config, io::stdin().lock()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if host_config.on_error == OnError::Warn => {
            log::warn!("{} (on_error = \"warn\": the container starts without these mounts)", chain(&e));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::registered_argv;
    use crate::cli::tests::parse_from;
    use crate::cli::Command;

    /// What the fast path reads is what clap reads; what it does not read, it
    /// leaves to clap.
    #[test]
    fn registered_argv_reads_what_clap_reads() {
        let read: &[&[&str]] = &[
            &["hook"],
            &["hook", "--stage", "prestart"],
            &["hook", "--stage", "createContainer", "--config", "/etc/x.toml"],
            &["hook", "--config", "/c.toml", "--stage", "createRuntime"],
            &["hook", "--stage", "startContainer"],
        ];
        for argv in read {
            let os: Vec<OsString> = argv.iter().map(OsString::from).collect();
            let fast = registered_argv(&os).unwrap_or_else(|| panic!("{argv:?} not read"));
            let Command::Hook(slow) = parse_from(argv).unwrap().command else { panic!("{argv:?}") };
            assert_eq!(format!("{fast:?}"), format!("{slow:?}"), "{argv:?}");
        }
        let left: &[&[&str]] = &[
            &[],
            &["explain"],
            &["hook", "--stage"],
            &["hook", "--stage", "bogus"],
            &["hook", "--stage=prestart"],
            &["hook", "--stage", "prestart", "--stage", "prestart"],
            &["hook", "--config", "--stage"],
            &["hook", "--help", "x"],
            &["hook", "--verbose", "1"],
            &["hook", "--config", ""],
        ];
        for argv in left {
            let os: Vec<OsString> = argv.iter().map(OsString::from).collect();
            assert!(registered_argv(&os).is_none(), "{argv:?} read without clap");
        }
    }
}
