//! Another vendor's NRI plugin, for the tests of ours beside it
//! (docs/nri.md#beside-other-plugins): it adds one tmpfs mount to every
//! container, at `--dest`, with source `--source` and `size=--size`, through
//! the crate's NRI stub (the connection and the protocol, as ours): it
//! implements `CreateContainer` alone.
//!
//! ```sh
//! nri_mount --socket /var/run/nri/nri.sock --name other --idx 20 \
//!     --dest /other --source other-plugin --size 8m
//! ```
//!
//! With `--dest /tmp` it claims `/tmp`: ours then leaves `/tmp` to it.
//! Not a product: no config, no checks beyond the arguments.

use std::sync::Arc;

use oci_tmpfs_hook::nri::proto::api;
use oci_tmpfs_hook::nri::stub::{self, Identity, Plugin, Refusal, Status, Stop};

/// The mount this plugin adds.
struct AddMount {
    name: String,
    mount: api::Mount,
}

impl Plugin for AddMount {
    fn create_container(
        &self,
        _: Option<&api::PodSandbox>,
        ctr: &api::Container,
    ) -> Result<Option<api::ContainerAdjustment>, Refusal> {
        eprintln!("{}: {}: adding a tmpfs at {}", self.name, ctr.name, self.mount.destination);
        let mut adjust = api::ContainerAdjustment::new();
        adjust.mounts.push(self.mount.clone());
        Ok(Some(adjust))
    }
}

fn main() {
    oci_tmpfs_hook::process::logger::init(log::LevelFilter::Info);
    let mut args = std::env::args().skip(1);
    let mut get = std::collections::HashMap::new();
    while let (Some(k), Some(v)) = (args.next(), args.next()) {
        get.insert(k.trim_start_matches("--").to_string(), v);
    }
    let arg = |k: &str| {
        get.get(k).cloned().unwrap_or_else(|| {
            eprintln!("nri_mount: --{k} is required (--socket --name --idx --dest --source --size)");
            std::process::exit(2)
        })
    };
    let (name, dest) = (arg("name"), arg("dest"));
    let mut mount = api::Mount::new();
    mount.destination = dest;
    mount.type_ = "tmpfs".into();
    mount.source = arg("source");
    mount.options = vec!["nosuid".into(), "nodev".into(), format!("size={}", arg("size"))];
    let ident = Identity { socket: arg("socket").into(), name: name.clone(), idx: arg("idx") };
    if !stub::valid_idx(&ident.idx) {
        eprintln!("nri_mount: --idx {:?}: two digits", ident.idx);
        std::process::exit(2);
    }
    eprintln!("{name}: serving {} at index {}", ident.socket.display(), ident.idx);
    stub::serve(&ident, &Arc::new(AddMount { name, mount }), &Status::default(), &Stop::default());
}
