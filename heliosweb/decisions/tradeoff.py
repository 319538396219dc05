"""A decision's trade-off and evidence checklist, read from its evidence jobs, the recipe's
stored boots and its engines' telemetry. The arithmetic lives in `scheduler_core.tradeoff` and
`telemetry.selectors`; this module only gathers."""

from __future__ import annotations

from typing import Any

from heliosweb.catalogs.health import recipe_boots
from heliosweb.jobs.models import JobStatus
from heliosweb.recipes.models import Recipe
from heliosweb.recipes.selectors import setting_of
from heliosweb.telemetry.selectors import MIN_SAMPLES, telemetry_by_version
from scheduler_core.tradeoff import CHECKLIST, Evidence, checklist, missing, tradeoff

from .models import PolicyDecision


def _evidence(decision: PolicyDecision) -> list[Evidence]:
    jobs = decision.evidence.filter(status=JobStatus.DONE).select_related("recipe").order_by("id")
    return [Evidence(j.pk, j.kind, j.recipe.name if j.recipe else None, j.params or {}, j.result or {}) for j in jobs]


def decision_tradeoff(*, decision: PolicyDecision) -> dict[str, Any]:
    """`GET /api/decisions/<id>/tradeoff/`: every part, null where no evidence covers it."""
    summary = tradeoff(
        _evidence(decision),
        recipe=decision.recipe.name,
        to_policy=decision.to_policy,
        boots=recipe_boots(recipe_id=decision.recipe_id),
    )
    summary["engine"] = engine_part(recipe=decision.recipe, to_policy=decision.to_policy)
    required = list(decision.recipe.required_evidence or [])
    summary["required"] = required
    summary["missing"] = missing(summary["checklist"], required)
    return summary


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
    for row in versions:
        row["current"] = row["version"] == current
        row["proposed"] = row["policy"] == to_policy
    latest: dict[str, dict[str, Any]] = {}
    for row in versions:  # oldest first: the last one kept per policy is its latest
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
