"""The harness of tests/gpu/run.sh (docs/gpu.md#gpu-script): GPU workloads in
read-only runc containers made of the host's own root, without us, with the
hook executor and with the spec executor, as three users; one Markdown table.

Each cell of the table is one container: a bundle whose rootfs is empty
mount points, the host's `/usr`, `/etc`, `/bin`, `/sbin`, `/lib*` and `/opt`
bound read-only into it (merged-/usr symlinks recreated), the Python
environment's own directories too when they lie elsewhere, `tests/gpu` at
`/gpu`, an empty `/root` (mode 0700) and an empty `/home`; `root.readonly` true,
`runc spec`'s 64 MiB `/dev/shm`, and (without `--cpu`) every `/dev/nvidia*`
node and `/dev/dri` bound in, with the device cgroup allowing all. It runs
`rows.py ROW`, which prints one PASS/FAIL/N/A line. The executors:
- none: the bundle as it is;
- hook: `oci-tmpfs-hook inject --stage prestart`;
- spec: `oci-tmpfs-hook inject --mode spec --runtime RUNTIME`.
Both read a host config of the harness's own (defaults, warnings to a log
file), not the host's. The users:
- root: uid 0, no `HOME` in the env (the runtime takes `/root` from the
  host's `/etc/passwd`, bound in);
- uid 1000 with `HOME=/home/u`, a home the image does not have;
- a uid with no `/etc/passwd` entry and no `HOME` (1000 if the host's
  passwd has none, else 12345 or the next free one): the runtime gives
  `HOME=/`; every executor keeps `/` read-only and mounts the caches under
  it (`/.triton`, `/.cupy`, `/.cache`, ...: docs/design.md#home-rule).
No executor sets `HOME` or makes it writable: only its caches are.
The exit status is 0 when every cell with us that is expected to pass
passed with the expected `HOME`, and nothing of ours stayed mounted on the
host; the cells without us are compared with the known table and marked,
but do not change it. Every container has a timeout and is deleted; every
bundle is removed.
"""

import argparse
import concurrent.futures
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# Row name, what it does (GPU; --cpu), seconds its container may take.
ROWS = [
    ("share_memory", "`Module.share_memory()`, `file_system` strategy, a child updates it",
     "`Module.share_memory()`, `file_system` strategy, a child updates it", 180),
    ("dataloader", "DataLoader, 4 workers, pinned memory, 73.5 MiB batches, a CNN trained on CUDA",
     "DataLoader, 4 workers, 73.5 MiB batches, a CNN trained on the CPU (unpinned)", 300),
    ("ipc", "a CUDA tensor handed to a spawned child (CUDA IPC)",
     "a shared CPU tensor handed to a spawned child (`file_descriptor` strategy)", 180),
    ("compile", "`torch.compile` on CUDA (Inductor + Triton)", "`torch.compile` on the CPU (Inductor, C++)", 600),
    ("triton", "a raw `@triton.jit` kernel", "Triton's kernel cache manager (`put`, `get_file`)", 300),
    ("cupy", "a CuPy `ElementwiseKernel`", "a file into CuPy's kernel cache dir", 300),
]
ROW_NAMES = [r[0] for r in ROWS]
EXECUTORS = [("none", "without us"), ("hook", "hook"), ("spec", "spec")]
USERS = ["root", "u1000", "noentry"]

# The host directories every container reuses, read-only.
HOST_DIRS = ["/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt"]
# Variables passed from the host: where the CUDA libraries and tools are.
# Nothing that moves a cache or the temp dir (TMPDIR, HOME, TRITON_*_DIR,
# CUPY_CACHE_DIR, XDG_*): those would change what is measured.
PASS_ENV = ["LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "PYTHONPATH",
            "TRITON_PTXAS_PATH", "TRITON_LIBCUDA_PATH"]
# Seconds a row waits for another process: short without us (nothing will
# answer), long with us.
WAIT_WITHOUT_US, WAIT_WITH_US = 20, 120

# Python run on the host: what the container needs of this environment.
PROBE = r"""
import json, os, sys
out = {"executable": sys.executable, "version": sys.version.split()[0],
       "dirs": [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
                os.path.dirname(sys.executable)] + [p for p in sys.path if p and os.path.isdir(p)]}
def probe(name, extra=None):
    try:
        m = __import__(name)
        out[name] = getattr(m, "__version__", "?")
        out["dirs"].append(os.path.dirname(os.path.dirname(os.path.realpath(m.__file__))))
        if extra:
            extra(m)
    except Exception as e:
        out[name + "_error"] = (type(e).__name__ + ": " + str(e)).splitlines()[0][:200]
def torch_extra(torch):
    out["torch_compile"] = hasattr(torch, "compile")
    out["cuda"] = bool(torch.cuda.is_available())
    if out["cuda"]:
        out["gpu"] = torch.cuda.get_device_name(0)
        out["torch_cuda"] = torch.version.cuda
probe("torch", torch_extra)
probe("triton")
probe("cupy")
print(json.dumps(out))
"""


def die(msg):
    print(f"tests/gpu: {msg}", file=sys.stderr)
    sys.exit(2)


def under(path, top):
    return path == top or path.startswith(top.rstrip("/") + "/")


class Host:
    """What the host gives every container."""

    def __init__(self, args):
        self.cpu = args.cpu
        self.hook = args.hook
        self.runtime = args.runtime
        self.python_arg = args.python
        self.noentry_uid = free_uid()
        self.homes = ["/root", "/home/u"]
        self.info = self.probe_python()
        self.python = self.info["executable"]
        self.binds = self.python_binds()
        self.devices = ([] if self.cpu else self.gpu_devices()) + args.device

    def probe_python(self):
        try:
            out = subprocess.run([self.python_arg, "-c", PROBE],
                                 capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as e:
            die(f"{self.python_arg}: {e}")
        if out.returncode != 0:
            die(f"{self.python_arg} failed: {out.stderr.strip()}")
        info = json.loads(out.stdout.strip().splitlines()[-1])
        if "torch" not in info:
            die(f"{info['executable']} cannot import torch ({info.get('torch_error')}); pass --python")
        if not self.cpu and not info.get("cuda"):
            die(f"torch {info['torch']} in {info['executable']} sees no CUDA device "
                "(torch.cuda.is_available() is False); run with --cpu for the dry run")
        return info

    def python_binds(self):
        """The Python environment's directories that the host dirs do not
        cover, each bound at its own path."""
        tops = [d for d in HOST_DIRS if os.path.isdir(d) and not os.path.islink(d)]
        want = set()
        for d in self.info["dirs"]:
            for p in {os.path.normpath(d), os.path.realpath(d)}:
                if not os.path.isdir(p) or any(under(p, t) for t in tops):
                    continue
                for h in self.homes:
                    if under(p, h) or under(h, p):
                        die(f"the Python environment lies under {p}, which is (or holds) a HOME the "
                            f"containers get ({h}): our tmpfs there would hide it. Use a Python "
                            "outside /root and /home/u (e.g. a venv in /opt), with --python")
                if p == "/":
                    die("the Python environment's directories include /")
                want.add(p)
        out = []
        for p in sorted(want):
            if not any(under(p, q) for q in out):
                out.append(p)
        return out

    def gpu_devices(self):
        devs = sorted(glob.glob("/dev/nvidia*"))
        if not any(re.fullmatch(r"/dev/nvidia\d+", d) for d in devs):
            die("no /dev/nvidia<N> device node: run on a host with an NVIDIA GPU, or with --cpu")
        if os.path.isdir("/dev/dri"):
            devs.append("/dev/dri")
        return devs

    def available(self, row):
        """None when the row can run here, else why not ("not installed")."""
        i = self.info
        if row == "compile":
            if not i.get("torch_compile"):
                return f"n/a: torch {i['torch']} has no torch.compile"
            if not self.cpu and "triton" not in i:
                return "n/a: triton not installed"
        if row == "triton" and "triton" not in i:
            return "n/a: triton not installed"
        if row == "cupy" and "cupy" not in i:
            return "n/a: cupy not installed"
        return None


def free_uid():
    """1000 if the host's /etc/passwd (which the containers see) has no entry
    for it, else the first free uid from 12345."""
    try:
        with open("/etc/passwd", encoding="utf-8", errors="replace") as f:
            used = {l.split(":")[2] for l in f if l.count(":") >= 6}
    except OSError:
        used = set()
    if "1000" not in used:
        return 1000
    uid = 12345
    while str(uid) in used:
        uid += 1
    return uid


def user_spec(host, user):
    """(uid, gid, HOME to put in the env or None, column label)."""
    if user == "root":
        return 0, 0, None, "root"
    if user == "u1000":
        return 1000, 1000, "/home/u", "uid 1000, HOME=/home/u"
    u = host.noentry_uid
    return u, u, None, f"uid {u}, no HOME, no passwd entry"


def expected_home(host, user, executor):
    if user == "root":
        return {"/root"}
    if user == "u1000":
        return {"/home/u"}
    # No executor sets HOME: runc gives /; crun 1.8.1 leaves HOME unset
    # (docs/design.md#home).
    return {"/", "(unset)"}


def expectation(host, row, executor, user):
    """'pass', or 'fail' (without us, per the known table). With us every
    cell passes: a uid with no passwd entry through the hook too, since the
    caches under HOME=/ (Triton's, CuPy's, Inductor's Triton) get a tmpfs."""
    if executor == "none":
        # CUDA IPC passes a memory handle: no temp dir, no file in /dev/shm
        # beyond its small ref counter (measured on an H200). The CPU
        # variant passes an fd over a socket in the temp dir.
        return "pass" if (row == "ipc" and not host.cpu) else "fail"
    return "pass"


class Cell:
    def __init__(self, row, executor, user):
        self.row, self.executor, self.user = row, executor, user
        self.status = None  # PASS, FAIL, N/A, ERROR
        self.error = ""
        self.home = None
        self.log = ""
        self.expect = None
        self.ok = True  # counts towards the exit status
        self.note = ""
        self.devices = {}  # path -> "ok" or an errno name


class Harness:
    def __init__(self, args, host):
        self.args, self.host = args, host
        self.work = args.workdir
        self.prefix = args.prefix
        self.counter = 0
        self.lock = threading.Lock()
        self.running = set()
        self.ids_file = os.path.join(self.work, "containers")

    def new_id(self, cell):
        with self.lock:
            self.counter += 1
            n = self.counter
        return f"{self.prefix}-{os.getpid()}-{n}-{cell.row}-{cell.executor}-{cell.user}".replace("_", "-")

    def bundle(self, cid, cell):
        host = self.host
        d = os.path.join(self.work, cid)
        rootfs = os.path.join(d, "rootfs")
        for sub in ["proc", "sys", "dev", "tmp", "gpu", "home"]:
            os.makedirs(os.path.join(rootfs, sub))
        os.makedirs(os.path.join(rootfs, "root"), mode=0o700)
        os.chmod(os.path.join(rootfs, "root"), 0o700)
        run([host.runtime, "spec", "--bundle", d], "runc spec")
        with open(os.path.join(d, "config.json")) as f:
            config = json.load(f)
        uid, gid, home, _ = user_spec(host, cell.user)
        env = [f"PATH={os.path.dirname(host.python)}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1",
               f"TORCH_TEST_WAIT={WAIT_WITHOUT_US if cell.executor == 'none' else WAIT_WITH_US}"]
        env += [f"{k}={os.environ[k]}" for k in PASS_ENV if os.environ.get(k)]
        if home:
            env.append(f"HOME={home}")
        if host.devices:
            env.append(f"GPU_TEST_DEVICES={':'.join(host.devices)}")
        proc = config["process"]
        proc.update({"terminal": False, "cwd": "/", "env": env, "user": {"uid": uid, "gid": gid},
                     "args": [host.python, "/gpu/rows.py", cell.row] + (["--cpu"] if host.cpu else [])})
        config["root"]["readonly"] = True
        config["hostname"] = "gpu-test"
        mounts = config["mounts"]
        for top in HOST_DIRS:
            at = os.path.join(rootfs, top.lstrip("/"))
            if os.path.islink(top):
                os.symlink(os.readlink(top), at)
            elif os.path.isdir(top):
                os.makedirs(at)
                mounts.append({"destination": top, "type": "bind", "source": top, "options": ["rbind", "ro"]})
        for p in host.binds:
            os.makedirs(os.path.join(rootfs, p.lstrip("/")), exist_ok=True)
            mounts.append({"destination": p, "type": "bind", "source": p, "options": ["rbind", "ro"]})
        mounts.append({"destination": "/gpu", "type": "bind", "source": HERE, "options": ["rbind", "ro"]})
        for dev in host.devices:
            mounts.append({"destination": dev, "type": "bind", "source": dev, "options": ["rbind", "rw"]})
        if host.devices:
            config["linux"].setdefault("resources", {})["devices"] = [{"allow": True, "access": "rwm"}]
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
        log = os.path.join(d, "hook.log")
        conf = os.path.join(d, "host.toml")
        with open(conf, "w") as f:
            f.write(f"log_file = {json.dumps(log)}\nlog_level = \"warn\"\n")
        return d, conf, log

    def inject(self, cell, d, conf):
        if cell.executor == "none":
            return ""
        argv = [self.host.hook, "inject", "--config", conf, "--bundle", d]
        if cell.executor == "hook":
            argv += ["--stage", "prestart"]
        else:
            argv += ["--mode", "spec", "--runtime", self.host.runtime]
        return run(argv, f"inject ({cell.executor})")

    def run_cell(self, cell):
        cell.expect = expectation(self.host, cell.row, cell.executor, cell.user)
        why = self.host.available(cell.row)
        if why:
            cell.status, cell.error = "N/A", why
            return cell
        cid = self.new_id(cell)
        d = None
        try:
            d, conf, log = self.bundle(cid, cell)
            injected = self.inject(cell, d, conf)
            out, err, rc, timed_out = self.run_container(cid, d, self.timeout(cell.row))
            hook_log = read(log)
            cell.log = (f"== {cid} ({cell.executor}, {cell.user}): exit {rc}{' (timed out)' if timed_out else ''}\n"
                        f"-- inject:\n{injected}\n-- stdout:\n{out}\n-- stderr:\n{err}\n-- hook log:\n{hook_log}\n")
            parse(cell, out, err, rc, timed_out, self.timeout(cell.row))
        except HarnessError as e:
            cell.status, cell.error = "ERROR", str(e)
            cell.log += f"== {cid}: {e}\n"
        finally:
            self.delete(cid)
            if d:
                left = mounts_under(d)
                if left:
                    cell.status, cell.error = "ERROR", f"left mounted on the host: {', '.join(left)}"
                    cell.note = "mount left"
                else:
                    shutil.rmtree(d, ignore_errors=True)
        return cell

    def timeout(self, row):
        return self.args.timeout or dict((r[0], r[3]) for r in ROWS)[row]

    def run_container(self, cid, d, timeout):
        with self.lock:
            self.running.add(cid)
            with open(self.ids_file, "a") as f:
                f.write(cid + "\n")
        p = subprocess.Popen([self.host.runtime, "run", "--bundle", d, cid], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
        try:
            out, err = p.communicate(timeout=timeout)
            return out, err, p.returncode, False
        except subprocess.TimeoutExpired:
            self.delete(cid)
            try:
                out, err = p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
            return out, err, p.returncode, True

    def delete(self, cid):
        subprocess.run([self.host.runtime, "delete", "--force", cid], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        with self.lock:
            self.running.discard(cid)

    def delete_all(self):
        for cid in list(self.running):
            self.delete(cid)


class HarnessError(Exception):
    pass


def run(argv, what):
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise HarnessError(f"{what}: {e}") from None
    text = out.stdout + out.stderr
    if out.returncode != 0:
        raise HarnessError(f"{what} exited {out.returncode}: {text.strip()[:300]}")
    return text


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def mounts_under(d):
    """Mount points on the host at or under `d` (none should be left)."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            at = line.split()[4].encode().decode("unicode_escape")
            if under(at, d):
                out.append(at)
    return out


# An error line on stderr: `SomeError: ...` or `ERROR: ...` at the start of a
# line (not a traceback's indented source line).
ERROR_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception)|ERROR): ")


def parse(cell, out, err, rc, timed_out, timeout):
    for line in out.splitlines():
        if line.startswith("HOME="):
            cell.home = line[5:]
        elif line.startswith("DEVICE "):
            _, path, state = line.split(" ", 2)
            cell.devices[path] = state
    line = next((l for l in out.splitlines()
                 if l.strip() == f"PASS {cell.row}" or l.startswith((f"FAIL {cell.row}:", f"N/A {cell.row}:"))),
                None)
    if line is None:
        cell.status = "FAIL"
        what = f"timed out after {timeout} s" if timed_out else f"no result line (exit {rc})"
        detail = first_error(err)
        cell.error = f"{what}{': ' + detail if detail else ''}"
        return
    if line.startswith("PASS"):
        cell.status = "PASS"
        return
    if line.startswith("N/A"):
        cell.status, cell.error = "N/A", "n/a: " + line.split(": ", 1)[1]
        return
    cell.status = "FAIL"
    msg = line.split(": ", 1)[1]
    # A worker's or the queue feeder's error (the real one) is on stderr;
    # the FAIL line then only says that nothing answered.
    detail = first_error(err, skip=msg)
    cell.error = msg if not detail or detail in msg else f"{msg} (stderr: {detail})"


def first_error(err, skip=""):
    for line in err.splitlines():
        if ERROR_LINE.match(line) and not (skip and (line in skip or skip in line)):
            return line.strip()[:240]
    return ""


def normalise(error):
    """The same error from another container reads the same: no pids."""
    return re.sub(r"pid(\(s\))? [0-9][0-9, ]*", r"pid\1 N", error)


def judge(host, cell):
    """Whether the cell counts as a failure, and the mark the table shows."""
    if cell.status == "N/A":
        cell.ok = True
        return
    want_home = expected_home(host, cell.user, cell.executor)
    home_ok = cell.home in want_home
    # A node missing, or refused by the device cgroup, is the harness's
    # fault in every column (EACCES is the node's mode on the host).
    broken = [f"{p}: {s}" for p, s in cell.devices.items() if s in ("ENOENT", "EPERM")]
    if cell.status in ("PASS", "FAIL") and cell.devices.keys() != set(host.devices):
        broken.append("no DEVICE lines")
    if broken:
        cell.ok = False
        cell.note = "device " + ", ".join(broken)
        return
    if cell.executor == "none":
        cell.ok = True
        if cell.status in ("PASS", "FAIL") and cell.status.lower() != cell.expect:
            cell.note = f"expected {cell.expect.upper()}"
        if cell.status == "ERROR":
            cell.ok = False
        return
    cell.ok = cell.status == "PASS"
    if not cell.ok:
        cell.note = "unexpected"
    if cell.home is not None and not home_ok:
        cell.ok = False
        cell.note = (cell.note + ", " if cell.note else "") + f"HOME={cell.home}, want {' or '.join(sorted(want_home))}"


def table(host, cells, args):
    errors = []

    def ref(text):
        if text not in errors:
            errors.append(text)
        return errors.index(text) + 1

    cols = [(e, u) for e, _ in EXECUTORS if e in args.executors for u in USERS if u in args.users]
    short = {"root": "root", "u1000": "uid 1000", "noentry": f"uid {host.noentry_uid}"}
    label = dict(EXECUTORS)
    lines = ["| row | " + " | ".join(f"{label[e]}: {short[u]}" for e, u in cols) + " |",
             "|---|" + "---|" * len(cols)]
    by = {(c.row, c.executor, c.user): c for c in cells}
    for name, gpu_what, cpu_what, _ in ROWS:
        if name not in args.rows:
            continue
        what = cpu_what if host.cpu else gpu_what
        row = [f"{name}: {what}"]
        for e, u in cols:
            c = by[(name, e, u)]
            if c.status == "PASS":
                text = "PASS"
            else:
                text = f"{c.status.lower() if c.status == 'N/A' else c.status} [{ref(normalise(c.error))}]"
            if c.note:
                text += f" ({c.note})"
            if not c.ok:
                text = f"**{text}**"
            row.append(text)
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    lines.append("PASS/FAIL: the row's own verdict; [n]: its first error line, below; "
                 "(expected X): differs from the known table; **bold**: counts as a failure.")
    lines.append("")
    for i, e in enumerate(errors, 1):
        lines.append(f"[{i}] {e.replace('|', '/')}  ")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(prog="tests/gpu/run.sh", description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu", action="store_true", help="the dry run: CPU variants of the rows, no /dev/nvidia*")
    ap.add_argument("--python", default=None,
                    help="the Python with torch (default: /usr/bin/python3 if it imports torch, else python3)")
    ap.add_argument("--runtime", default=None, help="the OCI runtime (default: runc on PATH)")
    ap.add_argument("--rows", default=",".join(ROW_NAMES), help="rows to run, comma-separated")
    ap.add_argument("--executors", default="none,hook,spec", help="of none,hook,spec")
    ap.add_argument("--users", default=",".join(USERS), help="of root,u1000,noentry")
    ap.add_argument("--device", action="append", default=[], metavar="PATH",
                    help="bind this device node (or directory) in too; repeatable")
    ap.add_argument("--timeout", type=int, default=0, help="seconds per container (default: per row, 180-600)")
    ap.add_argument("--jobs", type=int, default=1, help="containers at once (default 1)")
    ap.add_argument("--prefix", default="oci-tmpfs-gpu", help="container id prefix")
    ap.add_argument("--log", default=None, help="write every container's output to this file")
    ap.add_argument("--workdir", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--hook", required=True, help=argparse.SUPPRESS)
    args = ap.parse_args()
    for name, allowed in [("rows", ROW_NAMES), ("executors", [e for e, _ in EXECUTORS]), ("users", USERS)]:
        value = [v for v in getattr(args, name).split(",") if v]
        bad = [v for v in value if v not in allowed]
        if bad or not value:
            die(f"--{name}: {','.join(bad) or '(empty)'} not among {','.join(allowed)}")
        setattr(args, name, value)
    args.runtime = args.runtime or shutil.which("runc") or die("no runc on PATH (--runtime)")
    if not args.python:
        ok = os.access("/usr/bin/python3", os.X_OK) and subprocess.run(
            ["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0
        args.python = "/usr/bin/python3" if ok else (shutil.which("python3") or die("no python3"))

    host = Host(args)
    h = Harness(args, host)

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    i = host.info
    rt_version = subprocess.run([args.runtime, "--version"], capture_output=True, text=True).stdout.splitlines()
    hook_version = subprocess.run([args.hook, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"tests/gpu/run.sh{' --cpu' if host.cpu else ''}, {time.strftime('%Y-%m-%d %H:%M %Z')}:")
    print(f"- host: {os.uname().nodename}, kernel {os.uname().release}; "
          f"{'GPU ' + i.get('gpu', '?') + ', CUDA ' + str(i.get('torch_cuda')) if not host.cpu else 'CPU only (--cpu)'}")
    print(f"- Python {i['version']} ({host.python}); torch {i['torch']}; "
          f"triton {i.get('triton', 'not installed')}; cupy {i.get('cupy', 'not installed')}")
    print(f"- {rt_version[0] if rt_version else args.runtime} ({args.runtime}); {hook_version} ({args.hook})")
    if host.binds:
        print(f"- also bound read-only: {', '.join(host.binds)}")
    if host.devices:
        print(f"- devices: {', '.join(host.devices)}")
    print(f"- users: root (HOME=/root from /etc/passwd); uid 1000 with HOME=/home/u (not in the image); "
          f"uid {host.noentry_uid} with no HOME and no /etc/passwd entry (the runtime gives HOME=/)")
    sys.stdout.flush()

    cells = [Cell(r, e, u) for r in args.rows for e in args.executors for u in args.users]
    started = time.time()
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for c in pool.map(h.run_cell, cells):
                judge(host, c)
                mark = c.status if c.ok else f"{c.status} (counts as a failure)"
                print(f"  {c.row} / {c.executor} / {c.user}: {mark}{': ' + c.error if c.error else ''}",
                      file=sys.stderr, flush=True)
                if not c.ok:
                    print(c.log[-6000:], file=sys.stderr, flush=True)
    finally:
        h.delete_all()
    if args.log:
        with open(args.log, "w") as f:
            f.write("".join(c.log for c in cells))
    print()
    print(table(host, cells, args))
    bad = [c for c in cells if not c.ok]
    counted = [c for c in cells if c.executor != "none" and c.expect == "pass" and c.status != "N/A"]
    print()
    print(f"with us: {sum(c.ok for c in counted)} of {len(counted)} cells expected to pass passed; "
          f"without us: {sum(1 for c in cells if c.executor == 'none' and c.note.startswith('expected'))} "
          f"differ from the known table; {sum(1 for c in cells if c.status == 'N/A')} n/a; "
          f"{time.time() - started:.0f} s")
    print("RESULT: " + ("PASS" if not bad else f"FAIL ({len(bad)} cells)"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
