#!/usr/bin/env bash
# Keeping the image's HOME writable (docs/design.md#home-copy): what each way
# costs a container start and what it does past the copy-up bounds. As root:
#
#   bench/home_copy.sh [--rounds N] [--layouts a,b,c,d,e1,e2]
#   OCI_TMPFS_BENCH_HOOK=PATH bench/home_copy.sh ...   (that binary, no build)
#
# Real runc containers with a read-only busybox root whose /root (root's
# HOME, `HOME=/root` in process.env) holds one of the layouts below, each
# running `true`; `runc run` wall time per arm, the arms alternating within
# each round after one warm-up round (the image's files are in the page
# cache, as after a pull), medians and ratios to `none`:
#   none            no hook and no tmpfs at /root: the image's home, read-only
#   hook home=off   our hook (inject --stage prestart) with `home = false`:
#                   /tmp and /dev/shm only, the floor of the next arm
#   hook            our hook with HOME: a tmpfs at /root, the image's files
#                   copied up within the bounds (src/hook/copyup.rs)
#   tmpcopyup       a spec tmpfs at /root with our options plus runc's
#                   `tmpcopyup` (runc copies everything, without bounds)
#   overlay         bench/ovlhook.c at prestart, A MEASUREMENT ONLY: an
#                   overlay over /root by fd, lower = the image's /root,
#                   upper and work on a detached tmpfs of the same size
# Then each arm's hook process alone (bench/hook_timer.py: wall and CPU ms),
# what the hook logged, what the container sees at /root (writable, tmpfs
# use), and a few probes of this kernel's overlayfs. Prints Markdown.
# Needs runc, busybox-static, cc, python3 (Debian's /usr/bin/python3), unshare.
set -Eeuo pipefail
cd "$(dirname "$0")/.."

rounds=20
layouts=a,b,c,d,e1,e2
while [[ $# -gt 0 ]]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --layouts) layouts=$2; shift 2 ;;
        -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "home_copy: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
[[ $(id -u) == 0 ]] || { echo "home_copy: run as root (it starts containers)" >&2; exit 1; }
for tool in runc busybox cc /usr/bin/python3 unshare; do
    command -v "$tool" >/dev/null || { echo "home_copy: $tool is missing (see the top of $0)" >&2; exit 1; }
done
hook=${OCI_TMPFS_BENCH_HOOK:-$(packaging/build-static.sh | tail -n 1)}
hook=$(realpath "$hook")

work=$(mktemp -d /var/tmp/oth-hc-XXXXXX)
cleanup() {
    # Containers a failed run left behind (their ids are written before each start).
    if [[ -f $work/ids ]]; then
        while read -r id; do runc delete -f "$id" >/dev/null 2>&1 || true; done <"$work/ids"
    fi
    rm -rf "$work"
}
trap cleanup EXIT
cc -static -O2 -o "$work/ovlhook" bench/ovlhook.c

# Probes of this kernel's overlayfs, each in a private mount namespace.
probe() { # NAME COMMAND...: one table row, the last line the command printed
    local out rc=0
    out=$("${@:2}" 2>&1) || rc=$?
    out=$(printf '%s\n' "$out" | grep -v ' ok$' | tail -n 1)
    if [[ $rc == 0 ]]; then echo "| $1 | works${out:+ ($out)} |"; else echo "| $1 | **fails**: ${out:-exit $rc} |"; fi
}
p=$work/probe
mkdir -p "$p/home/.cache/sub" "$p/L/home" "$p/U" "$p/W" "$p/M"
echo hi >"$p/home/.bashrc"
echo hi >"$p/L/home/.bashrc"
ovl=$work/ovlhook
rename_py='import os,sys
try:
    os.rename(sys.argv[1] + "/.cache", sys.argv[1] + "/.cache2"); print("rename(2) of a lower dir: ok")
except OSError as e:
    print("rename(2) of a lower dir:", e.strerror); sys.exit(1)'
probes=$(
    echo "| probe (kernel $(uname -r)) | result |"
    echo "|---|---|"
    probe "fsconfig(FSCONFIG_SET_FD) lowerdir+/upperdir/workdir with O_PATH fds, upper+work on a detached tmpfs" \
        unshare -m --propagation private "$ovl" try "$p/home" 64m opath
    probe "the same with O_RDONLY fds" unshare -m --propagation private "$ovl" try "$p/home" 64m rdonly
    probe "the path form (/proc/self/fd/N strings: lowerdir, upperdir, workdir)" \
        unshare -m --propagation private "$ovl" try "$p/home" 64m string
    probe "rename(2) of a lower dir, default options" \
        unshare -m --propagation private sh -c "$ovl try $p/home 64m opath && /usr/bin/python3 -c '$rename_py' $p/home"
    probe "busybox mv, coreutils mv and Python's shutil.move of a lower dir, default options" \
        unshare -m --propagation private sh -c "mkdir -p $p/home/m1 $p/home/m2 $p/home/m3 && $ovl try $p/home 64m opath && busybox mv $p/home/m1 $p/home/n1 && mv $p/home/m2 $p/home/n2 && /usr/bin/python3 -c 'import shutil,sys; shutil.move(sys.argv[1], sys.argv[2])' $p/home/m3 $p/home/n3 && echo 'all three moved it (copying on EXDEV)'"
    probe "rename(2) of a lower dir, redirect_dir=on" \
        unshare -m --propagation private sh -c "$ovl try $p/home 64m redirect && /usr/bin/python3 -c '$rename_py' $p/home"
    probe "lower on an overlayfs (overlay2's rootfs shape: stacking depth 2)" \
        unshare -m --propagation private sh -c "mount -t overlay overlay -o lowerdir=$p/L,upperdir=$p/U,workdir=$p/W $p/M && $ovl try $p/M/home 64m opath && cat $p/M/home/.bashrc"
    probe "lower on an overlayfs on an overlayfs (depth 3)" \
        unshare -m --propagation private sh -c "mount -t overlay overlay -o lowerdir=$p/L,upperdir=$p/U,workdir=$p/W $p/M && $ovl try $p/M/home 64m opath && { $ovl try $p/M/home 64m opath || { dmesg | tail -n 1; exit 1; }; }"
    probe "in a user namespace (unshare -Urm), by fd" \
        unshare -Urm --propagation private sh -c "$ovl try $p/home 64m opath && echo w > $p/home/new && echo written"
)

/usr/bin/python3 - "$hook" "$work" "$rounds" "$layouts" "$probes" <<'PY'
import json, os, shutil, statistics, subprocess, sys, time

hook, work, rounds, layouts, probes = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(","), sys.argv[5]
ovlhook = os.path.join(work, "ovlhook")
timer = os.path.abspath("bench/hook_timer.py")
mem_kib = int(next(l.split()[1] for l in open("/proc/meminfo") if l.startswith("MemTotal:")))
size = mem_kib // 4 * 1024  # the hook's default home_size: 25% of RAM, as `explain` prints it
KIB, MIB = 1024, 1024 * 1024

def write(path, nbytes, seed):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    line = f"# {seed}: generated for bench/home_copy.sh\nimport os\n"
    with open(path, "w") as f:
        f.write((line * (nbytes // len(line) + 1))[:nbytes])

def fill(home, layout):
    """Returns a description of the layout's contents."""
    if layout == "a":
        return "empty"
    if layout == "b":  # dotfiles: 12 at the top, 8 under .config and .ssh
        for i, n in enumerate([".bashrc", ".profile", ".bash_history", ".gitconfig", ".vimrc", ".inputrc",
                               ".wget-hsts", ".selected_editor", ".python_history", ".lesshst", ".viminfo", ".netrc"]):
            write(f"{home}/{n}", 2 * KIB, i)
        for i in range(8):
            write(f"{home}/{['.config/git', '.config/pip', '.ssh', '.config/htop'][i % 4]}/file{i}", 2 * KIB, i)
        return "20 files, 40 KiB"
    site = f"{home}/.local/lib/python3.11/site-packages"
    if layout == "c":  # pip --user: 30 packages x 5 subpackages x 10 modules of 10 KiB
        for n in range(1500):
            write(f"{site}/pkg{n // 50:02}/sub{n // 10 % 5}/mod{n % 10}.py", 10 * KIB, n)
        return "1,500 files, 14.6 MiB"
    if layout == "d":  # at the bound: 4,000 files in 40 dirs (4,044 entries), 60 MiB
        for n in range(4000):
            write(f"{site}/pkg{n // 100:02}/mod{n % 100}.py", 60 * MIB // 4000, n)
        return "4,000 files, 60 MiB"
    if layout == "e1":  # a model file: 1 GiB, sparse
        os.makedirs(f"{home}/.cache/huggingface", exist_ok=True)
        with open(f"{home}/.cache/huggingface/model.safetensors", "w") as f:
            f.truncate(1 << 30)
        return "1 GiB sparse file"
    if layout == "e2":  # 100,000 files of 1 KiB in 100 dirs
        for n in range(100_000):
            write(f"{site}/pkg{n // 1000:02}/mod{n % 1000}.py", KIB, n)
        return "100,000 files, 98 MiB"
    raise SystemExit(f"home_copy: unknown layout {layout}")

APPLETS = ["sh", "true", "df", "du", "ls", "cat", "touch", "grep", "cut", "tail", "wc", "head", "echo", "find", "sed", "tr"]

def rootfs(layout):
    r = f"{work}/{layout}/rootfs"
    for d in ["bin", "proc", "sys", "dev", "etc", "tmp", "root"]:
        os.makedirs(f"{r}/{d}", exist_ok=True)
    os.chmod(f"{r}/root", 0o700)
    shutil.copy(shutil.which("busybox"), f"{r}/bin/busybox")
    for a in APPLETS:
        os.symlink("busybox", f"{r}/bin/{a}")
    open(f"{r}/etc/passwd", "w").write("root:x:0:0:root:/root:/bin/sh\n")
    open(f"{r}/etc/group", "w").write("root:x:0:\n")
    return r, fill(f"{r}/root", layout)

def conf(name, text):
    path = f"{work}/{name}.toml"
    open(path, "w").write(text)
    return path

HOME_ON = conf("home-on", "home = true\n")
HOME_OFF = conf("home-off", "home = false\n")
ARMS = ["none", "hook home=off", "hook", "tmpcopyup", "overlay"]

def bundle(layout, rootfs_dir, arm, args, tag="", config=HOME_ON, timed_hooks=None, tmpfs=None, memory=None):
    b = f"{work}/{layout}/{arm.replace(' ', '-').replace('=', '-')}{tag}"
    tmpfs = tmpfs or size
    os.makedirs(b, exist_ok=True)
    subprocess.run(["runc", "spec", "--bundle", b], check=True)
    with open(f"{b}/config.json") as f:
        c = json.load(f)
    c["root"] = {"path": rootfs_dir, "readonly": True}
    c["process"]["terminal"] = False
    c["process"]["args"] = args
    c["process"]["env"].append("HOME=/root")
    if memory:
        c["linux"].setdefault("resources", {})["memory"] = {"limit": memory}
    if arm == "tmpcopyup":
        c["mounts"].append({"destination": "/root", "type": "tmpfs", "source": "tmpfs",
                            "options": ["nosuid", "nodev", "mode=700", "uid=0", "gid=0", f"size={tmpfs}", "tmpcopyup"]})
    if arm == "overlay":
        c["hooks"] = {"prestart": [{"path": ovlhook, "args": ["ovlhook", "hook", rootfs_dir, "root", str(tmpfs)]}]}
    with open(f"{b}/config.json", "w") as f:
        json.dump(c, f, indent=1)
    if arm.startswith("hook"):
        cfg = HOME_OFF if arm == "hook home=off" else config
        subprocess.run([hook, "inject", "--bundle", b, "--stage", "prestart", "--config", cfg], check=True,
                       stdout=subprocess.DEVNULL)
    if timed_hooks:  # the hook process alone, through bench/hook_timer.py
        with open(f"{b}/config.json") as f:
            c = json.load(f)
        for h in c["hooks"]["prestart"]:
            h["args"] = ["python3", timer, timed_hooks, h["path"]] + h["args"][1:]
            h["path"] = "/usr/bin/python3"
        with open(f"{b}/config.json", "w") as f:
            json.dump(c, f, indent=1)
    return b

counter = 0
def run(b, capture=False, check=True):
    global counter
    counter += 1
    cid = f"oth-hc-{os.getpid()}-{counter}"
    with open(f"{work}/ids", "a") as f:
        f.write(cid + "\n")
    t0 = time.perf_counter()
    p = subprocess.run(["runc", "run", "--bundle", b, cid], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE if capture else subprocess.DEVNULL, stderr=subprocess.PIPE)
    ms = (time.perf_counter() - t0) * 1e3
    if not check:
        return ms, p.returncode, (p.stdout + p.stderr).decode(errors="replace")
    if p.returncode != 0:
        raise SystemExit(f"home_copy: runc run {b} failed: {p.stderr.decode(errors='replace')}")
    return ms, (p.stdout.decode(errors="replace") if capture else "")

def alternate(bundles, n):
    """One warm-up round, then n rounds with the arms in a rotating order."""
    times = {a: [] for a in bundles}
    names = list(bundles)
    for r in range(n + 1):
        order = names[r % len(names):] + names[:r % len(names)]
        for a in order:
            ms, _ = run(bundles[a])
            if r:
                times[a].append(ms)
    return {a: statistics.median(t) for a, t in times.items()}

def fmt(ms):
    return f"{ms:.2f}" if ms < 100 else f"{ms:.0f}"

LOOK = ("if touch /root/.w 2>/dev/null; then w=writable; else w=read-only; fi; "
        "echo \"$w|$(grep ' /root ' /proc/self/mountinfo | tail -n 1 | sed 's/.* - //' | cut -d' ' -f1)"
        "|$(df -k /root | tail -n 1 | tr -s ' ' | cut -d' ' -f3)|$(find /root | wc -l)\"")

MODEL = "/root/.cache/huggingface/model.safetensors"

def edge(layout, rdir):
    """Past the bounds, once each, on layout e1 (a 1 GiB sparse file), plus
    a dense 256 MiB file for the overlay's copy-up on write."""
    rows = []
    def one(what, b):
        ms, rc, out = run(b, capture=True, check=False)
        last = " ".join(out.strip().splitlines()[-1:]) if out.strip() else ""
        last = last.replace("|", "/").replace('\\"', '"')
        last = last if len(last) <= 200 else "..." + last[-200:]
        state = "**did not start**" if "runc run failed" in out else f"exit {rc}"
        rows.append(f"| {what} | {state} | {fmt(ms)} | `{last}` |")
    look = ["sh", "-c", LOOK]
    one("tmpcopyup, a 64 MiB tmpfs", bundle(layout, rdir, "tmpcopyup", look, tag="-64m", tmpfs=64 * MIB))
    one("tmpcopyup, memory limit 256 MiB", bundle(layout, rdir, "tmpcopyup", look, tag="-mem", memory=256 * MIB))
    one("hook, memory limit 256 MiB", bundle(layout, rdir, "hook", look, tag="-mem", memory=256 * MIB))
    one("overlay, append 1 byte to the sparse 1 GiB file",
        bundle(layout, rdir, "overlay", ["sh", "-c", f"echo x >> {MODEL} && {LOOK}"], tag="-app"))
    dense = "/root/.cache/torch/hub/checkpoints/weights.pt"
    os.makedirs(os.path.dirname(rdir + dense))
    with open(rdir + dense, "wb") as f:
        for _ in range(256):
            f.write(b"\x01" * MIB)
    append = ["sh", "-c", f"echo x >> {dense} && {LOOK}"]
    one("overlay, append 1 byte to a dense 256 MiB file", bundle(layout, rdir, "overlay", append, tag="-dense"))
    one("overlay, the same on a 64 MiB tmpfs", bundle(layout, rdir, "overlay", append, tag="-dense64", tmpfs=64 * MIB))
    one("overlay, the same with memory limit 128 MiB",
        bundle(layout, rdir, "overlay", append, tag="-densemem", memory=128 * MIB))
    os.unlink(rdir + dense)
    # The rootfs itself an overlayfs, as Docker's overlay2 and containerd's snapshotter make it.
    o = f"{work}/{layout}/ovlroot"
    for d in ["upper", "work", "merged"]:
        os.makedirs(f"{o}/{d}")
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={rdir},upperdir={o}/upper,workdir={o}/work", f"{o}/merged"], check=True)
    try:
        see = ["sh", "-c", "touch /root/.w && grep ' /root ' /proc/self/mountinfo | tail -n 1 | sed 's/.* - //'"]
        one("overlay, the rootfs an overlayfs (overlay2's shape; the container's mountinfo for /root)",
            bundle(layout, f"{o}/merged", "overlay", see, tag="-on-ovl"))
    finally:
        subprocess.run(["umount", f"{o}/merged"], check=True)
    return rows

start = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
load = open("/proc/loadavg").read().split()[:3]
main_rows, hook_rows, look_rows, logs, edge_rows = [], [], [], [], []
for layout in layouts:
    t0 = time.perf_counter()
    rdir, desc = rootfs(layout)
    made = time.perf_counter() - t0
    bundles = {a: bundle(layout, rdir, a, ["true"]) for a in ARMS}
    med = alternate(bundles, rounds)
    base = med["none"]
    cells = [f"{fmt(med[a])} ({med[a] / base:.2f})" for a in ARMS]
    main_rows.append(f"| ({layout}) {desc} | " + " | ".join(cells) + f" | {med['hook'] - med['hook home=off']:+.2f} |")

    # The hook processes alone (wall and CPU ms as the runtime sees them).
    tlogs = {a: f"{work}/{layout}-{a.replace(' ', '-')}.timer" for a in ["hook home=off", "hook", "overlay"]}
    timed = {a: bundle(layout, rdir, a, ["true"], tag="-timed", timed_hooks=tlogs[a]) for a in tlogs}
    alternate(timed, rounds)
    def hook_med(a):
        rows = [l.split() for l in open(tlogs[a])]
        last = rows[-rounds:]  # after the warm-up round's line
        return statistics.median(float(r[1]) for r in last), statistics.median(float(r[2]) for r in last)
    hw = {a: hook_med(a) for a in tlogs}
    hook_rows.append(f"| ({layout}) {desc} | " + " | ".join(f"{fmt(w)} / {fmt(c)}" for w, c in hw.values())
                     + f" | {hw['hook'][0] - hw['hook home=off'][0]:+.2f} |")

    # What the container sees at /root, and what the hook logged (debug).
    log = f"{work}/{layout}.log"
    debug = conf(f"{layout}-debug", f'home = true\nlog_level = "debug"\nlog_file = "{log}"\n')
    for a in ARMS:
        lb = bundle(layout, rdir, a, ["sh", "-c", LOOK], tag="-look", config=debug)
        _, out = run(lb, capture=True)
        w, fs, used, n = out.strip().split("|")
        fs = fs or "(image's dir)"
        mib = f"{int(used) / 1024:.1f}" if fs in ("tmpfs", "overlay") else "-"
        look_rows.append(f"| ({layout}) | {a} | {w} | {fs} | {mib} | {n} |")
    try:
        lines = [l.strip() for l in open(log) if "/root" in l and ("copied" in l or "left alone" in l)]
    except FileNotFoundError:
        lines = []
    logs.append(f"- ({layout}): " + ("; ".join(f"`{l.split(': ', 1)[-1]}`" for l in lines) or "(nothing about /root)"))
    if layout == "e1":
        edge_rows = edge(layout, rdir)
    print(f"home_copy: ({layout}) {desc}: made in {made:.1f} s, measured", file=sys.stderr)
    shutil.rmtree(f"{work}/{layout}")

out = [
    f"- date: {start}",
    f"- CPUs: {os.cpu_count()}; RAM: {mem_kib / 1024 / 1024:.1f} GiB; home tmpfs size (25% of RAM, the hook's default): {size // MIB} MiB",
    f"- kernel: {os.uname().release}; runc: {subprocess.run(['runc', '--version'], capture_output=True, text=True).stdout.split()[2]}",
    f"- hook: {hook}",
    f"- load average before: {' '.join(load)}",
    f"- rounds: {rounds} per arm and layout, alternating, after one warm-up round",
    "",
    "`runc run` of `true`, median ms (ratio to `none`); the last column is the hook's HOME share (hook − hook home=off):",
    "",
    "| layout of /root | none | hook home=off | hook (copy-up) | tmpcopyup | overlay (measurement hook) | HOME in the hook |",
    "|---|---|---|---|---|---|---|",
    *main_rows,
    "",
    "The prestart hook process alone (bench/hook_timer.py), median wall / CPU ms:",
    "",
    "| layout of /root | hook home=off | hook (copy-up) | overlay (measurement hook) | copy-up's share (wall) |",
    "|---|---|---|---|---|",
    *hook_rows,
    "",
    "What the hook logged about /root (log_level = \"debug\"):",
    "",
    *logs,
    "",
    "What the container sees at /root (`touch /root/.w`; the fs type of the last /root mount; `df` used, MiB: the overlay's is its upper tmpfs'; entries under /root, `find /root | wc -l`):",
    "",
    "| layout | arm | /root | mounted | MiB used | entries |",
    "|---|---|---|---|---|---|",
    *look_rows,
    "",
    *(["Past the bounds, once each on (e1) (the run's wall ms; the last line it printed, `/root|fs|df used KiB|entries` as above, or runc's error):", "",
       "| case | container | ms | last line |", "|---|---|---|---|", *edge_rows, ""] if edge_rows else []),
    probes,
]
print("\n".join(out))
PY
