"""The web process's garbage collector, set once the application has loaded (`heliosweb.asgi`)."""

from __future__ import annotations

import gc


def apply() -> None:
    """Freeze what is loaded, and collect the young generation every 50,000 allocations, not 700.

    Frozen, what is loaded is no longer walked by a full collection (~65 ms stalls at 500 sockets,
    not 150-220). A frame to 1,000 sockets allocates tens of thousands of objects: at 700 they were
    promoted, a full collection every 2.5-4 s; at 50,000 they die young (docs/bench/2026-12-02-viewers-gc.md).
    """
    gc.freeze()
    gc.set_threshold(50_000, 10, 10)
