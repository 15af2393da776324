"""The one line every workload script ends with: `PASS name`, or
`FAIL name: Error: message` (exit 1), which tests/runtimes/pytorch.rs reads."""

import sys


def report(name, main):
    """Runs `main` and prints its verdict on one line."""
    try:
        main()
    except Exception as e:  # noqa: BLE001 - one line for the test to read
        print(f"FAIL {name}: {type(e).__name__}: {e}".replace("\n", " "), flush=True)
        sys.exit(1)
    print(f"PASS {name}", flush=True)
