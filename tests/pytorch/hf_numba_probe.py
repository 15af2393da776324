"""An app's module for home_programs.py's `numba`: the home suite copies it
into the image (`/app`, read-only in the container), so numba cannot cache
`probe` beside it and caches under `$HOME/.cache/numba`."""

import numba


@numba.njit(cache=True)
def probe(n):
    s = 0
    for i in range(n):
        s += i * i
    return s
