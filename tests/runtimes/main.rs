//! The suites with real runtimes and engines: runc, crun, Podman, Docker,
//! containerd and its CRI API, CRI-O and what a CRI-O node's admin installs (sid only). tests/run.sh runs this binary on the host
//! (bookworm) and again inside the sid root, against sid's engines. One test
//! binary of modules, one per suite; suites that share the host's mount
//! table take `support::host::hold_host`.

#[path = "../support/mod.rs"]
mod support;

mod cdi;
mod cri;
mod crio;
mod crio_node;
mod engines;
mod home;
mod home_engines;
mod home_tools;
mod hook_runtimes;
mod hostile;
mod hostile_layouts;
mod hostile_spec;
mod manifest;
mod mount_ns;
mod pytorch;
mod reopen;
mod setup;
mod spec_fixture;
mod usage;
