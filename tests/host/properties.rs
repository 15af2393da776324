//! Property tests (SECURITY.md#the-adversarial-suite): the parsers never
//! panic on arbitrary input and whatever they accept is safe to act on; the
//! pure decision plans only safe mounts for valid input and refuses invalid
//! input. No root needed. The unit tests next to the code hold more
//! properties (size parsing, target normalisation, `add_hook` on values).

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use oci_tmpfs_hook::bundle::{self, HookEntry};
use oci_tmpfs_hook::host_config::{AnnotationPolicy, HostConfig};
use oci_tmpfs_hook::input::read_state;
use oci_tmpfs_hook::plan::{
    begin, finish, plan_for, Action, DirFacts, Found, HomeDir, HostFacts, Owner, Passwd, PlanError, Question,
    SizeFrom, UserFacts,
};
use oci_tmpfs_hook::size::{Bytes, Size, MIN_BYTES};
use oci_tmpfs_hook::stage::Stage;
use oci_tmpfs_hook::target::{self, EnvTarget};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use serde_json::{json, Value};

const RAM: Bytes = Bytes(16 << 30);

/// `cases` per property; failures are printed, not persisted (integration
/// tests have no source file proptest could find to persist them next to).
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

/// Text that looks like the values users and images write, plus junk.
fn size_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{1,25}(k|m|g|t|K|M|G|T|Ki|Mi|Gi|Ti|MiB|%|%%|b|Pi|e30)?",
        "[0-9]{1,4}[GMk],(mode|nr_inodes|size)=[0-9]{1,4}",
        "\\PC{0,40}",
        Just(String::new()),
    ]
}

/// Environment entries, mostly for the temp variables.
fn env_entry() -> impl Strategy<Value = String> {
    prop_oneof![
        ("(TMPDIR|TEMP|TMP|TEMPDIR|TRITON_CACHE_DIR|XDG_CACHE_HOME)", "[/a-z.]{0,24}")
            .prop_map(|(k, v)| format!("{k}={v}")),
        ("(TMPDIR|TEMP|TMP|TEMPDIR|TRITON_CACHE_DIR|XDG_CACHE_HOME)", "\\PC{0,40}")
            .prop_map(|(k, v)| format!("{k}={v}")),
        "(TMPDIR|PATH|TERM)",
        "\\PC{0,30}",
    ]
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn read_state_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        if let Ok(s) = read_state(&bytes[..]) {
            prop_assert!(!s.id.is_empty() && !s.id.chars().any(char::is_control));
            prop_assert!(s.bundle.is_absolute());
        }
    }

    #[test]
    fn read_state_never_panics_on_near_states(
        id in "\\PC{0,20}",
        pid in prop_oneof![any::<i64>().prop_map(|p| json!(p)), any::<u64>().prop_map(|p| json!(p)),
                           any::<f64>().prop_map(|p| json!(p)), "\\PC{0,8}".prop_map(|p| json!(p)), Just(Value::Null)],
        bundle in prop_oneof!["/[a-z/.]{0,20}", "\\PC{0,20}"],
        annotation in "\\PC{0,20}",
    ) {
        let doc = json!({"ociVersion": "1.0.2", "id": id, "pid": pid, "bundle": bundle,
                         "annotations": {"oci-tmpfs-hook/tmp-size": annotation}});
        if let Ok(s) = read_state(serde_json::to_vec(&doc).unwrap().as_slice()) {
            prop_assert!(!s.id.is_empty() && !s.id.chars().any(char::is_control));
            prop_assert!(s.bundle.is_absolute());
        }
    }

    #[test]
    fn settings_parse_never_panics(text in "\\PC{0,200}") {
        let _ = HostConfig::parse(&text);
    }

    #[test]
    fn accepted_settings_are_safe(
        tmp in size_text(), shm in size_text(),
        targets in proptest::collection::vec("[/a-z.]{0,16}", 0..4),
        inodes in any::<i64>(),
        log in "[/a-z]{0,12}",
    ) {
        let quote = |s: &str| toml_quote(s);
        let text = format!(
            "tmp_size = {}\nshm_size = {}\nextra_targets = [{}]\nnr_inodes = {inodes}\nlog_file = {}\n",
            quote(&tmp), quote(&shm),
            targets.iter().map(|t| quote(t)).collect::<Vec<_>>().join(", "),
            quote(&log),
        );
        if let Ok(s) = HostConfig::parse(&text) {
            for t in &s.extra_targets {
                prop_assert!(!target::denied(t.as_str()));
                prop_assert_eq!(target::validate(t.as_str()), Ok(t.clone()));
            }
            prop_assert!(s.nr_inodes != Some(0));
            prop_assert!(s.log_file.as_ref().is_none_or(|p| p.is_absolute()));
            prop_assert!(is_safe_size(s.tmp_size) && is_safe_size(s.shm_size));
        }
    }

    #[test]
    fn env_targets_are_normal_and_allowed(env in proptest::collection::vec(env_entry(), 0..10)) {
        for found in target::from_env(&target::default_env_targets(), env.iter().map(String::as_str)) {
            if let EnvTarget::Ok { path, .. } = found {
                prop_assert!(!target::denied(path.as_str()));
                prop_assert_eq!(target::validate(path.as_str()), Ok(path.clone()));
            }
        }
    }

    #[test]
    fn absolute_sizes_round_trip(n in 1u64..) {
        let size = Size::Absolute(Bytes(n));
        prop_assert_eq!(size.to_string().parse::<Size>(), Ok(size));
    }
}

/// The share of `decide_accepts_valid_input_and_plans_only_safe_mounts`'s
/// cases that must reach the invariants on the mounts (an enabled plan with
/// at least one action). Below it the generators have drifted into inputs
/// that `plan_for` refuses or leaves alone, and the property checks little.
const REACHED_FLOOR_PERCENT: usize = 80;

/// The directories the temp targets and the spec's mounts are named from, so
/// that they meet: equal, nested, one inside the other.
const DIRS: &str = "/(tmp|scratch|work|data|run|var/tmp)(/[a-z]{1,4})?";

/// Size text that `Size` accepts, spelled as users and images write it.
fn valid_size_text() -> impl Strategy<Value = String> {
    prop_oneof![
        ("[1-9][0-9]{0,5}", "(|b|k|K|Ki|KiB|m|M|Mi|MiB|g|G|Gi|GiB|t|T|Ti)")
            .prop_map(|(n, u)| format!("{n}{u}")),
        (1u8..=100).prop_map(|p| format!("{p}%")),
    ]
}

/// A size of the host config.
fn valid_size() -> impl Strategy<Value = Size> {
    prop_oneof![(1u64..=1 << 42).prop_map(|b| Size::Absolute(Bytes(b))), (1u8..=100).prop_map(Size::Percent)]
}

/// `process.env`: mostly temp variables naming directories, some junk
/// (which `plan_for` skips with a note, never refuses).
fn valid_env_entry() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => ("(TMPDIR|TEMP|TMP|TEMPDIR)", DIRS).prop_map(|(k, v)| format!("{k}={v}")),
        1 => ("HOME", prop_oneof![DIRS, "/(home|root)(/[a-z]{1,4})?", "(/|/etc|/proc/self|x|)"]).prop_map(|(k, v)| format!("{k}={v}")),
        1 => env_entry(),
    ]
}

/// What an executor read of the image's /etc/passwd.
fn valid_user() -> impl Strategy<Value = UserFacts> {
    let passwd = prop_oneof![
        Just(Passwd::NotRead),
        Just(Passwd::NoEntry),
        Just(Passwd::Unknown),
        Just(Passwd::Unreadable("is not a regular file".into())),
        prop_oneof![DIRS, "/(home|root)(/[a-z]{1,4})?", "(/|/../..|/usr|)"].prop_map(Passwd::Entry),
    ];
    passwd.prop_map(|passwd| UserFacts { passwd, home_dir: None })
}

/// The paths an executor reads below `HOME` for the default caches, and a
/// few the plan never asks for.
const BELOW_HOME: [&str; 9] = [
    ".cache",
    ".config",
    ".triton",
    ".cupy",
    ".nv",
    ".cache/torch",
    ".cache/huggingface",
    ".config/vllm",
    ".local",
];

/// What the image holds at one path: missing, a symlink, a mount,
/// something else, or a directory of some owner (the process's uid or
/// not), empty or not.
fn found() -> impl Strategy<Value = Found> {
    let dir = (prop_oneof![Just(0u32), Just(1000u32), 0..70000u32], 0..70000u32, 0..0o7777u32, any::<bool>())
        .prop_map(|(uid, gid, mode, empty)| Found::Dir(DirFacts { owner: Owner { uid, gid }, mode, empty }));
    prop_oneof![Just(Found::Missing), Just(Found::Symlink), Just(Found::Mount), Just(Found::Other), dir]
}

/// What the image holds at the home and below it, as an executor answers
/// the plan's question (it reads more than the plan needs: the plan must
/// look only where it walks).
fn valid_home_dir() -> impl Strategy<Value = HomeDir> {
    (found(), proptest::collection::vec(found(), BELOW_HOME.len())).prop_map(|(home, below)| {
        let mut read = vec![(String::new(), home)];
        read.extend(BELOW_HOME.iter().map(|p| p.to_string()).zip(below));
        HomeDir::Read(read)
    })
}

/// `linux.resources.memory.limit`: mostly none or one a tmpfs fits in;
/// seldom below the smallest tmpfs (an enabled plan with no mounts), or any
/// number (negative is no limit).
fn memory_limit() -> impl Strategy<Value = Option<i64>> {
    let (min, ram) = (i64::try_from(MIN_BYTES).unwrap(), i64::try_from(RAM.0).unwrap());
    prop_oneof![
        10 => Just(None),
        20 => (min..=2 * ram).prop_map(Some),
        1 => (1..min).prop_map(Some),
        1 => any::<i64>().prop_map(Some),
    ]
}

prop_compose! {
    /// A container's `config.json` that `plan_for` must accept: sizes that
    /// parse, `true` or `false` to enable, an own mount namespace, a root
    /// path. Mostly one the hook acts on (read-only root, not a sandbox);
    /// the spec's mounts and the temp variables drawn from the same
    /// directories.
    fn valid_config()(
        env in proptest::collection::vec(valid_env_entry(), 0..8),
        tmp in proptest::option::weighted(0.5, valid_size_text()),
        shm in proptest::option::weighted(0.5, valid_size_text()),
        enabled in prop_oneof![85 => Just(None), 12 => Just(Some("true")), 3 => Just(Some("false"))],
        sandbox in proptest::option::weighted(0.04, prop_oneof![Just("sandbox"), Just("container")]),
        readonly in proptest::bool::weighted(0.95),
        limit in memory_limit(),
        shm_mount in proptest::option::weighted(0.85, (
            "(tmpfs|bind)",
            proptest::collection::vec("(size=[0-9]{1,12}[kmg%]?|mode=[0-7]{3,4}|nosuid|bind|rbind|ro)", 0..4),
        )),
        mounts in proptest::collection::vec((DIRS, "(tmpfs|bind)"), 0..3),
    ) -> Value {
        let mut annotations = serde_json::Map::new();
        let ours = [("oci-tmpfs-hook/tmp-size", tmp), ("oci-tmpfs-hook/shm-size", shm),
                    ("oci-tmpfs-hook/enabled", enabled.map(str::to_string))];
        for (k, v) in ours {
            if let Some(v) = v {
                annotations.insert(k.into(), json!(v));
            }
        }
        if let Some(kind) = sandbox {
            annotations.insert("io.kubernetes.cri.container-type".into(), json!(kind));
        }
        let mut spec_mounts: Vec<Value> = mounts
            .into_iter()
            .map(|(dest, typ)| json!({"destination": dest, "type": typ, "source": "/volumes/v"}))
            .collect();
        if let Some((typ, options)) = shm_mount {
            spec_mounts.push(json!({"destination": "/dev/shm", "type": typ, "source": "shm", "options": options}));
        }
        let mut config = json!({
            "ociVersion": "1.0.2",
            "process": {"args": ["sh"], "cwd": "/", "env": env, "user": {"uid": 0, "gid": 0}},
            "root": {"path": "rootfs", "readonly": readonly},
            "mounts": spec_mounts,
            "annotations": annotations,
            "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}]},
        });
        if let Some(l) = limit {
            config["linux"]["resources"] = json!({"memory": {"limit": l}});
        }
        config
    }
}

prop_compose! {
    /// A host config as `HostConfig::parse` makes them: sizes, caps for the
    /// annotations, mostly `annotations = "allow"`, valid extra targets.
    fn valid_settings()(
        tmp in proptest::option::of(valid_size()),
        shm in proptest::option::of(valid_size()),
        max_tmp in proptest::option::of(valid_size()),
        max_shm in proptest::option::of(valid_size()),
        max_home in proptest::option::of(valid_size()),
        allow in proptest::bool::weighted(0.9),
        noexec in any::<bool>(),
        nr_inodes in proptest::option::of(1u64..1 << 24),
        extra in proptest::collection::vec(prop_oneof![DIRS, "/[a-z]{1,6}"], 0..3),
    ) -> HostConfig {
        let default = HostConfig::default();
        HostConfig {
            tmp_size: tmp.unwrap_or(default.tmp_size),
            tmp_size_set: tmp.is_some(),
            shm_size: shm.unwrap_or(default.shm_size),
            shm_size_set: shm.is_some(),
            max_tmp_size: max_tmp,
            max_shm_size: max_shm,
            max_home_size: max_home,
            annotations: if allow { AnnotationPolicy::Allow } else { AnnotationPolicy::Ignore },
            noexec,
            nr_inodes,
            extra_targets: extra.iter().filter_map(|e| target::validate(e).ok()).collect(),
            ..default
        }
    }
}

/// Valid input (`plan_for` must accept it) gets a plan whose every mount is
/// safe to act on: an allowed, normal target, not at, under or over a mount
/// of the spec, none nested in another; a size within `[MIN_BYTES, RAM]`,
/// the memory limit and the host config's cap on annotations; nosuid and
/// nodev always, noexec on `/dev/shm`; a positive inode count. A plan that is
/// off plans nothing. The test counts the cases that reach the mounts and
/// fails below [`REACHED_FLOOR_PERCENT`].
#[test]
fn decide_accepts_valid_input_and_plans_only_safe_mounts() {
    let (cases, reached) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let mut runner = TestRunner::new(config(512));
    let result = runner.run(
        &(valid_config(), valid_settings(), (valid_user(), valid_home_dir())),
        |(config, host_config, user)| {
            cases.fetch_add(1, Ordering::Relaxed);
            if check_plan(config, &host_config, &user)? {
                reached.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        },
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    let (cases, reached) = (cases.into_inner(), reached.into_inner());
    let percent = reached * 100 / cases;
    eprintln!("plan_for: {reached} of {cases} cases ({percent}%) reached the invariants on the mounts");
    assert!(
        percent >= REACHED_FLOOR_PERCENT,
        "only {reached} of {cases} cases ({percent}%, floor {REACHED_FLOOR_PERCENT}%) reached an enabled plan with mounts: the generators test little"
    );
}

/// The plan for `spec` finished as an executor finishes it ([`begin`],
/// then [`finish`]: the passwd entry as `facts` says, the home directory as
/// it says), checked against the plan made whole from the same answers.
fn finished_plan(
    spec: &oci_tmpfs_hook::oci::Spec,
    host_config: &HostConfig,
    facts: &(UserFacts, HomeDir),
) -> Result<oci_tmpfs_hook::plan::Plan, TestCaseError> {
    let (user, dir) = facts;
    let make = |user: &UserFacts| plan_for(spec, None, host_config, HostFacts { ram: RAM }, user);
    let refused = |e: PlanError| TestCaseError::fail(format!("plan_for refused valid input: {e}"));
    let unread = UserFacts { passwd: Passwd::NotRead, ..user.clone() };
    let answer = |q: &Question, u: &mut UserFacts| match q {
        Question::Passwd(_) => u.passwd = user.passwd.clone(),
        Question::HomeDir(path, _) => u.home_dir = Some((path.clone(), dir.clone())),
    };
    let first = begin(spec, None, host_config, HostFacts { ram: RAM }, &unread).map_err(refused)?;
    let plan = finish(first, unread.clone(), |q, u| {
        answer(q, u);
        Ok::<(), PlanError>(())
    })
    .map_err(refused)?;
    // The part made before HOME's step, finished, is the plan made whole
    // from the same answers: nothing of it depends on them.
    let mut u = unread;
    let mut whole = make(&u).map_err(refused)?;
    for _ in 0..2 {
        let Some(q) = whole.question() else { break };
        answer(&q, &mut u);
        whole = make(&u).map_err(refused)?;
    }
    prop_assert_eq!(&plan, &whole);
    Ok(plan)
}

/// The plan for one valid case, checked; true when it had mounts to check.
/// The plan is finished as an executor finishes it: the passwd entry as
/// `user` says, the home directory as `dir` says.
fn check_plan(
    config: Value,
    host_config: &HostConfig,
    facts: &(UserFacts, HomeDir),
) -> Result<bool, TestCaseError> {
    let (user, dir) = facts;
    let spec: oci_tmpfs_hook::oci::Spec = serde_json::from_value(config).unwrap();
    let plan = finished_plan(&spec, host_config, facts)?;
    if !plan.enabled {
        prop_assert!(plan.actions.is_empty());
        return Ok(false);
    }
    let limit = spec
        .linux()
        .as_ref()
        .and_then(|l| l.resources().as_ref()?.memory().as_ref()?.limit())
        .and_then(|l| u64::try_from(l).ok())
        .filter(|&l| l > 0);
    let spec_mounts: Vec<String> = spec
        .mounts()
        .iter()
        .flatten()
        .map(|m| target::normalise(&m.destination().to_string_lossy()))
        .collect();
    let mut seen: Vec<String> = Vec::new();
    for action in &plan.actions {
        let tmpfs = action.tmpfs();
        let size = &tmpfs.size;
        prop_assert!(size.bytes.0 >= MIN_BYTES && size.bytes <= RAM, "{}: {}", action.target(), size.bytes);
        prop_assert!(
            limit.is_none_or(|l| size.bytes.0 <= l),
            "{}: {} over the limit",
            action.target(),
            size.bytes
        );
        let max = match action {
            Action::MountTmpfs { tmpfs, .. } if tmpfs.own_from.is_some() => host_config.max_home_size,
            Action::MountTmpfs { .. } => host_config.max_tmp_size,
            Action::Shm { .. } => host_config.max_shm_size,
        };
        if let (SizeFrom::Annotation(_), Some(max)) = (size.from, max) {
            let (max, _) = max.resolve(limit.map(Bytes), RAM);
            prop_assert!(size.bytes <= max, "{}: {} over the cap {}", action.target(), size.bytes, max);
        }
        prop_assert!(tmpfs.nosuid && tmpfs.nodev && tmpfs.nr_inodes.is_none_or(|n| n > 0));
        check_cache(action, dir, &spec_mounts)?;
        match action {
            Action::MountTmpfs { target, .. } => {
                prop_assert!(!target::denied(target.as_str()));
                prop_assert_eq!(target::validate(target.as_str()), Ok(target.clone()));
                for d in spec_mounts.iter().filter(|d| *d != "/") {
                    let over = d.starts_with(&format!("{target}/"));
                    prop_assert!(
                        d != target.as_str() && !target.is_under(d) && !over,
                        "{} and the spec's {}",
                        target,
                        d
                    );
                }
                for s in &seen {
                    prop_assert!(s != target.as_str() && !target.is_under(s), "{} and {}", s, target);
                    prop_assert!(
                        !target::validate(s).unwrap().is_under(target.as_str()),
                        "{} and {}",
                        s,
                        target
                    );
                }
                seen.push(target.to_string());
            }
            Action::Shm { .. } => prop_assert!(tmpfs.noexec),
        }
    }
    // HOME itself is never a target.
    if let Some(oci_tmpfs_hook::plan::HomeWay::Caches { home, .. }) = &plan.home {
        prop_assert!(!plan.actions.iter().any(|a| a.target() == home.as_str()), "HOME {} is a target", home);
    }
    // The plan asks for /etc/passwd only when it was not read, and is
    // otherwise finished.
    if plan.passwd_uid.is_some() {
        prop_assert_eq!(&user.passwd, &Passwd::NotRead);
    }
    prop_assert_eq!(&plan.home_dir, &None);
    Ok(!plan.actions.is_empty())
}

/// The checks of a cache tmpfs under HOME ([`check_plan`]), against what
/// the image holds there (`dir`) and the spec's mounts.
fn check_cache(action: &Action, dir: &HomeDir, spec_mounts: &[String]) -> Result<(), TestCaseError> {
    // A cache under HOME belongs to the process, mode 0700, exec
    // allowed, and lies where the image has nothing to hide: a
    // directory missing, or empty and the process's; never HOME itself,
    // a symlink, a mount, or a directory holding the image's files
    // (docs/design.md#home-rule).
    let tmpfs = action.tmpfs();
    if let (Some(uid), Some(home)) = (tmpfs.image_owner, &tmpfs.own_from) {
        prop_assert_eq!(tmpfs.owner.map(|o| o.uid), Some(uid), "{}", action.target());
        prop_assert_eq!((tmpfs.mode, tmpfs.noexec), (0o700, false), "{}", action.target());
        let base = home.trim_end_matches('/');
        let Some(rel) = action.target().strip_prefix(&format!("{base}/")) else {
            return Err(TestCaseError::fail(format!("{} is not below HOME {}", action.target(), home)));
        };
        if let HomeDir::Read(read) = dir {
            let raw = |p: &str| read.iter().find(|(q, _)| q == p).map(|(_, e)| e.clone());
            // What is there: below a directory missing or empty in the
            // image an executor reads nothing, and nothing is there.
            let at = |p: &str| {
                let above = std::iter::once("")
                    .chain(p.match_indices('/').map(|(i, _)| &p[..i]))
                    .filter(|a| *a != p || p.is_empty());
                let emptied = !p.is_empty()
                    && above.into_iter().any(|a| {
                        matches!(raw(a), Some(Found::Missing | Found::Dir(DirFacts { empty: true, .. })))
                    });
                if emptied {
                    Some(Found::Missing)
                } else {
                    raw(p)
                }
            };
            match at(rel) {
                Some(Found::Missing) => {
                    let parent = rel.rsplit_once('/').map_or("", |(d, _)| d);
                    // Made in a directory of the process's: HOME made for
                    // it, or one the image gives it; `/` for HOME=/.
                    let parent_ok = match at(parent) {
                        Some(Found::Missing) => parent.is_empty(),
                        Some(Found::Dir(d)) => d.owner.uid == uid || (home == "/" && parent.is_empty()),
                        _ => false,
                    };
                    // A directory a spec mount lies in is the runtime's.
                    let runtime_made =
                        spec_mounts.iter().any(|d| d.starts_with(&format!("{base}/{parent}/")));
                    prop_assert!(parent_ok || runtime_made, "{}: made in {:?}", action.target(), at(parent));
                }
                Some(Found::Dir(d)) => {
                    prop_assert!(d.empty && d.owner.uid == uid, "{} covers {:?}", action.target(), d);
                }
                other => prop_assert!(false, "{} covers {:?}", action.target(), other),
            }
        }
    }
    Ok(())
}

/// One defect in an input otherwise valid: `plan_for` refuses the first
/// three, and leaves a container without a mount namespace of its own
/// alone with one warning (nothing can be mounted safely for it).
#[derive(Clone, Debug)]
enum Defect {
    /// The enable annotation neither `true` nor `false`.
    Enabled(String),
    /// A size annotation that does not parse.
    Size(&'static str, String),
    /// An empty `root.path`.
    NoRoot,
    /// No `mount` entry in `linux.namespaces`.
    NoMountNamespace,
    /// A `mount` namespace joined by path.
    SharedMountNamespace(String),
}

fn defect() -> impl Strategy<Value = Defect> {
    prop_oneof![
        prop_oneof![Just("yes".to_string()), Just("TRUE".to_string()), Just("1".to_string()), "\\PC{0,8}"]
            .prop_map(Defect::Enabled),
        (prop_oneof![Just("oci-tmpfs-hook/tmp-size"), Just("oci-tmpfs-hook/shm-size")], size_text())
            .prop_map(|(k, v)| Defect::Size(k, v)),
        Just(Defect::NoRoot),
        Just(Defect::NoMountNamespace),
        "/proc/[0-9]{1,5}/ns/mnt".prop_map(Defect::SharedMountNamespace),
    ]
}

proptest! {
    #![proptest_config(config(128))]

    /// Invalid input: an enabled container with one defect gets the error
    /// that names it, never a plan and never a panic.
    #[test]
    fn decide_refuses_invalid_input(
        defect in defect(),
        env in proptest::collection::vec(env_entry(), 0..8),
        shm_options in proptest::collection::vec("(size=[0-9]{1,12}[kmg%]?|mode=[0-7]{3,4}|nosuid|bind|rbind)", 0..4),
    ) {
        let mut config = json!({
            "ociVersion": "1.0.2",
            "process": {"args": ["sh"], "cwd": "/", "env": env, "user": {"uid": 0, "gid": 0}},
            "root": {"path": "rootfs", "readonly": true},
            "mounts": [{"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": shm_options}],
            "annotations": {},
            "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}]},
        });
        match &defect {
            Defect::Enabled(v) => {
                prop_assume!(v != "true" && v != "false");
                config["annotations"]["oci-tmpfs-hook/enabled"] = json!(v);
            }
            Defect::Size(key, v) => {
                prop_assume!(v.parse::<Size>().is_err());
                config["annotations"][*key] = json!(v);
            }
            Defect::NoRoot => config["root"]["path"] = json!(""),
            Defect::NoMountNamespace => config["linux"]["namespaces"] = json!([{"type": "pid"}]),
            Defect::SharedMountNamespace(p) => config["linux"]["namespaces"][1]["path"] = json!(p),
        }
        let spec: oci_tmpfs_hook::oci::Spec = serde_json::from_value(config).unwrap();
        let host_config = HostConfig::default();
        let result = plan_for(&spec, None, &host_config, HostFacts { ram: RAM }, &UserFacts::HOOK);
        let named = match (&defect, &result) {
            (Defect::Enabled(v), Err(PlanError::Enabled(got))) => v == got,
            (Defect::Size(key, _), Err(PlanError::Size { key: got, .. })) => key == got,
            (Defect::NoRoot, Err(PlanError::NoRoot)) => true,
            (Defect::NoMountNamespace | Defect::SharedMountNamespace(_), Ok(plan)) => {
                let needle = match &defect {
                    Defect::SharedMountNamespace(p) => format!("(path {p})"),
                    _ => "no \"mount\" entry".to_string(),
                };
                !plan.enabled
                    && plan.actions.is_empty()
                    && plan.notes.len() == 1
                    && plan.notes[0].warn
                    && plan.notes[0].reason.contains(&needle)
            }
            _ => false,
        };
        prop_assert!(named, "{:?} gave {:?}", defect, result);
    }
}

proptest! {
    #![proptest_config(config(64))]

    /// `inject` on a real file: never loses a field, keeps key order, idempotent.
    #[test]
    fn inject_keeps_every_field_and_is_idempotent(
        fields in proptest::collection::vec(("[a-zA-Z_]{1,10}", arbitrary_json()), 0..8),
        pretty in any::<bool>(),
    ) {
        let mut original = serde_json::Map::new();
        original.insert("ociVersion".into(), json!("1.0.2"));
        for (k, v) in fields {
            if k != "hooks" {
                original.insert(k, v);
            }
        }
        let original = Value::Object(original);
        let dir = std::env::temp_dir().join(format!("oth-prop-inject-{}-{}", std::process::id(), rand_suffix()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = if pretty { serde_json::to_vec_pretty(&original) } else { serde_json::to_vec(&original) }.unwrap();
        std::fs::write(dir.join("config.json"), text).unwrap();
        let entry = HookEntry::for_stage(Path::new("/usr/bin/oci-tmpfs-hook"), Stage::Prestart, None);
        let first = bundle::inject(&dir, Stage::Prestart, &entry);
        let after_first = std::fs::read(dir.join("config.json")).unwrap();
        let second = bundle::inject(&dir, Stage::Prestart, &entry);
        let after_second = std::fs::read(dir.join("config.json")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        prop_assert!(first.unwrap());
        prop_assert!(!second.unwrap());
        prop_assert_eq!(&after_first, &after_second);
        let mut edited: Value = serde_json::from_slice(&after_first).unwrap();
        let hooks = edited.as_object_mut().unwrap().remove("hooks").unwrap();
        prop_assert_eq!(hooks["prestart"].as_array().unwrap().len(), 1);
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        prop_assert_eq!(keys(&edited), keys(&original));
        prop_assert_eq!(edited, original);
    }
}

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn is_safe_size(size: Size) -> bool {
    match size {
        Size::Absolute(b) => b.0 > 0,
        Size::Percent(p) => (1..=100).contains(&p),
    }
}

fn toml_quote(v: &str) -> String {
    serde_json::to_string(v).unwrap()
}
