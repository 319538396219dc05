"""The jobs JSON API (`/api/jobs/`, `/api/kinds/`): thin views over services (writes) and selectors (reads)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from heliosweb.common.api import ERROR, QueryInt, json_body, json_object
from heliosweb.common.permissions import CanRunJobs
from scheduler_core.comparison import picked_pair, policies_run

from . import selectors
from .registry import job_kinds
from .services.submission import NO_PARAMS, job_cancel, job_create

JOB = selectors.JOB.schema()
JOB_CREATE = json_body(
    "JobCreate",
    {
        "kind": serializers.CharField(help_text="see GET /api/kinds/"),
        "recipe": serializers.CharField(required=False, allow_null=True),
        "params": serializers.DictField(
            required=False, help_text="the kind's declared parameters; defaults fill the rest"
        ),
    },
)
LIMIT = QueryInt("limit", default=50, most=200)
AFTER = QueryInt("after", default=0, description="only events numbered above this")
CREATED = inline_serializer("JobCreated", {"id": serializers.IntegerField(), "status": serializers.CharField()})


class JobListView(APIView):
    permission_classes = [IsAuthenticated, CanRunJobs]

    @extend_schema(
        responses={200: type(JOB)(many=True)},  # JOB's own class: a second "Job" would clash and vanish
        parameters=[LIMIT.parameter(), OpenApiParameter("kind", str)],
    )
    def get(self, request: Request) -> Response:
        limit = LIMIT.read(request.query_params)
        jobs = selectors.job_list(limit=limit, kind=request.query_params.get("kind"))
        return Response([selectors.job_as_api(j, full=False) for j in jobs])

    @extend_schema(request=JOB_CREATE, responses={201: CREATED, 400: ERROR, 403: ERROR})
    def post(self, request: Request) -> Response:
        data = json_object(request, JOB_CREATE)
        job = job_create(
            kind=data.get("kind"), recipe=data.get("recipe"), params=data.get("params", NO_PARAMS), user=request.user
        )
        return Response({"id": job.pk, "status": job.status}, status=status.HTTP_201_CREATED)


class JobDetailView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("before", str, description="the summary's pair's before: a policy the job ran"),
            OpenApiParameter("after", str, description="the summary's pair's after (both, or neither: its first two)"),
        ],
        responses={200: JOB, 400: ERROR, 404: ERROR},
    )
    def get(self, request: Request, job_id: int) -> Response:
        job = selectors.job_get(job_id=job_id)
        before, after = request.query_params.get("before"), request.query_params.get("after")
        pair = picked_pair(policies_run(job.result), before, after) if before or after else None
        return Response(selectors.job_as_api(job, pair=pair))


class JobCancelView(APIView):
    permission_classes = [IsAuthenticated, CanRunJobs]

    @extend_schema(request=None, responses={200: JOB, 404: ERROR, 409: ERROR})
    def post(self, request: Request, job_id: int) -> Response:
        job = job_cancel(job=selectors.job_get(job_id=job_id), user=request.user)
        return Response(selectors.job_as_api(job))


class JobEventsView(APIView):
    @extend_schema(
        parameters=[AFTER.parameter()],
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
        after = AFTER.read(request.query_params)
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
