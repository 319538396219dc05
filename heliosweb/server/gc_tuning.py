"""The web process's garbage collector, set once the application has loaded (`heliosweb.asgi`)."""

from __future__ import annotations

import gc


def apply() -> None:
    """Freeze what is loaded, and collect the young generation every 50,000 allocations, not 700.

    Everything loaded so far (Django, the apps, the server's own modules) lives as long as the
    process: frozen, a full collection no longer walks it. With 500 live sockets the process ran one
    every ~4-5 s, each stalling every socket 150-220 ms (about 65 ms once frozen). A frame sent to
    1,000 sockets allocates tens of thousands of objects: at 700, whatever lived a few milliseconds
    was promoted to the oldest generation, triggering a full collection every 2.5-4 s (170-240 ms
    each) at 1,000 viewers; at 50,000 those objects die young (docs/bench/2026-12-02-viewers-gc.md).
    """
    gc.freeze()
    gc.set_threshold(50_000, 10, 10)
