"""Real programs that write under the user's HOME, as ML containers run them.

    home_programs.py NAME [ARG]

NAME is one of:
  user_base   Python's per-user site (`site.USER_BASE`, `$HOME/.local`):
              makes `site.USER_SITE` and writes a module there, then imports
              it in a fresh interpreter.
  pip_user    `pip install --user` of the local wheel ARG (no index): pip
              writes `$HOME/.local` and its cache `$HOME/.cache/pip`; then the
              package is imported in a fresh interpreter.
  torch_hub   `torch.hub.get_dir()` (`$HOME/.cache/torch/hub`): makes it and
              writes a checkpoint file there, as `torch.hub.load` does.
  triton      Triton's own kernel cache manager (`triton.runtime.cache`,
              `$HOME/.triton/cache`) with no GPU: `put` then `get_file`.
  numba       `@numba.njit(cache=True)` of `hf_numba_probe.probe`, a module in
              the directory ARG, which is read-only: numba cannot cache
              beside the source (`__pycache__`), so it caches under
              `$HOME/.cache/numba` (NUMBA_CACHE_DIR unset); checks that an
              index (`.nbi`) and the compiled code (`.nbc`) are there.

Each prints `HOME=...` and one `PASS NAME` or `FAIL NAME: <the error>`
line; the error is the program's own (`OSError: [Errno 30] Read-only file
system: '/root/.local'`; numba's own, which names no path, gets the
user-wide cache it could not make). Exits 0 either way: the caller reads
the line.
"""

import hashlib
import os
import subprocess
import sys


def user_base():
    import site

    os.makedirs(site.USER_SITE, exist_ok=True)
    with open(os.path.join(site.USER_SITE, "hf_user_mod.py"), "w") as f:
        f.write("VALUE = 42\n")
    out = subprocess.run(
        [sys.executable, "-c", "import hf_user_mod; print(hf_user_mod.__file__)"],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0 or not out.stdout.startswith(site.USER_SITE):
        raise RuntimeError(f"the user site module was not imported: {out.stdout}{out.stderr}")
    return site.USER_SITE


def pip_user(wheel):
    out = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--user", "--no-index", "--no-deps",
         "--break-system-packages", "--disable-pip-version-check", wheel],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        errors = [l for l in out.stderr.splitlines() if "Error" in l or "error" in l]
        raise RuntimeError((errors or [out.stderr.strip() or "pip failed"])[-1])
    check = subprocess.run(
        [sys.executable, "-c", "import hf_probe; print(hf_probe.__file__)"], capture_output=True, text=True
    )
    if check.returncode != 0:
        raise RuntimeError(f"installed, but not importable: {check.stderr.strip()}")
    return check.stdout.strip()


def torch_hub():
    import torch

    d = torch.hub.get_dir()
    os.makedirs(os.path.join(d, "checkpoints"), exist_ok=True)
    path = os.path.join(d, "checkpoints", "probe.pth")
    torch.save({"w": torch.ones(4)}, path)
    if torch.load(path)["w"].sum().item() != 4:
        raise RuntimeError("the checkpoint does not read back")
    return path


def triton():
    from triton.runtime.cache import get_cache_manager

    m = get_cache_manager(hashlib.sha256(b"hf-probe").hexdigest())
    path = m.put(b"\x7fELF-fake-cubin", "hf_kernel.cubin")
    if m.get_file("hf_kernel.cubin") != path:
        raise RuntimeError(f"the cache does not give back {path}")
    return path


def numba_(src):
    from numba.misc.appdirs import AppDirs

    cache = AppDirs(appname="numba", appauthor=False).user_cache_dir
    sys.path.insert(0, src)
    try:
        import hf_numba_probe
    except RuntimeError as e:  # "cannot cache function 'probe': no locator available for file ..."
        raise RuntimeError(f"{e} (the user-wide cache: '{cache}')") from None
    if hf_numba_probe.probe(10) != 285:
        raise RuntimeError("probe(10) is not 285")
    found = [os.path.join(d, f) for d, _, files in os.walk(cache) for f in files]
    for ext in (".nbi", ".nbc"):
        if not any(f.endswith(ext) for f in found):
            raise RuntimeError(f"no {ext} file under '{cache}': {found}")
    return min(f for f in found if f.endswith(".nbi"))


PROGRAMS = {
    "user_base": user_base,
    "pip_user": pip_user,
    "torch_hub": torch_hub,
    "triton": triton,
    "numba": numba_,
}


def main():
    name = sys.argv[1]
    print(f"HOME={os.environ.get('HOME', '(unset)')}", flush=True)
    try:
        where = PROGRAMS[name](*sys.argv[2:])
    except Exception as e:  # the program's own error is the result
        msg = " ".join(f"{type(e).__name__}: {e}".split())
        print(f"FAIL {name}: {msg}", flush=True)
        return
    print(f"{name}: wrote {where}", flush=True)
    print(f"PASS {name}", flush=True)


if __name__ == "__main__":
    main()
