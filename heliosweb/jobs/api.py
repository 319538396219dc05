"""The jobs JSON API (`/api/jobs/`, `/api/kinds/`): thin views over services (writes) and selectors (reads)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from heliosweb.common.api import ERROR, json_object
from heliosweb.common.inputs import query_int, query_limit
from heliosweb.common.permissions import CanRunJobs

from . import selectors
from .registry import job_kinds
from .services.submission import NO_PARAMS, job_cancel, job_create

PROGRESS = inline_serializer(
    "Progress",
    {
        "done": serializers.IntegerField(),
        "total": serializers.IntegerField(),
        "percent": serializers.IntegerField(),
        "message": serializers.CharField(),
    },
)
JOB_FIELDS: dict[str, serializers.Field] = {
    "id": serializers.IntegerField(),
    "kind": serializers.CharField(),
    "recipe": serializers.CharField(allow_null=True),
    "status": serializers.ChoiceField(["queued", "running", "done", "failed", "cancelled"]),
    "params": serializers.DictField(allow_null=True, help_text="null in lists"),
    "catalog_sources": serializers.DictField(
        allow_null=True,
        child=serializers.ListField(child=serializers.DictField()),
        help_text="per catalog parameter given as stored boots ({boot} / {boots}): one entry per boot, "
        "{boot, repaired} and, repaired, replaced: [{prefill, decode, reason, ratio, was_ms, ms, source, "
        "from_boots}]; empty when every catalog was spelled out; null in lists",
    ),
    "trace_sources": serializers.DictField(
        allow_null=True,
        child=serializers.DictField(),
        help_text="per trace parameter given as a stored trace ({trace: name}): {trace, sha256, requests}; "
        "a replay of telemetry (POST /api/recipes/<name>/replay/): {telemetry, engine, since_ms, until_ms, "
        "window_utc, requests, execution}; empty when every trace was spelled out; null in lists",
    ),
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


class JobListView(APIView):
    permission_classes = [IsAuthenticated, CanRunJobs]

    @extend_schema(
        responses={200: type(JOB)(many=True)},  # JOB's own class: a second "Job" would clash and vanish
        parameters=[OpenApiParameter("limit", int, description="at most 200"), OpenApiParameter("kind", str)],
    )
    def get(self, request: Request) -> Response:
        limit = query_limit(request.query_params, default=50, most=200)
        jobs = selectors.job_list(limit=limit, kind=request.query_params.get("kind"))
        return Response([selectors.job_as_api(j, full=False) for j in jobs])

    @extend_schema(request=JOB_CREATE, responses={201: CREATED, 400: ERROR, 403: ERROR})
    def post(self, request: Request) -> Response:
        data = json_object(request, {"kind", "recipe", "params"})
        job = job_create(
            kind=data.get("kind"), recipe=data.get("recipe"), params=data.get("params", NO_PARAMS), user=request.user
        )
        return Response({"id": job.pk, "status": job.status}, status=status.HTTP_201_CREATED)


class JobDetailView(APIView):
    @extend_schema(responses={200: JOB, 404: ERROR})
    def get(self, request: Request, job_id: int) -> Response:
        return Response(selectors.job_as_api(selectors.job_get(job_id=job_id)))


class JobCancelView(APIView):
    permission_classes = [IsAuthenticated, CanRunJobs]

    @extend_schema(request=None, responses={200: JOB, 400: ERROR, 404: ERROR})
    def post(self, request: Request, job_id: int) -> Response:
        job = job_cancel(job=selectors.job_get(job_id=job_id), user=request.user)
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
        after = query_int(request.query_params, "after", default=0, minimum=0)
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
