//! A plan in the making, between [`super::begin`] and [`super::finish`]:
//! [`Decision`] (the plan, or the part made before `HOME`'s step asks the
//! image), [`Partial`] (that part and its question), and what a `Partial`
//! keeps for the answer ([`Ground`], what the plan is made from; [`Made`],
//! the steps' results). The steps themselves are composed in `super`.

use std::collections::HashMap;

use super::facts::SpecMounts;
use super::{home, sizes, temp_dirs, Action, Inputs, Note, Plan, PlanError, Question, SpecMount, UserFacts};
use crate::host_config::HostConfig;
use crate::oci::Spec;
use crate::target::TargetPath;

/// A plan, or the part of one made before `HOME` needs the image's answer.
pub enum Decision<'a> {
    /// Finished.
    Done(Plan),
    /// Everything but `HOME`'s part, made, and what to read for it.
    Asks(Partial<'a>),
}

impl Decision<'_> {
    /// The plan as far as `user` tells, a question left open
    /// ([`Partial::unanswered`]).
    pub fn unanswered(self, user: &UserFacts) -> Plan {
        match self {
            Decision::Done(plan) => plan,
            Decision::Asks(partial) => partial.unanswered(user),
        }
    }

    /// Whether an executor has anything to do ([`Plan::has_work`]; a
    /// question may bring work).
    pub fn has_work(&self) -> bool {
        match self {
            Decision::Done(plan) => plan.has_work(),
            Decision::Asks(_) => true,
        }
    }

    /// The `/dev/shm` action, which no answer changes: what the hook proves
    /// on the host before it joins the container.
    pub fn shm(&self) -> Option<&Action> {
        match self {
            Decision::Done(plan) => plan.actions.iter().find(|a| matches!(a, Action::Shm { .. })),
            Decision::Asks(partial) => partial.made.shm.as_ref().ok(),
        }
    }

    /// The spec's mounts, as the landing rule needs them.
    pub fn spec_mounts(&self) -> &[SpecMount] {
        match self {
            Decision::Done(plan) => &plan.spec_mounts,
            Decision::Asks(partial) => &partial.made.plan.spec_mounts,
        }
    }

    /// Whether the plan's tmpfs carry a label (each carries the spec's).
    pub fn labelled(&self) -> bool {
        match self {
            Decision::Done(plan) => plan.actions.iter().any(|a| a.tmpfs().label.is_some()),
            Decision::Asks(partial) => partial.made.label.is_some(),
        }
    }
}

/// The part of a plan made before `HOME`: the enablement, the sizes, the
/// temp targets, `/dev/shm`.
pub struct Partial<'a> {
    pub(super) ground: Ground<'a>,
    /// Boxed: a plan that ends before `HOME` (a writable root) moves no
    /// more than its `Plan`.
    pub(super) made: Box<Made<'a>>,
    pub(super) question: Question,
}

impl<'a> Partial<'a> {
    /// What the executor must read.
    pub fn question(&self) -> &Question {
        &self.question
    }

    /// The decision again from `HOME`'s step, with `user` holding the answer.
    ///
    /// # Errors
    /// A home annotation the answer made invalid.
    pub fn answer(self, user: &UserFacts) -> Result<Decision<'a>, PlanError> {
        super::at_home(self.ground, self.made, user)
    }

    /// The plan with its question left open (`HOME` unknown): what an
    /// executor that cannot read the image carries out.
    pub fn unanswered(self, user: &UserFacts) -> Plan {
        let step = match self.question {
            Question::Passwd(uid) => home::Step::Ask(uid),
            Question::HomeDir(ref path, ref paths) => home::Step::Look(path.clone(), paths.clone()),
        };
        super::complete(&self.ground.inputs(user), self.made, step)
    }
}

/// What a decision is made from, besides what the executor knows of the
/// user: kept by a [`Partial`] for the answer.
#[derive(Clone, Copy)]
pub(super) struct Ground<'a> {
    pub(super) spec: &'a Spec,
    pub(super) state_annotations: Option<&'a HashMap<String, String>>,
    pub(super) host_config: &'a HostConfig,
    pub(super) host_ram: crate::size::Bytes,
}

impl<'a> Ground<'a> {
    pub(super) fn inputs<'u>(self, user: &'u UserFacts) -> Inputs<'u>
    where
        'a: 'u,
    {
        Inputs {
            spec: self.spec,
            state_annotations: self.state_annotations,
            host_config: self.host_config,
            host_ram: self.host_ram,
            user,
        }
    }
}

/// What the steps before `HOME`'s made (`before_home` in `super`).
pub(super) struct Made<'a> {
    pub(super) plan: Plan,
    pub(super) sizes: sizes::Sizes,
    pub(super) spec_mounts: SpecMounts<'a>,
    pub(super) label: Option<String>,
    pub(super) targets: Vec<temp_dirs::Candidate>,
    pub(super) temp_dirs: Vec<TargetPath>,
    /// `/dev/shm`'s action, or why it is left alone.
    pub(super) shm: Result<Action, Note>,
}
