//! The suites that run once, on the host (bookworm), not again in sid: the
//! CLI, the plan's properties, the manifests, the NRI protocol against a fake
//! runtime, the node installer and the Debian package (which bring their own
//! roots). One test binary of modules, one per suite (tests/run.sh).

#[path = "../support/mod.rs"]
mod support;

mod cli;
mod deb;
mod explain_manifest;
mod manifests;
mod node;
mod nri_manifests;
mod nri_protocol;
mod properties;
mod routing;
mod spec_view;
