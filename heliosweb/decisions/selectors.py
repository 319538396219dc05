"""Reads for policy decisions and the audit trail, including the chain check."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from django.db.models import QuerySet

from heliosweb.common.inputs import get_by_id
from heliosweb.common.permissions import Actor
from heliosweb.jobs.models import BenchmarkJob, JobStatus
from heliosweb.jobs.selectors import job_summary
from scheduler_core.errors import InvalidInput

from .hashing import GENESIS, event_hash, event_payload
from .models import OPEN, AuditEvent, DecisionStatus, PolicyDecision


def decision_list(
    *, status: str | None = None, recipe: str | None = None, limit: int = 100
) -> QuerySet[PolicyDecision]:
    """Newest first; one query (recipe and people joined)."""
    if status and status not in DecisionStatus.values:
        raise InvalidInput("status", f"unknown status {status!r} (expected one of {DecisionStatus.values})")
    qs = PolicyDecision.objects.select_related("recipe", "created_by", "reviewed_by", "applied_by")
    if status:
        qs = qs.filter(status=status)
    if recipe:
        qs = qs.filter(recipe__name=recipe)
    return qs.order_by("-created_at", "-id")[:limit]


def decisions_open(*, limit: int = 20) -> QuerySet[PolicyDecision]:
    """Decisions still waiting for a review or to be applied, oldest first: what needs a maintainer."""
    return (
        PolicyDecision.objects.select_related("recipe", "created_by")
        .filter(status__in=OPEN)
        .order_by("created_at", "id")[:limit]
    )


def decision_latest_applied(*, recipe: str) -> PolicyDecision | None:
    """The recipe's most recently applied decision (the live page's before/after panel)."""
    return (
        PolicyDecision.objects.filter(recipe__name=recipe, status=DecisionStatus.APPLIED)
        .order_by("-applied_version")
        .first()
    )


def decision_get(*, decision_id: Any) -> PolicyDecision:
    """One decision by an id from outside: InvalidInput if not an integer, NotFound if no such decision."""
    related = PolicyDecision.objects.select_related("recipe", "created_by", "reviewed_by", "applied_by")
    return get_by_id(related, decision_id, what="decision")


def decision_evidence(*, decision: PolicyDecision) -> list[BenchmarkJob]:
    return list(decision.evidence.select_related("recipe").defer("result", "params").order_by("id"))


def decision_evidence_summaries(*, decision: PolicyDecision) -> list[tuple[BenchmarkJob, str | None]]:
    """Each evidence job with its result as text, so a reviewer reads the numbers on the decision itself."""
    return [
        (job, job_summary(job)) for job in decision.evidence.select_related("recipe").defer("params").order_by("id")
    ]


def decision_allowed_steps(*, decision: PolicyDecision, user: Actor) -> list[str]:
    """Which buttons to show; the services check the same rules again."""
    if not user.is_authenticated:
        return []
    steps: list[str] = []
    is_author = decision.created_by_id == user.pk
    if decision.status == DecisionStatus.PENDING:
        if not is_author and user.has_perm("decisions.approve_decision"):
            steps += ["approve", "reject"]
        if is_author:
            steps.append("withdraw")
    if decision.status == DecisionStatus.APPROVED and user.has_perm("decisions.apply_decision"):
        steps.append("apply")
    return steps


def evidence_job_choices(*, limit: int = 100) -> QuerySet[BenchmarkJob]:
    """Finished (done) jobs a proposal can cite, newest first."""
    return (
        BenchmarkJob.objects.filter(status=JobStatus.DONE)
        .select_related("recipe")
        .defer("result", "params")
        .order_by("-created_at", "-id")[:limit]
    )


def audit_list(*, decision_id: int | None = None, limit: int = 200) -> list[AuditEvent]:
    """The latest `limit` events (or one decision's), oldest first."""
    qs = AuditEvent.objects.all()
    if decision_id is not None:
        qs = qs.filter(decision_id=decision_id)
    return list(reversed(qs.order_by("-seq")[:limit]))


@dataclass(frozen=True)
class ChainReport:
    ok: bool
    count: int
    head_hash: str
    broken_at: int | None = None  # the seq of the first event that does not check out
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def audit_verify(*, batch: int = 2000) -> ChainReport:
    """Walk the whole chain in order and report the first broken link.

    An event checks out when its number follows the previous one, its `prev_hash` is the
    previous event's `hash`, and its `hash` recomputes from its own content. Editing any field,
    inserting a row or removing one from the middle breaks it. Removing events from the end
    cannot be seen from the chain alone: record `head_hash` elsewhere to detect that.
    """
    prev_hash, expected_seq, count = GENESIS, 1, 0
    last_seq = 0
    while True:
        rows = list(AuditEvent.objects.filter(seq__gt=last_seq).order_by("seq")[:batch])
        if not rows:
            break
        for event in rows:
            if event.seq != expected_seq:
                return ChainReport(
                    False,
                    count,
                    prev_hash,
                    event.seq,
                    f"event #{event.seq} follows #{expected_seq - 1}: events are missing",
                )
            if event.prev_hash != prev_hash:
                return ChainReport(
                    False, count, prev_hash, event.seq, f"event #{event.seq} does not link to the previous event's hash"
                )
            if event_hash(event_payload(event), event.prev_hash) != event.hash:
                return ChainReport(
                    False,
                    count,
                    prev_hash,
                    event.seq,
                    f"event #{event.seq} was changed after it was written: its hash does not match",
                )
            prev_hash, expected_seq, count = event.hash, expected_seq + 1, count + 1
        last_seq = rows[-1].seq
    return ChainReport(True, count, prev_hash)


def decision_as_api(decision: PolicyDecision, *, evidence: list[BenchmarkJob] | None = None) -> dict[str, Any]:
    def user(u: Any) -> str | None:
        return u.get_username() if u is not None else None

    def when(t: Any) -> str | None:
        return t.isoformat() if t is not None else None

    data = {
        "id": decision.pk,
        "recipe": decision.recipe.name,
        "status": decision.status,
        "from_policy": decision.from_policy,
        "to_policy": decision.to_policy,
        "base_version": decision.base_version,
        "applied_version": decision.applied_version,
        "rationale": decision.rationale,
        "created_by": user(decision.created_by),
        "created_at": when(decision.created_at),
        "reviewed_by": user(decision.reviewed_by),
        "reviewed_at": when(decision.reviewed_at),
        "review_reason": decision.review_reason,
        "applied_by": user(decision.applied_by),
        "applied_at": when(decision.applied_at),
    }
    if evidence is not None:
        data["evidence"] = [j.pk for j in evidence]
    return data


def audit_event_as_api(event: AuditEvent) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "action": event.action,
        "actor": event.actor_name,
        "recipe": event.recipe_name,
        "decision": event.decision_id,
        "before": event.before,
        "after": event.after,
        "reason": event.reason,
        "created_at": event.created_at.isoformat(),
        "prev_hash": event.prev_hash,
        "hash": event.hash,
    }
