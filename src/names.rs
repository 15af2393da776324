//! Names and paths that more than one module uses: annotation keys, the
//! runtime, wrapper and NRI plugin names, the engines' default config
//! paths, the hook's argv and how a system path moves under `--root`. One place, so that the
//! hook, the wrapper, the registration files and the tests cannot drift
//! apart. Constants and pure path functions only; no I/O here.

use std::path::{Path, PathBuf};

use crate::stage::Stage;

/// The product's name: the binary's file name, and what every annotation
/// key starts with ([`ANNOTATION_PREFIX`]).
pub(crate) const BINARY_NAME: &str = "oci-tmpfs-hook";
/// What every annotation of ours starts with.
pub(crate) const ANNOTATION_PREFIX: &str = "oci-tmpfs-hook/";

/// Annotation that forces the hook on (`true`) or off (`false`).
pub const ANNOTATION_ENABLED: &str = "oci-tmpfs-hook/enabled";
/// Annotation that sets the size of `/tmp` and the other temp targets.
pub const ANNOTATION_TMP_SIZE: &str = "oci-tmpfs-hook/tmp-size";
/// Annotation that sets the size of `/dev/shm`.
pub const ANNOTATION_SHM_SIZE: &str = "oci-tmpfs-hook/shm-size";
/// Annotation that turns the container user's `HOME` tmpfs on or off.
pub const ANNOTATION_HOME: &str = "oci-tmpfs-hook/home";
/// Annotation that sets the size of the `HOME` tmpfs.
pub const ANNOTATION_HOME_SIZE: &str = "oci-tmpfs-hook/home-size";
/// The glob that lets our annotations through containerd's CRI to the spec.
pub(crate) const ANNOTATION_GLOB: &str = "oci-tmpfs-hook/*";

/// containerd's CRI marks a pod's sandbox (pause) container with this
/// annotation set to [`SANDBOX`] (app containers: `container`).
pub(crate) const CRI_CONTAINER_TYPE: &str = "io.kubernetes.cri.container-type";
/// CRI-O's annotation for the same.
pub(crate) const CRIO_CONTAINER_TYPE: &str = "io.kubernetes.cri-o.ContainerType";
/// The container-type value of a pod sandbox.
pub(crate) const SANDBOX: &str = "sandbox";

/// `/dev/shm` inside the container.
pub const SHM_PATH: &str = "/dev/shm";

/// The runtime name the engines know the wrapper by (Docker, containerd).
pub(crate) const RUNTIME_NAME: &str = "oci-tmpfs";
/// The wrapper's file name: the binary acts as a runtime when called so.
pub(crate) const WRAPPER_NAME: &str = "oci-tmpfs-runtime";
/// The real runtime the wrapper execs when the host config names none.
pub(crate) const DEFAULT_RUNTIME: &str = "runc";
/// The hooks-dir file name (Podman, CRI-O).
pub(crate) const HOOK_FILE: &str = "oci-tmpfs-hook.json";
/// Our NRI plugin's default name, as the runtime lists it (and a
/// `required_plugins` entry names it): the DaemonSet's and the pre-registered
/// entry's.
pub(crate) const NRI_NAME: &str = BINARY_NAME;
/// Our NRI plugin's default index: late (docs/nri.md#beside-other-plugins).
/// The runtime calls plugins in index order and hands each the container as
/// the earlier ones adjusted it, so the plan sees every mount that other
/// plugins add. The pre-registered entry's too.
pub(crate) const NRI_IDX: &str = "90";

/// Podman's and CRI-O's default hooks dir.
pub(crate) const HOOKS_DIR: &str = "/usr/share/containers/oci/hooks.d";
/// The hooks dir for the administrator's own hooks (Podman reads it too).
pub(crate) const ETC_HOOKS_DIR: &str = "/etc/containers/oci/hooks.d";
/// Podman's main config file (its presence says Podman is set up).
pub(crate) const CONTAINERS_CONF: &str = "/etc/containers/containers.conf";
/// CRI-O's main config file.
pub(crate) const CRIO_CONF: &str = "/etc/crio/crio.conf";
/// CRI-O's drop-in dir (`*.conf`, read in sorted order after the main file).
pub(crate) const CRIO_CONF_D: &str = "/etc/crio/crio.conf.d";
/// Docker's daemon config.
pub(crate) const DAEMON_JSON: &str = "/etc/docker/daemon.json";
/// containerd's config.
pub(crate) const CONTAINERD_CONFIG: &str = "/etc/containerd/config.toml";

/// The host config file.
pub(crate) const DEFAULT_CONFIG_PATH: &str = "/etc/oci-tmpfs-hook/config.toml";
/// The environment variable that names another host config for the runtime
/// wrapper (engines start it with the runtime's arguments only).
pub(crate) const CONFIG_ENV: &str = "OCI_TMPFS_HOOK_CONFIG";
/// The environment variable that sets the log level.
pub const LOG_ENV: &str = "OCI_TMPFS_HOOK_LOG";

/// The `PATH` searched when there is none (runtimes give hooks an empty environment).
pub(crate) const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// The `PATH` entry a registered hook gets.
pub(crate) const HOOK_PATH_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The argv of a registered hook: `oci-tmpfs-hook hook --stage STAGE [--config PATH]`.
pub(crate) fn hook_argv(stage: Stage, config: Option<&Path>) -> Vec<String> {
    let mut args = vec!["oci-tmpfs-hook".to_string(), "hook".into(), "--stage".into(), stage.as_str().into()];
    if let Some(c) = config {
        args.push("--config".into());
        args.push(c.display().to_string());
    }
    args
}

/// `root` + an absolute system path: where `path` is under `--root DIR`.
pub(crate) fn rooted(root: &Path, path: &Path) -> PathBuf {
    match path.strip_prefix("/") {
        Ok(rel) => root.join(rel),
        Err(_) => root.join(path),
    }
}

/// The `source` of every tmpfs we mount or write into a spec: names them in
/// `mountinfo` as ours.
pub(crate) const MOUNT_SOURCE: &str = BINARY_NAME;

/// The annotation containerd's CRI puts on every container of a pod: the
/// pod sandbox's id, which names the pod's shm directory.
pub(crate) const CRI_SANDBOX_ID: &str = "io.kubernetes.cri.sandbox-id";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_path_env_is_the_default_path() {
        assert_eq!(HOOK_PATH_ENV.strip_prefix("PATH="), Some(DEFAULT_PATH));
    }

    #[test]
    fn rooted_prefixes_system_paths() {
        assert_eq!(rooted(Path::new("/"), Path::new(DAEMON_JSON)), Path::new(DAEMON_JSON));
        assert_eq!(rooted(Path::new("/d"), Path::new("/etc/x")), Path::new("/d/etc/x"));
    }
}
