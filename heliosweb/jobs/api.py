"""The JSON API: thin views over services (writes) and selectors (reads)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from heliosweb.errors import NotFound
from heliosweb.recipes import selectors as recipe_selectors
from scheduler_core.errors import InvalidInput

from . import selectors, services
from .registry import job_kinds

ERROR = inline_serializer("Error", {"error": serializers.CharField(), "field": serializers.CharField()})
PROGRESS = inline_serializer(
    "Progress",
    {
        "done": serializers.IntegerField(),
        "total": serializers.IntegerField(),
        "percent": serializers.IntegerField(),
        "message": serializers.CharField(),
    },
)
JOB_FIELDS = {
    "id": serializers.IntegerField(),
    "kind": serializers.CharField(),
    "recipe": serializers.CharField(allow_null=True),
    "status": serializers.ChoiceField(["queued", "running", "done", "failed", "cancelled"]),
    "params": serializers.DictField(),
    "progress": PROGRESS,
    "result": serializers.JSONField(allow_null=True),
    "summary": serializers.CharField(allow_null=True, help_text="the result as the analysis's text table"),
    "error": serializers.CharField(allow_null=True),
    "last_seq": serializers.IntegerField(),
    "created_by": serializers.CharField(allow_null=True),
    "created_at": serializers.DateTimeField(),
    "started_at": serializers.DateTimeField(allow_null=True),
    "finished_at": serializers.DateTimeField(allow_null=True),
}
JOB = inline_serializer("Job", JOB_FIELDS)
JOB_CREATE = inline_serializer(
    "JobCreate",
    {
        "kind": serializers.CharField(help_text="see GET /api/kinds/"),
        "recipe": serializers.CharField(required=False, allow_null=True),
        "params": serializers.DictField(
            required=False, help_text="the kind's declared parameters; defaults fill the rest"
        ),
    },
)
CREATED = inline_serializer("JobCreated", {"id": serializers.IntegerField(), "status": serializers.CharField()})
POLICY_FIELDS = {
    "recipe": serializers.CharField(),
    "policy": serializers.CharField(),
    "version": serializers.IntegerField(),
}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, InvalidInput):
        code = status.HTTP_404_NOT_FOUND if isinstance(exc, NotFound) else status.HTTP_400_BAD_REQUEST
        return Response(exc.as_dict(), status=code)
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(response.data, dict) and "detail" in response.data:
        response.data = {
            "error": str(response.data["detail"]),
            "field": "authorization" if response.status_code in (401, 403) else "request",
        }
    return response


class CanRunJobs(BasePermission):
    message = "starting or cancelling jobs needs the maintainer permission (jobs.run_jobs)"

    def has_permission(self, request: Request, view: APIView) -> bool:
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return True
        return bool(request.user and request.user.has_perm("jobs.run_jobs"))


class JobListView(APIView):
    permission_classes = APIView.permission_classes + [CanRunJobs]

    @extend_schema(
        responses={200: inline_serializer("Job", JOB_FIELDS, many=True)},
        parameters=[OpenApiParameter("limit", int, description="at most 200"), OpenApiParameter("kind", str)],
    )
    def get(self, request: Request) -> Response:
        try:
            limit = max(1, min(200, int(request.query_params.get("limit", 50))))
        except ValueError:
            raise InvalidInput("limit", "must be an integer") from None
        jobs = selectors.job_list(limit=limit, kind=request.query_params.get("kind"))
        return Response([selectors.job_as_api(j, full=False) for j in jobs])

    @extend_schema(request=JOB_CREATE, responses={201: CREATED, 400: ERROR, 403: ERROR})
    def post(self, request: Request) -> Response:
        data = request.data
        if not isinstance(data, dict):
            raise InvalidInput("body", "must be a JSON object {kind, recipe, params}")
        unknown = sorted(set(data) - {"kind", "recipe", "params"})
        if unknown:
            raise InvalidInput(unknown[0], "unknown field (expected kind, recipe, params)")
        job = services.job_create(
            kind=data.get("kind"), recipe=data.get("recipe"), params=data.get("params"), user=request.user
        )
        return Response({"id": job.pk, "status": job.status}, status=status.HTTP_201_CREATED)


class JobDetailView(APIView):
    @extend_schema(responses={200: JOB, 404: ERROR})
    def get(self, request: Request, job_id: int) -> Response:
        return Response(selectors.job_as_api(selectors.job_get(job_id=job_id)))


class JobCancelView(APIView):
    permission_classes = APIView.permission_classes + [CanRunJobs]

    @extend_schema(request=None, responses={200: JOB, 400: ERROR, 404: ERROR})
    def post(self, request: Request, job_id: int) -> Response:
        job = services.job_cancel(job=selectors.job_get(job_id=job_id))
        return Response(selectors.job_as_api(job))


class JobEventsView(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("after", int, description="only events numbered above this")],
        responses={
            200: inline_serializer(
                "Event",
                {"seq": serializers.IntegerField(), "type": serializers.CharField(), "ts": serializers.FloatField()},
                many=True,
            ),
            404: ERROR,
        },
    )
    def get(self, request: Request, job_id: int) -> Response:
        job = selectors.job_get(job_id=job_id)
        try:
            after = int(request.query_params.get("after", 0))
        except ValueError:
            raise InvalidInput("after", "must be an integer") from None
        return Response(selectors.job_events(job_id=job.pk, after=after))


class KindListView(APIView):
    @extend_schema(
        responses={
            200: inline_serializer(
                "Kind",
                {
                    "name": serializers.CharField(),
                    "queue": serializers.CharField(),
                    "summary": serializers.CharField(),
                    "params": serializers.ListField(child=serializers.DictField()),
                },
                many=True,
            )
        }
    )
    def get(self, request: Request) -> Response:
        return Response(
            [
                {"name": k.name, "queue": k.queue, "summary": k.summary, "params": k.params_spec()}
                for k in job_kinds().values()
            ]
        )


class RecipeListView(APIView):
    @extend_schema(responses={200: inline_serializer("RecipePolicy", POLICY_FIELDS, many=True)})
    def get(self, request: Request) -> Response:
        return Response(recipe_selectors.recipe_policies())
