"""Boots over the API: list a recipe's stored catalogs, or upload one measured elsewhere
(an engine's boot log, another lab's capture). Uploads are validated as scheduler_core reads them."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from heliosweb.common.api import ERROR, json_body, json_object
from heliosweb.common.auth import BearerTokenAuthentication, EngineAuthentication
from heliosweb.common.permissions import CanRunJobs
from heliosweb.recipes.selectors import recipe_get

from . import selectors, services
from .health import boot_healths
from .provenance import MAX_PROVENANCE_BYTES

HEALTH = inline_serializer(
    "BootHealth",
    {
        "status": serializers.ChoiceField(["ok", "flagged"]),
        "flagged": serializers.ListField(child=serializers.DictField(), help_text="{prefill, decode, reason, ratio}"),
        "fit": serializers.DictField(allow_null=True, help_text="{fixed_ms, ms_per_token} of the solo prefill graphs"),
        "compared_with": serializers.IntegerField(help_text="boots of the recipe it was judged against"),
    },
)
BOOT = selectors.BOOT.schema()
BOOT_UPLOAD = json_body(
    "BootUpload",
    {
        "catalog": selectors.GRAPHS,
        "provenance": serializers.DictField(
            required=False, help_text=f"at most {MAX_PROVENANCE_BYTES:,} bytes as JSON"
        ),
    },
)


class MayUploadBoot(CanRunJobs):
    """As `CanRunJobs`, and an engine token may upload a boot of its recipes (`telemetry.middleware` checked)."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        return _engine(request) is not None or super().has_permission(request, view)


def _engine(request: Request) -> Any:
    """The engine an engine token authenticated (`telemetry.middleware.Engine`, a room above this
    one: read by what `EngineAuthentication` sets), else None."""
    engine = getattr(request._request, "engine", None)
    return engine if engine is not None and request.user is engine else None


class RecipeBootsView(APIView):
    authentication_classes = [EngineAuthentication, BearerTokenAuthentication, SessionAuthentication]
    permission_classes = [IsAuthenticated, MayUploadBoot]

    @extend_schema(
        responses={200: selectors.BOOT.schema("BootWithHealth", many=True, extra={"health": HEALTH}), 404: ERROR}
    )
    def get(self, request: Request, name: str) -> Response:
        recipe = recipe_get(name=name)  # 404 for an unknown recipe rather than an empty list
        healths = boot_healths(recipe_id=recipe.pk)
        return Response(
            [selectors.boot_as_api(b, health=healths.get(b.pk)) for b in selectors.boot_list(recipe_name=name)]
        )

    @extend_schema(request=BOOT_UPLOAD, responses={201: BOOT, 400: ERROR, 403: ERROR, 404: ERROR, 413: ERROR})
    def post(self, request: Request, name: str) -> Response:
        recipe = recipe_get(name=name)
        body = json_object(request, BOOT_UPLOAD)
        engine = _engine(request)
        boot = services.boot_create(
            recipe=recipe,
            catalog=body.get("catalog"),
            provenance=body.get("provenance"),
            actor=None if engine else request.user,
            actor_name=engine.get_username() if engine else "system",
        )
        return Response(selectors.boot_as_api(boot), status=status.HTTP_201_CREATED)
