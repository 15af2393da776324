//! The fields of an OCI runtime spec (`config.json`) that a plan reads, and
//! nothing else: the root, the mounts, the environment, the namespaces and
//! id mappings, the mount label, the memory limit and the annotations. Every
//! other field is skipped unread, so the runtime stays the judge of the rest
//! of the spec. The accessors have the names and types of the `oci-spec`
//! crate's, whose whole typed parse this replaces on the start path: it cost
//! the hook and the wrapper 107k to 450k instructions per start and linked
//! `regex` into the binary (docs/design.md#spec-view). A test checks that both
//! read the same values from the same configs.

use std::collections::HashMap;
use std::path::PathBuf;

use serde::Deserialize;

/// The plan's view of a runtime spec.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct Spec {
    #[serde(default)]
    root: Option<Root>,
    #[serde(default)]
    mounts: Option<Vec<Mount>>,
    #[serde(default)]
    process: Option<Process>,
    #[serde(default)]
    linux: Option<Linux>,
    #[serde(default)]
    annotations: Option<HashMap<String, String>>,
}

impl Spec {
    pub fn root(&self) -> &Option<Root> {
        &self.root
    }
    pub fn mounts(&self) -> &Option<Vec<Mount>> {
        &self.mounts
    }
    pub fn process(&self) -> &Option<Process> {
        &self.process
    }
    pub fn linux(&self) -> &Option<Linux> {
        &self.linux
    }
    pub fn annotations(&self) -> &Option<HashMap<String, String>> {
        &self.annotations
    }
}

/// `root`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct Root {
    path: PathBuf,
    #[serde(default)]
    readonly: Option<bool>,
}

impl Root {
    pub fn path(&self) -> &PathBuf {
        &self.path
    }
    pub fn readonly(&self) -> Option<bool> {
        self.readonly
    }
}

/// One entry of `mounts`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct Mount {
    destination: PathBuf,
    #[serde(default, rename = "type")]
    typ: Option<String>,
    #[serde(default)]
    source: Option<PathBuf>,
    #[serde(default)]
    options: Option<Vec<String>>,
}

impl Mount {
    pub fn destination(&self) -> &PathBuf {
        &self.destination
    }
    pub fn typ(&self) -> &Option<String> {
        &self.typ
    }
    pub fn source(&self) -> &Option<PathBuf> {
        &self.source
    }
    pub fn options(&self) -> &Option<Vec<String>> {
        &self.options
    }
}

/// `process`: only its environment.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct Process {
    #[serde(default)]
    env: Option<Vec<String>>,
    #[serde(default)]
    user: User,
    /// The working directory (`/` when absent, as runc and crun start in).
    #[serde(default)]
    cwd: Option<String>,
}

impl Process {
    pub fn cwd(&self) -> &str {
        self.cwd.as_deref().unwrap_or("/")
    }

    pub fn env(&self) -> &Option<Vec<String>> {
        &self.env
    }

    pub fn user(&self) -> &User {
        &self.user
    }
}

/// `process.user`: the ids the process runs as (0 when absent).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct User {
    #[serde(default)]
    uid: u32,
    #[serde(default)]
    gid: u32,
}

impl User {
    pub fn uid(&self) -> u32 {
        self.uid
    }

    pub fn gid(&self) -> u32 {
        self.gid
    }
}

/// `linux`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Linux {
    #[serde(default)]
    namespaces: Option<Vec<LinuxNamespace>>,
    #[serde(default)]
    uid_mappings: Option<Vec<LinuxIdMapping>>,
    #[serde(default)]
    gid_mappings: Option<Vec<LinuxIdMapping>>,
    #[serde(default)]
    mount_label: Option<String>,
    #[serde(default)]
    resources: Option<LinuxResources>,
}

impl Linux {
    pub fn namespaces(&self) -> &Option<Vec<LinuxNamespace>> {
        &self.namespaces
    }
    pub fn uid_mappings(&self) -> &Option<Vec<LinuxIdMapping>> {
        &self.uid_mappings
    }
    pub fn gid_mappings(&self) -> &Option<Vec<LinuxIdMapping>> {
        &self.gid_mappings
    }
    pub fn mount_label(&self) -> &Option<String> {
        &self.mount_label
    }
    pub fn resources(&self) -> &Option<LinuxResources> {
        &self.resources
    }
}

/// The namespace types a plan asks about; the rest are `Other`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinuxNamespaceType {
    Mount,
    User,
    Other,
}

impl<'de> Deserialize<'de> for LinuxNamespaceType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Ok(match &*name {
            "mount" => LinuxNamespaceType::Mount,
            "user" => LinuxNamespaceType::User,
            _ => LinuxNamespaceType::Other,
        })
    }
}

/// One entry of `linux.namespaces`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct LinuxNamespace {
    #[serde(rename = "type")]
    typ: LinuxNamespaceType,
    #[serde(default)]
    path: Option<PathBuf>,
}

impl LinuxNamespace {
    pub fn typ(&self) -> LinuxNamespaceType {
        self.typ
    }
    pub fn path(&self) -> &Option<PathBuf> {
        &self.path
    }
}

/// One entry of `linux.uidMappings` or `linux.gidMappings`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct LinuxIdMapping {
    #[serde(rename = "containerID")]
    container_id: u32,
    #[serde(rename = "hostID")]
    host_id: u32,
    size: u32,
}

impl LinuxIdMapping {
    pub fn container_id(&self) -> u32 {
        self.container_id
    }
    pub fn host_id(&self) -> u32 {
        self.host_id
    }
    pub fn size(&self) -> u32 {
        self.size
    }
}

/// `linux.resources`: only its memory.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct LinuxResources {
    #[serde(default)]
    memory: Option<LinuxMemory>,
}

impl LinuxResources {
    pub fn memory(&self) -> &Option<LinuxMemory> {
        &self.memory
    }
}

/// `linux.resources.memory`: only its limit.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct LinuxMemory {
    #[serde(default)]
    limit: Option<i64>,
}

impl LinuxMemory {
    pub fn limit(&self) -> Option<i64> {
        self.limit
    }
}
