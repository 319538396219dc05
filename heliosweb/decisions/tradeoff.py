"""A decision's trade-off and evidence checklist, read from its evidence jobs and the recipe's
stored boots. The arithmetic lives in `scheduler_core.tradeoff`; this module only gathers."""

from __future__ import annotations

from typing import Any

from heliosweb.catalogs.health import recipe_boots
from heliosweb.jobs.models import JobStatus
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
    required = list(decision.recipe.required_evidence or [])
    summary["required"] = required
    summary["missing"] = missing(summary["checklist"], required)
    return summary


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
