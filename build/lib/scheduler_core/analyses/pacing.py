"""Progress at a listener-friendly cadence: the web side batches events every 50-100 ms, so an
analysis reports at most once per interval (plus the final step), whatever its inner loop does."""

from __future__ import annotations

import time

from .contract import Emit, progress


class Ticker:
    """Call `tick(done)` as often as convenient; it emits a progress event only when due."""

    def __init__(self, emit: Emit, total: int, interval_s: float = 0.05) -> None:
        self.emit, self.total, self.interval_s = emit, total, interval_s
        self._last = time.monotonic()
        progress(emit, 0, total, "starting")

    def tick(self, done: int, message: str = "") -> None:
        now = time.monotonic()
        if done >= self.total or now - self._last >= self.interval_s:
            self._last = now
            progress(self.emit, done, self.total, message)
