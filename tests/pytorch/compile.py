"""compile: `torch.compile` of a small model with the default backend
(Inductor) on CPU; the compiled model must match eager mode.

Inductor generates C++, builds it with g++ and loads the shared objects from
its cache dir, `<temp dir>/torchinductor_<user>` (needs g++, python3-dev and
libtorch-dev, and exec on the temp dir). Measured with PyTorch 2.14:
- read-only /tmp: `import torch._dynamo` (the first thing torch.compile does)
  fails with `FileNotFoundError: [Errno 2] No usable temporary directory
  found in ['/tmp', '/var/tmp', '/usr/tmp', '/']`;
- a `noexec` temp dir: the kernels build, then loading one fails with
  `... failed to map segment from shared object`.
PyTorch 1.13 (Debian 12) has no torch.compile: prints `UNSUPPORTED compile:
...` and exits 3 (the test asserts that, by version).
Prints one `PASS compile` or `FAIL compile: <error>` line; with an argument,
the kernels must have been built under that directory.
"""

import glob
import os
import sys

import torch

NAME = "compile"


def main():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
    model.eval()
    x = torch.randn(16, 64)
    with torch.no_grad():
        want = model(x)
        compiled = torch.compile(model)
        got = compiled(x)
    if not torch.allclose(got, want, atol=1e-5, rtol=1e-4):
        raise RuntimeError(f"compiled output differs from eager: max diff {float((got - want).abs().max())}")
    import tempfile

    from torch._inductor.runtime.cache_dir_utils import cache_dir

    cache = cache_dir()
    built = glob.glob(os.path.join(cache, "**", "*.so"), recursive=True)
    if not built:
        raise RuntimeError(f"no compiled kernel (*.so) under Inductor's cache dir {cache}")
    if len(sys.argv) > 1 and not cache.startswith(sys.argv[1].rstrip("/") + "/"):
        raise RuntimeError(f"Inductor's cache dir {cache} is not under {sys.argv[1]}")
    print(f"compile: {len(built)} kernel(s) built under {cache} (temp dir {tempfile.gettempdir()})", flush=True)


if __name__ == "__main__":
    if not hasattr(torch, "compile"):
        print(f"UNSUPPORTED {NAME}: torch {torch.__version__} has no torch.compile", flush=True)
        sys.exit(3)
    from verdict import report

    report(NAME, main)
