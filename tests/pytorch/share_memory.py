"""share_memory: a tensor moved to shared memory, handed to a child through a
torch.multiprocessing queue; the child writes, the parent sees the write.

The sharing strategy comes from $SHARING_STRATEGY (default `file_system`):
- `file_system` makes torch start `torch_shm_manager`, whose socket lives in
  `$TMPDIR` (or `/tmp`). Read-only /tmp gives:
    RuntimeError: torch_shm_manager at ".../torch_shm_manager": could not
    generate a random directory for manager socket
- `file_descriptor` (PyTorch's default) passes the segment's fd through a unix
  socket that Python's multiprocessing creates in the temp dir. Read-only /tmp
  gives `FileNotFoundError: [Errno 2] No usable temporary directory found` in
  the queue's feeder thread, and the child waits forever for the tensor.
With an argument (and `file_system`), the manager's socket dir must be in that
directory (the hook follows the container's own choice). Prints one
`PASS <name>` or `FAIL <name>: <error>` line; the name is `share_memory`, or
`share_memory_file_descriptor` with that strategy.
"""

import glob
import os
import queue as queues
import sys

import torch
import torch.multiprocessing as mp

STRATEGY = os.environ.get("SHARING_STRATEGY", "file_system")
NAME = "share_memory" if STRATEGY == "file_system" else f"share_memory_{STRATEGY}"


def child(queue, done):
    tensor = queue.get(timeout=60)
    tensor.add_(42)
    done.put(True)


def main():
    mp.set_sharing_strategy(STRATEGY)
    tensor = torch.zeros(1024)
    tensor.share_memory_()
    if len(sys.argv) > 1:
        # The manager is running now: its socket dir must be in the named dir.
        found = glob.glob(os.path.join(sys.argv[1], "torch-shm-dir-*"))
        if not found:
            raise RuntimeError(f"no torch-shm-dir-* in {sys.argv[1]}: torch_shm_manager used another dir")
        print(f"share_memory: manager socket dir {found[0]}", flush=True)
    queue, done = mp.Queue(), mp.Queue()
    proc = mp.Process(target=child, args=(queue, done), daemon=True)
    proc.start()
    queue.put(tensor)
    # Without the hook nothing ever answers: the test sets a short wait.
    wait = int(os.environ.get("TORCH_TEST_WAIT", "20"))
    try:
        done.get(timeout=wait)
    except queues.Empty:
        raise RuntimeError(f"the child never got the tensor in {wait} s (see the errors above)") from None
    proc.join(timeout=60)
    if proc.exitcode != 0:
        raise RuntimeError(f"child exited with {proc.exitcode}")
    if float(tensor.sum()) != 42 * 1024:
        raise RuntimeError(f"parent does not see the child's write: sum {float(tensor.sum())}")


if __name__ == "__main__":
    from verdict import report

    report(NAME, main)
