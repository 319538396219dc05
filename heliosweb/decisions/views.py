"""Pages: the decision list with the audit trail, the proposal form, and one decision's page."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from heliosweb.common.errors import http_status
from heliosweb.common.http_errors import found_or_404
from heliosweb.common.inputs import parse_id
from heliosweb.recipes.selectors import recipe_list
from scheduler_core.errors import InvalidInput
from scheduler_core.policies import selectable_policies
from scheduler_core.tradeoff import CHECKLIST

from . import selectors, services
from .models import DecisionStatus
from .tradeoff import delta_cdf
from .tradeoff_cache import decision_tradeoff_keyed


@login_required
def decision_list(request: HttpRequest) -> HttpResponse:
    status = request.GET.get("status", "")
    error = ""
    try:
        decisions = selectors.with_rollbacks(list(selectors.decision_list(status=status or None, limit=200)))
    except InvalidInput as exc:
        decisions, error = [], str(exc)
    return render(
        request,
        "decisions/list.html",
        {
            "decisions": decisions,
            "status": status,
            "statuses": DecisionStatus.values,
            "error": error,
            "chain": selectors.audit_verify(),
            "events": selectors.audit_list(limit=100),
            "can_propose": request.user.has_perm(services.PROPOSE_PERM),
        },
        status=400 if error else 200,
    )


@login_required
@permission_required(services.PROPOSE_PERM, raise_exception=True)
def decision_new(request: HttpRequest) -> HttpResponse:
    errors: dict[str, str] = {}
    values = selectors.rollback_prefill(rollback_of=request.GET.get("rollback_of", "")) or {
        "recipe": request.GET.get("recipe", ""),
        "policy": "",
        "rationale": "",
        "evidence": [],
        "rollback_of": "",
    }
    if request.method == "POST":
        values = {
            "recipe": request.POST.get("recipe", ""),
            "policy": request.POST.get("policy", ""),
            "rationale": request.POST.get("rationale", ""),
            "evidence": request.POST.getlist("evidence"),
            "rollback_of": request.POST.get("rollback_of", ""),
        }
        try:
            decision = services.decision_propose(
                actor=request.user,
                recipe=values["recipe"],
                policy=values["policy"],
                rationale=values["rationale"],
                evidence=[parse_id(v, field="evidence", what="job") for v in values["evidence"]],
                rollback_of=parse_id(values["rollback_of"], field="rollback_of", what="decision")
                if values["rollback_of"]
                else None,
            )
        except InvalidInput as exc:
            errors[exc.field.split("[", 1)[0]] = exc.message
        else:
            messages.success(request, f"Decision #{decision.pk} proposed; a second maintainer must approve it.")
            return redirect("decision_detail", decision_id=decision.pk)
    return render(
        request,
        "decisions/new.html",
        {
            "recipes": recipe_list(),
            "policies": selectable_policies(),
            "jobs": selectors.evidence_job_choices(),
            "values": values,
            "selected_evidence": {str(v) for v in values["evidence"]},
            "errors": errors,
        },
        status=400 if errors else 200,
    )


@login_required
def decision_detail(
    request: HttpRequest, decision_id: int, *, refused: dict[str, Any] | None = None, status: int = 200
) -> HttpResponse:
    """The decision; `refused`: a step it just refused ({step, field, message}), shown at that step's form."""
    decision = selectors.with_rollbacks([found_or_404(selectors.decision_get, decision_id=decision_id)])[0]
    key, tradeoff = decision_tradeoff_keyed(decision=decision)
    for part in tradeoff["requests"]:  # drawn when the kept rendering is made, not on every view
        part["cdf"] = partial(delta_cdf, part["cdf_ms"]) if "cdf_ms" in part else None
    steps = selectors.decision_allowed_steps(decision=decision, user=request.user)
    can_add = selectors.decision_may_add_evidence(decision=decision, user=request.user)
    return render(
        request,
        "decisions/detail.html",
        {
            "decision": decision,
            "evidence": partial(selectors.decision_evidence_summaries, decision=decision),  # read where not kept
            "steps": steps,
            "forms": [*(["evidence"] if can_add else []), *steps],  # where a refusal is shown at its form
            "addable": selectors.evidence_job_choices(besides=decision) if can_add else None,
            "events": selectors.audit_list(decision_id=decision.pk),
            "tradeoff": tradeoff,
            "tradeoff_key": key,
            "needs": selectors.decision_needs(
                decision=decision, missing_evidence=[dict(CHECKLIST)[k] for k in tradeoff["missing"]]
            ),
            "timeline": selectors.decision_timeline(decision=decision),
            "can_comment": request.user.has_perm(services.COMMENT_PERM),
            "can_roll_back": decision.status == DecisionStatus.APPLIED and request.user.has_perm(services.PROPOSE_PERM),
            "refused": refused,
        },
        status=status,
    )


@require_POST
@login_required
def decision_comment(request: HttpRequest, decision_id: int) -> HttpResponse:
    decision = found_or_404(selectors.decision_get, decision_id=decision_id)
    try:
        services.decision_comment(actor=request.user, decision=decision, body=request.POST.get("body", ""))
    except InvalidInput as exc:
        messages.error(request, str(exc))
        response = decision_detail(request, decision_id)
        response.status_code = http_status(exc)
        return response
    return redirect("decision_detail", decision_id=decision.pk)


@require_POST
@login_required
def decision_step(request: HttpRequest, decision_id: int, step: str) -> HttpResponse:
    if step not in services.STEPS:
        raise Http404(f"no step {step!r}")
    decision = found_or_404(selectors.decision_get, decision_id=decision_id)
    try:
        services.STEPS[step](actor=request.user, decision=decision, reason=request.POST.get("reason", ""))
    except InvalidInput as exc:
        refused = {"step": step, "field": exc.field, "message": exc.message, "reason": request.POST.get("reason", "")}
        return decision_detail(request, decision_id, refused=refused, status=http_status(exc))
    messages.success(request, f"Decision #{decision.pk}: {step} done.")
    return redirect("decision_detail", decision_id=decision.pk)


@require_POST
@login_required
def decision_add_evidence(request: HttpRequest, decision_id: int) -> HttpResponse:
    """A reviewer cites more jobs (`services.decision_add_evidence`); a refusal is shown at the form."""
    decision = found_or_404(selectors.decision_get, decision_id=decision_id)
    chosen = request.POST.getlist("evidence")
    try:
        ids = [parse_id(v, field=f"evidence[{i}]", what="job") for i, v in enumerate(chosen)]
        services.decision_add_evidence(actor=request.user, decision=decision, evidence=ids)
    except InvalidInput as exc:
        refused = {"step": "evidence", "field": exc.field, "message": exc.message, "chosen": chosen}
        return decision_detail(request, decision_id, refused=refused, status=http_status(exc))
    messages.success(request, f"Decision #{decision.pk}: cited job{'s' if len(ids) > 1 else ''} {', '.join(chosen)}.")
    return redirect("decision_detail", decision_id=decision.pk)
