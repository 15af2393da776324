"""The workloads of tests/gpu/run.sh, one per row, run inside the container.

    rows.py ROW [--cpu]

ROW is one of:
  share_memory  `Module.share_memory()` with the `file_system` sharing
                strategy; a forked child updates the parameters in place and
                the parent sees the update (both modes: the model is on the
                CPU, as with Hogwild training on a GPU host).
  dataloader    a DataLoader with 4 workers and ~73 MiB batches (128 images
                of 3x224x224 float32) training a small CNN for 6 steps: on
                CUDA with `pin_memory=True`; with --cpu on the CPU, unpinned.
  ipc           a tensor handed to a spawned child through a
                `torch.multiprocessing` queue; the child adds 42 in place and
                the parent sees it. On CUDA this is CUDA IPC (a memory handle,
                no file descriptor, nothing in the temp dir); with --cpu a
                shared CPU tensor under the default `file_descriptor`
                strategy (its fd travels over a unix socket in the temp dir).
  compile       `torch.compile` (Inductor) of a small MLP, checked against
                eager mode: on CUDA (Triton kernels), with --cpu on the CPU.
  triton        a raw `@triton.jit` vector add on CUDA; with --cpu, Triton's
                own kernel cache manager (`put`, `get_file`), which needs no
                GPU and writes where a kernel would go.
  cupy          a CuPy `ElementwiseKernel` on CUDA; with --cpu, a file
                written into CuPy's kernel cache dir the way CuPy saves a
                compiled kernel (no GPU needed).

Prints `HOME=...`, `MOUNT` lines (HOME and the cache tmpfs under it, /tmp,
/dev/shm), `DEVICE` lines (see check_devices), then one line: `PASS ROW`,
`FAIL ROW: Type: first line of the error` (exit 1; the traceback goes to
stderr), or `N/A ROW: why` (exit 3, when the host's Python lacks what the
row needs). The same
protocol as tests/pytorch/verdict.py. `TORCH_TEST_WAIT` (seconds, default
120) bounds every wait for another process: without us, the other side
often never answers.
"""

import os
import queue as queues
import sys
import traceback

WAIT = int(os.environ.get("TORCH_TEST_WAIT", "120"))


class NotApplicable(Exception):
    """The host's Python lacks what the row needs."""


def _bump(model):
    import torch

    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)


def share_memory(cpu):
    import torch
    import torch.multiprocessing as mp

    mp.set_sharing_strategy("file_system")
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 4)
    model.share_memory()
    before = [p.detach().clone() for p in model.parameters()]
    child = mp.get_context("fork").Process(target=_bump, args=(model,))
    child.start()
    child.join(timeout=WAIT)
    if child.exitcode != 0:
        raise RuntimeError(f"the child exited with {child.exitcode}")
    for b, p in zip(before, model.parameters()):
        if not torch.equal(b + 1.0, p.detach()):
            raise RuntimeError("the parent does not see the child's update")
    return "the child's update is seen by the parent"


BATCH, STEPS, SHAPE = 128, 6, (3, 224, 224)


class _Images:
    """A map-style dataset of random images: a batch of 128 is 73.5 MiB of
    float32, collated by the worker into shared memory (/dev/shm)."""

    def __len__(self):
        return BATCH * STEPS

    def __getitem__(self, i):
        import torch

        g = torch.Generator().manual_seed(i)
        return torch.randn(SHAPE, generator=g), i % 10


def dataloader(cpu):
    import torch
    from torch.utils.data import DataLoader

    device = torch.device("cpu" if cpu else "cuda")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 5, stride=4),
        torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, stride=2),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(32, 10),
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(_Images(), batch_size=BATCH, num_workers=4, pin_memory=not cpu, timeout=WAIT)
    steps, losses, nbytes = 0, [], 0
    for x, y in loader:
        nbytes = x.numel() * x.element_size()
        if not cpu and not x.is_pinned():
            raise RuntimeError("the batch is not in pinned memory")
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
        steps += 1
    if steps != STEPS:
        raise RuntimeError(f"{steps} steps, want {STEPS}")
    if not all(l == l and abs(l) < 1e6 for l in losses):
        raise RuntimeError(f"losses {losses}")
    return f"{steps} steps of {nbytes / 2**20:.1f} MiB batches on {device}, loss {losses[0]:.3f} -> {losses[-1]:.3f}"


def _ipc_child(q, done):
    import torch

    t = q.get(timeout=WAIT)
    t.add_(42)
    if t.is_cuda:
        torch.cuda.synchronize()
    del t
    done.put(True)


def ipc(cpu):
    import torch
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    n = 1 << 20
    t = torch.zeros(n, device="cpu" if cpu else "cuda")
    if cpu:
        t.share_memory_()
    q, done = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=_ipc_child, args=(q, done), daemon=True)
    child.start()
    q.put(t)
    try:
        done.get(timeout=WAIT)
    except queues.Empty:
        raise RuntimeError(f"the child never got the tensor in {WAIT} s (see the errors above)") from None
    child.join(timeout=WAIT)
    if child.exitcode != 0:
        raise RuntimeError(f"the child exited with {child.exitcode}")
    if cpu:
        got = float(t.sum())
    else:
        torch.cuda.synchronize()
        got = float(t.sum().cpu())
    if got != 42.0 * n:
        raise RuntimeError(f"the parent does not see the child's write: sum {got}")
    return f"a {t.device.type} tensor written by a spawned child"


def compile_(cpu):
    import torch

    if not hasattr(torch, "compile"):
        raise NotApplicable(f"torch {torch.__version__} has no torch.compile")
    device = "cpu" if cpu else "cuda"
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
    model = model.to(device).eval()
    x = torch.randn(16, 64, device=device)
    with torch.no_grad():
        want = model(x)
        got = torch.compile(model)(x)
    if not torch.allclose(got, want, atol=1e-4, rtol=1e-3):
        raise RuntimeError(f"compiled output differs from eager: max diff {float((got - want).abs().max())}")
    return f"compiled on {device}"


def triton_(cpu):
    try:
        import triton
    except ImportError as e:
        raise NotApplicable(f"triton is not installed ({e})") from None
    if cpu:
        import hashlib

        from triton.runtime.cache import get_cache_manager

        m = get_cache_manager(hashlib.sha256(b"tests/gpu").hexdigest())
        path = m.put(b"\x7fELF-fake-cubin", "gpu_kernel.cubin")
        if m.get_file("gpu_kernel.cubin") != path:
            raise RuntimeError(f"the cache does not give back {path}")
        return f"triton {triton.__version__}: cache manager wrote {path}"
    import torch

    # The kernel's body names `tl` as a global (Triton reads the function's
    # globals, not the closure).
    globals()["tl"] = triton.language

    @triton.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):  # noqa: F821
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # noqa: F821
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)  # noqa: F821

    n = 98432
    x = torch.rand(n, device="cuda")
    y = torch.rand(n, device="cuda")
    out = torch.empty_like(x)
    add[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    torch.cuda.synchronize()
    if not torch.allclose(out, x + y):
        raise RuntimeError("the kernel's sum differs from torch's")
    return f"triton {triton.__version__}: a @triton.jit kernel ran"


def cupy_(cpu):
    try:
        import cupy
    except ImportError as e:
        raise NotApplicable(f"cupy is not installed ({e})") from None
    if cpu:
        import tempfile

        from cupy.cuda import compiler

        d = compiler.get_cache_dir()
        os.makedirs(d, exist_ok=True)
        # CuPy saves a kernel as a temp file in the cache dir, renamed into place.
        fd, tmp = tempfile.mkstemp(dir=d)
        with os.fdopen(fd, "wb") as f:
            f.write(b"fake-cubin")
        os.replace(tmp, os.path.join(d, "tests-gpu.cubin"))
        return f"cupy {cupy.__version__}: wrote into its cache dir {d}"
    k = cupy.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = 2 * x + y", "tests_gpu_axpy")
    x = cupy.arange(4096, dtype=cupy.float32)
    y = cupy.ones(4096, dtype=cupy.float32)
    if not bool(cupy.allclose(k(x, y), 2 * x + y)):
        raise RuntimeError("the kernel's result differs")
    return f"cupy {cupy.__version__}: an ElementwiseKernel ran"


ROWS = {
    "share_memory": share_memory,
    "dataloader": dataloader,
    "ipc": ipc,
    "compile": compile_,
    "triton": triton_,
    "cupy": cupy_,
}


def first_line(e):
    """The error's first informative line: `backend='inductor' raised:` is
    followed by the real one."""
    lines = [l.strip() for l in str(e).splitlines() if l.strip()]
    for l in lines:
        if not l.endswith(":"):
            return l
    return lines[0] if lines else ""


def show_mounts():
    """The mounts at HOME, /tmp and /dev/shm, and on the dot-entries under
    HOME (the cache tmpfs: ~/.cache, ~/.triton, ...; HOME itself stays the
    image's, docs/design.md#home-rule), for the harness's log."""
    home = os.environ.get("HOME") or "/"
    want = {home, "/tmp", "/dev/shm"}
    caches = home.rstrip("/") + "/."
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] in want or fields[4].startswith(caches):
                sep = fields.index("-")
                print(f"MOUNT {fields[4]} {fields[sep + 1]} {fields[5]} {fields[sep + 3]}", flush=True)


def check_devices():
    """`DEVICE PATH ok` or `DEVICE PATH ERRNO` for each node the harness bound
    in ($GPU_TEST_DEVICES): ENOENT or EPERM (the device cgroup) is the
    harness's fault, EACCES the node's mode on the host."""
    import errno

    for path in filter(None, os.environ.get("GPU_TEST_DEVICES", "").split(":")):
        try:
            if os.path.isdir(path):
                os.listdir(path)
            else:
                os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
            print(f"DEVICE {path} ok", flush=True)
        except OSError as e:
            print(f"DEVICE {path} {errno.errorcode.get(e.errno, e.errno)}", flush=True)


def main():
    name, cpu = sys.argv[1], "--cpu" in sys.argv[2:]
    print(f"HOME={os.environ.get('HOME', '(unset)')}", flush=True)
    show_mounts()
    check_devices()
    try:
        what = ROWS[name](cpu)
    except NotApplicable as e:
        print(f"N/A {name}: {e}", flush=True)
        sys.exit(3)
    except Exception as e:  # noqa: BLE001 - one line for the harness to read
        traceback.print_exc()
        print(f"FAIL {name}: {type(e).__name__}: {first_line(e)}", flush=True)
        sys.exit(1)
    print(f"{name}: {what}", flush=True)
    print(f"PASS {name}", flush=True)


if __name__ == "__main__":
    main()
