"""The web process's garbage collector, set once the application has loaded (`heliosweb.asgi`)."""

from __future__ import annotations

import gc


def apply() -> None:
    """Freeze what is loaded, and collect the young generation every 50,000 allocations, not 700.

    What is loaded lives as long as the process: frozen, a full collection (every ~4-5 s at 500
    sockets) no longer walks it, and stalls each socket ~65 ms instead of 150-220. A frame sent to
    1,000 sockets allocates tens of thousands of objects: at 700 they were promoted and set off a
    full collection every 2.5-4 s; at 50,000 they die young (docs/bench/2026-12-02-viewers-gc.md).
    """
    gc.freeze()
    gc.set_threshold(50_000, 10, 10)
