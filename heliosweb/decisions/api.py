"""JSON API for decisions: thin views over services and selectors.

Authentication and error shape are the project's (`REST_FRAMEWORK` settings: Bearer token or
session; `heliosweb.jobs.api.exception_handler`: `{error, field}`); only the two decision
flavours of error get their own status here: 403 Forbidden, 409 Conflict.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from heliosweb.jobs.api import ERROR
from heliosweb.jobs.api import exception_handler as project_exception_handler
from scheduler_core.errors import InvalidInput

from . import selectors, services
from .errors import Conflict, Forbidden

DECISION_FIELDS = {
    "id": serializers.IntegerField(),
    "recipe": serializers.CharField(),
    "status": serializers.ChoiceField(["pending", "approved", "rejected", "withdrawn", "applied"]),
    "from_policy": serializers.CharField(),
    "to_policy": serializers.CharField(),
    "base_version": serializers.IntegerField(),
    "applied_version": serializers.IntegerField(allow_null=True),
    "rationale": serializers.CharField(),
    "evidence": serializers.ListField(child=serializers.IntegerField()),
    "created_by": serializers.CharField(),
    "created_at": serializers.DateTimeField(),
    "reviewed_by": serializers.CharField(allow_null=True),
    "reviewed_at": serializers.DateTimeField(allow_null=True),
    "review_reason": serializers.CharField(),
    "applied_by": serializers.CharField(allow_null=True),
    "applied_at": serializers.DateTimeField(allow_null=True),
}
DECISION = inline_serializer("Decision", DECISION_FIELDS)
DECISION_LIST = inline_serializer(
    "DecisionSummary", {k: v for k, v in DECISION_FIELDS.items() if k != "evidence"}, many=True
)
PROPOSE = inline_serializer(
    "DecisionPropose",
    {
        "recipe": serializers.CharField(),
        "policy": serializers.CharField(help_text="cost or rule; never rule-v1"),
        "rationale": serializers.CharField(),
        "evidence": serializers.ListField(
            child=serializers.IntegerField(), required=False, help_text="ids of finished (done) benchmark jobs"
        ),
    },
)
STEP = inline_serializer("DecisionStep", {"reason": serializers.CharField(required=False)})
AUDIT = inline_serializer(
    "AuditTrail",
    {
        "verified": serializers.BooleanField(),
        "count": serializers.IntegerField(),
        "broken_at": serializers.IntegerField(allow_null=True),
        "reason": serializers.CharField(),
        "head_hash": serializers.CharField(),
        "events": serializers.ListField(child=serializers.DictField()),
    },
)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, Forbidden):
        return Response(exc.as_dict(), status=status.HTTP_403_FORBIDDEN)
    if isinstance(exc, Conflict):
        return Response(exc.as_dict(), status=status.HTTP_409_CONFLICT)
    return project_exception_handler(exc, context)


class DecisionAPIView(APIView):
    def get_exception_handler(self):  # type: ignore[override]
        return exception_handler


def _body(request: Request, allowed: set[str]) -> dict[str, Any]:
    data = request.data
    if not isinstance(data, dict):
        raise InvalidInput("body", f"must be a JSON object with {sorted(allowed)}")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise InvalidInput(unknown[0], f"unknown field (expected {', '.join(sorted(allowed))})")
    return data


def _limit(request: Request, default: int, most: int) -> int:
    try:
        return max(1, min(most, int(request.query_params.get("limit", default))))
    except ValueError:
        raise InvalidInput("limit", "must be an integer") from None


def _detail(decision_id: Any) -> dict[str, Any]:
    decision = selectors.decision_get(decision_id=decision_id)
    return selectors.decision_as_api(decision, evidence=selectors.decision_evidence(decision=decision))


class DecisionListView(DecisionAPIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("status", str),
            OpenApiParameter("recipe", str),
            OpenApiParameter("limit", int, description="at most 500"),
        ],
        responses={200: DECISION_LIST, 400: ERROR},
    )
    def get(self, request: Request) -> Response:
        decisions = selectors.decision_list(
            status=request.query_params.get("status") or None,
            recipe=request.query_params.get("recipe") or None,
            limit=_limit(request, 100, 500),
        )
        return Response([selectors.decision_as_api(d) for d in decisions])

    @extend_schema(request=PROPOSE, responses={201: DECISION, 400: ERROR, 403: ERROR})
    def post(self, request: Request) -> Response:
        data = _body(request, {"recipe", "policy", "rationale", "evidence"})
        decision = services.decision_propose(
            actor=request.user,
            recipe=data.get("recipe"),
            policy=data.get("policy"),
            rationale=data.get("rationale"),
            evidence=data.get("evidence"),
        )
        return Response(_detail(decision.pk), status=status.HTTP_201_CREATED)


class DecisionDetailView(DecisionAPIView):
    @extend_schema(responses={200: DECISION, 404: ERROR})
    def get(self, request: Request, decision_id: int) -> Response:
        return Response(_detail(decision_id))


class DecisionStepView(DecisionAPIView):
    """POST /api/decisions/<id>/<step>/ with an optional {reason} (required to reject)."""

    step = ""
    STEPS = {
        "approve": services.decision_approve,
        "reject": services.decision_reject,
        "withdraw": services.decision_withdraw,
        "apply": services.decision_apply,
    }

    @extend_schema(request=STEP, responses={200: DECISION, 400: ERROR, 403: ERROR, 404: ERROR, 409: ERROR})
    def post(self, request: Request, decision_id: int) -> Response:
        data = _body(request, {"reason"})
        decision = selectors.decision_get(decision_id=decision_id)
        self.STEPS[self.step](actor=request.user, decision=decision, reason=data.get("reason", ""))
        return Response(_detail(decision.pk))


class AuditView(DecisionAPIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("limit", int, description="latest events, at most 1000"),
            OpenApiParameter("decision", int),
        ],
        responses={200: AUDIT, 400: ERROR},
    )
    def get(self, request: Request) -> Response:
        raw = request.query_params.get("decision")
        decision_id = None
        if raw:
            try:
                decision_id = int(raw)
            except ValueError:
                raise InvalidInput("decision", "must be an integer") from None
        report = selectors.audit_verify()
        events = selectors.audit_list(decision_id=decision_id, limit=_limit(request, 200, 1000))
        return Response(
            {
                "verified": report.ok,
                "count": report.count,
                "broken_at": report.broken_at,
                "reason": report.reason,
                "head_hash": report.head_hash,
                "events": [selectors.audit_event_as_api(e) for e in events],
            }
        )
