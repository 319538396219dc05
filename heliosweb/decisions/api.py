"""JSON API for decisions: thin views over services and selectors.

Authentication and error shape are the project's (`REST_FRAMEWORK` settings: Bearer token or
session; `heliosweb.common.api.exception_handler`: `{error, field}`, 403 for `Forbidden`, 409 for
`Conflict`).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from heliosweb.common.api import ERROR, json_object
from heliosweb.common.inputs import query_int, query_limit

from . import selectors, services
from .tradeoff_cache import decision_tradeoff_kept

EVIDENCE = {"evidence": serializers.ListField(child=serializers.IntegerField())}
DECISION = selectors.DECISION.schema(extra=EVIDENCE)
DECISION_LIST = selectors.DECISION.schema("DecisionSummary", many=True)
PROPOSE = inline_serializer(
    "DecisionPropose",
    {
        "recipe": serializers.CharField(),
        "policy": serializers.CharField(help_text="cost or rule; never rule-v1"),
        "rationale": serializers.CharField(),
        "evidence": serializers.ListField(
            child=serializers.IntegerField(), required=False, help_text="ids of finished (done) benchmark jobs"
        ),
        "rollback_of": serializers.IntegerField(required=False, help_text="the applied decision this one reverts"),
    },
)
COMMENT = selectors.COMMENT.schema()
COMMENT_LIST = selectors.COMMENT.schema(many=True)
TRADEOFF = inline_serializer(
    "Tradeoff",
    {
        "arms": serializers.ListField(child=serializers.DictField(), allow_null=True),
        **{
            part: serializers.DictField(allow_null=True)
            for part in (
                "sweep",
                "boots",
                "fuzz",
                "simulate",
                "capacity",
                "replay",
                "requests",
                "ttft",
                "numerics",
                "health",
                "engine",
            )
        },
        "checklist": serializers.ListField(child=serializers.DictField()),
        "required": serializers.ListField(child=serializers.CharField()),
        "missing": serializers.ListField(child=serializers.CharField()),
    },
)
ADD_EVIDENCE = inline_serializer(
    "DecisionAddEvidence",
    {"evidence": serializers.ListField(child=serializers.IntegerField(), help_text="ids of finished jobs to cite")},
)
STEP = inline_serializer("DecisionStep", {"reason": serializers.CharField(required=False)})
AUDIT = selectors.AUDIT_TRAIL.schema()


def _detail(decision_id: Any) -> dict[str, Any]:
    decision = selectors.decision_get(decision_id=decision_id)
    return selectors.decision_as_api(decision, evidence=selectors.decision_evidence(decision=decision))


class DecisionListView(APIView):
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
            limit=query_limit(request.query_params, default=100, most=500),
        )
        return Response([selectors.decision_as_api(d) for d in decisions])

    @extend_schema(request=PROPOSE, responses={201: DECISION, 400: ERROR, 403: ERROR})
    def post(self, request: Request) -> Response:
        data = json_object(request, {"recipe", "policy", "rationale", "evidence", "rollback_of"})
        decision = services.decision_propose(
            actor=request.user,
            recipe=data.get("recipe"),
            policy=data.get("policy"),
            rationale=data.get("rationale"),
            evidence=data.get("evidence"),
            rollback_of=data.get("rollback_of"),
        )
        return Response(_detail(decision.pk), status=status.HTTP_201_CREATED)


class DecisionDetailView(APIView):
    @extend_schema(responses={200: DECISION, 404: ERROR})
    def get(self, request: Request, decision_id: int) -> Response:
        return Response(_detail(decision_id))


class TradeoffView(APIView):
    @extend_schema(responses={200: TRADEOFF, 404: ERROR})
    def get(self, request: Request, decision_id: int) -> Response:
        return Response(decision_tradeoff_kept(decision=selectors.decision_get(decision_id=decision_id)))


class CommentsView(APIView):
    @extend_schema(responses={200: COMMENT_LIST, 404: ERROR})
    def get(self, request: Request, decision_id: int) -> Response:
        decision = selectors.decision_get(decision_id=decision_id)
        return Response([selectors.comment_as_api(c) for c in selectors.decision_comments(decision=decision)])

    @extend_schema(
        request=inline_serializer("CommentBody", {"body": serializers.CharField()}),
        responses={201: COMMENT, 400: ERROR, 403: ERROR, 404: ERROR},
    )
    def post(self, request: Request, decision_id: int) -> Response:
        data = json_object(request, {"body"})
        decision = selectors.decision_get(decision_id=decision_id)
        comment = services.decision_comment(actor=request.user, decision=decision, body=data.get("body"))
        return Response(selectors.comment_as_api(comment), status=status.HTTP_201_CREATED)


class DecisionStepView(APIView):
    """POST /api/decisions/<id>/<step>/ with an optional {reason} (required to reject)."""

    step = ""

    @extend_schema(request=STEP, responses={200: DECISION, 400: ERROR, 403: ERROR, 404: ERROR, 409: ERROR})
    def post(self, request: Request, decision_id: int) -> Response:
        data = json_object(request, {"reason"})
        decision = selectors.decision_get(decision_id=decision_id)
        services.STEPS[self.step](actor=request.user, decision=decision, reason=data.get("reason", ""))
        return Response(_detail(decision.pk))


class EvidenceView(APIView):
    """POST /api/decisions/<id>/evidence/ {evidence: [job ids]}: a reviewer cites more jobs on a
    pending decision (`services.decision_add_evidence`); answers the decision with all its evidence."""

    @extend_schema(request=ADD_EVIDENCE, responses={200: DECISION, 400: ERROR, 403: ERROR, 404: ERROR, 409: ERROR})
    def post(self, request: Request, decision_id: int) -> Response:
        data = json_object(request, {"evidence"})
        decision = selectors.decision_get(decision_id=decision_id)
        services.decision_add_evidence(actor=request.user, decision=decision, evidence=data.get("evidence"))
        return Response(_detail(decision.pk))


class AuditView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("limit", int, description="latest events, at most 1000"),
            OpenApiParameter("decision", int),
        ],
        responses={200: AUDIT, 400: ERROR},
    )
    def get(self, request: Request) -> Response:
        decision_id = query_int(request.query_params, "decision", default=0, minimum=0) or None
        limit = query_limit(request.query_params, default=200, most=1000)
        return Response(selectors.AUDIT_TRAIL.of(selectors.audit_trail(decision_id=decision_id, limit=limit)))
