//! `/proc/PID/mountinfo`, parsed.

/// One line of `/proc/self/mountinfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountInfo {
    pub mount_point: String,
    pub mount_options: Vec<String>,
    pub fstype: String,
    pub source: String,
    pub super_options: Vec<String>,
}

impl MountInfo {
    /// The `size=` super option in bytes (the kernel prints kibibytes with
    /// `k`). A tmpfs of the default size (half of RAM) has no `size=`: the
    /// kernel prints it only when it differs (`shmem_show_options`).
    pub fn size(&self) -> Option<u64> {
        let Some(v) = self.super_options.iter().find_map(|o| o.strip_prefix("size=")) else {
            return (self.fstype == "tmpfs").then(default_tmpfs_size).flatten();
        };
        let (n, mult) = match v.strip_suffix('k') {
            Some(n) => (n, 1024),
            None => (v, 1),
        };
        n.parse::<u64>().ok().map(|n| n * mult)
    }

    pub fn has(&self, opt: &str) -> bool {
        self.mount_options.iter().any(|o| o == opt)
    }
}

/// The size of a tmpfs mounted without `size=`: half of the RAM's pages
/// (`MemTotal`), in bytes.
fn default_tmpfs_size() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kib / 4 / 2 * 4096)
}

/// Parses mountinfo lines; other lines in the text are ignored.
pub fn parse_mountinfo(text: &str) -> Vec<MountInfo> {
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let l: Vec<&str> = left.split(' ').collect();
            let r: Vec<&str> = right.split(' ').collect();
            if l.len() < 6 || r.len() < 3 || l[0].parse::<u64>().is_err() {
                return None;
            }
            Some(MountInfo {
                mount_point: l[4].replace("\\040", " "),
                mount_options: l[5].split(',').map(String::from).collect(),
                fstype: r[0].to_string(),
                source: r[1].to_string(),
                super_options: r[2].split(',').map(String::from).collect(),
            })
        })
        .collect()
}

/// The last mount at `point` (the one on top).
pub fn mount_at<'a>(mounts: &'a [MountInfo], point: &str) -> Option<&'a MountInfo> {
    mounts.iter().rev().find(|m| m.mount_point == point)
}

/// The mount table of the runtimes' (this test's) namespace, for "the host is untouched" checks.
pub fn host_mounts() -> Vec<String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mut v: Vec<String> = parse_mountinfo(&text)
        .into_iter()
        // Containers started by concurrent tests come and go; their mounts
        // live under the runtimes' state dirs and the test bundles.
        .filter(|m| !m.mount_point.starts_with("/run/runc") && !m.mount_point.starts_with("/run/crun"))
        .map(|m| format!("{} {} {}", m.mount_point, m.fstype, m.source))
        .collect();
    v.sort();
    v
}
