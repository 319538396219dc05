"""Reads for policy decisions and the audit trail, including the chain check."""

from __future__ import annotations

from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Any

from django.db.models import QuerySet
from rest_framework import serializers

from heliosweb.audit.grants import privilege_mismatches
from heliosweb.audit.models import AuditEvent
from heliosweb.audit.selectors import EVENT, ChainReport, audit_events, chain_verify_since_check
from heliosweb.common.bounds import DB_INT_MAX
from heliosweb.common.inputs import as_int, get_by_id
from heliosweb.common.permissions import Actor
from heliosweb.common.shapes import Shape, username, when
from heliosweb.jobs.models import BenchmarkJob, JobStatus
from heliosweb.jobs.result_reading import readings
from heliosweb.recipes.selectors import policy_audit_mismatches
from scheduler_core.errors import InvalidInput

from .audit_rows import (
    comment_audit_mismatches,
    decision_audit_mismatches,
    emergency_audit_mismatches,
    evidence_audit_mismatches,
)
from .models import OPEN, DecisionComment, DecisionStatus, PolicyDecision
from .tradeoff import evidence_added_by


def decision_list(
    *, status: str | None = None, recipe: str | None = None, limit: int = 100
) -> QuerySet[PolicyDecision]:
    """Newest first; one query (recipe and people joined)."""
    if status is not None and status not in DecisionStatus.values:
        raise InvalidInput("status", f"unknown status {status!r} (expected one of {DecisionStatus.values})")
    qs = PolicyDecision.objects.select_related("recipe", "created_by", "reviewed_by", "applied_by")
    if status:
        qs = qs.filter(status=status)
    if recipe:
        qs = qs.filter(recipe__name=recipe)
    return qs.order_by("-created_at", "-id")[:limit]


def with_rollbacks(decisions: list[PolicyDecision]) -> list[PolicyDecision]:
    """Each decision with `rolled_back`: the emergency rollback that reverted the version it applied
    (`{version, by, at, reason}`, from the audit chain), else None. The decision's status stays
    `applied` (it was); the pages say "rolled back". One query for the lot."""
    applied: dict[tuple[str, Any], PolicyDecision] = {
        (d.recipe.name, d.applied_version): d for d in decisions if d.applied_version is not None
    }
    for d in decisions:
        d.rolled_back = None  # type: ignore[attr-defined]
    if not applied:
        return decisions
    events = AuditEvent.objects.filter(
        action="emergency_rollback", recipe_name__in={name for name, _ in applied}
    ).values_list("recipe_name", "before", "after", "actor_name", "created_at", "reason")
    for name, before, after, by, at, reason in events:
        decision = applied.get((name, (before or {}).get("version")))
        if decision is not None and decision.applied_at is not None and at >= decision.applied_at:
            decision.rolled_back = {"version": (after or {}).get("version"), "by": by, "at": at, "reason": reason}  # type: ignore[attr-defined]
    return decisions


def decisions_open(*, limit: int = 20) -> QuerySet[PolicyDecision]:
    """Decisions still waiting for a review or to be applied, oldest first: what needs a maintainer."""
    return (
        PolicyDecision.objects.select_related("recipe", "created_by")
        .filter(status__in=OPEN)
        .order_by("created_at", "id")[:limit]
    )


def decision_get(*, decision_id: Any) -> PolicyDecision:
    """One decision by an id from outside: InvalidInput if not an integer, NotFound if no such decision."""
    related = PolicyDecision.objects.select_related("recipe", "created_by", "reviewed_by", "applied_by")
    return get_by_id(related, decision_id, what="decision")


def decision_evidence(*, decision: PolicyDecision) -> list[BenchmarkJob]:
    return list(decision.evidence.select_related("recipe").defer("result", "params").order_by("id"))


def decision_evidence_summaries(*, decision: PolicyDecision) -> list[tuple[BenchmarkJob, str | None, str | None]]:
    """Each evidence job with its result as text, so a reviewer reads the numbers on the decision
    itself: a done job's text from its stored reading (`jobs.result_reading`), never its result;
    and who added it when a reviewer did (None: the proposer cited it)."""
    jobs = decision_evidence(decision=decision)
    read = readings(jobs)
    added_by = evidence_added_by(decision=decision)
    return [(job, read[job.pk].text or None if job.pk in read else None, added_by.get(job.pk)) for job in jobs]


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


def decision_may_add_evidence(*, decision: PolicyDecision, user: Actor) -> bool:
    """Whether to show the form to cite more jobs: a pending decision, a reviewer who may approve it
    (not its author): whoever is shown approve. `services.decision_add_evidence` checks the same rules again."""
    return "approve" in decision_allowed_steps(decision=decision, user=user)


def evidence_job_choices(*, limit: int = 100, besides: PolicyDecision | None = None) -> QuerySet[BenchmarkJob]:
    """Finished (done) jobs a proposal can cite, newest first; `besides`: those it does not cite yet."""
    qs = BenchmarkJob.objects.filter(status=JobStatus.DONE)
    if besides is not None:
        qs = qs.exclude(decisions=besides)
    return qs.select_related("recipe").defer("result", "params").order_by("-created_at", "-id")[:limit]


def audit_list(*, decision_id: int | None = None, limit: int = 200) -> list[AuditEvent]:
    """The latest `limit` events (or one decision's), oldest first."""
    qs = audit_events(object_type="decision", object_id=str(decision_id)) if decision_id else audit_events()
    return list(reversed(qs.order_by("-seq")[:limit]))


def audit_verify(*, chain: ChainReport | None = None, evidence: bool = False) -> ChainReport:
    """The whole check (docs/decisions.md lists what it names): the keyed chain (`chain`: a walk
    already made; by default the stored walk and the events since), then the rows its events
    describe. The evidence digests (`evidence`) hash every cited job's whole result, seconds with
    big evidence: `manage.py audit_verify` checks them, the pages do not."""
    report = chain if chain is not None else chain_verify_since_check()
    if not report.ok:
        return report
    mismatches = [
        *policy_audit_mismatches(),
        *decision_audit_mismatches(),
        *(evidence_audit_mismatches() if evidence else ()),
        *comment_audit_mismatches(),
        *emergency_audit_mismatches(),
        *privilege_mismatches(),
    ]
    return replace(report, ok=False, reason="; ".join(mismatches)) if mismatches else report


def rollback_prefill(*, rollback_of: str) -> dict[str, Any] | None:
    """A new proposal that reverts an applied decision: same recipe, its old policy, a rationale
    that says so. None when `rollback_of` does not name an applied decision."""
    number = as_int(rollback_of)
    if number is None or not 1 <= number <= DB_INT_MAX:
        return None
    decision = PolicyDecision.objects.select_related("recipe").filter(pk=number).first()
    if decision is None or decision.status != DecisionStatus.APPLIED:
        return None
    return {
        "recipe": decision.recipe.name,
        "policy": decision.from_policy,
        "rationale": f"Roll back decision #{decision.pk} ({decision.from_policy} -> {decision.to_policy}, "
        f"applied as v{decision.applied_version}): ",
        "evidence": [],
        "rollback_of": str(decision.pk),
    }


def decision_comments(*, decision: PolicyDecision) -> list[DecisionComment]:
    return list(decision.comments.select_related("author").order_by("created_at", "id"))


def decision_timeline(*, decision: PolicyDecision) -> list[dict[str, Any]]:
    """Steps (from the audit trail) and comments, in the order they happened."""
    steps = [
        {"kind": "step", "at": e.created_at, "who": e.actor_name, "action": e.action, "text": e.reason, "seq": e.seq}
        for e in audit_list(decision_id=decision.pk)
        if e.action != "commented"
    ]
    comments = [
        {"kind": "comment", "at": c.created_at, "who": c.author.get_username(), "action": "commented", "text": c.body}
        for c in decision_comments(decision=decision)
    ]
    return sorted(steps + comments, key=lambda row: row["at"])


DECISION: Shape[PolicyDecision] = Shape(
    "Decision",
    {
        "id": (serializers.IntegerField(), attrgetter("pk")),
        "recipe": (serializers.CharField(), attrgetter("recipe.name")),
        "status": (serializers.ChoiceField(DecisionStatus.values), attrgetter("status")),
        "from_policy": (serializers.CharField(), attrgetter("from_policy")),
        "to_policy": (serializers.CharField(), attrgetter("to_policy")),
        "base_version": (serializers.IntegerField(), attrgetter("base_version")),
        "applied_version": (serializers.IntegerField(allow_null=True), attrgetter("applied_version")),
        "rationale": (serializers.CharField(), attrgetter("rationale")),
        "created_by": (serializers.CharField(), lambda d: username(d.created_by)),
        "created_at": (serializers.DateTimeField(), lambda d: when(d.created_at)),
        "reviewed_by": (serializers.CharField(allow_null=True), lambda d: username(d.reviewed_by)),
        "reviewed_at": (serializers.DateTimeField(allow_null=True), lambda d: when(d.reviewed_at)),
        "review_reason": (serializers.CharField(), attrgetter("review_reason")),
        "applied_by": (serializers.CharField(allow_null=True), lambda d: username(d.applied_by)),
        "applied_at": (serializers.DateTimeField(allow_null=True), lambda d: when(d.applied_at)),
    },
)
COMMENT: Shape[DecisionComment] = Shape(
    "DecisionComment",
    {
        "id": (serializers.IntegerField(), attrgetter("pk")),
        "decision": (serializers.IntegerField(), attrgetter("decision_id")),
        "author": (serializers.CharField(), lambda c: c.author.get_username()),
        "body": (serializers.CharField(), attrgetter("body")),
        "created_at": (serializers.DateTimeField(), lambda c: when(c.created_at)),
    },
)
comment_as_api = COMMENT.of


def decision_as_api(decision: PolicyDecision, *, evidence: list[BenchmarkJob] | None = None) -> dict[str, Any]:
    """A decision; with its evidence's job ids on its own page (`evidence`), not in lists."""
    data = DECISION.of(decision)
    if evidence is not None:
        data["evidence"] = [j.pk for j in evidence]
    return data


AUDIT_EVENT: Shape[AuditEvent] = Shape(
    "DecisionAuditEvent",
    {
        **EVENT.keys,
        "decision": (
            serializers.IntegerField(allow_null=True, help_text="the decision's id, for a decision's event"),
            lambda e: int(e.object_id) if e.object_type == "decision" and e.object_id else None,
        ),
    },
)
"""An event as the decisions API has always shown it: the trail's event and its decision's id."""


@dataclass(frozen=True)
class AuditTrail:
    report: ChainReport
    events: list[AuditEvent]


def audit_trail(*, decision_id: int | None = None, limit: int = 200) -> AuditTrail:
    """The whole check and the latest `limit` events (or one decision's)."""
    return AuditTrail(audit_verify(), audit_list(decision_id=decision_id, limit=limit))


AUDIT_TRAIL: Shape[AuditTrail] = Shape(
    "AuditTrail",
    {
        "verified": (serializers.BooleanField(), attrgetter("report.ok")),
        "count": (serializers.IntegerField(), attrgetter("report.count")),
        "broken_at": (serializers.IntegerField(allow_null=True), attrgetter("report.broken_at")),
        "reason": (serializers.CharField(), attrgetter("report.reason")),
        "head_hash": (serializers.CharField(), attrgetter("report.head_hash")),
        "events": (AUDIT_EVENT.schema(many=True), lambda trail: [AUDIT_EVENT.of(e) for e in trail.events]),
    },
)


def decision_needs(*, decision: PolicyDecision, missing_evidence: list[str]) -> str:
    """What the decision needs next, in one sentence: the page opens with it."""
    status = decision.status
    if status == DecisionStatus.PENDING:
        also = f"; the recipe first requires evidence: {', '.join(missing_evidence)}" if missing_evidence else ""
        return f"Needs approval (or rejection) by a maintainer other than {decision.created_by}{also}."
    if status == DecisionStatus.APPROVED:
        return f"Approved: needs an operator to apply it (the recipe must still be at v{decision.base_version})."
    if status == DecisionStatus.APPLIED and getattr(decision, "rolled_back", None):
        return "Applied, then reverted by an emergency rollback: propose a follow-up decision."
    if status == DecisionStatus.APPLIED:
        return f"Applied as v{decision.applied_version}: engines run {decision.to_policy} now. Nothing more is needed."
    return f"Closed ({status}): nothing more can be done with it; propose again to reopen the question."
