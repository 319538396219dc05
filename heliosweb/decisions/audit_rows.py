"""Rows the audit chain vouches for (each decision, its evidence and comments, each recipe's
emergency banner) must be what their audit events say: the chain proves the events were not
edited, this that the rows were not edited around the services (raw SQL). Everything expected is
rebuilt from the events alone, so rows older than this check are covered (docs/decisions.md)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from heliosweb.audit.models import AuditEvent
from heliosweb.catalogs.models import Boot
from heliosweb.jobs.models import BenchmarkJob
from heliosweb.recipes.models import PolicySetting
from heliosweb.recipes.selectors import emergency_banner

from .models import DecisionComment, PolicyDecision

ROW_EVENTS = ("proposed", "evidence_added", "approved", "rejected", "withdrawn", "applied")  # set a decision's row
CITING_EVENTS = ("proposed", "evidence_added")  # the events that cite jobs, with their digests
BANNER_AT_SLACK_S = 2.0  # a banner written before its event carried the event's time was stamped just before it
_PROPOSED = {"policy": "from_policy", "proposed_policy": "to_policy", "base_version": "base_version"}


def decision_audit_mismatches() -> list[str]:
    """Decisions whose row differs from what their steps' events say, or that have no events."""
    expected = _decisions_from_events()
    problems = []
    evidence: dict[int, list[int]] = {}
    # The citations' ids from the link table alone: a cited job's row carries its whole result.
    for decision_id, job_id in PolicyDecision.evidence.through.objects.values_list(
        "policydecision_id", "benchmarkjob_id"
    ):
        evidence.setdefault(decision_id, []).append(job_id)
    rows = PolicyDecision.objects.select_related("recipe").order_by("id")
    for decision in rows.iterator(chunk_size=500):
        said = expected.pop(str(decision.pk), None)
        if said is None:
            problems.append(f"decision {decision.pk} has no proposed event in the audit chain")
            continue
        now = _decision_row(decision, evidence.get(decision.pk, []))
        for field, value in now.items():
            if field in said and said[field] != value:
                problems.append(
                    f"decision {decision.pk}: {field} is {_short(value)} but its events "
                    f"(last #{said['seq']}) say {_short(said[field])}"
                )
                break
    problems += [
        f"decision {pk} is in the audit chain (#{said['seq']}) but not in the database" for pk, said in expected.items()
    ]
    return problems


def emergency_audit_mismatches() -> list[str]:
    """Recipes whose emergency banner is not the one their last `emergency_rollback` left, or is
    gone without a follow-up decision's review (the only step that clears it), or appears from nowhere."""
    expected = _banners_from_events()
    problems = []
    for setting in PolicySetting.objects.select_related("recipe").order_by("recipe__name"):
        name = setting.recipe.name
        said, seq = expected.get(name, (None, None))
        if not _same_banner(setting.emergency, said):
            where = f"event #{seq} says {_short(said)}" if seq else "no emergency_rollback event made one"
            problems.append(f"recipe {name}'s emergency banner is {_short(setting.emergency)} but {where}")
    return problems


def evidence_digests(job_ids: list[int]) -> dict[str, str]:
    """Per evidence job (by id, as text): the sha256 of what a reviewer reads from it, taken when
    a proposal (or a reviewer) cites it: its kind, params and result, and the catalog and provenance
    of every boot its catalogs came from. Kept in the citing event (`CITING_EVENTS`), so an edit to any of them afterwards,
    around the services, is named by `audit_verify`."""
    jobs = BenchmarkJob.objects.filter(pk__in=job_ids).values_list("pk", "kind", "params", "result", "catalog_sources")
    rows = {pk: (kind, params, result, sources) for pk, kind, params, result, sources in jobs}
    cited = {s["boot"] for *_, sources in rows.values() for boots in (sources or {}).values() for s in boots}
    boots = {
        pk: (catalog, provenance)
        for pk, catalog, provenance in Boot.objects.filter(pk__in=cited).values_list("pk", "catalog", "provenance")
    }
    digests = {}
    for pk, (kind, params, result, sources) in rows.items():
        ids = sorted({s["boot"] for boots_of in (sources or {}).values() for s in boots_of})
        read = {"kind": kind, "params": params, "result": result, "boots": {str(b): boots.get(b) for b in ids}}
        digests[str(pk)] = hashlib.sha256(json.dumps(read, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return digests


def evidence_audit_mismatches() -> list[str]:
    """Decisions whose evidence jobs (results, or the boots they cite) differ from the digests their
    citing events took."""
    cited: list[tuple[str, int, dict[str, str]]] = []
    events = AuditEvent.objects.filter(object_type="decision", action__in=CITING_EVENTS)
    for object_id, seq, after in events.values_list("object_id", "seq", "after"):
        said = (after or {}).get("evidence_digests")
        if said:
            cited.append((object_id, seq, said))
    now = evidence_digests(sorted({int(job) for *_, said in cited for job in said}))
    return [
        f"decision {decision}: evidence job {job} (its result, params or a boot it cites) "
        f"{'is gone' if job not in now else 'changed'} since event #{seq} cited it"
        for decision, seq, said in cited
        for job, digest in said.items()
        if now.get(job) != digest
    ]


def comment_audit_mismatches() -> list[str]:
    """Comments whose decision, author or text differ from their `commented` event, or have none."""
    said = {
        str((after or {}).get("comment")): (object_id, actor_id, reason, seq)
        for object_id, actor_id, reason, after, seq in AuditEvent.objects.filter(
            object_type="decision", action="commented"
        ).values_list("object_id", "actor_id", "reason", "after", "seq")
    }
    problems = []
    for pk, decision_id, author_id, body in DecisionComment.objects.order_by("pk").values_list(
        "pk", "decision_id", "author_id", "body"
    ):
        event = said.pop(str(pk), None)
        if event is None:
            problems.append(f"comment {pk} on decision {decision_id} has no commented event in the audit chain")
        elif (str(decision_id), author_id, body) != event[:3]:
            problems.append(f"comment {pk} on decision {decision_id} differs from its event #{event[3]}")
    problems += [f"comment {pk} is in the audit chain (#{e[3]}) but not in the database" for pk, e in said.items()]
    return problems


def _decisions_from_events() -> dict[str, dict[str, Any]]:
    expected: dict[str, dict[str, Any]] = {}
    events = AuditEvent.objects.filter(object_type="decision", action__in=ROW_EVENTS).order_by("seq")
    for seq, action, object_id, actor_id, recipe, after, reason in events.values_list(
        "seq", "action", "object_id", "actor_id", "recipe_name", "after", "reason"
    ).iterator(chunk_size=2000):
        after = after or {}
        row = expected.setdefault(object_id, {})
        row["seq"] = seq
        if action == "proposed":
            row.update(
                recipe=recipe,
                status="pending",
                rationale=reason,
                created_by=actor_id,
                rollback_of=after.get("rollback_of"),
                reviewed_by=None,
                review_reason="",
                applied_by=None,
                applied_version=None,
            )
            # What the event states (an event that lacks a key leaves that column unchecked).
            row.update({column: after[key] for key, column in _PROPOSED.items() if key in after})
            if "evidence" in after:
                row["evidence"] = sorted(after["evidence"])
        elif action == "evidence_added":
            row["evidence"] = sorted(after["evidence"])
        elif action in ("approved", "rejected"):
            row.update(status=action, reviewed_by=actor_id, review_reason=reason)
        elif action == "withdrawn":
            row["status"] = action
        else:  # applied
            row.update(status=action, applied_by=actor_id)
            if "version" in after:
                row["applied_version"] = after["version"]
    return expected


def _decision_row(decision: PolicyDecision, evidence: list[int]) -> dict[str, Any]:
    return {
        "recipe": decision.recipe.name,
        "status": decision.status,
        "from_policy": decision.from_policy,
        "to_policy": decision.to_policy,
        "base_version": decision.base_version,
        "rationale": decision.rationale,
        "created_by": decision.created_by_id,
        "rollback_of": decision.rollback_of_id,
        "reviewed_by": decision.reviewed_by_id,
        "review_reason": decision.review_reason,
        "applied_by": decision.applied_by_id,
        "applied_version": decision.applied_version,
        "evidence": sorted(evidence),
    }


def _banners_from_events() -> dict[str, tuple[dict[str, Any] | None, int]]:
    """Per recipe: the banner its events leave standing (None when cleared) and the event that set it.
    A review clears it when its decision was proposed after the rollback (`decisions.services._review`)."""
    banners: dict[str, tuple[dict[str, Any] | None, int]] = {}
    proposed_after: dict[str, set[str]] = {}
    events = AuditEvent.objects.filter(action__in=("emergency_rollback", "proposed", "approved", "rejected"))
    for event in events.order_by("seq").iterator(chunk_size=2000):
        name = event.recipe_name
        if event.action == "emergency_rollback":
            banners[name] = (emergency_banner(event), event.seq)
            proposed_after[name] = set()
        elif event.object_type != "decision" or name not in proposed_after:
            continue
        elif event.action == "proposed":
            proposed_after[name].add(event.object_id)
        elif event.object_id in proposed_after[name] and banners[name][0] is not None:
            banners[name] = (None, event.seq)
    return banners


def _same_banner(stored: Any, said: dict[str, Any] | None) -> bool:
    if stored is None or said is None:
        return stored is None and said is None
    if not isinstance(stored, dict) or set(stored) != set(said):
        return False
    if any(stored[k] != said[k] for k in said if k != "at"):
        return False
    try:
        gap = abs((datetime.fromisoformat(stored["at"]) - datetime.fromisoformat(said["at"])).total_seconds())
    except (TypeError, ValueError):
        return False
    return gap <= BANNER_AT_SLACK_S


def _short(value: Any) -> str:
    return "nothing" if value is None else repr(value)[:120]
