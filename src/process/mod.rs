//! What belongs to the process rather than to a container: its allocator
//! ([`arena`]), where its log records go ([`logger`]), and how the
//! commands that run until stopped see SIGTERM and SIGINT ([`termination`]).

pub mod arena;
pub mod logger;
pub(crate) mod termination;
