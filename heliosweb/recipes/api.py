"""The recipes JSON API: every recipe's active policy, creating and editing recipes, and the
emergency rollback (one recipe's policy, for engines, is `policy_poll`)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from heliosweb.common.api import ERROR, json_object

from . import selectors, services

RECIPE = selectors.RECIPE.schema()
SHAPES, REQUIRED, HARDWARE = selectors.SHAPES, selectors.REQUIRED, selectors.HARDWARE
RECIPE_CREATE = inline_serializer(
    "RecipeCreate",
    {
        "name": serializers.CharField(),
        "description": serializers.CharField(required=False),
        "policy": serializers.CharField(help_text="the initial policy (version 1)"),
        "shapes": SHAPES,
        "required_evidence": REQUIRED,
        "hardware": HARDWARE,
    },
)
RECIPE_EDIT = inline_serializer(
    "RecipeEdit",
    {
        "description": serializers.CharField(required=False),
        "shapes": SHAPES,
        "required_evidence": REQUIRED,
        "hardware": HARDWARE,
    },
)
ROLLBACK = inline_serializer(
    "EmergencyRollback",
    {
        "reason": serializers.CharField(),
        "from_version": serializers.IntegerField(
            help_text="the policy version being rolled back (the one the operator saw): 409 when it moved since"
        ),
    },
)


class RecipeListView(APIView):
    @extend_schema(responses={200: selectors.RECIPE_POLICY.schema(many=True)})
    def get(self, request: Request) -> Response:
        return Response(selectors.recipe_policies())

    @extend_schema(request=RECIPE_CREATE, responses={201: RECIPE, 400: ERROR, 403: ERROR})
    def post(self, request: Request) -> Response:
        data = json_object(request, {"name", "description", "policy", "shapes", "required_evidence", "hardware"})
        recipe = services.recipe_create(actor=request.user, **data)
        return Response(selectors.recipe_as_api(recipe), status=status.HTTP_201_CREATED)


class RecipeDetailView(APIView):
    @extend_schema(responses={200: RECIPE, 404: ERROR})
    def get(self, request: Request, name: str) -> Response:
        return Response(selectors.recipe_as_api(selectors.recipe_get(name=name)))

    @extend_schema(request=RECIPE_EDIT, responses={200: RECIPE, 400: ERROR, 403: ERROR, 404: ERROR})
    def patch(self, request: Request, name: str) -> Response:
        data = json_object(request, {"description", "shapes", "required_evidence", "hardware"})
        recipe = services.recipe_update(recipe=selectors.recipe_get(name=name), actor=request.user, **data)
        return Response(selectors.recipe_as_api(recipe))


class RecipeRollbackView(APIView):
    """POST /api/recipes/<name>/rollback/ {reason, from_version}: the operator's emergency rollback."""

    @extend_schema(request=ROLLBACK, responses={200: RECIPE, 400: ERROR, 403: ERROR, 404: ERROR, 409: ERROR})
    def post(self, request: Request, name: str) -> Response:
        data = json_object(request, {"reason", "from_version"})
        recipe = selectors.recipe_get(name=name)
        services.policy_rollback_emergency(
            recipe=recipe, actor=request.user, reason=data.get("reason"), from_version=data.get("from_version")
        )
        return Response(selectors.recipe_as_api(selectors.recipe_get(name=name)))
