"""What the check runs, where, and how long each step should take, said before it starts.

A `Profile` is the check's sizes: on a GPU (`gpu_profile`, the preset's real shapes) or the dry
run of `scripts/gpu-run --dry-run` (`DRY`: CPU, tiny, small catalogs and arms). Estimates come
from the profile's priors before any boot is measured, then from what the first capture measured
(its boot's seconds, its catalog's durations): estimates, printed as such, never results. Torch-free.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpu_runner.presets import DEFAULT_DECODE_ROWS, PRESETS, default_shapes, estimate_bytes
from gpu_runner.results import CaptureResult, boots_of
from scheduler_core.catalog import DEFAULT_PREFILL_CAPACITIES, Catalog
from scheduler_core.planner import plan
from scheduler_core.policies import PR22_ARMS, PR22_POLICIES
from scheduler_core.request import Request

# A graph is launched at most this many times, or for this long, before it is timed: the warm-up (3)
# and the settling bounds (capture.SETTLE_MAX_LAUNCHES, 30, and capture.SETTLE_MAX_S, 3 s).
WARM_LAUNCHES = 33
WARM_MAX_S = 3.0
# Chunks late in a prompt attend longer key buckets than the catalog's (which times each graph at
# the start of a prompt): up to about twice its duration on the 14,000-token arm.
KEY_BUCKET_MARGIN = 2.0
TARGET_LAUNCHES = 2 * (10 + 3)  # targets.replay_vs_eager: 10 samples after 3 warm-ups, replayed and eager


@dataclass(frozen=True)
class Profile:
    """The check's sizes and its priors (seconds a step takes before any boot has been measured)."""

    name: str
    device: str  # "cuda", or "cpu" for the dry run
    preset: str
    arms: tuple[int, ...]  # prompt lengths of the TTFT arms and the numerics prompt (the first)
    repeats: int  # timed launches per shape
    ttft_runs: int
    drift_runs: int
    drift_capacity: int  # the graph the drifted TTFT boot times under competing work
    extra_boots: int  # boots added after the first pass, when time is left
    capacities: tuple[int, ...] = DEFAULT_PREFILL_CAPACITIES
    decode_rows: tuple[int, ...] = DEFAULT_DECODE_ROWS
    boot_prior_s: float = 25.0  # a fresh process: interpreter, torch, CUDA context, capture, timing
    fp32_prior_s: float = 10.0  # the fp32 numerics on tiny
    tests_prior_s: float = 60.0  # the CUDA-marked tests

    def params(self, **more: Any) -> dict[str, Any]:
        """An analysis's parameters on this profile's device and catalog."""
        return {"device": self.device, "capacities": list(self.capacities), "repeats": self.repeats, **more}

    def shapes(self) -> list[tuple[int, int]]:
        return default_shapes(self.capacities, self.decode_rows)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def gpu_profile(preset: str) -> Profile:
    """On one GPU: the preset's default catalog, the pull request's arms, 3 boots in all."""
    return Profile(
        name=f"{preset} on cuda",
        device="cuda",
        preset=preset,
        arms=tuple(PR22_ARMS.values()),
        repeats=20,
        ttft_runs=5,
        drift_runs=3,
        drift_capacity=4096,
        extra_boots=2,
    )


# The dry run: every step, on CPU, at sizes that keep the whole of `scripts/gpu-run --dry-run`
# near a minute on two cores (four graphs; arms that cross two key buckets).
DRY = Profile(
    name="dry run: tiny on cpu",
    device="cpu",
    preset="tiny",
    arms=(100, 200),
    repeats=3,
    ttft_runs=2,
    drift_runs=1,
    drift_capacity=64,
    extra_boots=1,
    capacities=(32, 64),
    decode_rows=(2,),
    boot_prior_s=8.0,
    fp32_prior_s=5.0,
    tests_prior_s=30.0,
)


def boot_s(profile: Profile, done: Mapping[str, Any]) -> float:
    """One boot: the first capture's, once measured, else the profile's prior."""
    if "capture" in done:
        return max(b["provenance"].get("boot_s") or profile.boot_prior_s for b in boots_of(done["capture"]))
    return profile.boot_prior_s


def _plans(capture: CaptureResult, arms: tuple[int, ...]) -> list[Any]:
    """Every arm's cost and rule plan on the capture's catalog (prefill graphs only)."""
    catalog = Catalog.from_dicts([g for g in capture["catalog"] if g["decode"] == 0])
    return [plan(policy, catalog, Request(n)) for n in arms for policy in PR22_POLICIES]


def plans_s(capture: CaptureResult, arms: tuple[int, ...]) -> float:
    """Seconds of device time one run of every arm's cost and rule plan is predicted to take."""
    return sum(l.predicted_ms for p in _plans(capture, arms) for l in p.launches) / 1000.0


def warmed_s(ms: float, repeats: int) -> float:
    """One graph settled, then timed `repeats` times."""
    return min(WARM_LAUNCHES * ms / 1000.0, WARM_MAX_S) + repeats * ms / 1000.0


def ttft(profile: Profile, done: Mapping[str, Any], runs: int) -> float:
    """A boot of the prefill graphs; each graph the plans run (a capacity at a key bucket) settled
    and timed alone; the runs. Late chunks' buckets cost up to `KEY_BUCKET_MARGIN` their catalog time."""
    if "capture" not in done:
        return 3 * profile.boot_prior_s
    from gpu_runner.model import key_bucket  # the check has torch by now
    from gpu_runner.presets import cache_tokens

    capture = done["capture"]
    length = cache_tokens(PRESETS[profile.preset], [(c, 0) for c in profile.capacities])
    graphs = {
        (l.graph, key_bucket(length, l.start + l.graph)): l.predicted_ms
        for p in _plans(capture, profile.arms)
        for l in p.launches
    }
    alone = sum(warmed_s(KEY_BUCKET_MARGIN * ms, profile.repeats) for ms in graphs.values())
    return boot_s(profile, done) + alone + KEY_BUCKET_MARGIN * runs * plans_s(capture, profile.arms)


def numerics(profile: Profile, done: Mapping[str, Any]) -> float:
    """A boot; the one-shot reference and each plan 5 times (twice, and the causality probe's three)."""
    if "capture" not in done:
        return 2 * profile.boot_prior_s
    return boot_s(profile, done) + KEY_BUCKET_MARGIN * 6 * plans_s(done["capture"], profile.arms[:1])


def targets(profile: Profile, done: Mapping[str, Any]) -> float:
    """A boot of every shape, each replayed and run eagerly `TARGET_LAUNCHES` times in all."""
    if "capture" not in done:
        return 2 * profile.boot_prior_s
    each = sum(m["median_ms"] for m in done["capture"]["measurements"]) / 1000.0
    return boot_s(profile, done) + TARGET_LAUNCHES * each


def memory_bytes(profile: Profile, preset: str | None = None, prefill_only: bool = False) -> int:
    """What a step's boot needs by `presets.estimate_bytes`, checked against the free memory first."""
    shapes = [(c, 0) for c in sorted(profile.capacities)] if prefill_only else profile.shapes()
    return estimate_bytes(PRESETS[preset or profile.preset], shapes, profile.device)[0]
