//! What a plan decided and what an executor did, worded for the log: the
//! one place that turns a [`Plan`]'s notes and caps and an executor's
//! effects into log records (warning or information). Where the records go
//! is the backend's ([`crate::process::logger`]), which knows nothing of plans.

use crate::plan::{Cap, HomeWay, Note, Plan, SizeFrom};

/// Logs a plan's notes and caps: a cap the host config put on an
/// annotation is a warning (the pod author asked for more), one from the
/// memory limit is information.
pub(crate) fn decision(plan: &Plan) {
    outcome(&plan.notes, &[] as &[&str]);
    // HOME stays read-only, its caches writable: one line, a warning when
    // the image's layout keeps a tool's cache from working.
    if let Some(home @ HomeWay::Caches { .. }) = &plan.home {
        if home.warn() {
            log::warn!("{}", home.line());
        } else {
            log::info!("{}", home.line());
        }
    }
    let mut warned: Vec<&str> = Vec::new();
    for action in &plan.actions {
        let size = &action.tmpfs().size;
        match (&size.capped, size.from) {
            (Some(cap @ Cap::HostConfig { .. }), SizeFrom::Annotation(key)) if !warned.contains(&key) => {
                warned.push(key);
                log::warn!("annotation {key}: {cap}");
            }
            (Some(cap), from) => log::info!("{} ({from}): {cap}", action.target()),
            (None, _) => {}
        }
    }
}

/// Logs what the hook did and what it left alone: the one place that does.
/// A note is a warning when a user's setting is not honoured, else info; an
/// effect is info (a successful hook prints nothing at the default level).
pub(crate) fn outcome<'a, D: std::fmt::Display + 'a>(
    notes: impl IntoIterator<Item = &'a Note>,
    done: impl IntoIterator<Item = &'a D>,
) {
    for n in notes {
        if n.warn {
            log::warn!("{} left alone: {}", n.subject, n.reason);
        } else {
            log::info!("{} left alone: {}", n.subject, n.reason);
        }
    }
    for d in done {
        log::info!("{d}");
    }
}
