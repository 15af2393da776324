"""share_memory: a tensor moved to shared memory with the `file_system`
strategy, handed to a child through a torch.multiprocessing queue; the child
writes, the parent sees the write.

`file_system` makes torch start `torch_shm_manager`, whose socket lives in
`$TMPDIR` (or `/tmp`). Read-only /tmp gives:
  RuntimeError: torch_shm_manager at ".../torch_shm_manager": could not
  generate a random directory for manager socket
With an argument, the manager's socket dir must be in that directory (the
hook follows the container's own choice). Prints one `PASS share_memory` or `FAIL share_memory: <error>` line.
"""

import glob
import os
import sys

import torch
import torch.multiprocessing as mp

NAME = "share_memory"


def child(queue, done):
    tensor = queue.get(timeout=60)
    tensor.add_(42)
    done.put(True)


def main():
    mp.set_sharing_strategy("file_system")
    tensor = torch.zeros(1024)
    tensor.share_memory_()
    if len(sys.argv) > 1:
        # The manager is running now: its socket dir must be in the named dir.
        found = glob.glob(os.path.join(sys.argv[1], "torch-shm-dir-*"))
        if not found:
            raise RuntimeError(f"no torch-shm-dir-* in {sys.argv[1]}: torch_shm_manager used another dir")
        print(f"share_memory: manager socket dir {found[0]}", flush=True)
    queue, done = mp.Queue(), mp.Queue()
    proc = mp.Process(target=child, args=(queue, done))
    proc.start()
    queue.put(tensor)
    done.get(timeout=60)
    proc.join(timeout=60)
    if proc.exitcode != 0:
        raise RuntimeError(f"child exited with {proc.exitcode}")
    if float(tensor.sum()) != 42 * 1024:
        raise RuntimeError(f"parent does not see the child's write: sum {float(tensor.sum())}")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - one line for the test to read
        print(f"FAIL {NAME}: {type(e).__name__}: {e}".replace("\n", " "), flush=True)
        sys.exit(1)
    print(f"PASS {NAME}", flush=True)
