"""Progress over a whole run: a capture inside a TTFT job advances the same bar as the plans
that follow it, so the dashboard and the terminal show one bar from 0 to done."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler_core.analyses.params import Emit, progress


@dataclass
class Progress:
    emit: Emit
    total: int
    done: int = 0

    def start(self, message: str) -> None:
        progress(self.emit, self.done, self.total, message)

    def advance(self, message: str) -> None:
        self.done += 1
        progress(self.emit, self.done, self.total, message)
