"""dataloader: a DataLoader with 2 workers whose batches are 256 MiB (four
times the default 64 MiB /dev/shm), several batches, each checksummed.

Workers hand batches to the parent through shared memory in /dev/shm and pass
the file descriptors over a unix socket in the temp dir. Too little shm gives:
  ERROR: Unexpected bus error encountered in worker. This might be caused by
  insufficient shared memory (shm).
  RuntimeError: DataLoader worker (pid N) is killed by signal: Bus error.
Read-only /tmp gives "No usable temporary directory found" in the worker, or
a hang (hence the DataLoader timeout: $TORCH_TEST_WAIT seconds, default 60;
without the hook the test sets a short one, since nothing will ever answer).
Usage: dataloader.py [MIB_PER_BATCH [BATCHES]]. Prints one `PASS dataloader`
or `FAIL dataloader: <error>` line.
"""

import os
import sys

import torch
from torch.utils.data import DataLoader, Dataset

NAME = "dataloader"


class Batches(Dataset):
    def __init__(self, nbytes, count):
        self.nbytes, self.count = nbytes, count

    def __len__(self):
        return self.count

    def __getitem__(self, i):
        return torch.full((self.nbytes,), i % 251 + 1, dtype=torch.uint8)


def main():
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    nbytes = mib << 20
    wait = int(os.environ.get("TORCH_TEST_WAIT", "60"))
    loader = DataLoader(Batches(nbytes, count), batch_size=None, num_workers=2, timeout=wait)
    seen = 0
    for i, batch in enumerate(loader):
        want = nbytes * (i % 251 + 1)
        got = int(batch.sum(dtype=torch.int64))
        if batch.numel() != nbytes or got != want:
            raise RuntimeError(f"batch {i}: checksum {got}, want {want}")
        seen += 1
    if seen != count:
        raise RuntimeError(f"got {seen} batches, want {count}")


if __name__ == "__main__":
    from verdict import report

    report(NAME, main)
