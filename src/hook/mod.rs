//! The hook, the fd executor: run by the runtime at a container's start, it
//! reads the state on stdin and the bundle's `config.json`, begins the plan
//! ([`plan::begin`]), finishes it from what the container will see
//! ([`apply::open`]) and carries it out by fd inside the container's
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

use crate::host_config::HostConfig;
use crate::input::{self, InputError};
use crate::plan::{self, Action, ShmSource, ShmWay};
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
/// `stage` (none: inferred), with `host_config`.
///
/// # Errors
/// The state or the bundle cannot be read, no plan can be made, or
/// carrying it out failed.
pub(crate) fn run(
    stage: Option<Stage>,
    host_config: &HostConfig,
    stdin: impl io::Read,
) -> Result<(), HookError> {
    let state = input::read_state(stdin)?;
    crate::process::logger::set_container(&state.id);
    // Before the bundle is read: at startContainer nothing can be done.
    let entry = stage.map(ns::NsEntry::at).transpose()?;
    let spec = input::read_spec(&state.bundle)?;
    let host = input::host_facts()?;
    let begun = plan::begin(&spec, state.annotations.as_ref(), host_config, host, &plan::UserFacts::HOOK)?;
    // A plan that asks what only the image can say is logged once it is
    // finished, inside the container: its notes would be logged twice.
    let asks = matches!(begun, plan::Decision::Asks(_));
    if let plan::Decision::Done(plan) = &begun {
        log::debug!("{}", plan.why);
        crate::process::logger::emit(crate::plan::report::decision(plan));
    }
    if !begun.has_work() {
        return Ok(());
    }
    let entry = match entry {
        Some(e) => e,
        None => ns::detect_entry(state.pid)?,
    };
    let rootfs = input::rootfs_path(&spec, &state.bundle).expect("a plan with actions has a root.path");
    let engine_shm = engine_shm(begun.shm(), &state.id, &spec, state.annotations.as_ref())?;
    let mut system = System::new(engine_shm, begun.labelled());
    let Some((mut root, plan)) = apply::open(&mut system, begun, entry, state.pid, &rootfs)? else {
        return Ok(());
    };
    if asks {
        log::debug!("{}", plan.why);
        crate::process::logger::emit(crate::plan::report::decision(&plan));
    }
    let report = apply::apply(&mut system, &mut root, &plan)?;
    crate::process::logger::emit(crate::plan::report::outcome(&report.notes, &report.done));
    Ok(())
}

/// For a `/dev/shm` the spec binds from the host and the plan grows: whether
/// that source is the engine's shm for this container, proven on the host
/// before the hook joins the container (docs/design.md#engine-shm): a
/// user's volume at `/dev/shm` is never grown.
fn engine_shm(
    shm: Option<&Action>,
    id: &str,
    spec: &crate::oci::Spec,
    state_annotations: Option<&HashMap<String, String>>,
) -> Result<Option<Result<u64, plan::Note>>, HookError> {
    let source = match shm {
        Some(Action::Shm { existing: ShmSource::Bind { source }, way: ShmWay::Grow, .. }) => source.as_str(),
        _ => return Ok(None),
    };
    let ids = engine_shm::container_ids(Some(id), spec, state_annotations);
    Ok(Some(engine_shm::prove(source, &ids)?.map(|(_, dev)| dev)))
}
