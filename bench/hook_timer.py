"""Registered as the OCI hook by bench.py in place of oci-tmpfs-hook: runs
`/bin/true` (the cost of spawning any tiny program from here), then the real
hook with the runtime's stdin, and appends one line to LOG:

    <true wall ms> <hook wall ms> <hook CPU ms> <hook exit code>

Wall time is posix_spawn to wait4 as seen from this process, the way a
runtime sees its hook; CPU time (user + system, from wait4's rusage) is what
the hook itself burnt, which load elsewhere on the machine does not inflate. (Peak memory is measured with GNU time instead: a child
spawned from Python inherits Python's RSS in its rusage.)
Usage: hook_timer.py LOG HOOK ARGS...
"""

import os
import sys
import time


def timed(argv):
    t0 = time.perf_counter_ns()
    pid = os.posix_spawn(argv[0], argv, os.environ)
    _, status, usage = os.wait4(pid, 0)
    wall_ms = (time.perf_counter_ns() - t0) / 1e6
    cpu_ms = (usage.ru_utime + usage.ru_stime) * 1e3
    return wall_ms, cpu_ms, os.waitstatus_to_exitcode(status)


def main():
    log, argv = sys.argv[1], sys.argv[2:]
    true_ms, _, _ = timed(["/bin/true"])
    hook_ms, cpu_ms, code = timed(argv)
    with open(log, "a") as f:
        f.write(f"{true_ms:.4f} {hook_ms:.4f} {cpu_ms:.4f} {code}\n")
    sys.exit(code)


if __name__ == "__main__":
    main()
