"""Writes for policy decisions: propose, approve, reject, withdraw, apply.

Each is one atomic action in Zulip's shape: check, change the state, append the audit event
(before/after) in the same transaction, and push a realtime event with `transaction.on_commit`.
`decision_apply` changes the recipe's policy only through `recipes.services.policy_set`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from heliosweb.audit.models import AuditEvent
from heliosweb.audit.services import audit_append
from heliosweb.common.errors import Conflict, Forbidden
from heliosweb.common.inputs import json_id
from heliosweb.common.permissions import Actor
from heliosweb.jobs.models import BenchmarkJob, JobStatus
from heliosweb.realtime.push import send_event_on_commit
from heliosweb.recipes.consumers import GROUP as REALTIME_GROUP
from heliosweb.recipes.models import PolicySetting, Recipe
from heliosweb.recipes.selectors import recipe_named
from heliosweb.recipes.services import emergency_reviewed, policy_set
from scheduler_core.errors import InvalidInput
from scheduler_core.policies import recipe_policy_named
from scheduler_core.validation import require_text

from .audit_rows import evidence_digests
from .models import DecisionComment, DecisionStatus, PolicyDecision
from .tradeoff import decision_missing_evidence

MAX_RATIONALE = 10_000
MAX_REASON = 2_000
MAX_EVIDENCE = 50

PROPOSE_PERM = "decisions.propose_decision"
APPROVE_PERM = "decisions.approve_decision"
APPLY_PERM = "decisions.apply_decision"
COMMENT_PERM = "decisions.comment_decision"
MAX_COMMENT = 5_000


# --- the five steps -------------------------------------------------------------------------


def decision_propose(
    *, actor: Actor, recipe: Any, policy: Any, rationale: Any, evidence: Any = None, rollback_of: Any = None
) -> PolicyDecision:
    """Propose changing `recipe`'s active policy to `policy`, based on the current version.

    Raises Forbidden (no propose permission) or InvalidInput naming the field (`recipe`,
    `policy`, `rationale`, `evidence`); nothing is stored then.
    """
    user = _require(actor, PROPOSE_PERM, "proposing a policy change")
    recipe_obj = _recipe(recipe)
    clean_policy = recipe_policy_named(policy)
    clean_rationale = require_text(rationale, "rationale", max_length=MAX_RATIONALE, required="required: say why")
    job_ids = _evidence_ids(evidence)
    with transaction.atomic():
        setting = PolicySetting.objects.select_for_update().filter(recipe=recipe_obj).first()
        if setting is None:
            raise InvalidInput("recipe", f"{recipe_obj.name} has no policy setting")
        if setting.policy == clean_policy:
            raise InvalidInput("policy", f"{clean_policy!r} is already {recipe_obj.name}'s active policy")
        jobs = _finished_jobs(job_ids)
        reverted = _rollback_of(rollback_of, recipe_obj)
        decision = PolicyDecision.objects.create(
            rollback_of=reverted,
            recipe=recipe_obj,
            from_policy=setting.policy,
            to_policy=clean_policy,
            base_version=setting.version,
            rationale=clean_rationale,
            created_by=user,
        )
        decision.evidence.set(jobs)
        state = _state(decision, setting)
        if reverted is not None:
            state["rollback_of"] = reverted.pk
        # the cited jobs' digests, so audit_verify covers what they said when cited (their results, their boots)
        cited = {"evidence": job_ids, "evidence_digests": evidence_digests(job_ids)}
        _audit(user, decision, "proposed", {**state, "status": None}, {**state, **cited}, clean_rationale)
    return decision


def decision_approve(*, actor: Actor, decision: PolicyDecision, reason: Any = "") -> PolicyDecision:
    """A second maintainer agrees. The author can never approve their own proposal."""
    user = _require(actor, APPROVE_PERM, "approving a decision")
    if decision.created_by_id == user.pk:
        raise Forbidden("actor", "a decision cannot be approved by its author: a second maintainer must approve it")
    return _review(user, decision, DecisionStatus.APPROVED, require_text(reason, "reason", max_length=MAX_REASON))


def decision_reject(*, actor: Actor, decision: PolicyDecision, reason: Any) -> PolicyDecision:
    """A reviewer declines; the reason is required so the audit trail says why."""
    user = _require(actor, APPROVE_PERM, "rejecting a decision")
    if decision.created_by_id == user.pk:
        raise Forbidden("actor", "the author cannot review their own decision: withdraw it instead")
    why = require_text(reason, "reason", max_length=MAX_REASON, required="required: say why")
    return _review(user, decision, DecisionStatus.REJECTED, why)


def decision_add_evidence(*, actor: Actor, decision: PolicyDecision, evidence: Any) -> PolicyDecision:
    """A reviewer cites further finished jobs on a pending decision before approving it: the
    evidence is what the proposer cites and what an approver adds. Audited as `evidence_added`
    with every cited job's id and the added jobs' digests taken now (as a proposal's are), so
    `audit_verify` covers them and the page can say who added each.

    Raises Forbidden (no approve permission, or the author: their evidence is the proposal's) or
    InvalidInput naming the field (`evidence`, `evidence[i]`), Conflict unless pending; nothing
    is stored then."""
    user = _require(actor, APPROVE_PERM, "adding evidence to a decision")
    if decision.created_by_id == user.pk:
        raise Forbidden("actor", "the author cites evidence when proposing: a reviewer adds evidence")
    job_ids = _evidence_ids(evidence)
    if not job_ids:
        raise InvalidInput("evidence", "required: the ids of one or more finished jobs to cite")
    with transaction.atomic():
        decision, setting = _lock(decision)
        _expect(decision, DecisionStatus.PENDING, "given more evidence")
        cited = sorted(decision.evidence.values_list("pk", flat=True))
        for i, job_id in enumerate(job_ids):
            if job_id in cited:
                raise InvalidInput(f"evidence[{i}]", f"job {job_id} is already cited by this decision")
        if len(cited) + len(job_ids) > MAX_EVIDENCE:
            raise InvalidInput("evidence", f"at most {MAX_EVIDENCE} jobs in all ({len(cited)} cited already)")
        jobs = _finished_jobs(job_ids)
        decision.evidence.add(*jobs)
        state = _state(decision, setting)
        added = {
            "evidence": sorted([*cited, *job_ids]),
            "added": job_ids,
            "evidence_digests": evidence_digests(job_ids),
        }
        reason = f"cited job{'s' if len(job_ids) > 1 else ''} {', '.join(f'#{j}' for j in job_ids)}"
        _audit(user, decision, "evidence_added", {**state, "evidence": cited}, {**state, **added}, reason)
    return decision


def decision_withdraw(*, actor: Actor, decision: PolicyDecision, reason: Any = "") -> PolicyDecision:
    """The author takes back a proposal that is still pending."""
    if not isinstance(actor, User) or decision.created_by_id != actor.pk:
        raise Forbidden("actor", "only the author can withdraw a decision")
    user = actor
    clean_reason = require_text(reason, "reason", max_length=MAX_REASON)
    with transaction.atomic():
        decision, setting = _lock(decision)
        _expect(decision, DecisionStatus.PENDING, "withdrawn")
        before = _state(decision, setting)
        decision.status = DecisionStatus.WITHDRAWN
        decision.save(update_fields=["status"])
        _audit(user, decision, "withdrawn", before, _state(decision, setting), clean_reason)
    return decision


def decision_apply(*, actor: Actor, decision: PolicyDecision, reason: Any = "") -> PolicyDecision:
    """Make an approved decision the recipe's active policy, in one transaction.

    Optimistic concurrency: the proposal recorded the PolicySetting version it was based on;
    if the version moved since (another decision applied), this fails with Conflict and changes
    nothing: propose again against the current policy.
    """
    user = _require(actor, APPLY_PERM, "applying a decision")
    clean_reason = require_text(reason, "reason", max_length=MAX_REASON)
    with transaction.atomic():
        decision, setting = _lock(decision)
        _expect(decision, DecisionStatus.APPROVED, "applied")
        if setting.version != decision.base_version:
            raise Conflict(
                "base_version",
                (
                    f"stale proposal: it was based on {decision.recipe.name} v{decision.base_version} "
                    f"({decision.from_policy}) but the policy is now v{setting.version} ({setting.policy}); "
                    "propose again against the current policy"
                ),
            )
        recipe_policy_named(decision.to_policy)  # a policy may have become unselectable since the proposal
        before = _state(decision, setting)
        setting = policy_set(
            recipe=decision.recipe, policy=decision.to_policy, user=user, reason=f"decision #{decision.pk} applied"
        )
        decision.status = DecisionStatus.APPLIED
        decision.applied_by = user
        decision.applied_at = timezone.now()
        decision.applied_version = setting.version
        decision.save(update_fields=["status", "applied_by", "applied_at", "applied_version"])
        _audit(user, decision, "applied", before, _state(decision, setting), clean_reason)
    return decision


# A decision's steps by the name the page and the API route them under (/decisions/<id>/<step>).
STEPS: dict[str, Callable[..., PolicyDecision]] = {
    "approve": decision_approve,
    "reject": decision_reject,
    "withdraw": decision_withdraw,
    "apply": decision_apply,
}


def decision_comment(*, actor: Actor, decision: PolicyDecision, body: Any) -> DecisionComment:
    """Plain text on a decision, in any status; audited like a step."""
    user = _require(actor, COMMENT_PERM, "commenting on a decision")
    text = require_text(body, "body", max_length=MAX_COMMENT, required="required: say why")
    with transaction.atomic():
        comment = DecisionComment.objects.create(decision=decision, author=user, body=text)
        audit_append(
            action="commented",
            actor=user,
            object_type="decision",
            object_id=decision.pk,
            recipe=decision.recipe.name,
            after={"comment": comment.pk},
            reason=text,
        )
    return comment


# --- helpers --------------------------------------------------------------------------------


def _review(user: User, decision: PolicyDecision, to: str, reason: str) -> PolicyDecision:
    with transaction.atomic():
        decision, setting = _lock(decision)
        _expect(decision, DecisionStatus.PENDING, str(to))
        if to == DecisionStatus.APPROVED:
            _require_evidence(decision)
        before = _state(decision, setting)
        if setting.emergency and decision.created_at > datetime.fromisoformat(setting.emergency["at"]):
            emergency_reviewed(recipe_id=decision.recipe_id)  # this decision is the follow-up
        decision.status = to
        decision.reviewed_by = user
        decision.reviewed_at = timezone.now()
        decision.review_reason = reason
        decision.save(update_fields=["status", "reviewed_by", "reviewed_at", "review_reason"])
        _audit(user, decision, str(to), before, _state(decision, setting), reason)
    return decision


def _rollback_of(value: Any, recipe: Recipe) -> PolicyDecision | None:
    """A rollback names the applied decision of the same recipe that it reverts."""
    if value in (None, ""):
        return None
    reverted = PolicyDecision.objects.filter(pk=json_id(value, field="rollback_of", what="decision")).first()
    if reverted is None:
        raise InvalidInput("rollback_of", f"no decision {value}")
    if reverted.status != DecisionStatus.APPLIED or reverted.recipe_id != recipe.pk:
        raise InvalidInput("rollback_of", f"decision {reverted.pk} is not an applied decision of {recipe.name}")
    return reverted


def _require_evidence(decision: PolicyDecision) -> None:
    """The recipe's required checklist items must be ticked by the evidence before approval."""
    still_open = decision_missing_evidence(decision=decision)
    if still_open:
        raise Conflict(
            "evidence", f"{decision.recipe.name} requires evidence before approval; missing: {', '.join(still_open)}"
        )


def _lock(decision: PolicyDecision) -> tuple[PolicyDecision, PolicySetting]:
    """Lock the recipe's setting, then the decision (always in that order), and reread both."""
    setting = PolicySetting.objects.select_for_update().get(recipe_id=decision.recipe_id)
    fresh = PolicyDecision.objects.select_for_update().select_related("recipe", "created_by").get(pk=decision.pk)
    return fresh, setting


def _expect(decision: PolicyDecision, status: str, step: str) -> None:
    if decision.status != status:
        raise Conflict("status", f"decision {decision.pk} is {decision.status}: only a {status} decision can be {step}")


def _state(decision: PolicyDecision, setting: PolicySetting) -> dict[str, Any]:
    return {
        "status": str(decision.status),
        "policy": setting.policy,
        "version": setting.version,
        "proposed_policy": decision.to_policy,
        "base_version": decision.base_version,
    }


def _audit(
    user: User, decision: PolicyDecision, action: str, before: dict[str, Any], after: dict[str, Any], reason: str
) -> AuditEvent:
    """Append the step to the one audit chain (inside the caller's transaction) and schedule the push."""
    event = audit_append(
        action=action,
        actor=user,
        object_type="decision",
        object_id=decision.pk,
        recipe=decision.recipe.name,
        before=before,
        after=after,
        reason=reason,
    )
    send_event_on_commit(REALTIME_GROUP, _realtime_message(event, decision))
    return event


def _realtime_message(event: AuditEvent, decision: PolicyDecision) -> dict[str, Any]:
    after = event.after or {}
    return {
        "type": "recipes.decision",
        "action": event.action,
        "seq": event.seq,
        "decision_id": decision.pk,
        "recipe": event.recipe_name,
        "status": str(decision.status),
        "actor": event.actor_name,
        "policy": after["policy"],
        "version": after["version"],
        "proposed_policy": decision.to_policy,
    }


def _require(actor: Actor | None, perm: str, what: str) -> User:
    """The acting user, if logged in and holding `perm`; else Forbidden."""
    if not isinstance(actor, User) or not actor.is_authenticated:
        raise Forbidden("actor", f"{what} needs a logged-in user")
    if not actor.has_perm(perm):
        raise Forbidden("actor", f"{what} needs the {perm} permission")
    return actor


def _recipe(recipe: Any) -> Recipe:
    if isinstance(recipe, Recipe):
        return recipe
    if not isinstance(recipe, str) or not recipe.strip():
        raise InvalidInput("recipe", "required: a recipe name")
    return recipe_named(recipe.strip())


def _evidence_ids(evidence: Any) -> list[int]:
    if evidence in (None, ""):
        return []
    if isinstance(evidence, (str, bytes, dict)) or not isinstance(evidence, Iterable):
        raise InvalidInput("evidence", "must be a list of job ids")
    given = list(itertools.islice(evidence, MAX_EVIDENCE + 1))
    if len(given) > MAX_EVIDENCE:
        raise InvalidInput("evidence", f"at most {MAX_EVIDENCE} jobs")
    ids: list[int] = []
    for i, value in enumerate(given):
        job_id = json_id(value, field=f"evidence[{i}]", what="job")
        if job_id not in ids:
            ids.append(job_id)
    return ids


def _finished_jobs(ids: list[int]) -> list[BenchmarkJob]:
    jobs = {j.pk: j for j in BenchmarkJob.objects.filter(pk__in=ids).only("id", "status")}
    for i, job_id in enumerate(ids):
        job = jobs.get(job_id)
        if job is None:
            raise InvalidInput(f"evidence[{i}]", f"no job {job_id}")
        if job.status != JobStatus.DONE:
            raise InvalidInput(
                f"evidence[{i}]", f"job {job_id} is {job.status}: only a finished (done) job is evidence"
            )
    return [jobs[i] for i in ids]
