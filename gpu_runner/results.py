"""The results of the GPU kinds (`capture`, `ttft`, `numerics`), declared: what their text
(`report`), the web's figures and the checks read. A capture also declares the boots it yields
(`capture_boots`), which the web stores under the job's recipe. Importing this never imports torch.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from scheduler_core.analyses.contract import BootArtifact
from scheduler_core.measured import LogitsComparison, MeasuredNumerics, MeasuredTtft

from .provenance import ProvenanceRecord


class Boot(TypedDict):
    """One boot's stored form (`capture.capture_boot`): where it ran, its catalog (as dicts) and
    every shape's measurement (median, p10, p90, samples; drift rows their undisturbed median)."""

    provenance: ProvenanceRecord
    catalog: list[dict[str, Any]]
    measurements: list[dict[str, Any]]
    output_fingerprint: Any
    repeats: int


class CaptureResult(Boot):
    """The first boot, as a named execution profile too; with several boots, each of them and how
    far they spread (max/min of their medians per shape) against the target."""

    profile: dict[str, Any]
    boots: NotRequired[list[Boot]]
    boot_spread: NotRequired[list[dict[str, Any]]]
    boot_spread_verdict: NotRequired[dict[str, Any]]


class TtftResult(Boot, MeasuredTtft):
    """This boot, the catalog the plans were made with, each graph timed alone, and (`MeasuredTtft`)
    an arm per (prompt, policy): measured TTFT beside the prediction, launch by launch."""

    planning_catalog: list[dict[str, Any]]
    planning_catalog_source: str
    alone_ms: list[dict[str, Any]]
    sequences: list[dict[str, Any]]  # each arm's launch sequence as it ran (`analyses.sequence_timing`)


class NumericsResult(MeasuredNumerics):
    """First-token logits under each chunking against the dtype's tolerance (`numerics.compare_chunkings`)."""

    provenance: ProvenanceRecord
    planning_catalog_source: str
    tolerance: dict[str, Any]
    chunkings: dict[str, Any]
    kv_vs_one_shot: dict[str, Any]
    causality: dict[str, Any]
    same_chunking_twice: dict[str, LogitsComparison]
    ok: bool


def boots_of(capture: CaptureResult) -> list[Boot]:
    """Every boot of a capture: the one it made, or each of several."""
    return capture.get("boots") or [capture]


def capture_boots(capture: CaptureResult) -> list[BootArtifact]:
    """The boots a capture yields, each stored with its catalog and provenance."""
    return [{"catalog": b["catalog"], "provenance": dict(b["provenance"])} for b in boots_of(capture)]
