//! The hook, the fd executor: run by the runtime at a container's start, it
//! reads the state on stdin and the bundle's `config.json`, takes the plan
//! ([`plan::plan_for`]) and carries it out by fd inside the container's
//! mount namespace: [`apply`] is the order of effects, behind
//! [`apply::Mounter`]; [`System`] makes them with the syscall layer
//! ([`crate::sys`]: `ns` joins the namespace, `resolve` walks the rootfs,
//! `mount` builds and attaches tmpfs mounts), and [`copyup`] fills each
//! tmpfs with what its directory held. An engine-made `/dev/shm` is proven
//! on the host first ([`crate::sys::engine_shm`]). Nothing here decides
//! what to mount: that is the plan's.

pub(crate) mod apply;
pub(crate) mod copyup;
pub(crate) mod system;

use std::collections::HashMap;
use std::io;

pub(crate) use system::System;

use crate::input::{self, InputError};
use crate::plan::{self, Action, ShmSource, ShmWay};
use crate::settings::Settings;
use crate::stage::Stage;
use crate::sys::{engine_shm, ns, SysError};

/// Everything that can stop the hook after the host config is read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HookError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Plan(#[from] plan::PlanError),
    #[error(transparent)]
    Sys(#[from] SysError),
}

/// Runs the hook for the container whose state is on `stdin`, registered at
/// `stage` (none: inferred), with the host config `settings`.
///
/// # Errors
/// The state or the bundle cannot be read, no plan can be made, or
/// carrying it out failed.
pub(crate) fn run(stage: Option<Stage>, settings: &Settings, stdin: impl io::Read) -> Result<(), HookError> {
    let state = input::read_state(stdin)?;
    crate::logger::set_container(&state.id);
    // Before the bundle is read: at startContainer nothing can be done.
    let entry = stage.map(ns::NsEntry::at).transpose()?;
    let spec = input::read_spec(&state.bundle)?;
    let host = input::host_facts()?;
    let make =
        |user: &plan::UserFacts| plan::plan_for(&spec, state.annotations.as_ref(), settings, host, user);
    let plan = make(&plan::UserFacts::HOOK)?;
    log::debug!("{}", plan.why);
    // A plan that asks what only the image can say is logged once it is
    // finished (`apply::apply`): its notes would be logged twice.
    if plan.question().is_none() {
        crate::report::decision(&plan);
    }
    if !plan.has_work() {
        return Ok(());
    }
    let entry = match entry {
        Some(e) => e,
        None => ns::detect_entry(state.pid)?,
    };
    let rootfs = input::rootfs_path(&spec, &state.bundle).expect("a plan with actions has a root.path");
    let engine_shm = engine_shm(&plan, &state.id, &spec, state.annotations.as_ref())?;
    let labelled = plan.actions.iter().any(|a| match a {
        Action::MountTmpfs { tmpfs, .. } | Action::Shm { tmpfs, .. } => tmpfs.label.is_some(),
    });
    let mut system = System::new(engine_shm, labelled);
    let report = apply::apply(&mut system, &plan, &make, entry, state.pid, &rootfs)?;
    crate::report::outcome(&report.notes, &report.done);
    Ok(())
}

/// For a `/dev/shm` the spec binds from the host and the plan grows: whether
/// that source is the engine's shm for this container, proven on the host
/// before the hook joins the container (docs/design.md#engine-shm): a
/// user's volume at `/dev/shm` is never grown.
fn engine_shm(
    plan: &plan::Plan,
    id: &str,
    spec: &crate::oci::Spec,
    state_annotations: Option<&HashMap<String, String>>,
) -> Result<Option<Result<u64, plan::Note>>, HookError> {
    let source = plan.actions.iter().find_map(|a| match a {
        Action::Shm { existing: ShmSource::Bind { source }, way: ShmWay::Grow, .. } => Some(source.as_str()),
        _ => None,
    });
    let Some(source) = source else { return Ok(None) };
    let ids = engine_shm::container_ids(Some(id), spec, state_annotations);
    Ok(Some(engine_shm::prove(source, &ids)?.map(|(_, dev)| dev)))
}
