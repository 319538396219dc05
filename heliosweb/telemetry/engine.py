"""The simulated engine: job kind `engine` (queue `engine`), so the loop runs on the embedded default.

It runs `scheduler_core.engine.EngineLoop` on endless Poisson traffic (or a trace replayed in a loop,
time-scaled) in real time (times `pace`), on the recipe's latest boot (as stored or repaired) or the pull request's clean or drift catalog,
and is a real client of the engine API over HTTP with its own engine token: one thread long-polls
the policy with `If-None-Match` and hands a change to the loop, which uses it from its next prefill
decision; another posts the records in numbered batches, retrying a failed POST with the same
number (the server stores a batch once). It runs until stopped (cancel) or for `duration_s`.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import close_old_connections

from heliosweb.catalogs.health import boot_repaired
from heliosweb.catalogs.models import Boot
from heliosweb.jobs.models import BenchmarkJob, JobStatus
from heliosweb.jobs.registry import JobKind
from heliosweb.jobs.services.runner import running_job
from heliosweb.recipes.models import Recipe
from scheduler_core.analyses.catalogs import (
    DRIFT_PARAM,
    EXECUTION_PARAMS,
    EXECUTION_PROFILE,
    check_boot_or_profile,
    execution_of,
)
from scheduler_core.analyses.params import Analysis, ChoiceParam, Emit, FloatParam, IntParam, progress
from scheduler_core.analyses.simulate import TRACE_PARAMS, boot_setting, build_catalog, selected_trace
from scheduler_core.analyses.simulate import check as simulate_check
from scheduler_core.catalog import Catalog
from scheduler_core.engine import EngineLoop
from scheduler_core.errors import InvalidInput
from scheduler_core.execution import ExecutionModel
from scheduler_core.scheduler import Arrival, SchedulerConfig
from scheduler_core.traffic import TrafficShape, looped

from .services import ENGINE_KIND, engine_token_create, engine_tokens_revoke

log = logging.getLogger(__name__)
QUEUE = "engine"
TICK_S = 0.02  # the loop catches up with the wall clock this often (and looks for a new policy)
REPORT_S = 1.0  # a progress event this often: the job page's status, and where a cancel is noticed
POLL_WAIT_S = 25


def engine_name(job_id: int) -> str:
    return f"sim-job-{job_id}"


@dataclass
class _Policy:
    """The newest policy the follower has read; the loop takes it between two launches."""

    name: str
    version: int


class PolicyFollower(threading.Thread):
    """Long-polls `GET /api/recipes/<name>/policy?wait=` with If-None-Match; keeps the newest policy."""

    def __init__(self, api: str, recipe: str, token: str) -> None:
        super().__init__(daemon=True, name=f"policy-follower-{recipe}")
        self.url, self.token = f"{api}/api/recipes/{recipe}/policy", token
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.latest: _Policy | None = None

    def read(self, wait: float = 0) -> _Policy | None:
        """One GET; the new policy, or None on 304."""
        tag = f'"v{self.latest.version}"' if self.latest else ""
        request = urllib.request.Request(
            f"{self.url}?wait={wait:g}" if wait else self.url,
            headers={"Authorization": f"Bearer {self.token}", **({"If-None-Match": tag} if tag else {})},
        )
        try:
            with urllib.request.urlopen(request, timeout=wait + 10) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 304:
                return None
            raise
        policy = _Policy(body["policy"], body["version"])
        with self.lock:
            self.latest = policy
        return policy

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.read(wait=POLL_WAIT_S)
            except (OSError, ValueError) as exc:
                log.warning("policy read failed (%s); retrying", exc)
                self.stopping.wait(1.0)


class TelemetryPoster(threading.Thread):
    """Posts numbered batches in order; a failed POST is retried with the same number."""

    def __init__(self, api: str, recipe: str, token: str, engine: str) -> None:
        super().__init__(daemon=True, name=f"telemetry-poster-{recipe}")
        self.url, self.token, self.engine = f"{api}/api/recipes/{recipe}/telemetry/", token, engine
        self.batches: queue.Queue[list[dict[str, Any]] | None] = queue.Queue()
        self.posted = 0
        self.next_batch = 1

    def run(self) -> None:
        while (records := self.batches.get()) is not None:
            self._post(records)

    def _post(self, records: list[dict[str, Any]]) -> None:
        body = json.dumps({"engine": self.engine, "batch": self.next_batch, "records": records}).encode()
        request = urllib.request.Request(
            self.url,
            data=body,
            method="POST",
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        for attempt in range(5):
            try:
                with urllib.request.urlopen(request, timeout=30):
                    break
            except urllib.error.HTTPError as exc:
                if exc.code == 400:  # our bug: retrying cannot help; say what the server said
                    log.error("telemetry batch %s refused: %s", self.next_batch, exc.read()[:500])
                    break
                time.sleep(0.5 * (attempt + 1))
            except OSError as exc:
                log.warning("telemetry batch %s not posted (%s); retrying", self.next_batch, exc)
                time.sleep(0.5 * (attempt + 1))
        self.next_batch += 1
        self.posted += 1


def setting(params: dict[str, Any], recipe: Recipe) -> tuple[ExecutionModel, Catalog, str, dict[str, Any] | None]:
    """The catalog and true costs: the recipe's latest boot (as stored, or repaired: its flagged
    shapes replaced, `catalogs.health`), or the PR's clean or drift catalog; and, for a boot, where
    the catalog came from (as a job's `catalog_sources` entry)."""
    if params["catalog"] in ("boot", "boot-repaired"):
        boot = Boot.objects.filter(recipe=recipe).order_by("-created_at", "-id").first()
        if boot is None:
            raise InvalidInput("catalog", f"recipe {recipe.name!r} has no stored boot; choose clean or drift")
        raw: list[dict[str, Any]] = boot.catalog
        source: dict[str, Any] = {"boot": boot.pk, "repaired": False}
        if params["catalog"] == "boot-repaired":
            raw, source = boot_repaired(boot_id=boot.pk, field="catalog")
        stored = Catalog.from_dicts(raw)  # read from storage: typed once, here
        simulate_check({**params, "boot_catalog": stored})  # decode graphs, and rows for max_lanes
        execution, catalog, _ = boot_setting({"boot_catalog": stored, "first_token_ms": params["first_token_ms"]})
        name = f"boot {boot.pk}"
        if source["repaired"]:
            n = len(source["replaced"])
            name = f"repaired boot {boot.pk} ({n} shape{'' if n == 1 else 's'} replaced)"
        return execution, catalog, name, source
    model = execution_of(params)
    return model, build_catalog({**params, "mixed_rows": [8, 32]}, model), params["catalog"], None


def run(params: dict[str, Any], emit: Emit) -> dict[str, Any]:
    job = running_job.get()
    if job is None or job.recipe_id is None:
        raise InvalidInput("recipe", "a simulated engine serves a recipe: start it from the recipe's page")
    recipe = Recipe.objects.get(pk=job.recipe_id)
    other = BenchmarkJob.objects.filter(kind=ENGINE_KIND, recipe=recipe, status=JobStatus.RUNNING).exclude(pk=job.pk)
    if other.exists():  # started around engine_start (the generic job form or API): still one per recipe
        raise InvalidInput("recipe", f"a simulated engine already runs for {recipe.name} (job {other[0].pk})")
    execution, catalog, catalog_name, source = setting(params, recipe)
    if source is not None:  # said on the job page and in the API, as for a job given a boot's catalog
        BenchmarkJob.objects.filter(pk=job.pk).update(catalog_sources={"catalog": [source]})
    engine = engine_name(job.pk)
    token = engine_token_create(engine=engine, recipes=[recipe])
    close_old_connections()  # the loop runs for hours; it needs no connection of its own
    api = settings.HELIOS_ENGINE_API_URL.rstrip("/")
    follower = PolicyFollower(api, recipe.name, token)
    poster = TelemetryPoster(api, recipe.name, token, engine)
    try:
        first = follower.read()
        assert first is not None
        follower.start()
        poster.start()
        return _serve(params, emit, execution, catalog, first, follower, poster) | {
            "engine": engine,
            "catalog": catalog_name,
        }
    finally:
        follower.stopping.set()
        if poster.ident is not None:  # started: it posts what is queued, then stops
            poster.batches.put(None)
            poster.join(timeout=30)
        engine_tokens_revoke(engine=engine)  # also when the first policy read failed


def traffic(params: dict[str, Any]) -> TrafficShape | Iterator[Arrival]:
    """Endless Poisson draws, or the job's trace (its window, limit and time scale applied) replayed
    in a loop: each pass one mean gap after the last (`scheduler_core.traffic.looped`)."""
    if params.get("trace") is not None:
        return looped(selected_trace(params))
    return TrafficShape(**{f: params[f] for f in TrafficShape.__dataclass_fields__})


def _serve(
    params: dict[str, Any],
    emit: Emit,
    execution: ExecutionModel,
    catalog: Catalog,
    first: _Policy,
    follower: PolicyFollower,
    poster: TelemetryPoster,
) -> dict[str, Any]:
    """The real-time loop: catch up with the wall clock, batch the records, report once a second."""
    loop = EngineLoop(
        catalog, execution, SchedulerConfig(first.name, params["max_lanes"], params["max_decode_wait"]), traffic(params)
    )
    loop.set_policy(first.name, first.version)
    pace, batch_s, duration = params["pace"], params["batch_ms"] / 1000.0, params["duration_s"]
    start_wall, start = time.time() * 1000.0, time.monotonic()
    pending: list[dict[str, Any]] = []
    counts = {"launch": 0, "request": 0}
    versions = [first.version]
    last_batch = last_report = start
    while duration == 0 or time.monotonic() - start < duration:
        with follower.lock:
            latest = follower.latest
        if latest is not None and latest.version != loop.version:
            loop.set_policy(latest.name, latest.version)
            versions.append(latest.version)
        now = time.monotonic()
        for record in loop.advance((now - start) * 1000.0 * pace):
            record["t_ms"] = start_wall + record["t_ms"] / pace
            counts[record["type"]] += 1
            pending.append(record)
        if pending and (now - last_batch >= batch_s or len(pending) >= 10_000):
            for i in range(0, len(pending), 10_000):
                poster.batches.put(pending[i : i + 10_000])
            pending, last_batch = [], now
        if now - last_report >= REPORT_S:
            last_report = now
            message = f"{loop.policy} v{loop.version}: {counts['launch']} launches, {counts['request']} requests"
            progress(emit, int(now - start), duration or 0, message)  # raises JobCancelled once stopped
        time.sleep(max(0.0, TICK_S - (time.monotonic() - now)))
    if pending:
        poster.batches.put(pending)
    return {
        "launches": counts["launch"],
        "requests": counts["request"],
        "versions": versions,
        "batches": poster.next_batch - 1,
    }


def format_text(result: dict[str, Any]) -> str:
    versions = " -> ".join(f"v{v}" for v in result["versions"])
    return (
        f"{result['engine']} on the {result['catalog']} catalog: {result['launches']} prefill launches, "
        f"{result['requests']} requests in {result['batches']} batches; policy versions followed: {versions}"
    )


def work(params: dict[str, Any]) -> int:
    return params["duration_s"]


def check(params: dict[str, Any]) -> None:
    """The traffic's ranges (simulate's rules); a recipe's boot is its own truth, so no profile beside it."""
    simulate_check({**params, "boot_catalog": None})
    check_boot_or_profile({"boot": params["catalog"] in ("boot", "boot-repaired"), **params}, "boot")


ANALYSIS = Analysis(
    name=ENGINE_KIND,
    summary="A simulated engine for this recipe: Poisson traffic (or a trace, replayed in a loop) through the multi-lane loop in real time, "
    "following the active policy over the engine API and posting its telemetry (runs until stopped).",
    params=(
        ChoiceParam(
            "catalog",
            "clean",
            "the recipe's latest boot (boot-repaired: with its flagged shapes replaced), or the PR's clean or "
            "drift catalog",
            choices=("boot", "boot-repaired", "clean", "drift"),
        ),
        FloatParam("rate_per_s", 20.0, "mean arrivals per second (Poisson)", minimum=0.01, maximum=10_000.0),
        IntParam("prompt_min", 32, "shortest prompt (tokens; lengths are log-uniform)", minimum=1, maximum=1_000_000),
        IntParam("prompt_max", 8_000, "longest prompt (tokens)", minimum=1, maximum=1_000_000),
        IntParam("output_min", 8, "fewest output tokens (uniform)", minimum=1, maximum=100_000),
        IntParam("output_max", 64, "most output tokens", minimum=1, maximum=100_000),
        FloatParam("span_share", 0.0, "share of requests holding one atomic span", minimum=0.0, maximum=1.0),
        IntParam("seed", 0, "traffic seed", minimum=0, maximum=2**31 - 1),
        FloatParam("pace", 1.0, "engine milliseconds per wall-clock millisecond", minimum=0.01, maximum=100.0),
        IntParam("batch_ms", 500, "telemetry batch interval (ms)", minimum=50, maximum=10_000),
        IntParam("duration_s", 0, "stop after this many seconds (0: run until stopped)", minimum=0, maximum=7 * 86_400),
        IntParam("max_lanes", 32, "most requests admitted at once", minimum=1, maximum=64),
        IntParam("max_decode_wait", 2, "most launches a decoding lane may sit out", minimum=1, maximum=64),
        *TRACE_PARAMS,
        DRIFT_PARAM,
        EXECUTION_PROFILE,
        *EXECUTION_PARAMS,
    ),
    run=run,
    check=check,
    work=work,
    max_work=7 * 86_400,
    format_text=format_text,
)
KIND = JobKind(ANALYSIS.name, QUEUE, ANALYSIS)
