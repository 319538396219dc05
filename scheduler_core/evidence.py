"""Where a piece of evidence comes from, and whether it speaks for the decision's recipe.

A decision is about one recipe on one piece of hardware. An evidence job may have run on another
recipe, or on another GPU's timings (an H100 profile cited for an A100 recipe), or on no hardware
at all (the affine model, random catalogs). Every part of the trade-off names its source as
`source(job, ...)` says it, and a part that does not match the decision is marked `foreign`, with
a sentence a reviewer cannot miss: it is shown, never silently preferred nor silently dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

Json = dict[str, Any]


@dataclass(frozen=True)
class Evidence:
    """One done job as the trade-off reads it. `boot_devices`: the devices of the stored boots it
    planned on (from their provenance), which only the web knows. `compared`: its per-request
    comparisons already made, one per ordered pair of the policies it ran (`request_deltas`), when
    `result` comes without its per-request rows (thousands of them, read for nothing else); None:
    the trade-off makes them from the rows."""

    id: int
    kind: str
    recipe: str | None
    params: Json
    result: Json
    boot_devices: tuple[str, ...] = field(default=())
    compared: tuple[Json, ...] | None = None


@dataclass(frozen=True)
class Subject:
    """What a decision is about: its recipe and the hardware the recipe serves on ("" = undeclared)."""

    recipe: str
    hardware: str = ""


def hardware_of(job: Evidence) -> str | None:
    """The hardware a job's durations belong to, in words; None where it has none (a model, random
    catalogs: such a figure speaks for no GPU)."""
    result = job.result
    provenance = result.get("provenance")
    if isinstance(provenance, dict) and provenance.get("device"):  # ttft, numerics: measured here
        return str(provenance["device"])
    execution = result.get("execution")
    if isinstance(execution, dict):
        if "execution" in execution:  # a named GPU profile
            return str(execution.get("provenance", {}).get("gpu") or execution["execution"])
        if execution.get("table") == "boot":
            return ", ".join(dict.fromkeys(job.boot_devices)) or "a stored boot (device not recorded)"
    if job.boot_devices:
        return ", ".join(dict.fromkeys(job.boot_devices))
    return None


def execution_of_job(job: Evidence) -> str:
    """What the job's durations are: a named profile, a boot, the affine model, or a measurement."""
    execution = job.result.get("execution")
    if isinstance(execution, dict):
        if "execution" in execution:
            return f"GPU profile {execution['execution']}"
        if execution.get("table") == "boot":
            return "a stored boot's measured durations"
        if "fixed_ms" in execution:
            return "the affine cost model (not a GPU)"
    if "provenance" in job.result:
        return f"measured ({job.result['provenance'].get('mode', '?')})"
    return "catalogs given to the job"


def _token(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def same_hardware(declared: str, found: str | None) -> bool | None:
    """Whether `found` is the declared hardware (case and punctuation ignored, "NVIDIA A100-SXM4"
    is an "A100"); None when either is unknown, so nothing is claimed either way."""
    if not declared or not found:
        return None
    return _token(declared) in _token(found)


def source(job: Evidence, subject: Subject, traffic: str | None = None) -> Json:
    """The part's source: job, recipe, hardware, execution and traffic, and `foreign`: the
    sentences that say how it differs from the decision (empty when it is the decision's own)."""
    hardware = hardware_of(job)
    foreign: list[str] = []
    if job.recipe != subject.recipe:
        foreign.append(
            f"job #{job.id} ran for {'no recipe' if job.recipe is None else 'recipe ' + job.recipe}, "
            f"not {subject.recipe}"
        )
    if same_hardware(subject.hardware, hardware) is False:
        foreign.append(f"job #{job.id} ran on {hardware}, not this recipe's {subject.hardware}")
    return {
        "job": job.id,
        "kind": job.kind,
        "recipe": job.recipe,
        "hardware": hardware,
        "execution": execution_of_job(job),
        "traffic": traffic,
        "foreign": foreign,
        "own": not foreign,
    }
