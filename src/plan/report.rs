//! What a plan decided and what an executor did, worded for the log: the
//! one place that turns a [`Plan`]'s notes and caps and an executor's
//! effects into lines, each a warning or information. Pure: the executors
//! hand the lines to the log backend ([`crate::process::logger::emit`]),
//! which knows nothing of plans.

use super::{Cap, HomeWay, Note, Plan, SizeFrom};

/// One line for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    /// A warning (a user's setting not honoured), else information.
    pub warn: bool,
    pub line: String,
}

impl Record {
    fn new(warn: bool, line: String) -> Record {
        Record { warn, line }
    }
}

/// A plan's notes and caps: a cap the host config put on an annotation is
/// a warning (the pod author asked for more), one from the memory limit is
/// information; `HOME`'s line is a warning when the image's layout keeps a
/// tool's cache from working.
pub(crate) fn decision(plan: &Plan) -> Vec<Record> {
    let mut out = outcome(&plan.notes, &[] as &[&str]);
    if let Some(home @ HomeWay::Caches { .. }) = &plan.home {
        out.push(Record::new(home.warn(), home.line()));
    }
    let mut warned: Vec<&str> = Vec::new();
    for action in &plan.actions {
        let size = &action.tmpfs().size;
        match (&size.capped, size.from) {
            (Some(cap @ Cap::HostConfig { .. }), SizeFrom::Annotation(key)) if !warned.contains(&key) => {
                warned.push(key);
                out.push(Record::new(true, format!("annotation {key}: {cap}")));
            }
            (Some(cap), from) => out.push(Record::new(false, format!("{} ({from}): {cap}", action.target()))),
            (None, _) => {}
        }
    }
    out
}

/// What an executor left alone (`notes`, each a warning when a user's
/// setting is not honoured) and what it did (`done`, information: a
/// successful start prints nothing at the default level).
pub(crate) fn outcome<'a, D: std::fmt::Display + 'a>(
    notes: impl IntoIterator<Item = &'a Note>,
    done: impl IntoIterator<Item = &'a D>,
) -> Vec<Record> {
    let notes =
        notes.into_iter().map(|n| Record::new(n.warn, format!("{} left alone: {}", n.subject, n.reason)));
    notes.chain(done.into_iter().map(|d| Record::new(false, d.to_string()))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A note is a warning only when it says so; what was done is
    /// information, after the notes.
    #[test]
    fn notes_then_effects_each_at_its_level() {
        let notes = [Note::warn("/tmp", "a volume wins"), Note::info("/var/tmp", "ours covers it")];
        let got = outcome(&notes, &["mounted /tmp"]);
        let want = [
            Record::new(true, "/tmp left alone: a volume wins".into()),
            Record::new(false, "/var/tmp left alone: ours covers it".into()),
            Record::new(false, "mounted /tmp".into()),
        ];
        assert_eq!(got, want);
    }

    /// A plan with nothing to say gives no line.
    #[test]
    fn a_quiet_plan_says_nothing() {
        assert!(decision(&Plan::default()).is_empty());
    }
}
