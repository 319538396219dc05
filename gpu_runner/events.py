"""Progress over a whole run: a capture inside a TTFT job advances the same bar as the plans
that follow it, so the dashboard and the terminal show one bar from 0 to done."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NotRequired, TypedDict

from scheduler_core.analyses.contract import Emit, progress
from scheduler_core.measured import TtftLaunch


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


class MeasurementEvent(TypedDict):
    """capture (and the boot inside ttft and numerics): one shape timed, as the catalog will hold it.
    `shape` labels it for figures; `samples` timed launches followed `warmup` untimed ones (the
    warm-up ran until timings settled, or its bound: `settled`);
    `clean_median_ms` (undisturbed) and `drift_slowdown` (median over it) come only with a drifted shape."""

    type: Literal["measurement"]
    boot: int
    shape: str
    prefill: int
    decode: int
    median_ms: float
    p10_ms: float
    p90_ms: float
    samples: int
    warmup: int
    settled: bool
    capture_ms: float
    mode: str
    drifted: bool
    clean_median_ms: NotRequired[float]
    drift_slowdown: NotRequired[float]


class TtftLaunchEvent(TtftLaunch):
    """ttft: one launch of an executed plan, measured (`ms`, in the median run) next to its prediction
    and to its graph (capacity at the key bucket `keys`) timed alone (`alone_ms`), announced as it
    lands (an arm's `launches` entry, with its prompt and policy)."""

    type: Literal["launch"]
    prompt_tokens: int
    policy: str


def shape_label(prefill: int, decode: int) -> str:
    """How figures and reports name a graph shape."""
    if decode == 0:
        return f"prefill {prefill}"
    return f"decode {decode}" if prefill == 0 else f"mixed {prefill}+{decode}"
