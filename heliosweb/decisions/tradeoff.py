"""A decision's trade-off and evidence checklist, read from its evidence jobs, the recipe's
stored boots and its engines' telemetry. The arithmetic lives in `scheduler_core.tradeoff` and
`telemetry.selectors`; this module gathers, and adds what only the web knows: a stored trace's
name, each worst request's /explain link, the per-request CDF as an inline picture."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.urls import reverse

from heliosweb.audit.models import AuditEvent
from heliosweb.catalogs.health import recipe_boots
from heliosweb.catalogs.models import Boot
from heliosweb.catalogs.provenance import Provenance as BootProvenance
from heliosweb.jobs.models import JobStatus
from heliosweb.jobs.result_reading import readings
from heliosweb.recipes.models import Recipe
from heliosweb.recipes.selectors import setting_of
from heliosweb.telemetry.selectors import MIN_SAMPLES, telemetry_by_version
from scheduler_core.comparison import Pair
from scheduler_core.evidence import Evidence, Subject
from scheduler_core.tradeoff import CHECKLIST, checklist, missing, tradeoff
from scheduler_core.verdict import verdict

from .models import PolicyDecision


def _evidence(decision: PolicyDecision) -> list[Evidence]:
    """The done cited jobs as the trade-off reads them: each result from its stored reading (the
    result less its per-request rows, and their comparisons made), never the result itself."""
    jobs = list(decision.evidence.filter(status=JobStatus.DONE).select_related("recipe").defer("result").order_by("id"))
    read = readings(jobs)
    booted = {j.pk: _boot_ids(j.catalog_sources) for j in jobs}
    wanted = {i for ids in booted.values() for i in ids}
    rows = Boot.objects.filter(pk__in=wanted).values_list("pk", "provenance")
    devices = {pk: BootProvenance.read(prov).device for pk, prov in rows}
    return [
        Evidence(
            j.pk,
            j.kind,
            j.recipe.name if j.recipe else None,
            j.params or {},
            read[j.pk].lean or {},
            tuple(d for i in booted[j.pk] if (d := devices.get(i))),
            _compared(read[j.pk].compared),
        )
        for j in jobs
    ]


def _compared(stored: list[dict[str, Any]] | None) -> tuple[dict[str, Any], ...] | None:
    return None if stored is None else tuple(stored)


def _boot_ids(sources: Any) -> list[int]:
    """The stored boots a job planned on (its `catalog_sources`: per parameter, [{boot, ...}])."""
    if not isinstance(sources, dict):
        return []
    return [
        row["boot"]
        for rows in sources.values()
        if isinstance(rows, list)
        for row in rows
        if isinstance(row, dict) and isinstance(row.get("boot"), int)
    ]


def decision_tradeoff(*, decision: PolicyDecision) -> dict[str, Any]:
    """`GET /api/decisions/<id>/tradeoff/`: a part per cited job of each kind (an empty list where
    none covers it), each naming its source, compared as the decision's before -> after; then the
    verdict the page opens with."""
    summary = tradeoff(
        _evidence(decision),
        subject=Subject(decision.recipe.name, decision.recipe.hardware),
        pair=Pair(decision.from_policy, decision.to_policy),
        boots=recipe_boots(recipe_id=decision.recipe_id),
    )
    _name_stored_traces(decision, summary)
    _name_adders(evidence_added_by(decision=decision), summary)
    for part in summary["requests"]:
        for row in part.get("worst", []):
            row["explain_url"] = explain_url(
                job=part["job"],
                catalog=part["catalog"],
                prompt_tokens=row["prompt_tokens"],
                request=row["id"],
                rate_per_s=part.get("rate_per_s"),
                pair=summary["pair"],
            )
    summary["engine"] = engine_part(recipe=decision.recipe, to_policy=decision.to_policy)
    required = list(decision.recipe.required_evidence or [])
    summary["required"] = required
    summary["missing"] = missing(summary["checklist"], required)
    summary["verdict"] = verdict(summary)
    return summary


def _name_stored_traces(decision: PolicyDecision, summary: dict[str, Any]) -> None:
    """A serving part run on a stored trace names it (`stored_trace`), and a replay of telemetry
    says whose and when (`telemetry`: recipe, engine, window, execution), as the job page does: the
    result itself only holds the requests it was given."""
    sources = dict(decision.evidence.values_list("pk", "trace_sources"))
    for name in ("simulate", "capacity", "replay"):
        for part in summary[name]:
            stored = (sources.get(part["job"]) or {}).get("trace")
            if stored and "telemetry" in stored:
                part["telemetry"] = {k: stored[k] for k in ("telemetry", "engine", "window_utc", "execution")}
            elif stored:
                part["stored_trace"] = stored["trace"]


def evidence_added_by(*, decision: PolicyDecision) -> dict[int, str]:
    """Who added each job a reviewer cited after the proposal (its `evidence_added` events); the
    proposer's own citations are not in it."""
    events = AuditEvent.objects.filter(object_type="decision", object_id=str(decision.pk), action="evidence_added")
    return {job: name for name, after in events.values_list("actor_name", "after") for job in after["added"]}


def _name_adders(added_by: dict[int, str], summary: dict[str, Any]) -> None:
    """Each part's source says who added its job, where a reviewer did (`added_by`)."""
    for parts in summary.values():
        for part in parts if isinstance(parts, list) else ():
            source = part.get("source") if isinstance(part, dict) else None
            if isinstance(source, dict) and source.get("job") in added_by:
                source["added_by"] = added_by[source["job"]]


def engine_part(*, recipe: Recipe, to_policy: str) -> dict[str, Any] | None:
    """What the recipe's engines measured in service, per policy version (`telemetry_by_version`),
    each marked `current` (the version engines run now) and `proposed` (under the policy this
    decision proposes), and for each policy its latest version with enough requests: the
    proposed policy's against the others', in service. None when no engine has reported."""
    versions = telemetry_by_version(recipe=recipe)
    if not versions:
        return None
    setting = setting_of(recipe)
    current = setting.version if setting else None
    latest: dict[str, dict[str, Any]] = {}
    for row in versions:  # oldest first: the last one kept per policy is its latest
        row["current"] = row["version"] == current
        row["proposed"] = row["policy"] == to_policy
        if not row["too_few"]:
            latest[row["policy"]] = row
    return {
        "versions": versions,
        "current_version": current,
        "to_policy": to_policy,
        "min_samples": MIN_SAMPLES,
        "latest_by_policy": {policy: row["version"] for policy, row in sorted(latest.items())},
    }


def decision_missing_evidence(*, decision: PolicyDecision) -> list[str]:
    """The labels of the checklist items the recipe requires that no evidence ticks yet."""
    required = list(decision.recipe.required_evidence or [])
    if not required:
        return []
    rows = checklist(
        _evidence(decision),
        recipe=decision.recipe.name,
        to_policy=decision.to_policy,
        boots=recipe_boots(recipe_id=decision.recipe_id),
    )
    labels = dict(CHECKLIST)
    return [labels[item] for item in missing(rows, required)]


# /explain's catalog choice for a serving job's catalog; it reads the job's execution model and
# drift factor (or its boot) from `job`. "unmeasured-full" has no counterpart there.
EXPLAIN_CATALOGS = {"clean": "clean", "drift": "drift", "boot": "job"}


def explain_url(
    *,
    job: int,
    catalog: str,
    prompt_tokens: int,
    request: int | None = None,
    rate_per_s: float | None = None,
    pair: dict[str, str] | None = None,
) -> str | None:
    """/explain for one request's prompt, planned on the catalog and execution model the job ran;
    with `request` (and a capacity job's `rate_per_s`), the page also splits its TTFT in that run,
    and the delta of `pair` (the table's after - before)."""
    choice = EXPLAIN_CATALOGS.get(catalog)
    if choice is None:
        return None
    query: dict[str, object] = {"job": job, "catalog": choice, "prompt_tokens": prompt_tokens}
    if request is not None:
        query["request"] = request
    if rate_per_s is not None:
        query["rate"] = rate_per_s
    if pair is not None:
        query |= {"before": pair["before"], "after": pair["after"]}
    return f"{reverse('explain')}?{urlencode(query)}"


CDF_WIDTH, CDF_HEIGHT, CDF_PAD = 600, 200, 8  # the drawing's own units; the page scales it to its width


def delta_cdf(cdf_ms: list[float]) -> dict[str, Any] | None:
    """The rule - cost CDF (101 quantiles) as an inline SVG polyline: x the delta in ms, y the share
    of requests; where x = 0 falls, and the axis ends. One small picture needs no chart library."""
    if len(cdf_ms) < 2:
        return None
    low, high = min(cdf_ms[0], 0.0), max(cdf_ms[-1], 0.0)
    span = (high - low) or 1.0
    inner_w, inner_h = CDF_WIDTH - 2 * CDF_PAD, CDF_HEIGHT - 2 * CDF_PAD

    def x(ms: float) -> float:
        return round(CDF_PAD + (ms - low) / span * inner_w, 2)

    steps = len(cdf_ms) - 1
    points: list[str] = []
    for i, ms in enumerate(cdf_ms):  # a step function: across at the previous share, then up
        y = round(CDF_PAD + inner_h * (1 - i / steps), 2)
        if points:
            points.append(f"{x(ms)},{points[-1].split(',')[1]}")
        points.append(f"{x(ms)},{y}")
    return {
        "width": CDF_WIDTH,
        "height": CDF_HEIGHT,
        "points": " ".join(points),
        "zero_x": x(0.0),
        "top": CDF_PAD,
        "bottom": CDF_HEIGHT - CDF_PAD,
        "low_ms": low,
        "high_ms": high,
    }
