"""tempfile: `tempfile.mkstemp()` and a write, in whatever temp dir the
container chose (`TMPDIR`, `TEMP`, `TMP`, else `/tmp`).

Read-only /tmp gives:
  FileNotFoundError: [Errno 2] No usable temporary directory found in
  ['/tmp', '/var/tmp', '/usr/tmp', '/']
With an argument, the temp dir must be that directory (the hook follows the
container's own choice). Prints one `PASS tempfile` or `FAIL tempfile: ...`.
"""

import os
import sys
import tempfile

NAME = "tempfile"


def main():
    fd, path = tempfile.mkstemp()
    data = os.urandom(1 << 20)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    with open(path, "rb") as f:
        if f.read() != data:
            raise RuntimeError(f"{path} does not read back what was written")
    os.unlink(path)
    if len(sys.argv) > 1 and os.path.dirname(path) != sys.argv[1]:
        raise RuntimeError(f"temp file {path} is not in {sys.argv[1]}")
    print(f"tempfile: wrote {path}", flush=True)


if __name__ == "__main__":
    from verdict import report

    report(NAME, main)
