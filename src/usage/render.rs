//! How `usage` shows what it read: a text table sorted by how full each
//! target is, the JSON list, the Prometheus text exposition format (for
//! node-exporter's textfile collector), and the warning for a target past
//! [`FULL_PERCENT`], naming the setting that sizes it. Pure: text in
//! values, text out; names and paths from a container are escaped.

use std::fmt::Write as _;

use super::{Container, Kind, Target};
use crate::error::escape_controls;
use crate::names::{ANNOTATION_HOME_SIZE, ANNOTATION_SHM_SIZE, ANNOTATION_TMP_SIZE};

/// A gauge: its name, its HELP text, and its value for one row.
type Gauge<'a, T> = (&'a str, &'a str, fn(&T) -> Option<u64>);

/// A target used past this percent of its size is marked `!` and warned of.
pub(crate) const FULL_PERCENT: u64 = 90;

/// Whether `t` is used past [`FULL_PERCENT`] of its size.
pub(crate) fn is_full(t: &Target) -> bool {
    u128::from(t.used_bytes) * 100 > u128::from(t.size_bytes) * u128::from(FULL_PERCENT)
}

/// Every (container, target) pair, fullest first; ties by id, then path.
fn rows(containers: &[Container]) -> Vec<(&Container, &Target)> {
    let mut rows: Vec<(&Container, &Target)> =
        containers.iter().flat_map(|c| c.targets.iter().map(move |t| (c, t))).collect();
    rows.sort_by(|a, b| {
        b.1.fullness()
            .total_cmp(&a.1.fullness())
            .then_with(|| a.0.id.cmp(&b.0.id))
            .then_with(|| a.1.path.cmp(&b.1.path))
    });
    rows
}

/// A byte count for people: the largest binary unit it reaches, one decimal.
fn human(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)];
    match UNITS.iter().find(|(_, u)| bytes >= *u) {
        Some((name, unit)) => format!("{:.1}{name}", bytes as f64 / *unit as f64),
        None => bytes.to_string(),
    }
}

fn human_or_dash(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "-".to_string(), human)
}

/// Used per size in whole percent, rounded down, and `!` past [`FULL_PERCENT`].
fn percent(t: &Target) -> String {
    let pct = (u128::from(t.used_bytes) * 100).checked_div(u128::from(t.size_bytes)).unwrap_or(0);
    format!("{pct}%{}", if is_full(t) { "!" } else { "" })
}

/// The text table: one row per target, fullest first.
pub(crate) fn text(containers: &[Container]) -> String {
    let header = ["CONTAINER", "NAME", "TARGET", "SIZE", "USED", "USE%", "SHMEM", "LIMIT"];
    let mut table: Vec<[String; 8]> = vec![header.map(str::to_string)];
    for (c, t) in rows(containers) {
        table.push([
            escape_controls(&c.id),
            c.name.as_deref().map_or_else(|| "-".to_string(), escape_controls),
            escape_controls(&t.path),
            human(t.size_bytes),
            human(t.used_bytes),
            percent(t),
            human_or_dash(c.shmem_bytes),
            human_or_dash(c.memory_limit_bytes),
        ]);
    }
    let mut widths = [0usize; 8];
    for row in &table {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &table {
        let cells: Vec<String> = row.iter().zip(widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// The JSON list, one object per container.
pub(crate) fn json(containers: &[Container]) -> String {
    let mut out = serde_json::to_string_pretty(containers).unwrap_or_else(|_| "[]".to_string());
    out.push('\n');
    out
}

/// A Prometheus label value: backslash, double quote and newline escaped
/// (`usage --prometheus` and the NRI plugin's per-container series).
pub(crate) fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The Prometheus text exposition format: four gauges, each with its HELP
/// and TYPE lines; a figure that could not be read has no sample.
pub(crate) fn prometheus(containers: &[Container]) -> String {
    let mut out = String::new();
    let ids = |c: &Container| {
        format!("id=\"{}\",name=\"{}\"", label(&c.id), label(c.name.as_deref().unwrap_or("")))
    };
    let per_target: [Gauge<'_, Target>; 2] = [
        (
            "oci_tmpfs_hook_container_tmpfs_size_bytes",
            "Size of a container's tmpfs of ours or /dev/shm.",
            |t| Some(t.size_bytes),
        ),
        (
            "oci_tmpfs_hook_container_tmpfs_used_bytes",
            "Bytes used in a container's tmpfs of ours or /dev/shm.",
            |t| Some(t.used_bytes),
        ),
    ];
    for (metric, help, value) in per_target {
        let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} gauge");
        for c in containers {
            for t in &c.targets {
                if let Some(v) = value(t) {
                    let _ = writeln!(out, "{metric}{{{},target=\"{}\"}} {v}", ids(c), label(&t.path));
                }
            }
        }
    }
    let per_container: [Gauge<'_, Container>; 2] = [
        (
            "oci_tmpfs_hook_container_shmem_bytes",
            "Shared memory (tmpfs and shm) charged to a container's memory cgroup.",
            |c| c.shmem_bytes,
        ),
        (
            "oci_tmpfs_hook_container_memory_limit_bytes",
            "A container's memory limit; no sample when it has none.",
            |c| c.memory_limit_bytes,
        ),
    ];
    for (metric, help, value) in per_container {
        let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} gauge");
        for c in containers {
            if let Some(v) = value(c) {
                let _ = writeln!(out, "{metric}{{{}}} {v}", ids(c));
            }
        }
    }
    out
}

/// The host config key, the annotation and the cap on the annotation that
/// size a target of `kind`.
fn settings(kind: Kind) -> (&'static str, &'static str, &'static str) {
    match kind {
        Kind::Shm => ("shm_size", ANNOTATION_SHM_SIZE, "max_shm_size"),
        Kind::Temp => ("tmp_size", ANNOTATION_TMP_SIZE, "max_tmp_size"),
        Kind::Home => ("home_size", ANNOTATION_HOME_SIZE, "max_home_size"),
    }
}

/// One warning per container and target past [`FULL_PERCENT`].
pub(crate) fn warnings(containers: &[Container]) -> Vec<String> {
    let mut out = Vec::new();
    for c in containers {
        let who = match &c.name {
            Some(name) => format!("container {} ({})", c.id, name),
            None => format!("container {}", c.id),
        };
        for t in c.targets.iter().filter(|t| is_full(t)) {
            let (key, annotation, cap) = settings(t.kind);
            out.push(escape_controls(&format!(
                "{who}: {} is {} full ({} of {}); raise the host config's {key} or the annotation {annotation} (at most {cap})",
                t.path,
                percent(t).trim_end_matches('!'),
                human(t.used_bytes),
                human(t.size_bytes),
            )));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MI: u64 = 1 << 20;

    fn target(path: &str, size: u64, used: u64, kind: Kind) -> Target {
        Target { path: path.into(), size_bytes: size, used_bytes: used, kind }
    }

    fn containers() -> Vec<Container> {
        vec![
            Container {
                id: "a".into(),
                name: Some("prod/shop/web".into()),
                pid: 10,
                memory_limit_bytes: Some(256 * MI),
                shmem_bytes: Some(135 * MI),
                targets: vec![
                    target("/dev/shm", 128 * MI, 100 * MI, Kind::Shm),
                    target("/tmp", 32 * MI, 30 * MI, Kind::Temp),
                ],
            },
            Container {
                id: "b\"x".into(),
                name: None,
                pid: 11,
                memory_limit_bytes: None,
                shmem_bytes: None,
                targets: vec![target("/root/.cache", 10 * MI, 5 * MI, Kind::Home)],
            },
        ]
    }

    #[test]
    fn the_90_percent_rule_is_strict() {
        for (size, used, full) in
            [(100, 90, false), (100, 91, true), (0, 0, false), (u64::MAX, u64::MAX, true)]
        {
            assert_eq!(is_full(&target("/t", size, used, Kind::Temp)), full, "{used} of {size}");
        }
    }

    #[test]
    fn text_is_sorted_by_fullness_and_marks_the_full() {
        let text = text(&containers());
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("CONTAINER"), "{text}");
        assert!(lines[1].contains("/tmp") && lines[1].contains("93%!"), "{text}");
        assert!(lines[2].contains("/dev/shm") && lines[2].contains("78% "), "{text}");
        assert!(lines[3].contains("/root/.cache") && lines[3].contains("50%"), "{text}");
        assert!(lines[3].ends_with("-  -") || lines[3].ends_with('-'), "{text}");
        assert!(lines[1].contains("prod/shop/web") && lines[1].contains("256.0Mi"), "{text}");
    }

    #[test]
    fn json_has_exactly_the_documented_fields() {
        let v: serde_json::Value = serde_json::from_str(&json(&containers())).unwrap();
        let first = v[0].as_object().unwrap();
        let keys: Vec<&str> = first.keys().map(String::as_str).collect();
        assert_eq!(keys, ["id", "name", "pid", "memory_limit_bytes", "shmem_bytes", "targets"]);
        let t: Vec<&str> = v[0]["targets"][0].as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(t, ["path", "size_bytes", "used_bytes"]);
        assert_eq!(v[1]["name"], serde_json::Value::Null);
        assert_eq!(v[1]["memory_limit_bytes"], serde_json::Value::Null);
        assert_eq!(json(&[]).trim(), "[]");
    }

    #[test]
    fn prometheus_has_help_type_and_escaped_labels() {
        let text = prometheus(&containers());
        for metric in [
            "oci_tmpfs_hook_container_tmpfs_size_bytes",
            "oci_tmpfs_hook_container_tmpfs_used_bytes",
            "oci_tmpfs_hook_container_shmem_bytes",
            "oci_tmpfs_hook_container_memory_limit_bytes",
        ] {
            assert!(text.contains(&format!("# HELP {metric} ")), "{text}");
            assert!(text.contains(&format!("# TYPE {metric} gauge\n")), "{text}");
        }
        let size = format!(
            "oci_tmpfs_hook_container_tmpfs_size_bytes{{id=\"a\",name=\"prod/shop/web\",target=\"/tmp\"}} {}\n",
            32 * MI
        );
        assert!(text.contains(&size), "{text}");
        assert!(text.contains("id=\"b\\\"x\",name=\"\",target=\"/root/.cache\"} 5242880\n"), "{text}");
        assert!(
            !text.contains("oci_tmpfs_hook_container_memory_limit_bytes{id=\"b"),
            "no limit, no sample: {text}"
        );
        assert_eq!(label("a\\b\nc\"d"), "a\\\\b\\nc\\\"d");
    }

    #[test]
    fn one_warning_per_full_target_naming_its_setting() {
        let mut cs = containers();
        cs[1].targets[0].used_bytes = 10 * MI;
        cs[1].id = "evil\nline".into();
        let w = warnings(&cs);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].starts_with("container a (prod/shop/web): /tmp is 93% full"), "{w:?}");
        assert!(w[0].contains("tmp_size") && w[0].contains("oci-tmpfs-hook/tmp-size"), "{w:?}");
        assert!(w[1].contains("evil\\nline") && w[1].contains("home_size"), "{w:?}");
        assert!(warnings(&containers()[1..]).is_empty());
    }
}
