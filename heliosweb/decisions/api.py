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

from heliosweb.common.api import ERROR, QueryInt, json_body, json_object, text_field
from scheduler_core.policies import selectable_policies

from . import selectors, services
from .models import DecisionStatus
from .tradeoff_cache import decision_tradeoff_kept

EVIDENCE = {"evidence": serializers.ListField(child=serializers.IntegerField())}
DECISION = selectors.DECISION.schema(extra=EVIDENCE)
DECISION_LIST = selectors.DECISION.schema("DecisionSummary", many=True)
PROPOSE = json_body(
    "DecisionPropose",
    {
        "recipe": serializers.CharField(),
        "policy": serializers.ChoiceField(selectable_policies(), help_text="a policy a recipe may run"),
        "rationale": text_field(max_length=services.MAX_RATIONALE, required=True),
        "evidence": serializers.ListField(
            child=serializers.IntegerField(), required=False, help_text="ids of finished (done) benchmark jobs"
        ),
        "rollback_of": serializers.IntegerField(required=False, help_text="the applied decision this one reverts"),
    },
)
COMMENT = selectors.COMMENT.schema()
COMMENT_BODY = json_body("CommentBody", {"body": text_field(max_length=services.MAX_COMMENT, required=True)})
COMMENT_LIST = selectors.COMMENT.schema(many=True)
TRADEOFF = inline_serializer(
    "Tradeoff",
    {
        "arms": serializers.ListField(child=serializers.DictField(), allow_null=True),
        **{
            part: serializers.JSONField(
                allow_null=True, help_text="this part's evidence (its shape: docs/decisions.md)"
            )
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
ADD_EVIDENCE = json_body(
    "DecisionAddEvidence",
    {
        "evidence": serializers.ListField(
            child=serializers.IntegerField(),
            min_length=1,
            max_length=services.MAX_EVIDENCE,
            help_text="ids of finished (done) jobs to cite, not already cited",
        )
    },
)
STEP = json_body("DecisionStep", {"reason": text_field(max_length=services.MAX_REASON, help_text="required to reject")})
AUDIT = selectors.AUDIT_TRAIL.schema()
LIST_LIMIT = QueryInt("limit", default=100, most=500)
AUDIT_LIMIT = QueryInt("limit", default=200, most=1000, description="latest events")
AUDIT_DECISION = QueryInt("decision", default=0, description="one decision's events (0: all)")


def _detail(decision_id: Any) -> dict[str, Any]:
    decision = selectors.decision_get(decision_id=decision_id)
    return selectors.decision_as_api(decision, evidence=selectors.decision_evidence(decision=decision))


class DecisionListView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("status", str, enum=DecisionStatus.values),
            OpenApiParameter("recipe", str),
            LIST_LIMIT.parameter(),
        ],
        responses={200: DECISION_LIST, 400: ERROR},
    )
    def get(self, request: Request) -> Response:
        decisions = selectors.decision_list(
            status=request.query_params.get("status"),
            recipe=request.query_params.get("recipe") or None,
            limit=LIST_LIMIT.read(request.query_params),
        )
        return Response([selectors.decision_as_api(d) for d in decisions])

    @extend_schema(request=PROPOSE, responses={201: DECISION, 400: ERROR, 403: ERROR})
    def post(self, request: Request) -> Response:
        data = json_object(request, PROPOSE)
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

    @extend_schema(request=COMMENT_BODY, responses={201: COMMENT, 400: ERROR, 403: ERROR, 404: ERROR})
    def post(self, request: Request, decision_id: int) -> Response:
        data = json_object(request, COMMENT_BODY)
        decision = selectors.decision_get(decision_id=decision_id)
        comment = services.decision_comment(actor=request.user, decision=decision, body=data.get("body"))
        return Response(selectors.comment_as_api(comment), status=status.HTTP_201_CREATED)


class DecisionStepView(APIView):
    """POST /api/decisions/<id>/<step>/ with an optional {reason} (required to reject)."""

    step = ""

    @extend_schema(request=STEP, responses={200: DECISION, 400: ERROR, 403: ERROR, 404: ERROR, 409: ERROR})
    def post(self, request: Request, decision_id: int) -> Response:
        data = json_object(request, STEP)
        decision = selectors.decision_get(decision_id=decision_id)
        services.STEPS[self.step](actor=request.user, decision=decision, reason=data.get("reason", ""))
        return Response(_detail(decision.pk))


class EvidenceView(APIView):
    """POST /api/decisions/<id>/evidence/ {evidence: [job ids]}: a reviewer cites more jobs on a
    pending decision (`services.decision_add_evidence`); answers the decision with all its evidence."""

    @extend_schema(request=ADD_EVIDENCE, responses={200: DECISION, 400: ERROR, 403: ERROR, 404: ERROR, 409: ERROR})
    def post(self, request: Request, decision_id: int) -> Response:
        data = json_object(request, ADD_EVIDENCE)
        decision = selectors.decision_get(decision_id=decision_id)
        services.decision_add_evidence(actor=request.user, decision=decision, evidence=data.get("evidence"))
        return Response(_detail(decision.pk))


class AuditView(APIView):
    @extend_schema(parameters=[AUDIT_LIMIT.parameter(), AUDIT_DECISION.parameter()], responses={200: AUDIT, 400: ERROR})
    def get(self, request: Request) -> Response:
        decision_id = AUDIT_DECISION.read(request.query_params) or None
        limit = AUDIT_LIMIT.read(request.query_params)
        return Response(selectors.AUDIT_TRAIL.of(selectors.audit_trail(decision_id=decision_id, limit=limit)))
