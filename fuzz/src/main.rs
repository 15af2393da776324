//! AFL++ target over the hook's parsers of untrusted text (see README,
//! "Fuzzing"). The first byte picks the parser, the rest is its input:
//! 0 size, 1 host config, 2 OCI state, 3 temp-dir env entry, 4 config.json
//! hook injection. Every parser must return, never panic; the checks below
//! are the properties that must hold for what it accepts.

use oci_tmpfs_hook::bundle::{add_hook, HookEntry};
use oci_tmpfs_hook::settings::Settings;
use oci_tmpfs_hook::size::{Bytes, Size};
use oci_tmpfs_hook::stage::Stage;
use oci_tmpfs_hook::{input, target};

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let Some((&which, rest)) = data.split_first() else { return };
        let text = std::str::from_utf8(rest).unwrap_or("");
        match which % 5 {
            0 => {
                if let Ok(size) = text.parse::<Size>() {
                    assert!(!text.contains(','), "an option separator got through: {text:?}");
                    let (b, _) = size.resolve(Some(Bytes(1 << 30)), Bytes(16 << 30));
                    assert!(b.0 >= 1 << 20 && b.0 <= 16 << 30);
                }
            }
            1 => {
                let _ = Settings::parse(text);
            }
            2 => {
                let _ = input::read_state(rest);
            }
            3 => {
                for t in target::from_env([text]) {
                    if let target::EnvTarget::Ok { path, .. } = t {
                        let p = path.as_str();
                        assert!(!target::denied(p), "denied target accepted: {p:?}");
                        assert!(
                            p.split('/').skip(1).all(|c| !c.is_empty() && c != "." && c != ".."),
                            "{p:?}"
                        );
                    }
                }
            }
            _ => {
                if let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(rest) {
                    let entry = HookEntry::for_stage(std::path::Path::new("/h"), Stage::Prestart, None);
                    if add_hook(&mut v, Stage::Prestart, &entry) == Ok(true) {
                        assert_eq!(add_hook(&mut v, Stage::Prestart, &entry), Ok(false));
                    }
                }
            }
        }
    });
}
