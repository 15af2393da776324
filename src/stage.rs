//! OCI hook stages, as the runtime-spec names them.

use std::fmt;
use std::str::FromStr;

/// The hook stage the hook is registered at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Runtime namespaces, after the config mounts, before pivot_root.
    Prestart,
    /// Same moment as prestart.
    CreateRuntime,
    /// The container's mount namespace, before pivot_root.
    CreateContainer,
    /// After pivot_root and the capability drop: too late for us.
    StartContainer,
}

impl Stage {
    pub const ALL: [Stage; 4] =
        [Stage::Prestart, Stage::CreateRuntime, Stage::CreateContainer, Stage::StartContainer];

    /// The name used in `config.json` `hooks` and in oci-hooks(5) files.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Prestart => "prestart",
            Stage::CreateRuntime => "createRuntime",
            Stage::CreateContainer => "createContainer",
            Stage::StartContainer => "startContainer",
        }
    }

    /// True where the hook runs in the runtime's namespaces and must join the
    /// container's mount namespace itself.
    pub fn in_runtime_namespace(self) -> bool {
        matches!(self, Stage::Prestart | Stage::CreateRuntime)
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Stage {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Stage::ALL.into_iter().find(|st| st.as_str().eq_ignore_ascii_case(s)).ok_or_else(|| {
            format!("unknown stage {s:?}: use prestart, createRuntime, createContainer or startContainer")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for st in Stage::ALL {
            assert_eq!(st.as_str().parse::<Stage>(), Ok(st));
        }
        assert_eq!("createcontainer".parse::<Stage>(), Ok(Stage::CreateContainer));
        assert!("poststop".parse::<Stage>().is_err());
    }
}
