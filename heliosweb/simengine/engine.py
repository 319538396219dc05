"""The simulated engine, job kind `engine` (queue `engine`): `scheduler_core.engine.EngineLoop` in real
time (times `pace`) on endless Poisson traffic or a looped trace, on the recipe's latest boot or the
PR's clean or drift catalog, until cancelled or for `duration_s`. A real engine-API client with its
own token (`helios_client`): `PolicyWatcher` long-polls the policy (a change applies to requests
whose prefill begins after it), `TelemetryReporter` posts numbered batches, retried by number.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any, TypedDict, cast

from django.conf import settings
from django.db import close_old_connections
from helios_client import Policy, PolicyWatcher, TelemetryReporter

from heliosweb.catalogs.health import boot_repaired
from heliosweb.catalogs.models import Boot
from heliosweb.jobs.models import BenchmarkJob, JobStatus
from heliosweb.jobs.registry import JobKind, RunContext
from heliosweb.recipes.models import Recipe
from heliosweb.telemetry.tokens import engine_token_create, engine_tokens_revoke
from scheduler_core.analyses.catalogs import (
    DRIFT_PARAM,
    EXECUTION_PARAMS,
    EXECUTION_PROFILE,
    boot_or_profile_schema,
    check_boot_or_profile,
    execution_of,
)
from scheduler_core.analyses.params import Analysis, ChoiceParam, Emit, FloatParam, IntParam, progress
from scheduler_core.analyses.simulate import (
    TRACE_ONLY,
    TRACE_PARAMS,
    boot_setting,
    build_catalog,
    poisson_params,
    selected_trace,
)
from scheduler_core.analyses.simulate import check as simulate_check
from scheduler_core.catalog import Catalog
from scheduler_core.engine import EngineLoop
from scheduler_core.errors import InvalidInput
from scheduler_core.execution import ExecutionModel
from scheduler_core.saturation import Load
from scheduler_core.scheduler import Arrival, SchedulerConfig
from scheduler_core.traffic import TrafficShape, looped

from .services import ENGINE_KIND

log = logging.getLogger(__name__)
QUEUE = "engine"
TICK_S = 0.02  # the loop catches up with the wall clock this often (and looks for a new policy)
REPORT_S = 1.0  # a progress event this often: the job page's status, and where a cancel is noticed
POLL_WAIT_S = 25
MAX_BATCH = 10_000  # records per batch (the server's bound)


BOOT_CATALOGS = ("boot", "boot-repaired")  # the `catalog` choices that run on the recipe's latest boot


def engine_name(job_id: int) -> str:
    return f"sim-job-{job_id}"


def setting(params: dict[str, Any], recipe: Recipe) -> tuple[ExecutionModel, Catalog, str, dict[str, Any] | None]:
    """The true costs, the catalog and its name: the recipe's latest boot (as stored or repaired) or
    the PR's clean or drift catalog; and, for a boot, its `catalog_sources` entry."""
    if params["catalog"] in BOOT_CATALOGS:
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


def check_submission(params: dict[str, Any], recipe: Recipe | None) -> None:
    """Refused at submission, not found out by the worker: an engine serves a recipe, and a boot
    catalog must be there and carry traffic (decode graphs, rows for `max_lanes`)."""
    if recipe is None or params["catalog"] not in BOOT_CATALOGS:  # no recipe: refused before (needs_recipe)
        return
    try:
        setting(params, recipe)
    except InvalidInput as exc:
        field = "catalog" if exc.field in ("catalog", "boot_catalog") else exc.field
        message = f"the recipe's latest boot {exc.message}" if exc.field == "boot_catalog" else exc.message
        raise InvalidInput(f"params.{field}", message, param=field) from None


class EngineResult(TypedDict):
    """What an engine served: its records, the policy versions it followed, where its telemetry went."""

    launches: int
    requests: int
    versions: list[int]
    batches: int
    session: str
    engine: str
    catalog: str
    load: dict[str, Any]  # did it keep up with its traffic (`scheduler_core.saturation`), its latest requests


def run(params: dict[str, Any], emit: Emit) -> EngineResult:
    """Without a job (the CLI, a bare `Analysis.run`) there is no recipe to serve."""
    raise InvalidInput("recipe", "a simulated engine serves a recipe: start it from the recipe's page")


def serve(context: RunContext, params: dict[str, Any], emit: Emit) -> EngineResult:
    """The job's run: its recipe and id come in `context`, its params stay the kind's declared ones."""
    recipe = context.recipe
    if recipe is None:
        return run(params, emit)
    other = BenchmarkJob.objects.filter(kind=ENGINE_KIND, recipe=recipe, status=JobStatus.RUNNING)
    other = other.exclude(pk=context.job_id)
    if other.exists():  # started around engine_start (the generic job form or API): still one per recipe
        raise InvalidInput("recipe", f"a simulated engine already runs for {recipe.name} (job {other[0].pk})")
    execution, catalog, catalog_name, source = setting(params, recipe)
    if source is not None:  # said on the job page and in the API, as for a job given a boot's catalog
        BenchmarkJob.objects.filter(pk=context.job_id).update(catalog_sources={"catalog": [source]})
    engine = engine_name(context.job_id)
    token = engine_token_create(engine=engine, recipes=[recipe])
    close_old_connections()  # the loop runs for hours; it needs no connection of its own
    api = settings.HELIOS_ENGINE_API_URL.rstrip("/")
    watcher = PolicyWatcher(api, recipe.name, token, wait_s=POLL_WAIT_S)
    reporter: TelemetryReporter | None = None
    try:
        first = watcher.start()
        reporter = TelemetryReporter(
            api,
            recipe.name,
            token,
            engine,
            batch_records=MAX_BATCH,
            interval_s=params["batch_ms"] / 1000.0,
            flush_on_exit=False,  # closed below, before the token is revoked
        )
        served = _serve(params, emit, execution, catalog, first, watcher, reporter)
        return cast(EngineResult, served | {"engine": engine, "catalog": catalog_name})
    finally:
        watcher.stop()
        if reporter is not None:  # it posts what is queued, then stops
            reporter.close(timeout_s=30)
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
    first: Policy,
    watcher: PolicyWatcher,
    reporter: TelemetryReporter,
) -> dict[str, Any]:
    """The real-time loop: catch up with the wall clock, hand the records to the reporter, report once a second."""
    loop = EngineLoop(
        catalog,
        execution,
        SchedulerConfig(first.policy, params["max_lanes"], params["max_decode_wait"]),
        traffic(params),
    )
    loop.set_policy(first.policy, first.version)
    pace, duration = params["pace"], params["duration_s"]
    start_wall, start = time.time() * 1000.0, time.monotonic()
    counts = {"launch": 0, "request": 0}
    versions = [first.version]
    last_report = start
    while duration == 0 or time.monotonic() - start < duration:
        latest = watcher.current
        if latest is not None and latest.version != loop.version:
            loop.set_policy(latest.policy, latest.version)
            versions.append(latest.version)
        now = time.monotonic()
        # older version first: requests planned before a change still finish after it, and the
        # reporter starts a batch at each version change
        for record in sorted(loop.advance((now - start) * 1000.0 * pace), key=lambda r: r["version"]):
            record["t_ms"] = start_wall + record["t_ms"] / pace
            counts[record["type"]] += 1
            reporter.add(record)
        if now - last_report >= REPORT_S:
            last_report = now
            message = f"{loop.policy} v{loop.version}: {counts['launch']} launches, {counts['request']} requests"
            dropped = reporter.stats.dropped_records
            message += f" ({dropped} records dropped: the API is not answering)" if dropped else ""
            progress(emit, int(now - start), duration or 0, message)  # raises JobCancelled once stopped
        time.sleep(max(0.0, TICK_S - (time.monotonic() - now)))
    reporter.flush()
    return {
        "launches": counts["launch"],
        "requests": counts["request"],
        "versions": versions,
        "batches": reporter.next_batch - 1,
        "session": reporter.session,
        "load": loop.load().to_dict(),
    }


def format_text(result: EngineResult) -> str:
    versions = " -> ".join(f"v{v}" for v in result["versions"])
    text = (
        f"{result['engine']} on the {result['catalog']} catalog: {result['launches']} prefill launches, "
        f"{result['requests']} requests in {result['batches']} batches; policy versions followed: {versions}"
    )
    load = result.get("load")  # absent from results older than the verdict
    return text + (f"\n{Load(**load).describe()}" if load else "")


def work(params: dict[str, Any]) -> int:
    return params["duration_s"]


def check(params: dict[str, Any]) -> None:
    """The traffic's ranges (simulate's rules); a recipe's boot is its own truth, so no profile beside it."""
    simulate_check({**params, "boot_catalog": None})
    check_boot_or_profile({"boot": params["catalog"] in BOOT_CATALOGS, **params}, "boot")


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
        *poisson_params(prompt_max=8_000, output_min=8, output_max=64),
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
    only_with=TRACE_ONLY,
    schema_rules=(boot_or_profile_schema("catalog", BOOT_CATALOGS),),
    check=check,
    work=work,
    max_work=7 * 86_400,
    format_text=format_text,
    result=EngineResult,
    needs_recipe="a simulated engine serves a recipe: choose one, or start it from the recipe's page",
    service_duration_s=lambda params: float(params["duration_s"]) or None,  # 0: until stopped
)
KIND = JobKind(ANALYSIS.name, QUEUE, ANALYSIS, check_recipe=check_submission, serve=serve)
