"""The figures API: a job's figures, its tables as CSV, its launches (or an engine's, from
telemetry) as a Chrome trace, and the synchronous `plan` (what `/explain` draws). Thin views over
selectors and exports."""

from __future__ import annotations

import json

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from heliosweb.catalogs.selectors import GRAPHS
from heliosweb.common.api import ERROR, json_body, schema_field
from heliosweb.jobs import selectors as job_selectors
from heliosweb.recipes.selectors import recipe_get
from scheduler_core.execution import execution_schema
from scheduler_core.plan_io import answer
from scheduler_core.policies import POLICIES

from . import exports
from .registry import views_for
from .selectors import job_data, job_figures_json, job_pair
from .telemetry_trace import telemetry_trace

FIGURE = inline_serializer(
    "Figure",
    {
        "id": serializers.CharField(),
        "title": serializers.CharField(),
        "figure": serializers.DictField(help_text="a Plotly figure: {data, layout}"),
        "seq": serializers.IntegerField(help_text="built from the events numbered up to this"),
        "growth": serializers.ListField(child=serializers.DictField(), help_text="live events that extend it"),
        "refresh_on": serializers.ListField(child=serializers.CharField(), help_text="live event types that redraw it"),
    },
    many=True,
)


PAIR = [
    OpenApiParameter("before", str, description="the pair's before: a policy the job ran (default: its first)"),
    OpenApiParameter("after", str, description="the pair's after: a policy the job ran (default: its second)"),
]


JSON = "application/json"


def _download(body: str, content_type: str, filename: str) -> HttpResponse:
    """An attachment; `filename` is built from a job id or a known recipe's name, never free text."""
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


class JobFiguresView(APIView):
    @extend_schema(parameters=PAIR, responses={200: FIGURE, 400: ERROR, 404: ERROR})
    def get(self, request: Request, job_id: int) -> HttpResponse:
        return HttpResponse(job_figures_json(job_id=job_id, query=request.query_params), content_type=JSON)


class JobTableView(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("table", str, description="which table (default: the kind's first)"), *PAIR],
        responses={(200, "text/csv"): str, 400: ERROR, 404: ERROR},
    )
    def get(self, request: Request, job_id: int) -> HttpResponse:
        job = job_selectors.job_get(job_id=job_id)
        views = views_for(job.kind)
        data = job_data(job, views, pair=job_pair(job, request.query_params))
        name, text = exports.table_csv(data, views, request.query_params.get("table"))
        return _download(text, "text/csv; charset=utf-8", f"job-{job.pk}-{name}.csv")


class JobTraceView(APIView):
    @extend_schema(
        responses={200: inline_serializer("ChromeTrace", {"traceEvents": serializers.ListField()}), 404: ERROR}
    )
    def get(self, request: Request, job_id: int) -> HttpResponse:
        job = job_selectors.job_get(job_id=job_id)
        views = views_for(job.kind)
        return _download(
            json.dumps(exports.chrome_trace(job_data(job, views), views)), JSON, f"job-{job.pk}-trace.json"
        )


class TelemetryTraceView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "since_ms", float, description="window start, Unix ms (default: a minute before until_ms)"
            ),
            OpenApiParameter("until_ms", float, description="window end, Unix ms (default: now); at most 10 minutes"),
            OpenApiParameter("engine", str, description="one engine (default: every engine of the recipe)"),
        ],
        responses={
            200: inline_serializer("EngineTrace", {"traceEvents": serializers.ListField()}),
            400: ERROR,
            404: ERROR,
        },
    )
    def get(self, request: Request, name: str) -> HttpResponse:
        trace = telemetry_trace(recipe=recipe_get(name=name), query=request.query_params)
        return _download(json.dumps(trace), JSON, f"{name}-engine-trace.json")


class PlanView(APIView):
    @extend_schema(
        request=json_body(  # closed: `plan_io.answer` refuses an unknown key
            "PlanInput",
            {
                "policy": serializers.ChoiceField(list(POLICIES), required=False, help_text="this, or policies"),
                "policies": serializers.ListField(
                    child=serializers.ChoiceField(list(POLICIES)), required=False, min_length=1, help_text="or policy"
                ),
                "catalog": GRAPHS,
                "request": serializers.DictField(help_text="{prompt_tokens, prefill_limit?, atomic_spans?}"),
                "execution": schema_field(execution_schema(), required=False, allow_null=True),
            },
            one_of=("policy", "policies"),
        ),
        responses={
            200: OpenApiResponse(
                description="the plan (one policy) or {plans: [...]} (policies), as the CLI prints it"
            ),
            400: ERROR,
        },
    )
    def post(self, request: Request) -> Response:
        return Response(answer(request.data))
