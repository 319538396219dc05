"""The parts of a measured run's result (the GPU kinds `ttft` and `numerics`) that the core's
trade-off reads. gpu_runner writes them and declares its results *with* these types
(`gpu_runner.results`), so writer and reader share one declaration and the core needs no gpu_runner.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class LoadNow(TypedDict):
    load_average: list[float]  # the 1, 5 and 15 minute averages
    cores: int | None


class HostLoadRecord(TypedDict):
    before: LoadNow
    after: NotRequired[LoadNow]


class MeasuredOn(TypedDict):
    """Where a run measured: the device, its mode ("cuda-graph" on a GPU, "eager-cpu" on a CPU)
    and the machine's load as it measured."""

    device: str
    mode: str
    host_load: NotRequired[HostLoadRecord]


class TtftConditions(TypedDict):
    """What the TTFT runs ran beside: their number per arm and the host's load before and after."""

    runs: int
    host_load: HostLoadRecord


class TtftLaunch(TypedDict):
    """One launch of an arm's median run: what the plan chose, its key bucket, and its device time
    beside the prediction, the undisturbed table and the graph timed alone."""

    index: int
    graph: int
    start: int
    end: int
    padding: int
    chooser: str
    keys: int
    predicted_ms: float
    table_ms: float
    alone_ms: float
    ms: float


class TtftArm(TypedDict):
    """One (prompt, policy): its median run's TTFT beside the prediction, launch by launch, and the
    gap split by source (`gpu_runner.targets.error_split`)."""

    prompt_tokens: int
    policy: str
    launch_count: int
    graphs: list[int]
    padded_tokens: int
    ttft_ms: float
    ttft_runs_ms: list[float]
    launch_sum_ms: float
    alone_ms: float
    predicted_ms: float
    table_ms: float
    first_token: int
    launches: list[TtftLaunch]
    errors: list[dict[str, Any]]


class MeasuredTtft(TypedDict):
    arms: list[TtftArm]
    ttft_conditions: NotRequired[TtftConditions]  # absent from results older than it


class LogitsComparison(TypedDict):
    """First-token logits against a reference (`gpu_runner.numerics.compare`): how far apart,
    whether the answer agrees, and the verdict against the dtype's tolerance."""

    max_abs_diff: float
    max_rel_diff: float
    argmax: list[int]  # [this one's, the reference's]
    argmax_agree: bool
    top_k_agree: bool
    bitwise_identical: bool
    bitwise_required: bool
    verdict: str


class MeasuredNumerics(TypedDict):
    prompt_tokens: int
    cost_vs_rule: LogitsComparison
    vs_one_shot: dict[str, LogitsComparison]
    reproducible: bool
