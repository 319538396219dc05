"""A decision's trade-off, computed once per evidence set and kept.

The trade-off reads each cited job's stored reading (`jobs.result_reading`: small rows made when
the result was stored), not the results themselves; assembling it is still kept. What it reads changes
only when the decision, its recipe, its cited jobs or the recipe's boots change, so the computed
summary is kept (the `evidence` cache: this process's memory, bounded) under a key made of exactly
those: the decision's and the recipe's rows, each cited job's id, status, creation, finish, last
event number, sources and recipe's name (a job's result is written once, when it finishes:
`jobs.services.runner`, so a re-run or a changed job is another key), the recipe's and the cited
boots' ids, and the proposer's name: the page's kept rendering shows the names, so a renamed recipe
or user is another key too. Only the engines' part, which moves with every telemetry batch, is
read afresh on every view.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.cache import caches
from django.db.models import Model

from heliosweb.catalogs.models import Boot

from .models import PolicyDecision
from .tradeoff import decision_tradeoff, engine_part

ALIAS = "evidence"
T = TypeVar("T")


def decision_tradeoff_kept(*, decision: PolicyDecision) -> dict[str, Any]:
    """`decision_tradeoff`, computed once per evidence set; the engines' part read now."""
    return decision_tradeoff_keyed(decision=decision)[1]


def decision_tradeoff_keyed(*, decision: PolicyDecision) -> tuple[str, dict[str, Any]]:
    """The same and the key it is kept under: the decision page keeps its rendering of the
    trade-off (all but the engines' part) and of the evidence list there too (`{% cache %}`)."""
    key = tradeoff_key(decision)
    summary = _kept(f"tradeoff:{key}", lambda: decision_tradeoff(decision=decision))
    summary["engine"] = engine_part(recipe=decision.recipe, to_policy=decision.to_policy)
    return key, summary


def tradeoff_key(decision: PolicyDecision) -> str:
    """A digest of everything the trade-off is computed from (see the module's docstring)."""
    jobs = list(
        decision.evidence.order_by("id").values_list(
            "pk",
            "kind",
            "status",
            "created_at",
            "finished_at",
            "last_seq",
            "catalog_sources",
            "trace_sources",
            "recipe__name",
        )
    )
    cited_boots = sorted({b["boot"] for job in jobs for rows in (job[6] or {}).values() for b in _boot_rows(rows)})
    boots = Boot.objects.filter(recipe_id=decision.recipe_id).values_list("pk", "created_at")
    parts = [_row(decision), _row(decision.recipe), jobs, list(boots), cited_boots, decision.created_by.username]
    return hashlib.sha256(json.dumps(parts, default=str, sort_keys=True).encode()).hexdigest()


def _kept(key: str, build: Callable[[], T]) -> T:
    store = caches[ALIAS]
    value = store.get(key)
    if value is None:
        value = build()
        store.set(key, value, timeout=None)
    return value


def _row(obj: Model) -> list[Any]:
    """Every stored column of a row: a new column (or a changed value) is another key."""
    return [getattr(obj, field.attname) for field in obj._meta.concrete_fields]


def _boot_rows(rows: Any) -> list[dict[str, Any]]:
    return [r for r in rows if isinstance(r, dict) and isinstance(r.get("boot"), int)] if isinstance(rows, list) else []
