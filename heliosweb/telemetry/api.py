"""`POST /api/recipes/<name>/telemetry/`: one batch from one engine (thin: the service validates and
stores), served in one kept thread per web process (`server.handler.kept_thread`) that reuses its
database connection; batches are one at a time anyway (`ingest.telemetry_turn`)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from helios_client.records import batch_json_schema
from rest_framework import serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from heliosweb.common.api import ERROR
from heliosweb.common.auth import BearerTokenAuthentication, EngineAuthentication
from heliosweb.common.permissions import RUN_JOBS
from heliosweb.recipes.selectors import recipe_get
from heliosweb.server.handler import kept_thread
from scheduler_core.errors import InvalidInput

from . import ingest
from .middleware import Engine
from .validation import MAX_BYTES


class MayPostTelemetry(BasePermission):
    message = f"posting telemetry needs an engine token for this recipe or the maintainer permission ({RUN_JOBS})"

    def has_permission(self, request: Request, view: APIView) -> bool:
        return isinstance(request.user, Engine) or bool(request.user and request.user.has_perm(RUN_JOBS))


STORED = inline_serializer(
    "TelemetryStored",
    {
        "engine": serializers.CharField(),
        "session": serializers.CharField(),
        "batch": serializers.IntegerField(),
        "stored": serializers.BooleanField(
            help_text="false: this batch (same session, number, records) was already stored"
        ),
        "launches": serializers.IntegerField(),
        "requests": serializers.IntegerField(),
        "upgrade": serializers.DictField(
            required=False,
            help_text="only for a batch in the previous schema: {schema, read_until, why} (docs/telemetry.md)",
        ),
    },
)


# The body's component: its properties are `helios_client.records`' declarations (`add_batch_to_openapi`).
BATCH = inline_serializer("TelemetryBatch", {"records": serializers.ListField()})


def add_batch_to_openapi(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular hook: `TelemetryBatch` as `helios_client.records` declares it (what `validation` checks)."""
    result["components"]["schemas"]["TelemetryBatch"] = batch_json_schema()
    return result


class RecipeTelemetryView(APIView):
    authentication_classes = [EngineAuthentication, BearerTokenAuthentication, SessionAuthentication]
    permission_classes = [MayPostTelemetry]

    @extend_schema(
        request=BATCH,
        responses={201: STORED, 200: STORED, 400: ERROR, 401: ERROR, 403: ERROR, 404: ERROR, 409: ERROR, 413: ERROR},
    )
    def post(self, request: Request, name: str) -> Response:
        size = int(request.META.get("CONTENT_LENGTH") or 0)
        if size > MAX_BYTES:
            raise InvalidInput("body", f"is {size} bytes, at most {MAX_BYTES} per batch")
        engine = request.user.name if isinstance(request.user, Engine) else None
        recipe = recipe_get(name=name)
        with ingest.telemetry_turn():
            row, batch, created = ingest.telemetry_ingest(recipe=recipe, data=request.data, engine=engine)
        return Response(
            ingest.batch_receipt(row, batch, created), status=status.HTTP_201_CREATED if created else status.HTTP_200_OK
        )


recipe_telemetry = kept_thread(RecipeTelemetryView.as_view(), "telemetry-ingest")
