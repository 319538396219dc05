"""`POST /api/recipes/<name>/replay/`: queue a counterfactual replay of what the recipe's engines
served over a window (thin: `replay.replay_submit` reads the telemetry and submits the job)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from heliosweb.common.api import ERROR, json_body, json_object
from heliosweb.common.permissions import CanRunJobs
from heliosweb.recipes.selectors import recipe_get

from .replay import MAX_REQUESTS, MAX_UNIX_MS, MIN_UNIX_MS, executions, replay_submit
from .validation import ENGINE_NAME

REPLAY = json_body(
    "ReplayCreate",
    {
        "since_ms": serializers.FloatField(
            min_value=MIN_UNIX_MS, max_value=MAX_UNIX_MS, help_text="window start, Unix ms"
        ),
        "until_ms": serializers.FloatField(
            min_value=MIN_UNIX_MS,
            max_value=MAX_UNIX_MS,
            help_text="window end, Unix ms; the window spans at most HELIOS_TELEMETRY_RAW_HOURS",
        ),
        "engine": serializers.RegexField(
            f"^({ENGINE_NAME.pattern[1:-1]})?$",  # or empty: every engine
            required=False,
            allow_null=True,
            help_text="one engine's name; default (null or empty) all",
        ),
        "execution": serializers.ChoiceField(
            list(executions()), required=False, help_text="the recipe's latest boot (default) or a model"
        ),
    },
)


class RecipeReplayView(APIView):
    permission_classes = [IsAuthenticated, CanRunJobs]

    @extend_schema(
        request=REPLAY,
        responses={
            201: inline_serializer(
                "ReplayCreated",
                {
                    "id": serializers.IntegerField(),
                    "status": serializers.CharField(),
                    "requests": serializers.IntegerField(),
                },
            ),
            400: ERROR,
            403: ERROR,
            404: ERROR,
        },
        description=f"Requests that finished in [since_ms, until_ms), at most {MAX_REQUESTS:,}, replayed under "
        "each policy as a `replay` job.",
    )
    def post(self, request: Request, name: str) -> Response:
        data = json_object(request, REPLAY)
        recipe = recipe_get(name=name)
        job = replay_submit(
            recipe=recipe,
            since_ms=data.get("since_ms"),
            until_ms=data.get("until_ms"),
            engine=data.get("engine"),
            execution=data.get("execution", "boot"),
            user=request.user,
        )
        body = {"id": job.pk, "status": job.status, "requests": job.trace_sources["trace"]["requests"]}
        return Response(body, status=status.HTTP_201_CREATED)
